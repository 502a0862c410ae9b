# Schema changes: memory returned, nothing in flight uses freed metadata.
cassini_pytest(integration_schema_memory test_schema_memory.py TIMEOUT 300)
