# Storage decoders under libFuzzer: mutations (commitlog bodies, hints,
# internode), commitlog segments, SSTable blocks and index entries.
cassini_fuzz_target(fuzz_storage_mutation
  SOURCES fuzz_storage_mutation.c LIBS cassini_storage
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/fuzz_storage_mutation)
cassini_fuzz_target(fuzz_storage_commitlog
  SOURCES fuzz_storage_commitlog.c LIBS cassini_storage
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/fuzz_storage_commitlog)
cassini_fuzz_target(fuzz_storage_sstable
  SOURCES fuzz_storage_sstable.c LIBS cassini_storage
  CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/fuzz_storage_sstable)
