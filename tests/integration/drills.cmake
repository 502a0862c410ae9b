# scripts/cluster's network faults on a real 2:2 cluster (127.0.30.x; root).
cassini_pytest(integration_netfaults test_netfaults.py TIMEOUT 600)
# The built-in drills at reduced size on one 3:3 cluster (127.0.31.x; root).
cassini_pytest(integration_drills test_drills.py TIMEOUT 900)
