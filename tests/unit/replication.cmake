# Replication unit suites.
cassini_check_suite(test_hints LABEL unit SOURCES test_hints.c
                    LIBS cassini_replication cassini_sim cassini_common)
