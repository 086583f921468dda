#!/usr/bin/env bash
# Checkpoint write and resume speed against the disk's sequential write speed, measured in
# the same run on the same folder: dd of the checkpoint's size with conv=fsync (what a
# checkpoint pays too: every file is fsync'd), then nestpipe writing checkpoints of a
# large-table model at R = 1 and R = 2 (ranks write their shards in parallel) and resuming
# them. The result is first validated: the resumed run's dump must be the bytes of an
# uninterrupted run.
# usage: bench/ckpt_speed.sh [build/nestpipe] [DIR on the disk to measure] [OUT.md]
set -eu
NP=${1:-build/nestpipe}
BASE=${2:-/tmp}
OUT=${3:-}
W=$(mktemp -d "$BASE/np_ckspeed_XXXXXX")
trap 'rm -rf "$W"' EXIT
export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND)
# 8 tables x 250000 rows x dim 32 (fp32) = 256 MB of rows, + 8 MB of Adagrad state
SM=(--rows 250000 --tables 8 --dim 32 --bottom 13-32-32 --top 32-1 --batch 256 --eval-samples 256
  --sparse-optim rowwise-adagrad --quiet)
STEPS=4
json() { python3 -c "import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print('%.1f' % v if isinstance(v, float) else v)" "$1" "$2"; }

run() { # R flags...
  local R=$1
  shift
  if [[ $R == 1 ]]; then "$NP" train "${SM[@]}" "$@"; else "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" "$@"; fi
}

rows=()
for R in 1 2; do
  run "$R" --steps $STEPS --dump-params "$W/ref.params"
  run "$R" --steps $((STEPS / 2)) --checkpoint-dir "$W/ck$R" --checkpoint-every 1 --metrics-json "$W/w$R.json"
  size_mb=$(du -sm "$W/ck$R/ckpt-$(printf %09d $((STEPS / 2)))" | cut -f1)
  # the disk, right now: the same amount of data, fsync'd
  sync
  dd_out=$(dd if=/dev/zero of="$W/dd.bin" bs=1M count="$size_mb" conv=fsync 2>&1 | tail -n 1)
  dd_mbs=$(echo "$dd_out" | python3 -c "
import re,sys; l=sys.stdin.read(); m=re.search(r'(\d+) bytes.*, ([0-9.]+) s,', l)
print('%.0f' % (int(m.group(1)) / 1e6 / float(m.group(2))))")
  rm -f "$W/dd.bin"
  # resume: drop the page cache when allowed, so the read comes from the disk
  cold=no
  sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null && cold=yes
  run "$R" --steps $STEPS --resume "$W/ck$R" --dump-params "$W/res.params" --metrics-json "$W/r$R.json"
  cmp -s "$W/ref.params" "$W/res.params" || { echo "R=$R: resumed dump differs" >&2; exit 1; }
  w_mbs=$(json "$W/w$R.json" checkpoint_mb_per_s)
  w_s=$(python3 -c "import json; d=json.load(open('$W/w$R.json')); print('%.3f' % (d['checkpoint_seconds'] / d['checkpoints']))")
  r_mbs=$(json "$W/r$R.json" resume_mb_per_s)
  r_s=$(python3 -c "import json; print('%.3f' % json.load(open('$W/r$R.json'))['resume_seconds'])")
  rows+=("| $R | $size_mb | $w_s | $w_mbs | $dd_mbs | $(python3 -c "print('%.2f' % ($w_mbs / $dd_mbs))") | $r_s | $r_mbs | $cold |")
  echo "${rows[-1]}"
done

report() {
  echo "# Checkpoint write and resume speed: $(date -u +%Y-%m-%d)"
  echo
  echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $(uname -sr);"
  echo "folder on $(df -T "$BASE" | awk 'NR==2 {print $2 " (" $1 ")"}'). Shape: ${SM[*]}."
  echo "Validated first: each resumed run's dump equals the uninterrupted run's bytes."
  echo "Write: mean over the run's checkpoints (all files, fsync'd, the manifest last)."
  echo "Disk: dd bs=1M conv=fsync of the checkpoint's size, same folder, same run."
  echo "Resume: rank 0's load (manifest, dense file, its shard or, at another R, every shard)."
  echo
  echo "| R | checkpoint MB | write s | write MB/s | dd MB/s | write / dd | resume s | resume MB/s | page cache dropped |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
}
if [[ -n $OUT ]]; then report >"$OUT"; cat "$OUT"; else report; fi
