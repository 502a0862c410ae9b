cassini_fuzz_target(fuzz_cql_frame SOURCES fuzz_cql_frame.c LIBS cassini_client
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_frame)
cassini_fuzz_target(fuzz_cql_parse SOURCES fuzz_cql_parse.c LIBS cassini_client
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_parse)
