# Lightweight transactions with real clusters (127.0.107.x).
cassini_pytest(integration_lwt test_lwt.py TIMEOUT 600)
# repair --paxos-only (127.0.107.21-23).
cassini_pytest(integration_paxos_repair test_paxos_repair.py TIMEOUT 120)
# the paxos repair of moving ranges: a bootstrap, a decommission
# (127.0.107.40-43).
cassini_pytest(integration_paxos_moves test_paxos_moves.py TIMEOUT 300)
# system.paxos purging (127.0.107.46-47).
cassini_pytest(integration_paxos_purge test_paxos_purge.py TIMEOUT 120)
# LWT increments across two DCs, 3 + 3 nodes (127.0.114.1-6).
cassini_pytest(integration_lwt_dcs test_lwt_dcs.py TIMEOUT 300)
