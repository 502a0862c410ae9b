# Repair sessions in the deterministic simulator (their cluster:
# repair_cluster.c): streaming and the tree exchange; sessions and
# failures; incremental repair.
cassini_check_suite(test_repair_sim LABEL sim TIMEOUT 300
                    SOURCES test_repair.c repair_cluster.c mem_store.c LIBS cassini_sim cassini_repair)
cassini_check_suite(test_repair_failures_sim LABEL sim TIMEOUT 300
                    SOURCES test_repair_failures.c repair_cluster.c mem_store.c LIBS cassini_sim cassini_repair)
cassini_check_suite(test_repair_incremental_sim LABEL sim TIMEOUT 300
                    SOURCES test_repair_incremental.c repair_cluster.c mem_store.c LIBS cassini_sim cassini_repair)
# The repair scheduler over three simulated nodes.
cassini_check_suite(test_repair_sched_sim LABEL sim TIMEOUT 300
                    SOURCES test_repair_sched.c mem_store.c LIBS cassini_sim cassini_repair)
# Session options (-seq/-dcpar parallelism, -j job threads) over five
# simulated nodes.
cassini_check_suite(test_repair_jobs_sim LABEL sim TIMEOUT 300
                    SOURCES test_repair_jobs.c mem_store.c LIBS cassini_sim cassini_repair)
