# Lightweight transactions with real clusters (127.0.107.x).
cassini_pytest(integration_lwt test_lwt.py TIMEOUT 600)
# repair --paxos-only (127.0.107.21-23).
cassini_pytest(integration_paxos_repair test_paxos_repair.py TIMEOUT 120)
# the paxos repair of moving ranges: a bootstrap (127.0.107.40-43).
cassini_pytest(integration_paxos_moves test_paxos_moves.py TIMEOUT 120)
# system.paxos purging (127.0.107.44-45).
cassini_pytest(integration_paxos_purge test_paxos_purge.py TIMEOUT 120)
