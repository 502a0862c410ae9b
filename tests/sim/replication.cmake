# The coordinator in the deterministic simulator.
cassini_check_suite(test_coordinator_sim LABEL sim TIMEOUT 600
                    SOURCES test_coordinator.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
