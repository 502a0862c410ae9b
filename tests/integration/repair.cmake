# Repair with real clusters (127.0.14.x).
cassini_pytest(integration_repair test_repair.py TIMEOUT 600)
