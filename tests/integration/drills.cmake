# scripts/cluster's network faults on a real 2:2 cluster (127.0.30.x; root).
cassini_pytest(integration_netfaults test_netfaults.py TIMEOUT 600)
