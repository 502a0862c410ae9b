# ring/: replication options, initial_token and range arithmetic.
# libFuzzer adds what it finds to the corpus directory it runs on, so the
# test runs on a copy in the build tree and the checked-in seeds stay as
# they are.
file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/ring_corpus
     DESTINATION ${CMAKE_CURRENT_BINARY_DIR})
cassini_fuzz_target(ring_fuzz SOURCES ring_fuzz.c LIBS cassini_ring
                    CORPUS ${CMAKE_CURRENT_BINARY_DIR}/ring_corpus)
