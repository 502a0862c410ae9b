# Native protocol codec: edge cases in C, and both directions against the
# DataStax driver's own encoder and decoder.
cassini_check_suite(test_proto LABEL unit SOURCES test_proto.c
                    LIBS cassini_client)
# v5 segments, fields and results, with vectors from the driver's segment.py.
cassini_check_suite(test_proto_segment LABEL unit SOURCES test_proto_segment.c
                    LIBS cassini_proto)
add_executable(cql_proto_cli cql_proto_cli.c)
target_link_libraries(cql_proto_cli PRIVATE cassini_client)
cassini_pytest(unit_proto_driver test_proto_driver.py LABEL unit TIMEOUT 120)
cassini_check_suite(test_cql_parse LABEL unit SOURCES test_cql_parse.c
                    LIBS cassini_client)
cassini_check_suite(test_cql_floor LABEL unit SOURCES test_cql_floor.c
                    LIBS cassini_cql)
cassini_check_suite(test_cql_json LABEL unit SOURCES test_cql_json.c
                    LIBS cassini_cql)
add_executable(cql_test_server cql_test_server.c)
target_link_libraries(cql_test_server PRIVATE cassini_client
                      PkgConfig::LIBEVENT)
cassini_pytest(unit_cql_server test_cql_server.py LABEL unit TIMEOUT 120)
cassini_pytest(unit_cql_server_v5 test_cql_server_v5.py LABEL unit TIMEOUT 120)
add_executable(cql_values_cli cql_values_cli.c)
target_link_libraries(cql_values_cli PRIVATE cassini_client)
cassini_pytest(unit_cql_values_driver test_cql_values_driver.py LABEL unit
               TIMEOUT 120)
cassini_check_suite(test_schema LABEL unit SOURCES test_schema.c
                    LIBS cassini_client)
add_executable(cql_exec_server cql_exec_server.c)
target_link_libraries(cql_exec_server PRIVATE cassini_node
                      PkgConfig::LIBEVENT)
cassini_pytest(unit_cql_exec_driver test_cql_exec_driver.py LABEL unit
               TIMEOUT 180)
cassini_pytest(unit_describe_driver test_describe_driver.py LABEL unit
               TIMEOUT 180)
cassini_pytest(unit_bind_types_driver test_bind_types_driver.py LABEL unit
               TIMEOUT 300)
cassini_check_suite(test_dml LABEL unit SOURCES test_dml.c LIBS cassini_client)
cassini_check_suite(test_select_group LABEL unit SOURCES test_select_group.c
                    LIBS cassini_client)
cassini_check_suite(test_schema_log LABEL unit SOURCES test_schema_log.c
                    LIBS cassini_client)
cassini_check_suite(test_auth LABEL unit SOURCES test_auth.c LIBS cassini_auth)
cassini_check_suite(test_tls_names LABEL unit SOURCES test_tls_names.c
                    LIBS cassini_proto)
