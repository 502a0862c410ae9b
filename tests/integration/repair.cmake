# Repair with real clusters (127.0.14.x).
cassini_pytest(integration_repair test_repair.py TIMEOUT 600)
# Scheduled repair with a real cluster (127.0.15.x).
cassini_pytest(integration_repair_sched test_repair_sched.py TIMEOUT 300)
# Repair session options (-seq, -dcpar, -j, --trace) and the persisted
# repair history with a real cluster (127.0.18.x).
cassini_pytest(integration_repair_options test_repair_options.py TIMEOUT 300)
# Incremental repair on a 3-node cluster (127.0.77.41-43).
cassini_pytest(integration_incremental_repair test_incremental_repair.py TIMEOUT 300)
# Incremental repair's participant sessions across restarts (127.0.77.50-52).
cassini_pytest(integration_incremental_repair_restart test_incremental_repair_restart.py TIMEOUT 300)
