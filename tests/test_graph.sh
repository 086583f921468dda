#!/usr/bin/env bash
# `nestpipe graph`: the step graph of every pipeline and built-in model, as text, JSON and
# DOT (rendered by Graphviz where installed), the same tasks in each; --check passes for
# every pipeline on 1 and 2 ranks; bad arguments are refused with one line and exit 2.
# (A plugin's model: tests/test_plugin.sh.)   usage: test_graph.sh PATH/TO/nestpipe
set -u
NP=$1
W=$(mktemp -d /tmp/np_graph_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
SMALL=(--rows 1000 --tables 4 --batch 256)
HSTU=(--model hstu --seq-len 4 --seq-negatives 2 --tables 1 --rows 500 --batch 64)

# the task count the text header, the JSON and the DOT give for one step
count_text() { sed -n 's/.*): \([0-9]*\) tasks.*/\1/p' "$1" | head -1; }
count_json() { python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['nodes']))" "$1"; }
count_dot() { grep -c '^    n[0-9]* \[label=' "$1"; }

for model in dlrm dcnv2 hstu; do
  for p in sequential dbp async fwp nestpipe; do
    flags=(--pipeline "$p" --windows 2 --chunks 2)
    if [[ $model == hstu ]]; then flags+=("${HSTU[@]}"); else flags+=(--model "$model" "${SMALL[@]}"); fi
    name="$model $p"
    if ! "$NP" graph "${flags[@]}" >"$W/t.txt" 2>"$W/err" ||
      ! "$NP" graph "${flags[@]}" --format json --out "$W/g.json" 2>>"$W/err" ||
      ! "$NP" graph "${flags[@]}" --format dot >"$W/g.dot" 2>>"$W/err"; then
      bad "$name: $(head -n 2 "$W/err")"
      continue
    fi
    nt=$(count_text "$W/t.txt") nj=$(count_json "$W/g.json") nd=$(count_dot "$W/g.dot")
    if grep -q "^step 5 of $p " "$W/t.txt" && [[ -n $nt && $nt == "$nj" && $nt == "$nd" && $nt -gt 20 ]]; then
      ok "$name: $nt tasks in text, JSON and DOT"
    else
      bad "$name: text $nt, JSON $nj, DOT $nd tasks; $(head -n 1 "$W/t.txt")"
    fi
    if command -v dot >/dev/null; then
      dot -Tsvg "$W/g.dot" -o "$W/g.svg" 2>"$W/err" && grep -q '<svg' "$W/g.svg" &&
        ok "$name: the DOT renders" || bad "$name: dot refused it: $(head -n 2 "$W/err")"
    fi
    for R in 1 2; do
      if "$NP" graph "${flags[@]}" --ranks "$R" --check >"$W/c.txt" 2>&1 && ! grep -q VIOLATED "$W/c.txt"; then
        ok "$name, $R rank(s): every guarantee it promises holds"
      else
        bad "$name, $R rank(s): --check: $(grep -m 2 -A 1 VIOLATED "$W/c.txt")"
      fi
    done
  done
done

# the checks say what a pipeline does not promise
"$NP" graph --pipeline async --check "${SMALL[@]}" >"$W/c.txt" 2>&1
grep -q "fresh rows: not promised (async trains on stale rows), and indeed" "$W/c.txt" &&
  ok "async: its stale rows are reported, not failed" || bad "async --check: $(head -n 3 "$W/c.txt")"

if command -v dot >/dev/null; then
  "$NP" graph --format svg --out "$W/g2.svg" "${SMALL[@]}" 2>"$W/err" && grep -q '<svg' "$W/g2.svg" &&
    ok "--format svg through Graphviz" || bad "--format svg: $(head -n 2 "$W/err")"
  "$NP" graph --format png --out "$W/g2.png" "${SMALL[@]}" 2>"$W/err" &&
    [[ $(head -c 4 "$W/g2.png" | od -An -c | tr -d ' ') == 211PNG ]] &&
    ok "--format png through Graphviz" || bad "--format png: $(head -n 2 "$W/err")"
fi

# --gpus N: refused where the build has no CUDA, else drawn with N CUDA workers
"$NP" graph --gpus 1 --pipeline nestpipe >"$W/g.txt" 2>"$W/err"
rc=$?
if [[ $rc == 2 ]] && grep -q "but nestpipe was not built with CUDA" "$W/err" && [[ $(wc -l <"$W/err") == 1 ]]; then
  ok "--gpus 1 refused on a build without CUDA"
elif [[ $rc == 0 ]] && head -n 1 "$W/g.txt" | grep -q ", 1 CUDA worker)"; then
  ok "--gpus 1 drawn with one CUDA worker"
else
  bad "--gpus 1: exit $rc, $(head -n 2 "$W/err" "$W/g.txt")"
fi

expect_fail() { # NAME TEXT -- ARGS...
  local name=$1 text=$2
  shift 3
  "$NP" graph "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [[ $rc == 2 && $(wc -l <"$W/err") == 1 ]] && grep -qF -- "$text" "$W/err"; then
    ok "refused: $name"
  else
    bad "$name: exit $rc, stderr: $(head -n 3 "$W/err")"
  fi
}
expect_fail "an unknown format" "--format is text, dot, json, svg or png, not pdf" -- --format pdf
expect_fail "svg without --out" "svg and png need --out FILE" -- --format svg
expect_fail "a step past 15" "--step takes 0 to 15, not 16" -- --step 16
expect_fail "the reference engine" "--engine reference runs no task graph" -- --engine reference
expect_fail "zero ranks" "--ranks takes a count from 1 to 65536, not 0" -- --ranks 0
expect_fail "--check with a format" "--check prints a report" -- --check --format dot
expect_fail "a train flag misspelt" "unknown flag '--pipline'" -- --pipline dbp
expect_fail "an unwritable --out" "cannot" -- --out /nonexistent/dir/g.txt

echo "$pass passed, $failed failed"
((failed == 0))
