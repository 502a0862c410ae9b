cassini_check_suite(test_gossip_unit LABEL unit SOURCES test_gossip_unit.c
                    LIBS cassini_gossip)
