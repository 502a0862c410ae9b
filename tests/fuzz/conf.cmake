cassini_fuzz_target(fuzz_conf SOURCES fuzz_conf.c LIBS cassini_conf
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/conf)
