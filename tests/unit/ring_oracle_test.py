#!/usr/bin/python3
"""Ring vs the DataStax Python driver (tests/unit/oracle_placement.py).

Run by CTest as `ring_oracle_test.py <ring_oracle_cli> <oracle_placement.py>`.
Fails loudly (exit 2) when the oracle or the driver is missing: it never
skips. Seeded by CASSINI_SEED (printed on failure).

Checks:
  * Murmur3 tokens of thousands of random keys, every length 0..40, bytes
    >= 0x80, and compound keys, against Murmur3Token.from_key;
  * replica placement on random topologies (1-5 DCs, 1-6 racks per DC,
    1-20 nodes per DC, 1-16 tokens each; SimpleStrategy and NTS with per-DC
    RF 1-5 plus a DC named with no nodes) for random tokens and every ring
    token and its neighbours: the same replicas per DC in the same order.

Known driver quirk (python3-cassandra 3.25 NetworkTopologyStrategy): an
endpoint set aside for a repeated rack is remembered once per vnode, so the
driver can list it twice and then miss the next endpoint. Cassandra keeps
set-aside endpoints in a LinkedHashSet; we follow Cassandra. Such lists are
compared as "ours starts with the driver's list without repeats" and
counted, and checked in full against a small Python model of Cassandra's
walk (cassandra_nts below).
"""
import importlib.util
import os
import random
import subprocess
import sys

MIN = -(1 << 63)
MAX = (1 << 63) - 1


def load_oracle(path):
    if not os.path.exists(path):
        print("FAIL: oracle %s is missing" % path)
        sys.exit(2)
    spec = importlib.util.spec_from_file_location("oracle_placement", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:
        print("FAIL: the oracle needs Debian's python3-cassandra: %s" % e)
        sys.exit(2)
    return mod


def run_cli(cli, text):
    p = subprocess.run([cli], input=text, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-4000:])
        raise SystemExit("FAIL: cli exited %d" % p.returncode)
    return p.stdout.splitlines()


def murmur_checks(oracle, cli, rng):
    keys = []
    for n in range(0, 41):
        for _ in range(40):
            keys.append(bytes(rng.randrange(256) for _ in range(n)))
        keys.append(bytes([0x80 + (i % 0x80) for i in range(n)]))
        keys.append(b"\xff" * n)
    for _ in range(2000):
        n = rng.randrange(0, 300)
        keys.append(bytes(rng.randrange(256) for _ in range(n)))
    comps = []
    for _ in range(500):
        comps.append([bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24)))
                      for _ in range(rng.randrange(1, 5))])
    lines = ["key " + k.hex() for k in keys]
    lines += ["ckey " + ",".join(p.hex() or "-" for p in c) for c in comps]
    out = run_cli(cli, "\n".join(lines) + "\n")
    want = [oracle.token_of_key(k) for k in keys]
    want += [oracle.token_of_key(oracle.composite_routing_key(c)) for c in comps]
    bad = [(l, o, w) for l, o, w in zip(lines, out, want) if int(o) != w]
    if len(out) != len(want) or bad:
        for b in bad[:10]:
            print("murmur3 mismatch:", b)
        return False
    print("murmur3: %d keys and %d compound keys agree" % (len(keys), len(comps)))
    return True


def random_topology(rng, idx):
    ndc = rng.randint(1, 5)
    hosts = []
    used = set()
    addr = 1
    for d in range(ndc):
        nracks = rng.randint(1, 6)
        nnodes = rng.randint(1, 20)
        ntok = rng.randint(1, 16)
        for _ in range(nnodes):
            toks = []
            while len(toks) < ntok:
                t = rng.randrange(MIN + 1, MAX + 1)
                if t not in used:
                    used.add(t)
                    toks.append(t)
            hosts.append({"address": "10.%d.%d.%d" % (d, addr // 250, addr % 250 + 1),
                          "dc": "dc%d" % (d + 1),
                          "rack": "r%d" % rng.randint(1, nracks),
                          "tokens": [str(t) for t in toks]})
            addr += 1
    if rng.random() < 0.3:
        repl = {"class": rng.choice(["SimpleStrategy",
                                     "org.apache.cassandra.locator.SimpleStrategy"]),
                "replication_factor": str(rng.randint(1, 5))}
    else:
        repl = {"class": rng.choice(["NetworkTopologyStrategy",
                                     "org.apache.cassandra.locator.NetworkTopologyStrategy"])}
        for d in range(ndc):
            if rng.random() < 0.9:
                repl["dc%d" % (d + 1)] = str(rng.randint(1, 5))
        if rng.random() < 0.3:
            repl["dc_empty"] = str(rng.randint(1, 3))
        if rng.random() < 0.2:
            repl["dc1"] = "0"
    return hosts, repl


def query_tokens(rng, hosts):
    ring = sorted(int(t) for h in hosts for t in h["tokens"])
    q = [rng.randrange(MIN, MAX + 1) for _ in range(30)]
    for t in rng.sample(ring, min(len(ring), 40)):
        q += [t, t - 1 if t > MIN else t, t + 1 if t < MAX else t]
    q += [MIN, MAX, 0]
    return q


def cassandra_nts(spec, token):
    """Cassandra's rack-aware NTS walk (skipped endpoints kept once, in ring
    order), per DC. Only used where the driver shows its quirk."""
    hosts = {h["address"]: h for h in spec["hosts"]}
    ring = sorted((int(t), h["address"]) for h in spec["hosts"] for t in h["tokens"])
    rf = {k: int(v) for k, v in spec["replication"].items() if k != "class"}
    nodes, racks = {}, {}
    for h in spec["hosts"]:
        nodes.setdefault(h["dc"], set()).add(h["address"])
        racks.setdefault(h["dc"], set()).add(h["rack"])
    start = next((i for i, (t, _) in enumerate(ring) if t >= token), 0)
    reps, seen, skipped = {}, {}, {}
    for k in range(len(ring)):
        a = ring[(start + k) % len(ring)][1]
        dc, rack = hosts[a]["dc"], hosts[a]["rack"]
        want = min(rf.get(dc, 0), len(nodes[dc]))
        r = reps.setdefault(dc, [])
        if len(r) >= want or a in r:
            continue
        sr = seen.setdefault(dc, set())
        sk = skipped.setdefault(dc, [])
        if len(sr) == len(racks[dc]):
            r.append(a)
        elif rack in sr:
            if a not in sk:
                sk.append(a)
        else:
            r.append(a)
            sr.add(rack)
            if len(sr) == len(racks[dc]):
                for x in sk:
                    if len(r) >= want:
                        break
                    if x not in r:
                        r.append(x)
    return {dc: r for dc, r in reps.items() if r}


def dedupe(seq):
    out = []
    for x in seq:
        if x not in out:
            out.append(x)
    return out


def placement_checks(oracle, cli, rng, count):
    lines, specs = [], []
    for i in range(count):
        hosts, repl = random_topology(rng, i)
        toks = query_tokens(rng, hosts)
        specs.append(({"hosts": hosts, "replication": repl,
                       "tokens": [str(t) for t in toks]}, toks))
        lines.append("reset")
        for h in hosts:
            lines.append("ep %s %s %s NORMAL %s" % (h["address"], h["dc"], h["rack"],
                                                 ",".join(h["tokens"])))
        lines.append("strategy " + " ".join("%s=%s" % kv for kv in repl.items()))
        lines += ["token %d" % t for t in toks]
    out = iter(run_cli(cli, "\n".join(lines) + "\n"))
    dc_of = {}
    ok = True
    compared = quirks = 0
    for (spec, toks) in specs:
        for h in spec["hosts"]:
            dc_of[h["address"]] = h["dc"]
        want = oracle.run(spec)["results"]
        for t, w in zip(toks, want):
            got_line = next(out)
            head, _, pend = got_line.partition(" |")
            f = head.split()
            assert int(f[0]) == t, (f[0], t)
            got = f[1:]
            compared += 1
            if pend.strip():
                print("unexpected pending endpoints", got_line)
                ok = False
            wl = w["replicas"]
            if wl == got:
                continue
            # NTS: the driver groups by DC; compare DC by DC.
            gdc = {}
            for a in got:
                gdc.setdefault(dc_of[a], []).append(a)
            wdc = w["replicas_by_dc"]
            same = set(gdc) == set(wdc)
            quirk = False
            for dc in wdc:
                if not same:
                    break
                if wdc[dc] == gdc.get(dc):
                    continue
                d = dedupe(wdc[dc])
                if (len(d) < len(wdc[dc]) and gdc[dc][:len(d)] == d and
                        cassandra_nts(spec, t).get(dc) == gdc[dc]):
                    quirk = True
                    continue
                same = False
            if same and quirk:
                quirks += 1
                continue
            if not same:
                ok = False
                print("placement mismatch for token %d under %s" % (t, spec["replication"]))
                print("  ours:  ", gdc)
                print("  driver:", wdc)
                if not ok and compared > 0:
                    return False
    print("placement: %d topologies, %d lookups agree (%d hit the driver's "
          "repeated-endpoint quirk)" % (count, compared, quirks))
    return ok


def main():
    cli, oracle_path = sys.argv[1], sys.argv[2]
    seed = int(os.environ.get("CASSINI_SEED", "20261130"))
    count = int(os.environ.get("RING_ORACLE_TOPOLOGIES", "150"))
    oracle = load_oracle(oracle_path)
    rng = random.Random(seed)
    ok = murmur_checks(oracle, cli, rng)
    ok = placement_checks(oracle, cli, rng, count) and ok
    if not ok:
        print("FAILED with CASSINI_SEED=%d" % seed)
        sys.exit(1)


if __name__ == "__main__":
    main()
