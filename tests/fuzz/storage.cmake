# Storage decoders under libFuzzer: mutations (commitlog bodies, hints,
# internode), commitlog segments, SSTable blocks and index entries, read
# commands and fragments (replicated reads), values of composite types, and
# mutations of a table of them (non-frozen UDTs, tuples, vectors, durations).
# libFuzzer adds the inputs it finds to its corpus directory, so each
# target runs over a copy of its checked-in seeds in the build tree.
foreach(_target fuzz_storage_mutation fuzz_storage_commitlog
                fuzz_storage_sstable fuzz_storage_fragment
                fuzz_storage_counter fuzz_storage_values
                fuzz_storage_typed)
  file(COPY ${CMAKE_CURRENT_SOURCE_DIR}/corpus/${_target}
       DESTINATION ${CMAKE_CURRENT_BINARY_DIR}/corpus)
  cassini_fuzz_target(${_target}
    SOURCES ${_target}.c LIBS cassini_storage
    CORPUS ${CMAKE_CURRENT_BINARY_DIR}/corpus/${_target})
endforeach()
