# Replication unit suites.
cassini_check_suite(test_hints LABEL unit SOURCES test_hints.c
                    LIBS cassini_replication cassini_sim cassini_common)
cassini_check_suite(test_batchlog LABEL unit SOURCES test_batchlog.c
                    LIBS cassini_replication cassini_sim cassini_common)
cassini_check_suite(test_paxos_state LABEL unit SOURCES test_paxos_state.c
                    LIBS cassini_replication cassini_common)
