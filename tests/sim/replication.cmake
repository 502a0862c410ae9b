# The coordinator in the deterministic simulator.
cassini_check_suite(test_coordinator_sim LABEL sim TIMEOUT 600
                    SOURCES test_coordinator.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
# Counter writes and their leader in the simulator.
cassini_check_suite(test_counter_sim LABEL sim TIMEOUT 600
                    SOURCES test_counter.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
