"""The drills' judgement: pure functions over what a drill recorded.

Inputs (made by drill.py, or by hand in tests):
  ledger    a list of Op: every operation the workers ran, with its start
            and end (seconds since the workload began), DC, stream, kind
            ('W' write, 'R' read), key, value (written, or read: None when
            no row), client timestamp (None when the coordinator chose),
            consistency level, outcome ('ok' or an error class) and the
            coordinator's address when known
  windows   the faults as they happened: dicts with kind, label, start,
            end and what they hit (see fault_cuts)
  nodes     {name: {"dc": dc, "address": ip}}
  rf        {dc: replication factor}
  states    {node name: {key: (value, writetime)}}: what each replica
            holds, read from that replica alone
  replicas  {key: [node names]}: the replicas of each key
  events    [(t, observer node, target node, "DOWN"|"UP")] from the logs

Each check returns a dict: name, ok (True/False; None when it could not be
judged), summary (one line with the numbers) and numbers (for the report).
Nothing here talks to a cluster."""
import collections
import math

Op = collections.namedtuple(
    "Op", "t0 t1 dc stream op key value ts cl outcome host")

LOCAL_LEVELS = ("LOCAL_ONE", "LOCAL_QUORUM")
CUT_KINDS = ("partition", "isolate", "one-way")
PROCESS_KINDS = ("kill", "stop", "pause", "dc-loss")


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(math.ceil(p / 100.0 * len(v))) - 1))
    return v[k]


# ---- what a fault takes away ------------------------------------------

def fault_cuts(w, nodes):
    """{coordinator dc: set of nodes it cannot use} while `w` is in force
    (flapping links: only in their down windows, see down_intervals)."""
    dcs = sorted({n["dc"] for n in nodes.values()})
    cut = {dc: set() for dc in dcs}
    kind = w["kind"]
    if kind in CUT_KINDS or (kind == "link" and w.get("flap")):
        a, b = set(w["a"]), set(w["b"])
        for dc in dcs:
            mine = {n for n, x in nodes.items() if x["dc"] == dc}
            if mine & a:
                cut[dc] |= b
            if mine & b:
                cut[dc] |= a
    elif kind in PROCESS_KINDS:
        for dc in dcs:
            cut[dc] |= set(w["nodes"])
    return cut


def down_intervals(w):
    """The spans in which `w` cuts: the whole window, or a flapping
    link's down windows (down at the end of every period from its
    start)."""
    if w["kind"] != "link":
        return [(w["start"], w["end"])]
    if not w.get("flap"):
        return []
    down, period = w["flap"]
    out, t = [], w["start"]
    while t < w["end"]:
        s, e = t + period - down, min(t + period, w["end"])
        if s < e:
            out.append((s, e))
        t += period
    return out


def level_met(cl, dc, rf, unusable, nodes):
    """Whether `cl`, coordinated in `dc`, is met for every key when the
    nodes in `unusable` cannot be reached: the worst key has
    min(unusable in D, rf_D) of its replicas in D among them."""
    avail = {}
    for d, r in rf.items():
        u = sum(1 for n in unusable if nodes[n]["dc"] == d)
        avail[d] = r - min(u, r)
    total, need_total = sum(avail.values()), sum(rf.values())
    if cl in ("ONE", "ANY"):
        return total >= 1
    if cl == "TWO":
        return total >= 2
    if cl == "THREE":
        return total >= 3
    if cl == "QUORUM":
        return total >= need_total // 2 + 1
    if cl == "ALL":
        return total == need_total
    if cl == "LOCAL_ONE":
        return avail.get(dc, 0) >= 1
    if cl == "LOCAL_QUORUM":
        return avail.get(dc, 0) >= rf.get(dc, 0) // 2 + 1
    if cl == "EACH_QUORUM":
        return all(avail[d] >= rf[d] // 2 + 1 for d in rf if rf[d])
    raise ValueError(f"unknown consistency level {cl}")


def impaired_intervals(windows, nodes, rf, dc, cl, grace):
    """Where the consistency arithmetic says (dc, cl) must fail: spans of
    the faults that leave it short of replicas, each stretched by
    `grace` after it ends (gossip and the drivers noticing the heal)."""
    spans = []
    for w in windows:
        cuts = fault_cuts(w, nodes)[dc]
        if not cuts or level_met(cl, dc, rf, cuts, nodes):
            continue
        for s, e in down_intervals(w):
            spans.append((s, e + grace))
    return merge(spans)


def edge_intervals(windows, dc, grace, client_timeout):
    """Process faults: requests in flight on a coordinator that dies or
    freezes fail, and a driver takes a moment to move away, whatever the
    arithmetic: for ops coordinated by one of the fault's nodes, the fault
    itself plus `client_timeout` and `grace`. {node: [(s, e)]}."""
    out = collections.defaultdict(list)
    for w in windows:
        if w["kind"] not in PROCESS_KINDS:
            continue
        for n in w["nodes"]:
            out[n].append((w["start"] - 1.0,
                           w["end"] + client_timeout + grace))
    return out


def merge(spans):
    spans = sorted(spans)
    out = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def inside(t, spans):
    return any(s <= t <= e for s, e in spans)


# ---- checks -------------------------------------------------------------

def check_errors(ledger, windows, nodes, rf, grace, client_timeout=10.0):
    """Errors only where the consistency arithmetic says they must
    happen (or on a coordinator that a process fault took away)."""
    addr_node = {x["address"]: n for n, x in nodes.items()}
    edges = edge_intervals(windows, None, grace, client_timeout)
    cache = {}
    unexpected, expected = collections.Counter(), collections.Counter()
    examples = []
    for op in ledger:
        if op.outcome == "ok":
            continue
        key = (op.dc, op.cl)
        if key not in cache:
            cache[key] = impaired_intervals(windows, nodes, rf, op.dc, op.cl,
                                            grace)
        node = addr_node.get(op.host)
        allowed = inside(op.t0, cache[key]) or inside(op.t1, cache[key]) or (
            node is not None and (inside(op.t0, edges.get(node, [])))) or (
            node is None and any(inside(op.t0, v) for v in edges.values()))
        tag = f"{op.dc} {op.cl} {op.outcome}"
        if allowed:
            expected[tag] += 1
        else:
            unexpected[tag] += 1
            if len(examples) < 5:
                examples.append(f"{op.t0:.1f}s {tag} key {op.key} via "
                                f"{op.host or '?'}")
    n_unexp = sum(unexpected.values())
    summary = (f"{n_unexp} unexpected errors" +
               (f" ({', '.join(f'{k}: {v}' for k, v in unexpected.most_common())})"
                if n_unexp else "") +
               f"; {sum(expected.values())} where the arithmetic says "
               f"they must happen" +
               (f" ({', '.join(f'{k}: {v}' for k, v in expected.most_common(4))})"
                if expected else ""))
    return {"name": "errors_where_expected", "ok": n_unexp == 0,
            "summary": summary,
            "numbers": {"unexpected": dict(unexpected),
                        "expected": dict(expected), "examples": examples}}


def newest(states, key, reps):
    """The newest (value, ts) any of `reps` holds for key, or None."""
    best = None
    for r in reps:
        v = states.get(r, {}).get(key)
        if v is not None and (best is None or v[1] > best[1]):
            best = v
    return best


def write_scope(op, replicas, nodes, scope):
    reps = replicas[op.key]
    if scope == "cl" and op.cl in LOCAL_LEVELS:
        return [r for r in reps if nodes[r]["dc"] == op.dc]
    return reps


def check_acknowledged(ledger, states, replicas, nodes, scope="all"):
    """Every acknowledged write is on every replica of its scope: the
    replica holds it, or a newer version of the cell (LWW). scope 'all':
    every replica in every DC (what hints and repair must bring about);
    'cl': LOCAL_* writes only in their own DC. Writes whose timestamp the
    coordinator chose are judged when their value shows up somewhere
    (then its writetime is known), else counted as not judged."""
    seen_ts = {}
    for node, kv in states.items():
        for k, (v, ts) in kv.items():
            seen_ts[(k, v)] = ts
    missing_writes, missing_copies, judged, unjudged = 0, 0, 0, 0
    per_dc = collections.Counter()
    examples = []
    for op in ledger:
        if op.op != "W" or op.outcome != "ok":
            continue
        ts = op.ts if op.ts is not None else seen_ts.get((op.key, op.value))
        if ts is None:
            unjudged += 1
            continue
        judged += 1
        lost = []
        for r in write_scope(op, replicas, nodes, scope):
            have = states.get(r, {}).get(op.key)
            if have is None or have[1] < ts or (
                    have[1] == ts and have[0] != op.value):
                lost.append(r)
        if lost:
            missing_writes += 1
            missing_copies += len(lost)
            for r in lost:
                per_dc[nodes[r]["dc"]] += 1
            if len(examples) < 5:
                examples.append(f"key {op.key} = {op.value!r} "
                                f"({op.dc} {op.cl} at {op.t0:.1f}s) missing "
                                f"on {', '.join(lost)}")
    summary = (f"{missing_writes} of {judged} acknowledged writes missing "
               f"on some replica ({missing_copies} copies"
               + (": " + ", ".join(f"{d} {c}" for d, c in sorted(per_dc.items()))
                  if per_dc else "") + ")"
               + (f"; {unjudged} not judged (server timestamps, value "
                  f"overwritten everywhere)" if unjudged else ""))
    return {"name": "acknowledged_writes", "ok": missing_writes == 0,
            "summary": summary,
            "numbers": {"judged": judged, "missing_writes": missing_writes,
                        "missing_copies": missing_copies,
                        "missing_per_dc": dict(per_dc),
                        "not_judged": unjudged, "examples": examples}}


def check_later_write_wins(ledger, states, replicas):
    """Of two writes to a key where one started after the other (and
    every other write to it) had finished, the later one is what the
    replicas hold in the end (the newest version any replica has)."""
    by_key = collections.defaultdict(list)
    for op in ledger:
        if op.op == "W":
            by_key[op.key].append(op)
    judged, inverted, examples = 0, 0, []
    for k, ws in by_key.items():
        last = max(ws, key=lambda o: o.t0)
        if last.outcome != "ok" or any(
                o is not last and o.t1 >= last.t0 for o in ws):
            continue  # no write that is plainly the latest
        final = newest(states, k, replicas[k])
        if final is None:
            continue  # lost entirely: acknowledged_writes counts it
        judged += 1
        if final[0] != last.value:
            inverted += 1
            if len(examples) < 5:
                winner = next((o for o in ws if o.value == final[0]), None)
                examples.append(
                    f"key {k}: {final[0]!r} "
                    f"({'written at %.2fs via %s' % (winner.t0, winner.host) if winner else 'unknown'}) "
                    f"beat {last.value!r} written at {last.t0:.2f}s via "
                    f"{last.host}")
    return {"name": "later_write_wins", "ok": inverted == 0,
            "summary": f"{inverted} of {judged} keys kept an earlier write "
                       f"over a later one",
            "numbers": {"judged": judged, "inverted": inverted,
                        "examples": examples}}


def check_converged(states, replicas, preview):
    """Replicas equal: every key the same on each of its replicas, and a
    preview repair on every node found no mismatched range. `preview`:
    {node: mismatched ranges, or None when it could not run}."""
    differ, examples = 0, []
    for k, reps in replicas.items():
        vals = {states.get(r, {}).get(k) for r in reps}
        if len(vals) > 1:
            differ += 1
            if len(examples) < 5:
                examples.append(f"key {k}: " + ", ".join(
                    f"{r}={states.get(r, {}).get(k)}" for r in reps))
    ran = {n: v for n, v in preview.items() if v is not None}
    mism = sum(ran.values())
    ok = differ == 0 and mism == 0 and len(ran) == len(preview)
    return {"name": "converged", "ok": ok,
            "summary": f"{differ} of {len(replicas)} keys differ between "
                       f"replicas; preview repair: {mism} mismatched ranges "
                       f"on {len(ran)} of {len(preview)} nodes",
            "numbers": {"keys_differ": differ, "preview_mismatched": mism,
                        "preview": preview, "examples": examples}}


def same_side(w, a, b):
    """Whether fault `w` stands between nodes a and b (or takes one)."""
    if w["kind"] in PROCESS_KINDS:
        return a in w["nodes"] or b in w["nodes"]
    if w["kind"] in CUT_KINDS or (w["kind"] == "link" and w.get("flap")):
        A, B = set(w["a"]), set(w["b"])
        return (a in A and b in B) or (a in B and b in A)
    return False


def check_false_convictions(events, windows, nodes, grace, until=None):
    """No node convicted by a peer of its own DC unless a fault stood
    between them (or took it) at that time; up to `until` (the drill's
    own verification, which loads the machine, is not judged)."""
    bad, examples = 0, []
    for t, obs, tgt, what in events:
        if what != "DOWN" or nodes[obs]["dc"] != nodes[tgt]["dc"]:
            continue
        if until is not None and t > until:
            continue
        if any(same_side(w, obs, tgt) and
               w["start"] - 1 <= t <= w["end"] + grace for w in windows):
            continue
        bad += 1
        if len(examples) < 5:
            examples.append(f"{t:.1f}s {obs} convicted {tgt}")
    return {"name": "no_false_convictions", "ok": bad == 0,
            "summary": f"{bad} convictions inside a DC with no fault "
                       f"between the two nodes",
            "numbers": {"false": bad, "examples": examples}}


def fault_times(events, windows, nodes, ledger, rf, grace):
    """Per fault that cuts: time to detect (first and every DOWN across
    it), to recover membership (every UP again) and availability (the
    last error of a stream it impaired) after it ended."""
    out = []
    for w in windows:
        pairs = set()
        if w["kind"] in PROCESS_KINDS:
            for t in w["nodes"]:
                for o in nodes:
                    if o not in w["nodes"]:
                        pairs.add((o, t))
        elif w["kind"] in CUT_KINDS:
            for x in w["a"]:
                for y in w["b"]:
                    pairs.add((y, x))
                    if w["kind"] != "one-way":
                        pairs.add((x, y))
        if not pairs:
            continue
        downs = {}
        ups = {}
        for t, obs, tgt, what in events:
            if (obs, tgt) not in pairs:
                continue
            if what == "DOWN" and w["start"] <= t <= w["end"] and \
                    (obs, tgt) not in downs:
                downs[(obs, tgt)] = t
            if what == "UP" and t >= w["end"] and (obs, tgt) in downs and \
                    (obs, tgt) not in ups:
                ups[(obs, tgt)] = t
        rec = {"label": w["label"], "start": w["start"], "end": w["end"]}
        if downs:
            rec["detect_first"] = min(downs.values()) - w["start"]
            if len(downs) == len(pairs):
                rec["detect_all"] = max(downs.values()) - w["start"]
        if downs and len(ups) == len(downs):
            rec["membership_recovered"] = max(ups.values()) - w["end"]
        last_err = None
        for op in ledger:
            if op.outcome != "ok" and op.t0 >= w["end"] and \
                    op.t0 <= w["end"] + 120:
                last_err = op.t1 if last_err is None else max(last_err,
                                                               op.t1)
        rec["availability_recovered"] = 0.0 if last_err is None else \
            max(0.0, last_err - w["end"])
        out.append(rec)
    return out


def latency_ratio(ledger, baseline, fault_spans, cl="LOCAL_QUORUM"):
    """p50/p99 of successful `cl` ops per DC: before any fault (the first
    `baseline` seconds less the first second, the warm-up) and within
    the faults; ratio fault p99 / baseline p99."""
    out = {}
    for dc in sorted({o.dc for o in ledger if o.dc != "load"}):
        base = [o.t1 - o.t0 for o in ledger if o.dc == dc and o.cl == cl and
                o.outcome == "ok" and 1.0 <= o.t0 < baseline]
        during = [o.t1 - o.t0 for o in ledger if o.dc == dc and o.cl == cl
                  and o.outcome == "ok" and inside(o.t0, fault_spans)]
        b99, f99 = percentile(base, 99), percentile(during, 99)
        out[dc] = {"baseline_p50": percentile(base, 50), "baseline_p99": b99,
                   "fault_p50": percentile(during, 50), "fault_p99": f99,
                   "ratio": (f99 / b99) if b99 and f99 else None,
                   "baseline_ops": len(base), "fault_ops": len(during)}
    return out
