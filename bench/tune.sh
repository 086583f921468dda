#!/usr/bin/env bash
# Scheduler tuning on the bench's Kaggle-like shape, one process (issue 28's measurements):
# 1. perf models: `tune --calibrate` under dmda with the models keyed on what decides a
#    task's cost, and with NESTPIPE_FOOTPRINT=sizes (keyed on buffer sizes, as before 0.6),
#    each in a STARPU_HOME of its own, fresh: each codelet's prediction error on a fresh run;
# 2. the sweep: `nestpipe tune` over the seven policies x --chunks 1,2,4 within --budget;
# 3. the confirmation: the three best policies x their chunk counts again, 5 interleaved
#    repeats each: is the sweep's first the fastest, or within its spread of it?
# 4. priorities: fixed vs critical-path under prio and dmdas, sequential and nestpipe
#    (--windows 4), 5 interleaved repeats each.
# Writes bench/results/<date>-tune.md (--quick: <date>-tune-quick.md, tiny runs).
#
#   bash bench/tune.sh [--budget 10m] [--steps 40] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUDGET=10m STEPS=40 REPEATS=5 SUFFIX=""
SHAPE=(--rows 100000 --bottom 13-512-256-64-16 --top 512-256-1 --batch 2048)
while [[ $# -gt 0 ]]; do
  case "$1" in
  --budget) BUDGET=$2; shift 2 ;;
  --steps) STEPS=$2; shift 2 ;;
  --quick) STEPS=12 REPEATS=2 BUDGET=2m SUFFIX=-quick SHAPE=(--rows 1000 --batch 256); shift ;;
  *) echo "tune.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
NP=$(realpath "${NESTPIPE:-build/nestpipe}")
[[ -x $NP ]] || { echo "tune.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
export STARPU_SILENT=1
unset STARPU_SCHED
W=$(mktemp -d /tmp/np_tunebench_XXXXXX)
trap 'rm -rf "$W"' EXIT
OUT=bench/results/$(date +%Y-%m-%d)-tune$SUFFIX.md
mkdir -p bench/results

echo "== 1. perf models: prediction errors (dmda), keyed and sizes-only" >&2
for kind in keyed sizes; do
  mkdir -p "$W/home-$kind"
  if [[ $kind == sizes ]]; then export NESTPIPE_FOOTPRINT=sizes; else unset NESTPIPE_FOOTPRINT; fi
  STARPU_HOME=$W/home-$kind "$NP" tune --calibrate --repeats 5 --steps "$STEPS" \
    --json "$W/cal-$kind.json" "${SHAPE[@]}" | tee "$W/cal-$kind.txt" >&2
done
unset NESTPIPE_FOOTPRINT
export STARPU_HOME=$W/home-keyed # the calibrated keyed models from here on

echo "== 2. the sweep" >&2
"$NP" tune --policies eager,prio,ws,lws,dm,dmda,dmdas --chunks 1,2,4 --repeats "$REPEATS" \
  --budget "$BUDGET" --steps "$STEPS" --json "$W/sweep.json" --svg "$W/sweep.svg" \
  --out "$W/best.ini" "${SHAPE[@]}" | tee "$W/sweep.txt" >&2

echo "== 3. confirmation" >&2
read -r POLS CHUNKS < <(python3 - "$W/sweep.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["settings"]
pols, chunks = [], []
for x in s:
    if x["sched"] not in pols and len(pols) < 3:
        pols.append(x["sched"])
for x in s:
    if x["sched"] in pols and x["chunks"] not in chunks:
        chunks.append(x["chunks"])
print(",".join(pols), ",".join(chunks[:3]))
PY
)
"$NP" tune --policies "$POLS" --chunks "$CHUNKS" --repeats 5 --budget 1h --steps "$STEPS" \
  --json "$W/confirm.json" --out "$W/confirm.ini" "${SHAPE[@]}" | tee "$W/confirm.txt" >&2

echo "== 4. priorities" >&2
"$NP" tune --policies prio,dmdas --priorities fixed,critical-path --pipeline sequential \
  --repeats 5 --budget 1h --steps "$STEPS" --json "$W/prio-seq.json" --out "$W/p1.ini" \
  "${SHAPE[@]}" | tee "$W/prio-seq.txt" >&2
"$NP" tune --policies prio,dmdas --priorities fixed,critical-path --pipeline nestpipe \
  --windows 4 --repeats 5 --budget 1h --steps "$STEPS" --json "$W/prio-nest.json" \
  --out "$W/p2.ini" "${SHAPE[@]}" | tee "$W/prio-nest.txt" >&2

machine_facts
NPROC=$(nproc) TORCH_LINES=() TORCH_MISSING="not part of this bench"
TMP_OUT=$(mktemp "$OUT.XXXXXX")
{
  echo "# Scheduler tuning on the Kaggle-like shape ($(date +%Y-%m-%d))"
  echo
  echo "\`bash bench/tune.sh$([[ -n $SUFFIX ]] && echo " --quick")\`: one process, shape \`${SHAPE[*]}\`,"
  echo "$STEPS steps a run (tune leaves out the first $((STEPS / 5 > 2 ? STEPS / 5 : 2)) as warm-up). Figures are"
  echo "steady-state step times from each run's trace (docs/engine.md \"Choosing a scheduler\")."
  echo
  machine_section
  echo
  echo "## 1. Perf models: prediction error on a fresh run (dmda)"
  echo
  echo "Median and 90th percentile of |predicted - measured| / measured per codelet, after"
  echo "\`tune --calibrate\` (each side calibrated from nothing in its own STARPU_HOME). *keyed*: this"
  echo "build's models (a layer's kind, hyper-parameters, widths, rows, precision; the rows or keys"
  echo "a task really carries). *sizes*: NESTPIPE_FOOTPRINT=sizes, the buffers' sizes alone, as"
  echo "the models were before. *noise floor*: the median error of a hindsight prediction, each"
  echo "footprint's own median duration in the same run: what no model keyed on the footprint beats."
  echo
  python3 - "$W/cal-keyed.json" "$W/cal-sizes.json" <<'PY'
import json, sys
k = {r["codelet"]: r for r in json.load(open(sys.argv[1]))}
s = {r["codelet"]: r for r in json.load(open(sys.argv[2]))}
def pct(x):
    return "n/a" if x is None else "%.1f%%" % (100 * x)
print("| codelet | tasks | mean µs | keyed: predicted | keyed: median | keyed: p90 | keyed: noise floor | sizes: predicted | sizes: median | sizes: p90 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
worst = 0
for name in sorted(k):
    a, b = k[name], s.get(name, {})
    print("| %s | %d | %.1f | %d%% | %s | %s | %s | %s | %s | %s |" % (
        name, a["tasks"], a["mean_us"], round(100 * a["predicted"] / a["tasks"]),
        pct(a["median_error"]), pct(a["p90_error"]), pct(a.get("noise_floor")),
        "%d%%" % round(100 * b["predicted"] / b["tasks"]) if b else "n/a",
        pct(b.get("median_error")), pct(b.get("p90_error"))))
    if a["median_error"] is not None:
        worst = max(worst, a["median_error"])
print()
over = [n for n in k if k[n]["median_error"] is not None and k[n]["median_error"] > 0.15]
print("Keyed models: the largest median error is %.1f%%; over 15%%: %s." % (
    100 * worst, ", ".join(sorted(over)) if over else "none"))
PY
  echo
  echo "## 2. The sweep"
  echo
  echo '```'
  cat "$W/sweep.txt"
  echo '```'
  echo
  echo "## 3. Confirmation (5 interleaved repeats)"
  echo
  echo '```'
  cat "$W/confirm.txt"
  echo '```'
  echo
  python3 - "$W/sweep.json" "$W/confirm.json" <<'PY'
import json, sys
sw = json.load(open(sys.argv[1]))["settings"]
co = json.load(open(sys.argv[2]))["settings"]
first = sw[0]
key = lambda x: (x["sched"], x["chunks"], x["windows"], x["priorities"])
match = [x for x in co if key(x) == key(first)]
if not match:
    print("The sweep's first (%s, chunks %s) was not in the confirmation." % (first["sched"], first["chunks"]))
else:
    m, best = match[0], co[0]
    verdict = ("it is the fastest" if m["rank"] == 1 else
               "within the fastest's spread (its interquartile range meets the first's)" if m["step_ms_q1"] <= best["step_ms_q3"] else
               "slower than the fastest beyond the spread")
    print("The sweep ranked first **%s, chunks %s** (%.2f ms). In the confirmation it ranks %d (%.2f ms, IQR %.2f-%.2f) against the fastest %s, chunks %s (%.2f ms, IQR %.2f-%.2f): %s." % (
        first["sched"], first["chunks"], first["step_ms_median"], m["rank"], m["step_ms_median"],
        m["step_ms_q1"], m["step_ms_q3"], best["sched"], best["chunks"], best["step_ms_median"],
        best["step_ms_q1"], best["step_ms_q3"], verdict))
dflt = [x for x in sw if x["sched"] == "lws" and x["chunks"] == "4"]
if dflt:
    d = dflt[0]
    print()
    print("The default (lws, chunks 4) ranks %d in the sweep: %.2f ms, %.2fx the first's step." % (
        d["rank"], d["step_ms_median"], d["step_ms_median"] / first["step_ms_median"]))
PY
  echo
  echo "## 4. Priorities: fixed vs critical-path (5 interleaved repeats)"
  echo
  for part in seq nest; do
    echo "### $([[ $part == seq ]] && echo "--pipeline sequential" || echo "--pipeline nestpipe --windows 4")"
    echo
    echo '```'
    cat "$W/prio-$part.txt"
    echo '```'
    echo
    python3 - "$W/prio-$part.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["settings"]
for pol in ("prio", "dmdas"):
    f = [x for x in s if x["sched"] == pol and x["priorities"] == "fixed"][0]
    c = [x for x in s if x["sched"] == pol and x["priorities"] == "critical-path"][0]
    overlap = c["step_ms_q1"] <= f["step_ms_q3"] and f["step_ms_q1"] <= c["step_ms_q3"]
    print("- %s: critical-path %.2f ms vs fixed %.2f ms: %.3fx the step%s." % (
        pol, c["step_ms_median"], f["step_ms_median"], c["step_ms_median"] / f["step_ms_median"],
        " (the interquartile ranges meet: no clear difference)" if overlap else ""))
PY
    echo
  done
} >"$TMP_OUT"
mv "$TMP_OUT" "$OUT"
cp "$W/sweep.svg" "${OUT%.md}.svg"
echo "wrote $OUT" >&2
