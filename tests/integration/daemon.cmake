cassini_pytest(integration_daemon test_daemon.py TIMEOUT 120)
cassini_pytest(integration_cluster_script test_cluster_script.py TIMEOUT 180)
cassini_pytest(integration_config_docs test_config_docs.py TIMEOUT 60)
cassini_pytest(integration_cql_node test_cql_node.py TIMEOUT 180)
