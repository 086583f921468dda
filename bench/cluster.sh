#!/usr/bin/env bash
# Key-centric sample clustering: exchange volume with contiguous vs clustered windows and
# the clustering's cost, G = 8192, Zipf 1.05, W = 4 and 8, for 1 table, 26 independent
# tables, and 26 tables correlated by latent groups (--groups). Writes bench/results/<date>-cluster.md. See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/cluster_bench
[[ -x $B ]] || { echo "cluster.sh: $B not found; build first: bash .ci/build" >&2; exit 2; }
OUT=bench/results/$(date +%Y-%m-%d)-cluster.md
{
  echo "# Key-centric sample clustering ($(date +%Y-%m-%d))"
  echo
  echo "Global batch 8192 of synthetic Zipf 1.05 data (one key per table and sample); volume ="
  echo "sum over the W windows of the distinct (table, key) pairs each holds, i.e. the rows the"
  echo "windows' exchanges move. Reduction and time: medians over 5 batches; the volumes shown"
  echo "are the last batch's. Time: np_cluster_windows alone, one thread. groups: synthetic"
  echo "latent groups whose members share their popular keys in every table (0: tables drawn"
  echo "independently; docs/data.md)."
  echo
  echo "| tables | rows | groups | W | volume, contiguous | volume, clustered | reduction | clustering ms |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  "$B" 1 100000 0
  "$B" 26 100000 0
  "$B" 26 100000 16
  "$B" 26 100000 64
  echo
  echo "Machine: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores; commit $(git rev-parse --short HEAD)."
  echo "Command: \`bash bench/cluster.sh\`"
} >"$OUT"
cat "$OUT"
