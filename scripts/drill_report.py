"""A drill's verdict as text, its timeline as a picture (matplotlib), and
both in one self-contained HTML page (the PNG embedded)."""
import base64
import collections
import html
import math

import drill_checks as checks

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
FAULT_COLORS = {"partition": "#d62728", "one-way": "#e377c2",
                "isolate": "#8c564b", "link": "#ff7f0e", "kill": "#7f7f7f",
                "stop": "#7f7f7f", "pause": "#bcbd22", "dc-loss": "#000000",
                "skew": "#17becf", "repair": "#2ca02c"}


def _result_word(r):
    if r["ok"] is None:
        return "n/a"
    word = "PASS" if r["ok"] else "FAIL"
    if r.get("expected") == "fail":
        word += " (expected FAIL)" if not r["ok"] else " (expected FAIL!)"
    return word


def _fmt_s(v):
    return "-" if v is None else f"{v:.1f} s"


def verdict_text(res):
    lines = [f"drill {res['scenario']}: {res['verdict']}"]
    for r in res["checks"]:
        lines.append(f"  {_result_word(r):<22} {r['name']}: {r['summary']}")
    for t in res["targets"]:
        v = t["value"]
        v = "-" if v is None else (f"{v:.2f}" if isinstance(v, float)
                                   else str(v))
        word = "n/a" if t["ok"] is None else ("PASS" if t["ok"] else "FAIL")
        lines.append(f"  {word:<22} target: {t['name']}: {v}")
    for x in res["fault_times"]:
        lines.append(
            f"  {'info':<22} {x['label']}: detected {_fmt_s(x.get('detect_first'))}"
            f" (every node {_fmt_s(x.get('detect_all'))}), membership back "
            f"{_fmt_s(x.get('membership_recovered'))} and errors stopped "
            f"{_fmt_s(x.get('availability_recovered'))} after the heal")
    if res.get("converge_after_heal") is not None:
        lines.append(f"  {'info':<22} replicas converged "
                     f"{res['converge_after_heal']:.1f} s after the last heal"
                     f" ({'repair' if res.get('repair_done') else 'hints'})")
    if res.get("latency"):
        for dc, x in res["latency"].items():
            if x["baseline_p99"] and x["fault_p99"]:
                lines.append(
                    f"  {'info':<22} {dc} LOCAL_QUORUM p99 "
                    f"{x['baseline_p99'] * 1e3:.1f} ms without faults, "
                    f"{x['fault_p99'] * 1e3:.1f} ms with them "
                    f"({x['ratio']:.2f}x)")
    for p in res["problems"]:
        lines.append(f"  {'FAIL':<22} {p}")
    if res.get("timings"):
        lines.append(f"  {'info':<22} took " + ", ".join(
            f"{k} {v:.1f} s" for k, v in res["timings"].items()))
    return "\n".join(lines) + "\n"


def _bins(ledger, dcs, n):
    """Per whole second and DC: ok ops, errors, and per consistency level
    the latencies of ok ops."""
    ok = {dc: [0] * n for dc in dcs}
    err = {dc: [0] * n for dc in dcs}
    lat = collections.defaultdict(lambda: [[] for _ in range(n)])
    for op in ledger:
        if op.dc not in ok or op.t0 < 0 or int(op.t1) >= n:
            continue
        i = int(op.t1)
        if op.outcome == "ok":
            ok[op.dc][i] += 1
            lat[(op.dc, op.cl)][i].append((op.t1 - op.t0) * 1e3)
        else:
            err[op.dc][i] += 1
    return ok, err, lat


def timeline_png(res, ledger, samples, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dcs = sorted({op.dc for op in ledger if op.dc != "load"})
    end = max([res.get("workload_end") or 0] +
              [s[0] for s in samples] + [m[0] for m in res["marks"]])
    n = max(1, int(res.get("workload_end") or end))  # whole seconds
    ok, err, lat = _bins(ledger, dcs, n)
    xs = [x + 0.5 for x in range(n)]
    levels = [l for l in dict.fromkeys(op.cl for op in ledger
                                       if op.dc != "load")]
    fig, axes = plt.subplots(4, 1, figsize=(12, 9.5), sharex=True,
                             gridspec_kw={"height_ratios": [3, 3, 2, 2]})
    ax_tp, ax_lat, ax_err, ax_mem = axes
    for i, dc in enumerate(dcs):
        c = COLORS[i % len(COLORS)]
        ax_tp.plot(xs, ok[dc], color=c, label=f"{dc}", lw=1.4,
                   ls="-" if i % 2 == 0 else (0, (4, 2)))
        for j, level in enumerate(levels):
            v = lat.get((dc, level))
            if not v:
                continue
            p99 = [checks.percentile(b, 99) if b else float("nan")
                   for b in v]
            if j == 0:  # the main stream: p50 and p99
                p50 = [checks.percentile(b, 50) if b else float("nan")
                       for b in v]
                ax_lat.plot(xs, p99, color=c, lw=1.5,
                            label=f"{dc} {level} p99")
                ax_lat.plot(xs, p50, color=c, lw=1.0, ls="--",
                            label=f"{dc} {level} p50")
            else:
                ax_lat.plot(xs, p99, color=c, lw=0.8, ls=":",
                            label=f"{dc} {level} p99")
        ax_err.bar([x + (i - (len(dcs) - 1) / 2) * 0.4 for x in xs], err[dc],
                   width=0.4, color=c, label=f"{dc} errors")
    ax_tp.set_ylabel("successful ops/s")
    ax_tp.set_ylim(bottom=0, top=max([1] + [max(ok[dc]) for dc in dcs]) * 1.15)
    ax_lat.set_ylabel("latency (ms, log)")
    ax_lat.set_yscale("log")
    ax_err.set_ylabel("errors/s")
    # membership and hints
    for i, dc in enumerate(dcs + [d for d in sorted(
            {k for s in samples for k in s[1]}) if d not in dcs]):
        pts = [(s[0], s[1].get(dc)) for s in samples
               if s[1].get(dc) is not None]
        if pts:
            ax_mem.step([p[0] for p in pts], [p[1] for p in pts],
                        where="post", color=COLORS[i % len(COLORS)],
                        label=f"nodes {dc} sees DN")
    ax_mem.set_ylabel("nodes seen DN")
    from matplotlib.ticker import MaxNLocator
    ax_mem.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_mem.set_ylim(bottom=0, top=max([1] + [v for s_ in samples
                                             for v in s_[1].values()
                                             if v is not None]) + 0.5)
    ax_mem.set_xlabel("seconds since the workload started")
    ax_h = ax_mem.twinx()
    hp = [(s[0], s[2]) for s in samples]
    if hp:
        ax_h.fill_between([p[0] for p in hp], [p[1] for p in hp], step="post",
                          color="#9467bd", alpha=0.25, label="hints pending")
    ax_h.set_ylabel("hints pending", color="#9467bd")
    ax_h.set_ylim(bottom=0, top=max([10] + [p[1] for p in hp]) * 1.1)
    # faults shaded, marks drawn
    seen_labels = set()
    for w in res["windows"]:
        s, e = w["start"], w["end"] if w["end"] is not None else end
        col = FAULT_COLORS.get(w["kind"], "#7f7f7f")
        for ax in axes:
            ax.axvspan(s, e, color=col, alpha=0.12, lw=0)
        key = w["label"]
        if key not in seen_labels:
            seen_labels.add(key)
            ax_tp.text(s, 1.0, " " + key, transform=ax_tp.get_xaxis_transform(),
                       va="bottom", ha="left", fontsize=9, color=col,
                       clip_on=False)
        if w.get("flap"):
            for ds, de in checks.down_intervals(dict(w, end=e)):
                for ax in axes:
                    ax.axvspan(ds, de, color=col, alpha=0.25, lw=0)
    for t, label in res["marks"]:
        if label.startswith("end: "):
            continue
        for ax in axes:
            ax.axvline(t, color="#444444", ls=":", lw=1)
        ax_mem.text(t, 0.98, " " + label, transform=ax_mem.get_xaxis_transform(),
                    rotation=90, va="top", ha="left", fontsize=8,
                    color="#444444")
    ax_tp.legend(loc="lower left", fontsize=8, ncol=len(dcs))
    ax_lat.legend(loc="upper left", fontsize=8, ncol=2 * max(1, len(dcs)))
    if any(sum(err[dc]) for dc in dcs):
        ax_err.legend(loc="upper left", fontsize=8)
    h1, l1 = ax_mem.get_legend_handles_labels()
    h2, l2 = ax_h.get_legend_handles_labels()
    ax_mem.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_xlim(0, end * 1.04 + 1)
    fig.suptitle(f"drill {res['scenario']}: {res['verdict']}", fontsize=14,
                 color="#2ca02c" if res["verdict"] == "PASS" else "#d62728",
                 y=0.995, fontweight="bold")
    fig.text(0.5, 0.962, "   ".join(
        f"{r['name']} {_result_word(r)}" for r in res["checks"]),
        ha="center", fontsize=9, color="#333333")
    fig.tight_layout(rect=(0, 0, 1, 0.955))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _table(rows, head):
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)
           + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def html_page(res, ledger, png_path, path):
    img = base64.b64encode(png_path.read_bytes()).decode()
    e = html.escape
    ok_col = "#2ca02c" if res["verdict"] == "PASS" else "#d62728"
    checks_rows = []
    for r in res["checks"]:
        word = _result_word(r)
        col = "#2ca02c" if (r["ok"] is True) == (r.get("expected") != "fail") \
            else "#d62728"
        ex = "<br>".join(e(x) for x in r["numbers"].get("examples", []))
        checks_rows.append([f"<b style='color:{col}'>{e(word)}</b>",
                            e(r["name"]), e(r["summary"]) +
                            (f"<div class='ex'>{ex}</div>" if ex else "")])
    target_rows = []
    for t in res["targets"]:
        v = t["value"]
        target_rows.append([
            "n/a" if t["ok"] is None else ("PASS" if t["ok"] else "FAIL"),
            e(t["name"]), "-" if v is None else
            (f"{v:.2f}" if isinstance(v, float) else e(str(v)))])
    fault_rows = [[e(x["label"]), f"{x['start']:.1f}", f"{x['end']:.1f}",
                   _fmt_s(x.get("detect_first")), _fmt_s(x.get("detect_all")),
                   _fmt_s(x.get("membership_recovered")),
                   _fmt_s(x.get("availability_recovered"))]
                  for x in res["fault_times"]]
    ops = collections.defaultdict(lambda: [0, 0, collections.Counter(), []])
    for op in ledger:
        if op.dc == "load":
            continue
        k = (op.dc, op.cl, "write" if op.op == "W" else "read")
        ops[k][0] += 1
        if op.outcome == "ok":
            ops[k][3].append(op.t1 - op.t0)
        else:
            ops[k][1] += 1
            ops[k][2][op.outcome] += 1
    ops_rows = []
    for k in sorted(ops):
        total, errs, by, lat = ops[k]
        p50, p99 = checks.percentile(lat, 50), checks.percentile(lat, 99)
        ops_rows.append([e(k[0]), e(k[1]), e(k[2]), str(total), str(errs),
                         e(", ".join(f"{a} {b}" for a, b in by.most_common()))
                         or "-",
                         "-" if p50 is None else f"{p50 * 1e3:.1f}",
                         "-" if p99 is None else f"{p99 * 1e3:.1f}"])
    problems = "".join(f"<li>{e(p)}</li>" for p in res["problems"])
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8">
<title>drill {e(res['scenario'])}: {res['verdict']}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1300px; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left;
         vertical-align: top; font-size: 14px; }}
th {{ background: #f4f4f4; }}
.verdict {{ font-size: 28px; font-weight: bold; color: {ok_col}; }}
.ex {{ color: #666; font-size: 12px; margin-top: 4px; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
</style></head><body>
<div class="verdict">drill {e(res['scenario'])}: {res['verdict']}</div>
<p>{e(res['description'])}</p>
<p>Scenario: <code>{e(res['file'])}</code>; cluster <code>{e(res['cluster']['name'])}</code>,
replication {e(str(res['cluster']['rf']))}.</p>
<h2>Checks</h2>
{_table(checks_rows, ["result", "check", "what was found"])}
{"<h2>Targets</h2>" + _table(target_rows, ["result", "target", "measured"]) if target_rows else ""}
{"<h2>Faults</h2>" + _table(fault_rows, ["fault", "from (s)", "to (s)", "first DN", "every DN", "membership back", "errors stopped"]) if fault_rows else ""}
{"<h2>Problems</h2><ul>" + problems + "</ul>" if problems else ""}
<h2>Timeline</h2>
<p>Shaded: the faults (darker: a flapping link's down windows). Dotted
lines: heals, hint delivery, repairs. Throughput counts successful
operations; latency is of successful operations.</p>
<img alt="timeline" src="data:image/png;base64,{img}">
<h2>Operations</h2>
{_table(ops_rows, ["dc", "consistency", "kind", "ops", "errors", "errors by class", "p50 ms", "p99 ms"])}
<p>The whole ledger (every operation: start, end, DC, key, value,
timestamp, outcome, coordinator) is <code>ledger.csv</code> beside this
page; the numbers behind it are in <code>summary.json</code>.</p>
</body></html>
"""
    path.write_text(page)
