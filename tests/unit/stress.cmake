# The C client (client/driver/) and cassini-stress's histogram.
cassini_check_suite(test_cql_client LABEL unit
                    SOURCES test_cql_client.c
                            ${PROJECT_SOURCE_DIR}/node/tools/stress_hist.c
                    LIBS cassini_cql_client)
# Where the client routes keys (tests/integration/test_stress_routing.py).
add_executable(cql_route_cli cql_route_cli.c)
target_link_libraries(cql_route_cli PRIVATE cassini_cql_client)
