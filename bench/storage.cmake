# storage_bench: db_bench's flags and output over the storage engine.
add_executable(storage_bench storage_bench.c)
target_link_libraries(storage_bench PRIVATE cassini_storage cassini_conf)
