# Lightweight transactions with real clusters (127.0.107.x).
cassini_pytest(integration_lwt test_lwt.py TIMEOUT 600)
