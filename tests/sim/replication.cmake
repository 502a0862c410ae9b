# The coordinator in the deterministic simulator.
cassini_check_suite(test_coordinator_sim LABEL sim TIMEOUT 600
                    SOURCES test_coordinator.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
# Counter writes and their leader in the simulator.
cassini_check_suite(test_counter_sim LABEL sim TIMEOUT 600
                    SOURCES test_counter.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
# Lightweight transactions: the linearizability checker on hand-built
# histories, then Paxos under random faults checked with it.
cassini_check_suite(test_lincheck LABEL sim SOURCES test_lincheck.c lincheck.c
                    LIBS cassini_common)
cassini_check_suite(test_paxos_sim LABEL sim TIMEOUT 600
                    SOURCES test_paxos.c lincheck.c
                    LIBS cassini_sim cassini_replication)
# Indexed range reads: candidates only, replica filtering protection,
# merged pieces.
cassini_check_suite(test_index_read_sim LABEL sim TIMEOUT 600
                    SOURCES test_index_read.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
# Row-level replica filtering protection: replicas answer with rows,
# protection asks for rows by primary key.
cassini_check_suite(test_index_rows_sim LABEL sim TIMEOUT 600
                    SOURCES test_index_rows.c coord_cluster.c
                    LIBS cassini_sim cassini_replication)
