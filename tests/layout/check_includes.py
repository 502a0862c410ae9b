#!/usr/bin/env python3
"""The dependency direction, checked: every #include "dir/file.h" in a module
must name a module that module may use (the table below, which
docs/architecture.md draws). A module never includes one above it, so the
picture stays true as code is added. Run by CTest as layout_includes.

    check_includes.py [REPO]     exit 0 when every include is allowed
"""
import os
import re
import subprocess
import sys

# module (a folder, longest match wins) -> the modules it may include.
# Each module may also include itself.
LOWER = {
    "common": [],
    "conf": ["common"],
    "ring": ["common"],
    "storage": ["conf", "common"],
    "gossip": ["common"],
    "replication": ["storage", "ring", "conf", "common"],
    "repair": ["storage", "ring", "common"],
    "client/proto": ["common"],
    "client/cql": ["client/proto", "storage", "common"],
    "client/schema": ["client/cql", "client/proto", "storage", "ring",
                      "common"],
    "client/exec": ["client/schema", "client/cql", "client/proto", "storage",
                    "ring", "common"],
    "client/driver": ["client/proto", "common"],
    "client/auth": ["client/exec", "client/schema", "client/cql",
                    "client/proto", "client/driver", "common"],
    "node": ["client/auth", "client/exec", "client/schema", "client/cql", "client/proto",
             "repair", "replication", "gossip", "storage", "ring", "conf",
             "common"],
    "node/tools": ["node", "client/driver", "client/proto", "storage", "ring",
                   "conf", "common"],
}
# Not modules: they may include anything.
FREE = ("tests/", "bench/", "build/")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path):
    best = None
    for m in LOWER:
        if path == m or path.startswith(m + "/"):
            if best is None or len(m) > len(best):
                best = m
    return best


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")
    os.chdir(repo)
    try:
        files = subprocess.check_output(
            ["git", "ls-files", "*.c", "*.h"], text=True).split()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f))
                 for d, _, fs in os.walk(".") for f in fs
                 if f.endswith((".c", ".h"))]
    bad = []
    for f in files:
        if f.startswith(FREE):
            continue
        mod = module_of(f)
        if mod is None:
            bad.append(f"{f}: not in any module of the table "
                       "(add it to tests/layout/check_includes.py)")
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            if "/" not in inc:
                continue  # generated headers next to the file (protobuf)
            target = module_of(inc)
            if target is None:
                if not os.path.exists(inc):
                    continue  # a build-tree header (e.g. *.pb-c.h)
                bad.append(f"{f}: includes {inc}, which is in no module")
            elif target != mod and target not in LOWER[mod]:
                bad.append(f"{f}: {mod}/ may not include {inc} "
                           f"({target}/ is not below it)")
    for b in bad:
        print(b)
    print(f"{len(files)} files checked, {len(bad)} includes against the "
          "direction")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
