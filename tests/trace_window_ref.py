"""Checks `nestpipe trace report --json --from-batch A --to-batch B` of a real trace against
the whole trace restricted to that window, computed here independently of runtime/trace/window.c
and runtime/trace/analyze.c (docs/tracing.md "Part of a run"):
the window runs from the last end of the batches before A (the trace's start when A is its
first batch) to the last end of the batches up to B, over all ranks; every task that
overlaps it counts, clipped to it; a rank's span is the window, its batches those whose last
task ended inside it; a kind's exposed time is its union minus the rank's dense compute.

A window by time (--from-ms A --to-ms B) runs from A to B ms, cut to the trace's ends.

usage: python3 trace_window_ref.py TRACE.json REPORT.json batches|ms A B    (exit 0: equal)
"""
import json
import sys

COMPUTE = {"pool_fwd", "fwd", "loss_fwd", "loss_bwd", "bwd", "pool_bwd"}
LOOKUP = {"route", "exchange_keys", "route_owner", "retrieve", "sync"}


def union(spans):
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def measure(u):
    return sum(e - s for s, e in u)


def overlap(a, b):
    return sum(max(0.0, min(x[1], y[1]) - max(x[0], y[0])) for x in a for y in b)


def main():
    trace, report = (json.load(open(p)) for p in sys.argv[1:3])
    by_ms = sys.argv[3] == "ms"
    tasks = []
    for ev in trace["traceEvents"]:
        if ev.get("ph") != "X" or "kind" not in ev.get("args", {}):
            continue
        s = ev["ts"]
        tasks.append((ev["pid"], ev["tid"], ev["args"]["kind"], ev["args"]["batch"], s,
                      s + max(ev["dur"], 0)))
    ends = {}
    for rank, _, _, batch, _, e in tasks:
        ends[rank, batch] = max(ends.get((rank, batch), e), e)
    lo, hi = min(t[4] for t in tasks), max(t[5] for t in tasks)
    if by_ms:
        w0, w1 = max(float(sys.argv[4]) * 1e3, lo), min(float(sys.argv[5]) * 1e3, hi)
    else:
        first, last = int(sys.argv[4]), int(sys.argv[5])
        before = [e for (r, b), e in ends.items() if b < first]
        w0 = max(before) if before else lo
        w1 = max(e for (r, b), e in ends.items() if b <= last)
    win = report["window"]
    assert abs(win["from_us"] - w0) < 1e-3 and abs(win["to_us"] - w1) < 1e-3, (win, w0, w1)

    def near(a, b, what):
        assert abs(a - b) <= 1e-3 + 1e-9 * abs(b), "%s: report %r, reference %r" % (what, a, b)

    ranks = sorted({r for (r, w, k, b, s, e) in tasks
                    if e > w0 and s < w1 or (e == s and w0 <= s <= w1)})
    assert [rr["rank"] for rr in report["ranks"]] == ranks, (report["ranks"], ranks)
    for rr in report["ranks"]:
        rank = rr["rank"]
        mine = [(w, k, max(s, w0), min(e, w1)) for (r, w, k, b, s, e) in tasks
                if r == rank and (e > w0 and s < w1 or (e == s and w0 <= s <= w1))]
        dense = union([(s, e) for _, k, s, e in mine if k in COMPUTE])
        done = sum(1 for (r, b), e in ends.items() if r == rank and w0 < e <= w1)
        assert rr["batches"] == done, (rank, rr["batches"], done)
        near(rr["span_us"], w1 - w0, "rank %d span" % rank)
        for kind in {k for _, k, _, _ in mine}:
            u = union([(s, e) for _, k, s, e in mine if k == kind])
            got = rr["kinds"][kind]
            assert got["count"] == sum(1 for _, k, _, _ in mine if k == kind), (rank, kind)
            near(got["union_us"], measure(u), "rank %d %s union" % (rank, kind))
            exposed = measure(u) if kind in COMPUTE else measure(u) - overlap(u, dense)
            near(got["exposed_us"], exposed, "rank %d %s exposed" % (rank, kind))
        u = union([(s, e) for _, k, s, e in mine if k in LOOKUP])
        near(rr["lookup_us"], measure(u), "rank %d lookup" % rank)
        near(rr["lookup_exposed_us"], measure(u) - overlap(u, dense), "rank %d lookup exposed" % rank)
        for w in rr["workers"]:
            busy = measure(union([(s, e) for ww, _, s, e in mine if ww == w["worker"]]))
            near(w["busy_us"], busy, "rank %d worker %d busy" % (rank, w["worker"]))
    print("window %.3f-%.3f ms: %d ranks equal to the whole trace restricted to it" %
          (w0 / 1e3, w1 / 1e3, len(report["ranks"])))


main()
