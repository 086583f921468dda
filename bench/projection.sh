#!/usr/bin/env bash
# The projection to 1,536 ranks with the collectives of issue 42 against those before
# (docs/scale.md): for 512, 2048 and 8192 samples a worker, nestpipe and sequential are
# traced here (a 2-rank run for the graph, a 1-rank run for the compute) and replayed at 16
# and 1,536 ranks: 100 Gbit/s, 5 us, 1 us a message, 8 ranks a host (intra-host links at
# the simulator's defaults), device speed 1 and 10, alpha-beta. "before": the flat
# All2All (--a2a direct), one all-reduce a layer, row-wise owners; "after": the two-level
# All2All (--a2a hier), one all-reduce a step, spread owners (--shard spread). Efficiency
# is the step at 16 over the step at 1,536 (weak scaling, the batch a worker held).
# Writes bench/results/<date>-<cpu>-projection.md.
#
#   bash bench/projection.sh [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BENCH_TORCH=system # no PyTorch side
# shellcheck source=bench/lib.sh
. bench/lib.sh
QUICK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
  --quick) QUICK=1; shift ;;
  *) echo "projection.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
own_bench_setup projection
BATCHES=(512 2048 8192) SPEEDS=(1 10) PIPES=(nestpipe sequential) NS=16,1536 STEPS=12
if [[ $QUICK == 1 ]]; then BATCHES=(512) SPEEDS=(10) PIPES=(nestpipe) NS=16,64; fi
BEFORE=(--allreduce-bucket 0 --shard row)
AFTER=(--shard spread)
PLAT=(--link-gbit 100 --latency-us 5 --msg-us 1 --host-ranks 8 --model alpha-beta --route-steps 1)
RES=$W/res.tsv
: >"$RES"
for b in "${BATCHES[@]}"; do
  for p in "${PIPES[@]}"; do
    lib_log "$(date +%T) batch $b $p: the one-rank compute trace"
    timeout 900 "$NP" train --quiet --steps $STEPS --pipeline "$p" --windows 4 --batch "$b" \
      --trace "$W/c.json" >/dev/null 2>"$W/err" ||
      { echo "projection.sh: the one-rank run failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
    for side in before after; do
      if [[ $side == before ]]; then flags=("${BEFORE[@]}") a2a=direct; else flags=("${AFTER[@]}") a2a=hier; fi
      lib_log "$(date +%T) batch $b $p $side: the 2-rank graph trace"
      timeout 900 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
        -x STARPU_SILENT -x STARPU_HOME "$NP" train --quiet --steps $STEPS --pipeline "$p" \
        --windows 4 --batch $((2 * b)) "${flags[@]}" --trace "$W/g.json" >/dev/null 2>"$W/err" ||
        { echo "projection.sh: the 2-rank run failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
      for s in "${SPEEDS[@]}"; do
        lib_log "$(date +%T) batch $b $p $side: simulate at device speed $s"
        "$NP" simulate --graph "$W/g.json" --compute "$W/c.json" --ranks "$NS" --quiet \
          --steps $STEPS --pipeline "$p" --windows 4 --batch $((2 * b)) "${flags[@]}" \
          --collectives-from-graph "${PLAT[@]}" --a2a $a2a --device-speed "$s" --json \
          >"$W/s.json" 2>"$W/err" ||
          { echo "projection.sh: simulate failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
        python3 - "$W/s.json" "$b" "$p" "$side" "$s" >>"$RES" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lo, hi = rows[0], rows[-1]
print("\t".join(sys.argv[2:] + ["%.3f" % (lo["step_us"] / 1e3), "%.3f" % (hi["step_us"] / 1e3),
                                "%.4f" % hi["efficiency"], str(hi["N"])]))
EOF
      done
    done
  done
done

[[ $QUICK == 1 ]] && OUT=$W/quick.md
machine_section >"$OUT.machine"
python3 - "$RES" "$OUT" "$STAMP" <<'EOF' || exit 1
import math, sys
res, out, stamp = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
# batch, pipeline, side, speed, step16, stepN, eff, N
data = {}
for b, p, side, s, s16, sn, eff, n in rows:
    data[(int(b), p, side, s)] = (float(s16), float(sn), float(eff), int(n))
N = rows[0][7]
batches = sorted({int(r[0]) for r in rows})
speeds = sorted({r[3] for r in rows}, key=float)
pipes = sorted({r[1] for r in rows}, key=lambda p: p != "nestpipe")

def cross(p, side, s, target=0.9):
    """The batch a worker where the efficiency crosses target, log-linear between measured."""
    pts = [(b, data[(b, p, side, s)][2]) for b in batches if (b, p, side, s) in data]
    for (b0, e0), (b1, e1) in zip(pts, pts[1:]):
        if e0 < target <= e1:
            f = (target - e0) / (e1 - e0)
            return "%.0f" % math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))
    if pts and pts[0][1] >= target:
        return "<= %d" % pts[0][0]
    return "> %d" % pts[-1][0] if pts else "-"

with open(out, "w") as f:
    w = f.write
    w("# nestpipe at %s ranks with the collectives of issue 42 (projection, %s)\n\n" % (N, stamp))
    w("`bash bench/projection.sh`. The default model; nestpipe and sequential with 4 windows, each "
      "traced here (a 2-rank run of 12 steps for the graph, a 1-rank run for the compute) and "
      "replayed by `nestpipe simulate --collectives-from-graph` at 16 and %s ranks: 100 Gbit/s a rank, "
      "5 us latency, 1 us a message, 8 ranks a host (2400 Gbit/s, 1 us within), alpha-beta; the "
      "compute divided by the device speed. **before**: `--a2a direct --allreduce-bucket 0 --shard row` "
      "(a flat All2All, one all-reduce a layer, row-wise owners: the engine before issue 42); "
      "**after**: `--a2a hier --shard spread` with the default bucket (the two-level All2All, one "
      "all-reduce a step, spread owners). Efficiency: the step at 16 over the step at %s, the batch "
      "a worker held. Every figure is a projection (docs/scale.md \"What the projection leaves "
      "out\").\n\n" % (N, N))
    for s in speeds:
        w("## Device speed %s\n\n" % s)
        w("| samples a worker | " + " | ".join(
            "%s %s step at 16 ms | at %s ms | efficiency" % (p, side, N) for p in pipes
            for side in ("before", "after")) + " |\n")
        w("|---|" + "---|---|---|" * (2 * len(pipes)) + "\n")
        for b in batches:
            cells = []
            for p in pipes:
                for side in ("before", "after"):
                    v = data.get((b, p, side, s))
                    cells += ["%.3f" % v[0], "%.3f" % v[1], "%.1f%%" % (100 * v[2])] if v else ["-"] * 3
            w("| %d | %s |\n" % (b, " | ".join(cells)))
        w("\n")
        for p in pipes:
            w("- %s crosses 90%% at %s samples a worker before, %s after.\n" %
              (p, cross(p, "before", s), cross(p, "after", s)))
        w("\n")
    w(open(out + ".machine").read())
EOF
rm -f "$OUT.machine"
echo "projection.sh: wrote $OUT" >&2
cat "$OUT"
