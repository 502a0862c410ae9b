cassini_check_suite(test_node_transport LABEL unit TIMEOUT 120
                    SOURCES test_node_transport.c LIBS cassini_node)
cassini_check_suite(test_node_local_state LABEL unit
                    SOURCES test_node_local_state.c LIBS cassini_node)
# WAN faults of test clusters through the transport (127.0.39.x).
cassini_check_suite(test_node_netfault LABEL unit TIMEOUT 120
                    SOURCES test_node_netfault.c LIBS cassini_node)
