# Gossip and failure detection in the deterministic simulator.
add_library(cassini_gossip_sim STATIC gossip_cluster.c)
target_link_libraries(cassini_gossip_sim PUBLIC cassini_sim cassini_gossip
                      PkgConfig::CHECK)
cassini_check_suite(test_gossip_sim LABEL sim SOURCES test_gossip.c
                    LIBS cassini_gossip_sim)
cassini_check_suite(test_gossip_spread LABEL sim TIMEOUT 600
                    SOURCES test_gossip_spread.c LIBS cassini_gossip_sim)
