# The C client (client/cql_client*) and cassini-stress's histogram.
cassini_check_suite(test_cql_client LABEL unit
                    SOURCES test_cql_client.c
                            ${PROJECT_SOURCE_DIR}/node/stress_hist.c
                    LIBS cassini_cql_client)
