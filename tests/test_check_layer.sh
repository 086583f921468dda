#!/usr/bin/env bash
# `nestpipe check-layer`: --all passes; a plugin's correct kind passes and its buggy one
# fails (exit 1) naming the wrong tensor; a plugin that clashes with a built-in kind or
# was built for another NP_PLUGIN_ABI, and bad flags, exit 2 with one line naming what.
# usage: test_check_layer.sh NESTPIPE GOOD.so BUGGY.so CLASH.so BADABI.so
set -u
NP=$1 GOOD=$2 BUGGY=$3 CLASH=$4 BADABI=$5
W=$(mktemp -d /tmp/np_checklayer_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

# run NAME WANT_EXIT -- CMD...: the exit code; stdout in $W/out, stderr in $W/err
run() {
  local name=$1 want=$2
  shift 3
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [[ $rc -ne $want ]]; then
    bad "$name: exit $rc, want $want; stdout: $(tail -n 5 "$W/out"); stderr: $(cat "$W/err")"
    return 1
  fi
  return 0
}
# has NAME FILE FRAGMENT: FILE holds FRAGMENT
has() {
  if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1: lacks '$3': $(cat "$2")"; fi
}
# expect_fail NAME FRAGMENT -- CMD...: exit 2, one stderr line starting nestpipe:, FRAGMENT
expect_fail() {
  local name=$1 frag=$2
  shift 2
  run "$name" 2 -- "$@" || return
  local lines
  lines=$(wc -l <"$W/err")
  if [[ $lines -ne 1 ]]; then
    bad "$name: stderr has $lines lines, want 1: $(cat "$W/err")"
  elif ! grep -q '^nestpipe: ' "$W/err"; then
    bad "$name: stderr does not start with 'nestpipe: ': $(cat "$W/err")"
  else
    has "$name" "$W/err" "$frag"
  fi
}

CL=("$NP" check-layer)

run "--all" 0 -- "${CL[@]}" --all && has "--all: PASS last" <(tail -n 1 "$W/out") "PASS ("
for k in linear dot concat cross; do
  grep -q "^$k" "$W/out" && ok "--all checks $k" || bad "--all does not check $k"
done
if grep -q "FAIL" "$W/out"; then bad "--all prints a FAIL: $(grep FAIL "$W/out")"; fi

run "one kind" 0 -- "${CL[@]}" --kind linear --in 6 --hp out=3,relu=1 --rows 5 --seed 7 &&
  has "one kind: PASS" <(tail -n 1 "$W/out") "PASS"
has "one kind: names the weight" "$W/out" "weight   (3, 6)"
has "one kind: the contract" "$W/out" "contract: held"
has "one kind: the CUDA comparison or why not" "$W/out" "  cuda: "
run "--hp twice, --flag=value" 0 -- "${CL[@]}" --kind=cross --in=5,5 --hp rank=2 --hp i1=0 \
  --tol=0.05 --no-cuda && has "--flag=value: PASS" <(tail -n 1 "$W/out") "PASS"

run "good plugin" 0 -- "${CL[@]}" --plugin "$GOOD" --kind pgate --in 5 &&
  has "good plugin: PASS" <(tail -n 1 "$W/out") "PASS"
run "buggy plugin" 1 -- "${CL[@]}" --plugin "$GOOD" --plugin "$BUGGY" --kind pgate_bad --in 5 &&
  has "buggy plugin: names bias" <(tail -n 1 "$W/out") "FAIL: bias worst"
grep -q "^  weight .*over the tolerance" "$W/out" && bad "buggy plugin: weight flagged too" ||
  ok "buggy plugin: only bias flagged"
run "--all with plugins" 1 -- "${CL[@]}" --plugin "$GOOD" --plugin "$BUGGY" --all &&
  has "--all with plugins: one failed" <(tail -n 1 "$W/out") "FAIL (1 of"
run "--list" 0 -- "${CL[@]}" --plugin "$GOOD" --list && has "--list: plugin kind" "$W/out" "pgate "
has "--list: built-in" "$W/out" "y = x W^T + b"
has "--list: hp names" "$W/out" "out, relu"
run "--help" 0 -- "${CL[@]}" --help && has "--help" "$W/out" "usage: nestpipe check-layer"

expect_fail "clashing plugin" "plugin $CLASH: layer linear: this kind is already registered" \
  "${CL[@]}" --plugin "$CLASH" --kind linear --in 4 --hp out=2
expect_fail "bad-ABI plugin" "plugin $BADABI: built for the layer API" \
  "${CL[@]}" --plugin "$BADABI" --list
expect_fail "missing plugin" "plugin $W/none.so: cannot load it" \
  "${CL[@]}" --plugin "$W/none.so" --list
expect_fail "unknown kind" "unknown layer kind 'nosuch'" "${CL[@]}" --kind nosuch --in 4
expect_fail "bad --in" "--in '4,x'" "${CL[@]}" --kind concat --in 4,x
expect_fail "zero width" "--in '0'" "${CL[@]}" --kind concat --in 0
expect_fail "inputs out of range" "linear takes 1 to 1 inputs, not 2" \
  "${CL[@]}" --kind linear --in 4,4 --hp out=2
expect_fail "unknown --hp name" "no hyper-parameter 'width'" \
  "${CL[@]}" --kind linear --in 4 --hp width=3
expect_fail "bad --hp value" "out = 'x'" "${CL[@]}" --kind linear --in 4 --hp out=x
expect_fail "refused shape" "linear: output width 0" "${CL[@]}" --kind linear --in 4
expect_fail "unknown flag" "unknown flag '--bogus'" "${CL[@]}" --kind linear --in 4 --bogus
expect_fail "bad --rows" "--rows '0'" "${CL[@]}" --kind concat --in 4 --rows 0
expect_fail "bad --tol" "--tol 'abc'" "${CL[@]}" --kind concat --in 4 --tol abc
expect_fail "no --kind" "--kind K and --in" "${CL[@]}" --in 4

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
