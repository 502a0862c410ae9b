cassini_fuzz_target(fuzz_cql_client SOURCES fuzz_cql_client.c
                    LIBS cassini_cql_client
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_client)
