# The hint file parser under libFuzzer (replication/hints_file.c).
file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/corpus/fuzz_hints_file
     DESTINATION ${CMAKE_CURRENT_BINARY_DIR}/corpus)
cassini_fuzz_target(fuzz_hints_file
  SOURCES fuzz_hints_file.c LIBS cassini_replication
  CORPUS ${CMAKE_CURRENT_BINARY_DIR}/corpus/fuzz_hints_file)
