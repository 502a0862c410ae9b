# Schema changes: memory returned, nothing in flight uses freed metadata.
cassini_pytest(integration_schema_memory test_schema_memory.py TIMEOUT 300)
# tombstone_warn_threshold / tombstone_failure_threshold through the driver.
cassini_pytest(integration_tombstone_thresholds test_tombstone_thresholds.py
               TIMEOUT 300)
# GROUP BY paged through the Python driver on 3 nodes in 2 datacenters;
# NetworkTopologyStrategy's replication_factor shorthand.
cassini_pytest(integration_groupby_paging test_groupby_paging.py TIMEOUT 600)
# User-defined types: driver metadata, DESCRIBE, restart, two nodes.
cassini_pytest(integration_udt test_udt.py TIMEOUT 300)
# The data model's types on 3 nodes RF 3: hints, repair, flush, compaction,
# restart; every replica read alone (127.0.103.61-63).
cassini_pytest(integration_datamodel_cluster test_datamodel_cluster.py
               TIMEOUT 600)
# Secondary indexes on 3 nodes RF 3: DDL spread, CL, paging, restart.
cassini_pytest(integration_indexes test_indexes.py TIMEOUT 300)
# Indexed queries against a model: writes, deletes, TTLs, flushes, compactions.
cassini_pytest(integration_index_model test_index_model.py TIMEOUT 300)
# Indexed range reads across replicas: CL with a node down, paging, a
# stale replica (replica filtering protection).
cassini_pytest(integration_index_replicas test_index_replicas.py TIMEOUT 300)
# Two ANDed indexes intersected on the replicas: a model at every CL and
# page size, a node down, the trace's rows read (127.0.115.21-23).
cassini_pytest(integration_index_intersect test_index_intersect.py TIMEOUT 300)
# Index entries carry rows: one matching row of a 2,000-row partition is
# the one row read (the trace); overwrites, deletions, TTLs, statics,
# paging, LIMIT, PER PARTITION LIMIT stay right (127.0.116.1).
cassini_pytest(integration_index_rows test_index_rows.py TIMEOUT 300)
# The same at QUORUM and ALL on 3 nodes: replicas read rows, row-level
# replica filtering protection asks for rows by primary key; a stale
# replica's rows resolve to the newest (127.0.123.1-3).
cassini_pytest(integration_index_rows_quorum test_index_rows_quorum.py
               TIMEOUT 400)
# Building an index over existing data: refused while building, resumed
# after a restart, rebuild_index, sai_column_indexes and IndexInfo
# (127.0.109.20-22).
cassini_pytest(integration_index_build test_index_build.py TIMEOUT 300)
# Replica filtering protection: a stale replica's matches read from the
# others several partitions a message, cached-rows warn and fail
# thresholds per node (127.0.117.1-3).
cassini_pytest(integration_index_protection test_index_protection.py
               TIMEOUT 300)

# Index operations on one node: analyzer options, a failed build kept
# failed across restarts, a corrupt component, tablestats (127.0.109.60-62).
cassini_pytest(integration_index_ops test_index_ops.py TIMEOUT 300)
# m[k] = v on an entries(m) index and under ALLOW FILTERING: memtable and
# SSTable data, deleted entries, paging, prepared (127.0.109.64).
cassini_pytest(integration_index_entries test_index_entries.py TIMEOUT 300)
