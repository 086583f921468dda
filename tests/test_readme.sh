#!/usr/bin/env bash
# The README's "Using it" commands and those of docs/ (fenced sh blocks) run as written:
# each line is run in order, in a scratch folder that holds links to the build and examples/models/,
# with small sizes appended to `train` commands (later flags override earlier ones).
# A command passes when it exits 0 (compare: 0 or 1, "same" or "differ"; bf16: 0, or 2 with
# the one-line refusal on a CPU without avx512_bf16). Then every file they left must be one
# the repository's .gitignore covers.
# usage: test_readme.sh PATH/TO/build
set -u
BUILD=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/np_readme_XXXXXX) L=$(mktemp -d /tmp/np_readme_log_XXXXXX)
trap 'rm -rf "$W" "$L"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
cd "$W" || exit 1
ln -s "$BUILD" build
mkdir examples && ln -s "$ROOT/examples/models" examples/models
# the line up to its comment: a '#' after whitespace, outside single or double quotes
strip_comment() {
  local s=$1 out="" q="" c prev=" " i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    if [[ -z $q ]]; then
      if [[ $c == "'" || $c == '"' ]]; then
        q=$c
      elif [[ $c == "#" && ($prev == " " || $prev == $'\t') ]]; then
        break
      fi
    elif [[ $c == "$q" ]]; then
      q=""
    fi
    out+=$c
    prev=$c
  done
  printf '%s' "$out"
}
SMALL=(--rows 2000 --batch 64 --steps 3 --eval-samples 64 --quiet)
# the block between "## Using it" and the next heading, fenced sh lines only
mapfile -t CMDS < <(awk '/^## Using it/ { on = 1; next } /^## / { on = 0 }
  on && /^```sh/ { code = 1; next } on && /^```/ { code = 0 } on && code' "$ROOT/README.md")
((${#CMDS[@]} >= 10)) && ok "README block has ${#CMDS[@]} commands" || bad "README block: ${#CMDS[@]} commands"
# then every fenced sh block of docs/, in file order; install.md's build, install and link
# commands are run by .ci/example (ctest example_install) with a scratch prefix instead
n_readme=${#CMDS[@]}
for f in "$ROOT"/docs/*.md; do
  [[ $(basename "$f") == install.md ]] && continue
  mapfile -t -O "${#CMDS[@]}" CMDS < <(awk '/^```sh/ { code = 1; next } /^```/ { code = 0 } code' "$f")
done
((${#CMDS[@]} > n_readme)) && ok "docs/ have $((${#CMDS[@]} - n_readme)) commands" || bad "no commands found in docs/"
for line in "${CMDS[@]}"; do
  cmd=$(strip_comment "$line")
  cmd=${cmd%"${cmd##*[![:space:]]}"}
  [[ -z $cmd ]] && continue
  run=$cmd
  if [[ $cmd == *"nestpipe train"* && $cmd != *"--help"* ]]; then
    run+=" ${SMALL[*]}"
    [[ $cmd == *"--data "* ]] && run+=" --steps 0 --tables 26"
  fi
  [[ $cmd == *"nestpipe predict"* ]] && run+=" --rows 2000" # the shape train got above
  [[ $cmd == *"nestpipe tune"* ]] && run+=" --steps 6 --repeats 1 --rows 2000 --batch 64 --eval-samples 64"
  [[ $cmd == mpirun* ]] && run=${run/mpirun /mpirun --mca btl self,vader }
  timeout 300 bash -c "$run" >"$L/out" 2>"$L/err"
  rc=$?
  if [[ $rc == 0 ]]; then
    ok "$cmd"
  elif [[ $rc == 1 && $cmd == *"nestpipe compare"* ]]; then
    ok "$cmd (exit 1: the models differ, as expected)"
  elif [[ $rc == 2 && $cmd == *"--precision bf16"* ]] && grep -q "bf16 needs a CPU with avx512_bf16" "$L/err"; then
    ok "$cmd (refused: no avx512_bf16 here)"
  else
    bad "$cmd: exit $rc: $(tail -n 2 "$L/err")"
  fi
done
# what the commands left, as paths in the repository: each must be ignored (a source tree
# that is not a git checkout cannot say)
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  left=()
  while IFS= read -r f; do
    git -C "$ROOT" check-ignore -q --no-index -- "${f#./}" || left+=("${f#./}")
  done < <(find . \( -path ./build -o -path ./examples/models \) -prune -o -type f -print)
  ((${#left[@]} == 0)) && ok "the commands leave no file outside .gitignore" ||
    bad "files outside .gitignore: ${left[*]}"
else
  echo "note: $ROOT is not a git checkout; the .gitignore check is skipped"
fi
echo "$pass passed, $failed failed"
((failed == 0))
