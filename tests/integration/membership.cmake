# Membership with real processes (127.0.2.x and 127.0.3.x).
cassini_pytest(integration_membership test_membership.py TIMEOUT 300)
cassini_pytest(integration_garbage test_garbage.py TIMEOUT 120)
# The coordinator with real clusters (127.0.11.x).
cassini_pytest(integration_coordinator test_coordinator.py TIMEOUT 600)
# Nodes joining and leaving a cluster with data (127.0.9.x).
cassini_pytest(integration_ring_changes test_ring_changes.py TIMEOUT 300)
# Counters on a 3-node cluster: exact sums, kill -9 bounds, repair (127.0.104.x).
cassini_pytest(integration_counters test_counters.py TIMEOUT 900)
