# The drills' judgement and scripts/cluster's network faults, without a
# cluster (docs/drills.md).
cassini_pytest(unit_drill_checks test_drill_checks.py LABEL unit TIMEOUT 60)
cassini_pytest(unit_cluster_net test_cluster_net.py LABEL unit TIMEOUT 60)
