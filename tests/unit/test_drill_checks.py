"""The drills' judgement (scripts/drill_checks.py) on ledgers made by hand:
no cluster. Each check must be able to fail: missing writes are counted
per replica and DC, an earlier write that won is found, an error outside
what the consistency arithmetic allows is flagged, and so on."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] /
                       "scripts"))

import drill_checks as dc  # noqa: E402
from drill_checks import Op  # noqa: E402

NODES = {f"node{i}": {"dc": "dc1" if i <= 3 else "dc2",
                      "address": f"127.0.0.{i}"} for i in range(1, 7)}
RF = {"dc1": 3, "dc2": 3}
ALL = sorted(NODES)
DC1 = ["node1", "node2", "node3"]
DC2 = ["node4", "node5", "node6"]


def w(t0, key, value, ts, dc_="dc1", cl="LOCAL_QUORUM", outcome="ok",
      host="127.0.0.1", t1=None):
    return Op(t0, t1 if t1 is not None else t0 + 0.01, dc_, 0, "W", key,
              value, ts, cl, outcome, host)


def everywhere(key, value, ts, nodes=ALL):
    return {n: {key: (value, ts)} for n in nodes}


def test_level_arithmetic():
    assert dc.level_met("LOCAL_QUORUM", "dc1", RF, set(DC2), NODES)
    assert not dc.level_met("EACH_QUORUM", "dc1", RF, set(DC2), NODES)
    assert dc.level_met("LOCAL_QUORUM", "dc1", RF, {"node1"}, NODES)
    assert not dc.level_met("LOCAL_QUORUM", "dc1", RF, {"node1", "node2"},
                            NODES)
    assert dc.level_met("QUORUM", "dc1", RF, {"node1", "node2"}, NODES)
    assert not dc.level_met("QUORUM", "dc1", RF, set(DC2) | {"node1"},
                            NODES)
    assert not dc.level_met("ALL", "dc2", RF, {"node6"}, NODES)
    assert dc.level_met("ONE", "dc2", RF, set(DC2), NODES)


def test_missing_writes_are_counted_per_replica_and_dc():
    ledger = [w(1, 7, "a", 100), w(2, 7, "b", 200), w(3, 8, "c", 300)]
    states = {n: {7: ("b", 200), 8: ("c", 300)} for n in ALL}
    reps = {7: ALL, 8: ALL}
    r = dc.check_acknowledged(ledger, states, reps, NODES)
    assert r["ok"], r["summary"]  # "a" is superseded by "b" everywhere
    states["node5"][7] = ("a", 100)   # node5 missed the second write
    del states["node6"][8]            # node6 lost key 8 entirely
    r = dc.check_acknowledged(ledger, states, reps, NODES)
    assert not r["ok"]
    assert r["numbers"]["missing_writes"] == 2
    assert r["numbers"]["missing_copies"] == 2
    assert r["numbers"]["missing_per_dc"] == {"dc2": 2}
    assert "2 of 3 acknowledged writes missing" in r["summary"]


def test_local_scope_judges_only_the_writers_dc():
    ledger = [w(1, 7, "a", 100)]
    states = everywhere(7, "a", 100, DC1)
    reps = {7: ALL}
    assert not dc.check_acknowledged(ledger, states, reps, NODES)["ok"]
    assert dc.check_acknowledged(ledger, states, reps, NODES,
                                 scope="cl")["ok"]


def test_a_failed_write_is_not_judged_but_an_equal_timestamp_must_match():
    ledger = [w(1, 7, "a", 100), w(2, 7, "x", 200, outcome="WriteTimeout")]
    reps = {7: ALL}
    assert dc.check_acknowledged(ledger, everywhere(7, "x", 200), reps,
                                 NODES)["ok"]
    r = dc.check_acknowledged(ledger, everywhere(7, "z", 100), reps, NODES)
    assert not r["ok"]


def test_server_timestamps_judge_what_shows_up():
    ledger = [w(1, 7, "a", None), w(2, 7, "b", None)]
    r = dc.check_acknowledged(ledger, everywhere(7, "b", 555), {7: ALL},
                              NODES)
    assert r["ok"] and r["numbers"]["not_judged"] == 1
    states = everywhere(7, "b", 555)
    states["node2"][7] = ("a", 444)
    assert not dc.check_acknowledged(ledger, states, {7: ALL}, NODES)["ok"]


def test_an_earlier_write_that_wins_is_found():
    # b starts after a finished: b is the later write and must win.
    ledger = [w(1.0, 7, "a", None, host="127.0.0.1"),
              w(1.5, 7, "b", None, host="127.0.0.4")]
    r = dc.check_later_write_wins(ledger, everywhere(7, "b", 10), {7: ALL})
    assert r["ok"] and r["numbers"]["judged"] == 1
    r = dc.check_later_write_wins(ledger, everywhere(7, "a", 20), {7: ALL})
    assert not r["ok"] and r["numbers"]["inverted"] == 1
    assert "127.0.0.1" in r["numbers"]["examples"][0]
    # Overlapping writes decide nothing.
    ledger = [w(1.0, 7, "a", None, t1=2.0), w(1.5, 7, "b", None)]
    r = dc.check_later_write_wins(ledger, everywhere(7, "a", 20), {7: ALL})
    assert r["ok"] and r["numbers"]["judged"] == 0


PARTITION = {"kind": "partition", "label": "cut", "start": 10.0,
             "end": 40.0, "a": DC2, "b": DC1}


def test_errors_where_the_arithmetic_allows_them():
    ledger = [w(20, 1, "e", 1, cl="EACH_QUORUM", outcome="Unavailable"),
              w(45, 1, "e", 1, cl="EACH_QUORUM", outcome="Unavailable")]
    r = dc.check_errors(ledger, [PARTITION], NODES, RF, grace=10)
    assert r["ok"], r["summary"]  # inside the cut, and within the grace
    late = [w(55, 1, "e", 1, cl="EACH_QUORUM", outcome="Unavailable")]
    assert not dc.check_errors(late, [PARTITION], NODES, RF, 10)["ok"]
    local = [w(20, 1, "l", 1, cl="LOCAL_QUORUM", outcome="WriteTimeout")]
    r = dc.check_errors(local, [PARTITION], NODES, RF, 10)
    assert not r["ok"]
    assert r["numbers"]["unexpected"] == {"dc1 LOCAL_QUORUM WriteTimeout": 1}


def test_a_dead_coordinator_may_fail_its_own_requests():
    kill = {"kind": "kill", "label": "kill node2", "start": 10.0,
            "end": 20.0, "nodes": ["node2"]}
    mine = [w(10.2, 1, "x", 1, outcome="ConnectionShutdown",
              host="127.0.0.2")]
    other = [w(10.2, 1, "x", 1, outcome="WriteTimeout", host="127.0.0.3")]
    assert dc.check_errors(mine, [kill], NODES, RF, 5)["ok"]
    assert not dc.check_errors(other, [kill], NODES, RF, 5)["ok"]
    # Two of dc1's three down: LOCAL_QUORUM in dc1 must fail anywhere.
    two = dict(kill, nodes=["node2", "node3"])
    assert dc.check_errors(other, [two], NODES, RF, 5)["ok"]


def test_a_flapping_link_impairs_only_its_down_windows():
    flap = {"kind": "link", "label": "flap", "start": 0.0, "end": 60.0,
            "a": DC1, "b": DC2, "flap": (5.0, 30.0)}
    assert dc.down_intervals(flap) == [(25.0, 30.0), (55.0, 60.0)]
    spans = dc.impaired_intervals([flap], NODES, RF, "dc1", "EACH_QUORUM",
                                  2)
    assert spans == [(25.0, 32.0), (55.0, 62.0)]
    assert dc.impaired_intervals([flap], NODES, RF, "dc1", "LOCAL_QUORUM",
                                 2) == []
    delay_only = dict(flap, flap=None)
    assert dc.impaired_intervals([delay_only], NODES, RF, "dc1",
                                 "EACH_QUORUM", 2) == []


def test_converged_needs_equal_replicas_and_a_clean_preview():
    reps = {7: ALL}
    same = everywhere(7, "a", 1)
    assert dc.check_converged(same, reps, {n: 0 for n in ALL})["ok"]
    assert not dc.check_converged(same, reps, {"node1": 3})["ok"]
    assert not dc.check_converged(same, reps, {"node1": None})["ok"]
    differ = everywhere(7, "a", 1)
    differ["node4"] = {}
    r = dc.check_converged(differ, reps, {n: 0 for n in ALL})
    assert not r["ok"] and r["numbers"]["keys_differ"] == 1


def test_false_convictions_are_those_no_fault_explains():
    events = [(15.0, "node4", "node1", "DOWN"),  # across the cut
              (15.0, "node2", "node1", "DOWN"),  # inside dc1: false
              (50.0, "node5", "node6", "DOWN")]  # inside dc2, no fault
    r = dc.check_false_convictions(events, [PARTITION], NODES, 5)
    assert r["numbers"]["false"] == 2
    kill = {"kind": "kill", "label": "k", "start": 49.0, "end": 60.0,
            "nodes": ["node6"]}
    r = dc.check_false_convictions(events, [PARTITION, kill], NODES, 5)
    assert r["numbers"]["false"] == 1
    r = dc.check_false_convictions(events, [PARTITION], NODES, 5, until=40)
    assert r["numbers"]["false"] == 1  # the one at 50 s is not judged


def test_detection_and_recovery_times():
    events = [(12.0, "node4", "node1", "DOWN"),
              (14.0, "node1", "node4", "DOWN"),
              (40.5, "node4", "node1", "UP"),
              (41.0, "node1", "node4", "UP")]
    cut = dict(PARTITION, a=["node4"], b=["node1"])
    ledger = [w(40.2, 1, "e", 1, cl="EACH_QUORUM", outcome="Unavailable",
                t1=40.3)]
    (t,) = dc.fault_times(events, [cut], NODES, ledger, RF, 5)
    assert t["detect_first"] == 2.0 and t["detect_all"] == 4.0
    assert t["membership_recovered"] == 1.0
    assert abs(t["availability_recovered"] - 0.3) < 1e-9


def test_latency_ratio_compares_faults_with_the_baseline():
    ops = [Op(t, t + 0.002, "dc1", 0, "W", 1, "v", 1, "LOCAL_QUORUM", "ok",
              None) for t in [1.5 + i * 0.01 for i in range(100)]]
    ops += [Op(t, t + 0.004, "dc1", 0, "W", 1, "v", 1, "LOCAL_QUORUM", "ok",
               None) for t in [20 + i * 0.01 for i in range(100)]]
    r = dc.latency_ratio(ops, 10.0, [(15.0, 30.0)])["dc1"]
    assert abs(r["ratio"] - 2.0) < 0.01
