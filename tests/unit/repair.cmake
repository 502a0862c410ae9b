# Repair unit suites.
cassini_check_suite(test_repair_merkle LABEL unit
                    SOURCES test_repair_merkle.c LIBS cassini_repair)
cassini_check_suite(test_repair_msg LABEL unit
                    SOURCES test_repair_msg.c LIBS cassini_repair)
cassini_check_suite(test_repair_sched LABEL unit
                    SOURCES test_repair_sched.c LIBS cassini_repair cassini_sim)
cassini_check_suite(test_repair_history LABEL unit
                    SOURCES test_repair_history.c LIBS cassini_repair)
