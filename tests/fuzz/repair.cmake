# Repair's wire form (trees, requests, responses) and its handlers.
cassini_fuzz_target(fuzz_repair SOURCES fuzz_repair.c
                    LIBS cassini_repair cassini_sim
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/repair)
