#!/usr/bin/env python3
"""Every function or object a module's library exports carries one of that
module's prefixes (the table below), and no symbol is defined by two
libraries: a generic name (now_us, ck_cmp, op_new) exported by one module
could collide at link time with another's. Make such helpers static or give
them the prefix. Run by CTest as layout_symbols with the libraries' paths.

    check_symbols.py NM LIB.a...
"""
import collections
import os
import subprocess
import sys

# library name -> the prefixes its exported symbols may start with. A
# sub-prefix names one of the module's own parts (hints_ in replication/).
# cassini__ is protobuf-c's generated code (package cassini).
PREFIXES = {
    "cassini_common": ["arena_", "buf_", "crc32", "cursor_", "env_", "err_",
                       "hex_", "inet_", "log_", "loopq_", "murmur3_",
                       "ratelimit_", "rng_", "slice_", "thread_", "uuid_",
                       "workers_", "zalloc"],
    "cassini_conf": ["conf_"],
    "cassini_ring": ["ring_", "token_"],
    "cassini_storage": ["storage_", "sst_", "sstable_", "commitlog_",
                        "memtable_", "skiplist_", "sai_"],
    "cassini_gossip": ["gossip_", "cassini__"],
    "cassini_replication": ["repl_", "hints_", "batchlog_", "paxos_",
                            "cassini__"],
    "cassini_repair": ["repair_", "merkle_", "cassini__"],
    "cassini_proto": ["cql_"],
    "cassini_cql": ["cql_"],
    "cassini_schema": ["cql_", "schema_"],
    "cassini_exec": ["cql_"],
    "cassini_cql_client": ["cql_client_", "cql_frame", "cql_conn",
                           "cql_result", "cql_"],
    "cassini_auth": ["cql_auth_", "auth_"],
    "cassini_node": ["node_", "admin_", "cql_service_", "cql_data_",
                     "transport_", "netfault_", "messaging_", "members_",
                     "local_state_", "cassini__"],
}


def exported(nm, lib):
    out = subprocess.check_output([nm, "-g", "--defined-only", lib],
                                  text=True, stderr=subprocess.DEVNULL)
    syms = []
    for line in out.splitlines():
        parts = line.split()
        # "addr TYPE name"; only code and data (not weak/common/absolute)
        # compiler-made names (ASan's __odr_asan_gen_*) are not ours
        if len(parts) == 3 and parts[1] in "TDBR" \
                and not parts[2].startswith("__"):
            syms.append(parts[2])
    return syms


def main():
    nm, libs = sys.argv[1], sys.argv[2:]
    bad, where = [], collections.defaultdict(set)
    for lib in libs:
        name = os.path.basename(lib)
        name = name[3:] if name.startswith("lib") else name
        name = name.rsplit(".", 1)[0]
        allowed = PREFIXES.get(name)
        if allowed is None:
            bad.append(f"{name}: no prefixes listed in "
                       "tests/layout/check_symbols.py")
            continue
        for s in exported(nm, lib):
            where[s].add(name)
            if not s.startswith(tuple(allowed)):
                bad.append(f"{name}: exports {s} (prefixes: "
                           f"{', '.join(allowed)})")
    for s, ls in sorted(where.items()):
        if len(ls) > 1:
            bad.append(f"{s}: defined by {', '.join(sorted(ls))}")
    for b in bad:
        print(b)
    print(f"{len(libs)} libraries, {len(where)} exported symbols, "
          f"{len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
