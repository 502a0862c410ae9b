# Lightweight transactions with real clusters (127.0.107.x).
cassini_pytest(integration_lwt test_lwt.py TIMEOUT 600)
# repair --paxos-only (127.0.107.21-23).
cassini_pytest(integration_paxos_repair test_paxos_repair.py TIMEOUT 120)
