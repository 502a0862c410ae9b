# Internode handshake/envelope and admin request/response decoders.
cassini_fuzz_target(fuzz_node_msg SOURCES fuzz_node_msg.c LIBS cassini_node
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/node_msg)
