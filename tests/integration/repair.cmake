# Repair with real clusters (127.0.14.x).
cassini_pytest(integration_repair test_repair.py TIMEOUT 600)
# Scheduled repair with a real cluster (127.0.15.x).
cassini_pytest(integration_repair_sched test_repair_sched.py TIMEOUT 300)
