"""cassini-tool sstablemetadata, sstabledump, sstableverify and
sstableexpiredblockers against SSTables the
engine wrote (sstable_fixture), then against damaged copies of them: the
tool reports the damage (exit status 1, the file named) and never crashes.

usage: tool_sstable_test.py CASSINI_TOOL SSTABLE_FIXTURE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode >= 0, f"{args}: killed by signal {-p.returncode}"
    return p


def field(out, name):
    for line in out.splitlines():
        if line.startswith(name + ": "):
            return line[len(name) + 2:]
    raise AssertionError(f"no '{name}' in:\n{out}")


def check_metadata(tool, table):
    data = os.path.join(table, "ca-1-Data.db")
    p = run(tool, "sstablemetadata", data)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert field(out, "SSTable") == os.path.join(table, "ca-1")
    assert field(out, "Statistics.db version") == "5"
    assert field(out, "Pending repair") == "--"
    assert field(out, "Estimated cardinality") == "42"
    # 10 live rows and the TTL row (2 atoms each), 30 row deletions
    assert field(out, "totalColumnsSet") == "52"
    assert field(out, "Tombstones").startswith("31 ")
    assert field(out, "TTL min") == "3600"
    assert field(out, "TTL max") == "3600"
    assert field(out, "Minimum timestamp").startswith("1000 ")
    assert field(out, "SSTable min local deletion time").startswith(
        "1700000000 ")
    assert field(out, "SSTable max local deletion time").startswith(
        "1700003600 ")
    assert field(out, "Created at").startswith("1700000000 ")
    assert field(out, "SSTable Level") == "0"
    assert field(out, "Repaired at") == "0"
    # (30 row deletions + the partition deletion + 2 expired TTL atoms)
    # over (52 atoms + 1 partition deletion), all past by now
    ratio = float(field(out, "Estimated droppable tombstones"))
    assert abs(ratio - 33 / 53) < 1e-6, ratio
    # with a gc_grace reaching back before the TTL's expiry
    age = int(subprocess.check_output(["date", "+%s"])) - 1700000000
    p = run(tool, "sstablemetadata", "-g", str(age - 1800), data)
    ratio = float(field(p.stdout, "Estimated droppable tombstones"))
    # Cassandra's estimate between bins (31 at ...040, 2 at ...3640):
    # half the lower bin plus the trapezoid up to gc_before
    w = (1800 - 40) / 3600
    mb = 31 + (2 - 31) * w
    assert abs(ratio - ((31 + mb) * w / 2 + 31 / 2) / 53) < 0.01, ratio
    # nothing droppable before the first deletion
    p = run(tool, "sstablemetadata", "-g", str(age + 100), data)
    assert float(field(p.stdout, "Estimated droppable tombstones")) == 0
    assert "1700000040 (2023-11-14 22:14:00 UTC) | 31 (94)" in out, out
    assert "1700003640 (2023-11-14 23:14:00 UTC) | 2 (6)" in out, out
    ratio = float(field(out, "Compression ratio"))
    assert 0 < ratio <= 1.1, ratio
    assert "Partition Size:" in out
    # the column layout Statistics.db version 5 records, as Cassandra
    # prints its serialization header, then every slot
    assert field(out, "KeyType") == "text"
    assert field(out, "ClusteringTypes") == "[int]"
    assert field(out, "StaticColumns") == "{s:int}"
    assert field(out, "RegularColumns") == "{v:text}"
    slots = out[out.index("Column slots:\n"):].splitlines()[2:7]
    assert [" ".join(x.split()) for x in slots] == [
        "0 | partition key | pk text", "1 | clustering | c int",
        "2 | regular | v text", "3 | static | s int",
        "4 | regular | gone int (dropped)"], slots
    # any component names the generation
    p2 = run(tool, "sstablemetadata", os.path.join(table, "ca-1-TOC.txt"))
    assert p2.returncode == 0 and p2.stdout == out


def check_dump(tool, table):
    data = os.path.join(table, "ca-1-Data.db")
    p = run(tool, "sstabledump", data)
    assert p.returncode == 0, p.stderr
    parts = json.loads(p.stdout)
    assert len(parts) == 42
    by_key = {x["partition"]["key_text"]: x for x in parts}
    assert by_key["gone"]["partition"]["deletion_info"][
        "local_delete_time"] == 1700000000
    assert by_key["gone"]["atoms"] == []
    live = by_key["live3"]["atoms"]
    assert [a["type"] for a in live] == ["row_liveness", "cell"]
    assert live[1]["column"] == 2 and live[1]["value"] == "76"
    assert by_key["dead5"]["atoms"][0]["type"] == "row_deletion"
    ttl = by_key["ttl0"]["atoms"][1]
    assert ttl["ttl"] == 3600 and ttl["expires_at"] == 1700003600
    tokens = [x["partition"]["token"] for x in parts]
    assert tokens == sorted(tokens)
    p = run(tool, "sstabledump", "-k", "live3", data)
    one = json.loads(p.stdout)
    assert p.returncode == 0 and len(one) == 1
    assert one[0]["partition"]["key_text"] == "live3"
    hexkey = "0x" + b"dead7".hex()
    one = json.loads(run(tool, "sstabledump", "-k", hexkey, data).stdout)
    assert [x["partition"]["key_text"] for x in one] == ["dead7"]
    assert json.loads(run(tool, "sstabledump", "-k", "nope", data).stdout) \
        == []
    keys = json.loads(run(tool, "sstabledump", "-d", data).stdout)
    assert len(keys) == 42 and "atoms" not in keys[0]


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5a]))


def check_damage(tool, table, tmp):
    def copy(name):
        d = os.path.join(tmp, name)
        shutil.copytree(table, d)
        return d

    # a damaged Statistics.db: reported, the other components still shown
    d = copy("stats")
    flip(os.path.join(d, "ca-1-Statistics.db"), 40)
    p = run(tool, "sstablemetadata", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1
    assert "ca-1-Statistics.db" in p.stderr and "checksum" in p.stderr, \
        p.stderr
    assert "Bloom Filter FP chance" in p.stdout
    # a damaged data block: metadata reads, the dump stops with the error
    d = copy("data")
    flip(os.path.join(d, "ca-1-Data.db"), 30)
    p = run(tool, "sstablemetadata", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 0, p.stderr
    p = run(tool, "sstabledump", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1 and "ca-1-Data.db" in p.stderr, p.stderr
    json.loads(p.stdout)  # what read before the damage is still JSON
    # a truncated Data.db, a missing Index.db
    d = copy("short")
    with open(os.path.join(d, "ca-1-Data.db"), "r+b") as f:
        f.truncate(100)
    os.unlink(os.path.join(d, "ca-1-Index.db"))
    p = run(tool, "sstablemetadata", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1
    assert "100 bytes, statistics say" in p.stderr, p.stderr
    assert "ca-1-Index.db: missing" in p.stderr, p.stderr
    p = run(tool, "sstabledump", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1 and p.stderr
    # garbage in every component, several files at once: each reported
    d = copy("garbage")
    for name in os.listdir(d):
        with open(os.path.join(d, name), "wb") as f:
            f.write(os.urandom(64))
    p = run(tool, "sstablemetadata", os.path.join(d, "ca-1-Data.db"),
            os.path.join(table, "ca-1-Data.db"), "/nonexistent/ca-9-Data.db",
            os.path.join(d, "notansstable.db"))
    assert p.returncode == 1
    assert p.stdout.count("SSTable: ") == 1, p.stdout
    assert "Estimated cardinality: 42" in p.stdout
    assert "ca-9" in p.stderr and "not an SSTable component" in p.stderr
    p = run(tool, "sstabledump", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1 and p.stderr


def check_verify(tool, table, tmp):
    data = os.path.join(table, "ca-1-Data.db")
    p = run(tool, "sstableverify", data, os.path.join(table, "ca-2-TOC.txt"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"Verifying {data}\n" in p.stdout, p.stdout
    assert f"Verify of {data} succeeded. All 42 partitions read " \
        "successfully" in p.stdout, p.stdout
    assert "All 1 partitions" in p.stdout, p.stdout
    assert p.stderr == ""
    sizes = {c: os.path.getsize(os.path.join(table, f"ca-1-{c}"))
             for c in ("Data.db", "Index.db", "Summary.db", "Filter.db",
                       "Statistics.db")}
    # one byte flipped anywhere in each checksummed component: named
    for comp, size in sizes.items():
        for at in (0, size // 2, size - 1):
            d = os.path.join(tmp, f"v-{comp}-{at}")
            shutil.copytree(table, d)
            flip(os.path.join(d, f"ca-1-{comp}"), at)
            f = os.path.join(d, "ca-1-Data.db")
            good = os.path.join(d, "ca-2-Data.db")
            p = run(tool, "sstableverify", f, good)
            assert p.returncode == 1, (comp, at, p.stdout)
            assert f"Error verifying {f}: " in p.stdout, p.stdout
            assert f"ca-1-{comp}" in p.stderr, (comp, at, p.stderr)
            # the next file is still verified
            assert f"Verify of {good} succeeded" in p.stdout, p.stdout
            if comp in ("Data.db", "Index.db") and at == size // 2:
                assert "offset" in p.stderr, p.stderr
    # truncated Data.db: the cut block and the size mismatch
    d = os.path.join(tmp, "v-short")
    shutil.copytree(table, d)
    with open(os.path.join(d, "ca-1-Data.db"), "r+b") as f:
        f.truncate(sizes["Data.db"] - 3)
    p = run(tool, "sstableverify", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1
    assert "truncated block at offset" in p.stderr, p.stderr
    assert "statistics say" in p.stderr, p.stderr
    # a missing TOC.txt (an incomplete SSTable), a missing Index.db
    d = os.path.join(tmp, "v-toc")
    shutil.copytree(table, d)
    os.unlink(os.path.join(d, "ca-1-TOC.txt"))
    os.unlink(os.path.join(d, "ca-1-Index.db"))
    p = run(tool, "sstableverify", os.path.join(d, "ca-1-Data.db"))
    assert p.returncode == 1
    assert "ca-1-TOC.txt: missing" in p.stderr, p.stderr
    assert "ca-1-Index.db: missing" in p.stderr, p.stderr
    p = run(tool, "sstableverify", "/nonexistent/notansstable.db")
    assert p.returncode == 1 and "not an SSTable component" in p.stderr
    assert run(tool, "sstableverify").returncode == 1


def check_expired_blockers(tool, table):
    files = [os.path.join(table, f"ca-{g}-Data.db") for g in (1, 2, 3)]
    p = run(tool, "sstableexpiredblockers", "-g", "0", *files)
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stdout.splitlines() if x]
    assert len(lines) == 1, p.stdout
    # ca-1 has data (timestamps from 1000) that never expires; ca-2 and
    # ca-3 hold one deletion each, newer: both fully expired, both
    # blocked by ca-1 and by nothing else
    assert lines[0].startswith(f"[{files[0]} (minTS = 1000, maxTS = "), \
        lines[0]
    assert "maxLDT = 2147483647)],  blocks 2 expired sstables from " \
        "getting dropped: " in lines[0], lines[0]
    assert f"[{files[1]} (minTS = 1042, maxTS = 1042, maxLDT = " \
        "1700000000)], " in lines[0], lines[0]
    assert f"[{files[2]} (minTS = 1043, maxTS = 1043, maxLDT = " \
        "1700000000)], " in lines[0], lines[0]
    # without the blocker nothing is blocked; nothing expired within a
    # gc_grace reaching back before the deletions
    p = run(tool, "sstableexpiredblockers", "-g", "0", *files[1:])
    assert p.returncode == 0 and p.stdout == "", p.stdout
    age = int(subprocess.check_output(["date", "+%s"])) - 1700000000
    p = run(tool, "sstableexpiredblockers", "-g", str(age + 100), *files)
    assert p.returncode == 0 and p.stdout == "", p.stdout
    p = run(tool, "sstableexpiredblockers", "/nonexistent/ca-9-Data.db")
    assert p.returncode == 1 and "Couldn't open sstable" in p.stdout


def main():
    tool, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="tool-sstable-")
    try:
        table = subprocess.check_output([fixture, os.path.join(tmp, "db")],
                                        text=True).strip()
        check_metadata(tool, table)
        check_dump(tool, table)
        check_damage(tool, table, tmp)
        check_verify(tool, table, tmp)
        check_expired_blockers(tool, table)
    finally:
        shutil.rmtree(tmp)
    print("ok")


if __name__ == "__main__":
    main()
