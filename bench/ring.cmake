# ring/: replica-map rebuild benchmark and the allocator balance table.
add_executable(ring_bench ring_bench.c)
target_link_libraries(ring_bench PRIVATE cassini_ring)
add_executable(ring_alloc_table ring_alloc_table.c)
target_link_libraries(ring_alloc_table PRIVATE cassini_ring)
