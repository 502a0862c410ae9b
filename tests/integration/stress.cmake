# cassini-stress against a real node (127.0.8.x).
cassini_pytest(integration_stress test_stress.py TIMEOUT 240)
