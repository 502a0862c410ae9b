"""A CAS-register linearizability checker (Wing & Gong's search with Lowe's
memoisation), the Python twin of tests/sim/lincheck.c: check(history,
init) is True when some order of the operations respects real time and
replays on a sequential register. Op(kind "cas"|"read", a, b, res
"ok"|"fail"|"unknown", out, call, ret); ret None: unknown outcome (may
take effect any time after call, or never)."""
import collections
import random
import time

Op = collections.namedtuple("Op", "kind a b res out call ret")
INF = float("inf")


def _step(op, state):
    """(ok, next state)."""
    if op.kind == "read":
        return op.out == state, state
    if state == op.a:
        return op.res != "fail", op.b
    if op.res == "ok":
        return False, state
    return op.res == "unknown" or op.out == state, state


def _prune(ops):
    """Unknown CASes whose new value nobody saw or expected cannot be told
    from ones that never happened."""
    ops = list(ops)
    changed = True
    while changed:
        changed = False
        for i, o in enumerate(ops):
            if o.kind != "cas" or o.res != "unknown":
                continue
            seen = any(j != i and (p.a == o.b or p.out == o.b)
                       for j, p in enumerate(ops))
            if not seen:
                del ops[i]
                changed = True
                break
    return ops


def check(history, init, budget=5_000_000):
    ops = _prune(history)
    n = len(ops)
    events = []
    for i, o in enumerate(ops):
        events.append((o.call, 0, i))
        events.append((INF if o.ret is None else o.ret, 1, i))
    events.sort()
    # a doubly linked list of events
    nxt, prv = {}, {}
    order = [(kind, i) for _, kind, i in events]
    head = 0 if order else None
    for k in range(len(order)):
        prv[k] = k - 1 if k > 0 else None
        nxt[k] = k + 1 if k + 1 < len(order) else None
    pos = {}
    for k, (kind, i) in enumerate(order):
        pos[(kind, i)] = k

    def lift(k):
        nonlocal head
        for e in (k, pos[(1, order[k][1])]):
            if prv[e] is None:
                head = nxt[e]
            else:
                nxt[prv[e]] = nxt[e]
            if nxt[e] is not None:
                prv[nxt[e]] = prv[e]

    def unlift(k):
        nonlocal head
        for e in (pos[(1, order[k][1])], k):
            if prv[e] is None:
                head = e
            else:
                nxt[prv[e]] = e
            if nxt[e] is not None:
                prv[nxt[e]] = e

    seen = set()
    stack = []
    linearized = 0
    state = init
    e = head
    steps = 0
    while head is not None:
        steps += 1
        if steps > budget:
            return "gave up"
        kind, i = order[e]
        if kind == 0:
            ok, new = _step(ops[i], state)
            if ok:
                bits = linearized | (1 << i)
                if (bits, new) not in seen:
                    seen.add((bits, new))
                    stack.append((e, state))
                    linearized = bits
                    state = new
                    lift(e)
                    e = head
                    continue
            e = nxt[e]
            continue
        if not stack:
            return "not linearizable"
        e, state = stack.pop()
        linearized &= ~(1 << order[e][1])
        unlift(e)
        e = nxt[e]
    return True


if __name__ == "__main__":
    # the checker itself: a linearizable history and two that are not
    ok = [Op("cas", 0, 1, "ok", None, 0, 10), Op("read", 0, 0, "ok", 1, 11, 12)]
    assert check(ok, 0) is True
    lost = [Op("cas", 0, 1, "ok", None, 0, 10),
            Op("cas", 1, 2, "ok", None, 20, 30),
            Op("read", 0, 0, "ok", 1, 40, 50)]
    assert check(lost, 0) == "not linearizable"
    twice = [Op("cas", 0, 1, "ok", None, 0, 10),
             Op("cas", 0, 2, "ok", None, 5, 15)]
    assert check(twice, 0) == "not linearizable"
    unknown = [Op("cas", 0, 5, "unknown", None, 0, None),
               Op("read", 0, 0, "ok", 0, 10, 20),
               Op("read", 0, 0, "ok", 5, 30, 40)]
    assert check(unknown, 0) is True
    print("lincheck.py: ok")


def cas_increments(ss, prepared, cid, t0, stop_at, history,
                   quick_retry=()):
    """A client's loop of CAS increments on one register (prepared:
    `UPDATE ... SET v = ? WHERE ... IF v = ?`) until time.monotonic()
    passes stop_at[0], each one an Op in history (times from t0). A
    failed CAS learns the current value; an exception is an unknown
    outcome, followed by a short pause unless it is one of quick_retry."""
    seen = 0
    rnd = random.Random(cid)
    while time.monotonic() < stop_at[0]:
        new = cid * 100000 + rnd.randrange(1, 99999)
        call = time.monotonic() - t0
        try:
            r = ss.execute(prepared, (new, seen))
            ret = time.monotonic() - t0
            if r.was_applied:
                history.append(Op("cas", seen, new, "ok", None, call, ret))
                seen = new
            else:
                cur = r.one().v
                history.append(Op("cas", seen, new, "fail", cur, call, ret))
                seen = cur
        except Exception as e:  # noqa: BLE001 (timeouts, lost connections)
            history.append(Op("cas", seen, new, "unknown", None, call, None))
            if not isinstance(e, quick_retry):
                time.sleep(0.1)
