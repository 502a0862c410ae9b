# Gossip message decoders and handlers under libFuzzer.
cassini_fuzz_target(fuzz_gossip SOURCES fuzz_gossip.c
                    LIBS cassini_gossip cassini_sim
                    CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/corpus/gossip)
