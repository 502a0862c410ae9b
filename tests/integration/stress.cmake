# cassini-stress against a real node (127.0.8.x).
cassini_pytest(integration_stress test_stress.py TIMEOUT 240)
# Token-aware routing of the C client against the driver's, 3 nodes
# (127.0.8.11-13).
cassini_pytest(integration_stress_routing test_stress_routing.py TIMEOUT 240)
