cassini_fuzz_target(fuzz_cql_frame SOURCES fuzz_cql_frame.c LIBS cassini_client
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_frame)
cassini_fuzz_target(fuzz_cql_segment SOURCES fuzz_cql_segment.c
                    LIBS cassini_proto
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_segment)
cassini_fuzz_target(fuzz_cql_parse SOURCES fuzz_cql_parse.c LIBS cassini_client
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_parse)
cassini_fuzz_target(fuzz_schema_record SOURCES fuzz_schema_record.c
                    LIBS cassini_client RUNS 5000
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/schema_record)
# PREPARE and EXECUTE of generated statements on generated schemas, in
# process, with a data path that builds and reads back what the node would.
cassini_fuzz_target(fuzz_cql_prepare SOURCES fuzz_cql_prepare.c
                    LIBS cassini_cql_client cassini_client RUNS 5000
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_prepare)
cassini_fuzz_target(fuzz_auth_sasl SOURCES fuzz_auth_sasl.c LIBS cassini_auth
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/auth_sasl)
cassini_fuzz_target(fuzz_cql_json SOURCES fuzz_cql_json.c LIBS cassini_cql
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cql_json)
# The TLS handshake boundary of the native transport: garbage before a
# real handshake and after it, on a TLS-only and an optional port.
cassini_fuzz_target(fuzz_tls_boundary SOURCES fuzz_tls_boundary.c
                    LIBS cassini_proto PkgConfig::LIBEVENT RUNS 3000
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/tls_boundary)
