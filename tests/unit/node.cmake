cassini_check_suite(test_node_transport LABEL unit TIMEOUT 120
                    SOURCES test_node_transport.c LIBS cassini_node)
cassini_check_suite(test_node_local_state LABEL unit
                    SOURCES test_node_local_state.c LIBS cassini_node)
cassini_check_suite(test_node_slow_queries LABEL unit
                    SOURCES test_node_slow_queries.c
                    LIBS cassini_node cassini_sim)
# WAN faults of test clusters through the transport (127.0.39.x).
cassini_check_suite(test_node_netfault LABEL unit TIMEOUT 120
                    SOURCES test_node_netfault.c LIBS cassini_node)
# cassini-tool sstablemetadata / sstabledump on SSTables the engine wrote
# (sstable_fixture), intact and damaged.
add_executable(sstable_fixture sstable_fixture.c)
target_link_libraries(sstable_fixture PRIVATE cassini_storage
                      cassini_storage_testenv cassini_conf)
add_test(NAME tool_sstable
         COMMAND ${SYSTEM_PYTHON3}
                 ${CMAKE_CURRENT_SOURCE_DIR}/tool_sstable_test.py
                 $<TARGET_FILE:cassini-tool> $<TARGET_FILE:sstable_fixture>)
set_tests_properties(tool_sstable PROPERTIES LABELS unit TIMEOUT 120)
# Read_failure / Write_failure's failed replicas: v5's reason map, the
# count before (cql_data_encode_result).
cassini_check_suite(test_node_failures LABEL unit
                    SOURCES test_node_failures.c LIBS cassini_node)
# Trace sessions' rows (system_traces) as node_trace writes them, and a
# long session's batches (a simulated env).
cassini_check_suite(test_node_trace LABEL unit
                    SOURCES test_node_trace.c LIBS cassini_node cassini_sim)
