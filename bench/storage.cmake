# storage_bench: db_bench's flags and output over the storage engine.
add_executable(storage_bench storage_bench.c)
target_link_libraries(storage_bench PRIVATE cassini_storage cassini_conf)

# sai_component_bench: an SAI component's memory held open and a paged
# lookup's work per step (docs/indexes.md, "Paged lookups").
add_executable(sai_component_bench sai_component_bench.c)
target_link_libraries(sai_component_bench PRIVATE cassini_storage)

# sai_memtable_bench: a paged lookup's work per step in a memtable's index
# (docs/indexes.md, "Paged lookups").
add_executable(sai_memtable_bench sai_memtable_bench.c)
target_link_libraries(sai_memtable_bench PRIVATE cassini_storage)
