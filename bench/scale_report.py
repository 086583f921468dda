#!/usr/bin/env python3
"""bench/scale.sh's report: reads the work folder's outputs, writes the Markdown results
and the efficiency plot (SVG). Every projected figure is labelled as a projection."""
import json
import math
import sys
import datetime

W, OUT, SVG, RATE, LOCAL, PIPES, WINS, RANKS_V2, BATCHES, SG, MACHINE, REPEATS = sys.argv[1:13]
REPEATS = int(REPEATS)
PIPES, WINS, RANKS_V2, BATCHES = PIPES.split(), WINS.split(), RANKS_V2.split(), BATCHES.split()
LOCAL = int(LOCAL)
import os
NPROC = os.cpu_count() or 1


def jl(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except OSError:
        return []


def report(path):
    with open(path) as f:
        return json.load(f)["overall"]


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


out = []
p = out.append
p("# nestpipe at scale: a projection checked against runs here (%s)" % datetime.date.today())
p("")
p("Written by `bash bench/scale.sh` (docs/scale.md). V0-V2 run on this machine over the emulated "
  "link (`NP_LINK_GBIT=%s`: shared memory paced at %s Gbit/s a rank, each way); everything "
  "labelled *projection* is computed, not run. SimGrid: %s." % (RATE, RATE, SG))
p("")
p(MACHINE)
p("")

# ---- V0
p("## V0: collectives, simulated against measured")
p("")
p("An All2All of B bytes a rank in equal blocks and the engine's dense all-reduce of B bytes "
  "(bench/coll_bench.c, the medians of 5). *local*: the same collective without the link (MPI "
  "over shared memory: the copies and MPI's own latency); *wire*: `nestpipe simulate "
  "--collective` at the link's rate, latency 0; predicted = local + wire.")
p("")
p("| collective | ranks | bytes | local us | measured us | wire alpha-beta us | wire SimGrid us | predicted us | error |")
p("|---|---|---|---|---|---|---|---|---|")
v0 = {}
for line in open(W + "/v0"):
    where, kind, r, b, us = line.split()
    v0.setdefault((kind, int(r), int(b)), {})[where] = float(us)
sims = [l.split() for l in open(W + "/v0sim")]
worst = 0
i = 0
for line in open(W + "/v0"):
    where, kind, r, b, us = line.split()
    if where != "local":
        continue
    d = v0[(kind, int(r), int(b))]
    sim = sims[i]
    i += 1
    ab = float(sim[3])
    sg = float(sim[4]) if len(sim) > 4 and sim[4] != "nan" else float("nan")
    pred = d["local"] + ab
    err = pct(pred, d["link"])
    worst = max(worst, abs(err))
    p("| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %+.1f%% |" % (kind, r, b, d["local"], d["link"], ab, sg, pred, err))
p("")
p("**V0: largest error %.1f%% (target 10%%): %s.**" % (worst, "met" if worst <= 10 else "not met"))
p("")

# ---- V1
p("## V1: each 2-rank run replayed from its own trace")
p("")
p("Measured: the steady-state step (`trace report --from-batch 2`) of a 2-rank run over the link "
  "(%d samples a rank). Replayed: `nestpipe simulate --graph` of that trace at 2 ranks, its own "
  "durations, the link's wire time taken out of its collectives and put back by the model." % LOCAL)
p("")
p("| pipeline | W | measured step ms | replayed step ms | error |")
p("|---|---|---|---|---|")
worst = 0
for pp in PIPES:
    for w in WINS:
        m = report("%s/m_%s_%s_2.json" % (W, pp, w))["step_us"]
        r = jl("%s/v1_%s_%s.json" % (W, pp, w))
        r = r[0]["step_us"] if r else float("nan")
        e = pct(r, m)
        worst = max(worst, abs(e))
        p("| %s | %s | %.3f | %.3f | %+.1f%% |" % (pp, w, m / 1e3, r / 1e3, e))
p("")
p("**V1: largest error %.1f%% (target 5%%): %s.**" % (worst, "met" if worst <= 5 else "not met"))
p("")

# ---- V2
def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def measured(pp, w, R):
    """median samples/s, its spread (max - min over the median) and the median exposed ratio"""
    runs = []
    for k in range(1, REPEATS + 1):
        try:
            runs.append(report("%s/m_%s_%s_%d_%d.json" % (W, pp, w, R, k)))
        except OSError:
            pass
    sps = [LOCAL * R / (m["step_us"] / 1e6) for m in runs]
    ratio = [m["exchange_exposed_ratio"] for m in runs if m["exchange_us"]]
    med = median(sps)
    return med, (max(sps) - min(sps)) / med, median(ratio) if ratio else float("nan"), len(runs)


def predicted(how, pp, w, R):
    x = jl("%s/v2%s_%s_%s_%d.json" % (W, how, pp, w, R))
    if not x:
        return float("nan"), float("nan")
    x = x[0]
    return x["samples_s"], (x["exchange_exposed_us"] / x["exchange_us"] if x["exchange_us"] else float("nan"))


p("## V2: 2, 3 and 4 real ranks predicted from one-rank runs")
p("")
p("Measured: R ranks over the link, %d samples a rank, the steady state of %d runs each "
  "(interleaved; the median, and the spread max - min over it). Predicted by `simulate` from the "
  "2-rank run's graph and route-stats at R ranks, with three calibrations:" % (LOCAL, REPEATS))
p("")
p("- *one rank*: compute durations, the runtime's delays and the collectives' own part from a "
  "one-rank run of %d samples (no MPI: its collectives are copies);" % LOCAL)
p("- *+ 2-rank runtime*: `--collectives-from-graph`: the collectives' own part (MPI's software, "
  "copies, waits for peers) and the delays from the 2-rank run, compute still from one rank;")
p("- *+ shared cores* (the V2 prediction): that, and `--cores-per-rank %d/R`: the R ranks share "
  "this machine's %d cores, so each rank's compute worker gets %d/R of a core when R > %d." % (
      NPROC, NPROC, NPROC, NPROC))
p("")
p("| pipeline | W | R | measured samples/s | spread | one rank | + 2-rank runtime | + shared cores | error | measured exposed ratio | predicted | difference |")
p("|---|---|---|---|---|---|---|---|---|---|---|---|")
worst_s, worst_r = 0, 0
meas, pred, spread = {}, {}, {}
for pp in PIPES:
    for w in WINS:
        for R in RANKS_V2:
            R = int(R)
            ms, sp, mr, nr = measured(pp, w, R)
            one, _ = predicted("one", pp, w, R)
            gr, _ = predicted("graph", pp, w, R)
            ps, pr = predicted("cores", pp, w, R)
            e = pct(ps, ms)
            worst_s = max(worst_s, abs(e))
            if not math.isnan(mr) and not math.isnan(pr):
                worst_r = max(worst_r, abs(pr - mr))
            meas[(pp, w, R)], pred[(pp, w, R)], spread[(pp, w, R)] = ms, ps, sp
            p("| %s | %s | %d | %.0f | %.0f%% | %.0f | %.0f | %.0f | %+.1f%% | %.2f | %.2f | %+.2f |" % (
                pp, w, R, ms, 100 * sp, one, gr, ps, e, mr, pr, pr - mr))
p("")
wrong = 0
for w in WINS:
    for R in RANKS_V2:
        R = int(R)
        mo = sorted(PIPES, key=lambda x: -meas[(x, w, R)])
        po = sorted(PIPES, key=lambda x: -pred[(x, w, R)])
        # a pair ordered differently counts only when the measured gap exceeds both spreads
        bad_pairs = []
        for i, a in enumerate(mo):
            for b in mo[i + 1:]:
                gap = (meas[(a, w, R)] - meas[(b, w, R)]) / meas[(b, w, R)]
                if pred[(a, w, R)] < pred[(b, w, R)] and gap > max(spread[(a, w, R)], spread[(b, w, R)]):
                    bad_pairs.append("%s > %s" % (a, b))
        wrong += len(bad_pairs)
        p("- W=%s, R=%d: measured %s; predicted %s%s" % (
            w, R, " > ".join(mo), " > ".join(po),
            "; measured beyond the spread but predicted the other way: " + ", ".join(bad_pairs) if bad_pairs else ""))
p("")
p("**V2: samples/s within %.1f%% (target 15%%): %s; the order: %s; exposed ratio within %.2f (target 0.1): %s.**"
  % (worst_s, "met" if worst_s <= 15 else "not met",
     "every pair whose measured gap exceeds its spread is predicted in that order" if not wrong else "%d pairs predicted the other way" % wrong,
     worst_r, "met" if worst_r <= 0.1 else "not met"))
p("")

# ---- V3 and the projection
proj = {}
for pp in PIPES:
    for link in ("100", "25"):
        proj[(pp, link)] = jl("%s/p_%s_%s.json" % (W, pp, link))
p("## V3: SimGrid against alpha-beta on a full-bisection fabric (projection)")
p("")
p("| pipeline | N | alpha-beta step ms | SimGrid step ms | difference |")
p("|---|---|---|---|---|")
worst = 0
for pp in PIPES:
    rows = proj[(pp, "100")]
    for n in (16, 128, 1536):
        a = [x for x in rows if x["N"] == n and x["model"] == "alpha-beta"]
        s = [x for x in rows if x["N"] == n and x["model"] == "simgrid"]
        if a and s:
            d = pct(s[0]["step_us"], a[0]["step_us"])
            worst = max(worst, abs(d))
            p("| %s | %d | %.3f | %.3f | %+.2f%% |" % (pp, n, a[0]["step_us"] / 1e3, s[0]["step_us"] / 1e3, d))
p("")
p("**V3: largest difference %.2f%% (target 10%%).**" % worst)
p("")
walls = [l.split() for l in open(W + "/p_wall")]
p("Wall time of `nestpipe simulate` for N = 16 to 1,536 (8 sizes) with SimGrid at 100 Gbit/s: "
  + ", ".join("%s %.0f s" % (x[0], float(x[2])) for x in walls if x[1] == "100") + ".")
p("")
p("## The projection: weak scaling to 1,536 ranks (projection)")
p("")
p("%d samples a rank, W = %s, the default model, compute of this machine's one-rank run "
  "(device speed 1), flat full-bisection fabric, latency 5 us, 1 us a message, direct All2All. "
  "Efficiency: step at 16 / step at N. The paper reports 94.07%% at 1,536 (on its own models, "
  "batch and accelerators)." % (LOCAL, WINS[0]))
for link in ("100", "25"):
    p("")
    p("### %s Gbit/s a rank" % link)
    p("")
    ns = sorted({x["N"] for x in proj[(PIPES[0], link)]})
    p("| pipeline | " + " | ".join("N=%d" % n for n in ns) + " | samples/s at %d |" % ns[-1])
    p("|---|" + "---|" * (len(ns) + 1))
    for pp in PIPES:
        rows = [x for x in proj[(pp, link)] if x["model"] == "alpha-beta"]
        eff = {x["N"]: x["efficiency"] for x in rows}
        last = [x for x in rows if x["N"] == ns[-1]]
        p("| %s | " % pp + " | ".join("%.1f%%" % (100 * eff.get(n, float("nan"))) for n in ns)
          + " | %.0f |" % (last[0]["samples_s"] if last else float("nan")))
fast = jl("%s/p_nestpipe_100_fast.json" % W)
if fast:
    p("")
    p("With latency-optimised collectives instead of the engine's (`--a2a bruck --allreduce rhd`: "
      "log2 N rounds rather than N - 1 messages), nestpipe at 100 Gbit/s (projection):")
    p("")
    rows = sorted((x for x in fast if x["model"] == "alpha-beta"), key=lambda x: x["N"])
    p("| " + " | ".join("N=%d" % x["N"] for x in rows) + " |")
    p("|" + "---|" * len(rows))
    p("| " + " | ".join("%.1f%%" % (100 * x["efficiency"]) for x in rows) + " |")
p("")
p("![efficiency against N](%s)" % SVG.split("/")[-1])
p("")

# ---- batch per worker
p("## nestpipe at 1,536 ranks against the batch per worker (projection, 100 Gbit/s)")
p("")
p("| samples a worker | step at 16 ms | step at 1,536 ms | efficiency |")
p("|---|---|---|---|")
effs = []
for b in BATCHES:
    rows = {x["N"]: x for x in jl("%s/b_%s.json" % (W, b)) if x["model"] == "alpha-beta"}
    if 16 in rows and 1536 in rows:
        e = rows[1536]["efficiency"]
        effs.append((int(b), e))
        p("| %s | %.3f | %.3f | %.1f%% |" % (b, rows[16]["step_us"] / 1e3, rows[1536]["step_us"] / 1e3, 100 * e))
p("")
below = [b for b, e in effs if e < 0.9]
above = [b for b, e in effs if e >= 0.9]
if not effs:
    p("(no run reached 1,536 ranks)")
elif below and above:
    p("nestpipe's projected efficiency at 1,536 is below 90%% at %d samples a worker and at or above it at %d." % (max(below), min(above)))
elif below:
    p("nestpipe's projected efficiency at 1,536 stays below 90%% up to %d samples a worker (the largest measured)." % max(below))
else:
    p("nestpipe's projected efficiency at 1,536 is 90%% or more from %d samples a worker (the smallest measured)." % min(above))
with open(OUT, "w") as f:
    f.write("\n".join(out) + "\n")

# ---- the plot: efficiency against N, a line per pipeline, solid 100 Gbit/s, dashed 25
colours = {"sequential": "#7f7f7f", "dbp": "#1f77b4", "fwp": "#2ca02c", "nestpipe": "#d62728"}
Wd, H, L, R, T, B = 800, 440, 60, 230, 40, 50
ns = sorted({x["N"] for x in proj[(PIPES[0], "100")]})
lx0, lx1 = math.log2(ns[0]), math.log2(ns[-1])
X = lambda n: L + (Wd - L - R) * (math.log2(n) - lx0) / max(lx1 - lx0, 1e-9)
Y = lambda e: T + (H - T - B) * (1 - max(0.0, min(1.0, e)))
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (Wd, H),
       '<rect width="100%" height="100%" fill="white"/>',
       '<text x="%d" y="20">Projected weak-scaling efficiency (a projection, not a run)</text>' % L]
for k in range(0, 11, 2):
    y = Y(k / 10)
    svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%d%%</text>' % (L, Wd - R, y, y, L - 6, y + 4, 10 * k))
for n in ns:
    svg.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(n), H - B + 18, n))
svg.append('<text x="%d" y="%d" text-anchor="middle">ranks (log scale)</text>' % ((L + Wd - R) // 2, H - 12))
y = Y(0.9407)
svg.append('<circle cx="%.1f" cy="%.1f" r="5" fill="none" stroke="black"/><text x="%.1f" y="%.1f" text-anchor="end">the paper: 94.07%% at 1,536</text>' % (X(1536), y, X(1536) - 10, y - 8))
row = 0
for pp in PIPES:
    for link, dash in (("100", ""), ("25", ' stroke-dasharray="5,4"')):
        rows = sorted((x for x in proj[(pp, link)] if x["model"] == "alpha-beta"), key=lambda x: x["N"])
        pts = " ".join("%.1f,%.1f" % (X(x["N"]), Y(x["efficiency"])) for x in rows)
        svg.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (colours.get(pp, "black"), dash, pts))
        svg.append('<text x="%d" y="%d" fill="%s">%s, %s Gbit/s%s</text>' % (Wd - R + 8, T + 60 + 16 * row, colours.get(pp, "black"), pp, link, "" if link == "100" else " (dashed)"))
        row += 1
if fast:
    rows = sorted((x for x in fast if x["model"] == "alpha-beta"), key=lambda x: x["N"])
    pts = " ".join("%.1f,%.1f" % (X(x["N"]), Y(x["efficiency"])) for x in rows)
    svg.append('<polyline fill="none" stroke="black" stroke-width="2" stroke-dasharray="2,3" points="%s"/>' % pts)
    svg.append('<text x="%d" y="%d">nestpipe, 100 Gbit/s, Bruck</text>' % (Wd - R + 8, T + 60 + 16 * row))
    svg.append('<text x="%d" y="%d">and rhd collectives (dotted)</text>' % (Wd - R + 8, T + 76 + 16 * row))
svg.append("</svg>")
with open(SVG, "w") as f:
    f.write("\n".join(svg) + "\n")
