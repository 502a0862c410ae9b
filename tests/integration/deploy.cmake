# Deployment: the Debian package installed into this machine with dpkg
# (127.0.40.20), and a 3:3 cluster on six network namespaces (10.231/16).
cassini_pytest(integration_package test_package.py TIMEOUT 300)
cassini_pytest(integration_multihost test_multihost.py TIMEOUT 300)
