# Shared by the shell tests (source it after setting W, the scratch folder): counting and
# reporting checks, and the two checks most of them make of a command.
pass=0
failed=0

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

# expect_fail NAME WANT_EXIT STDERR_FRAGMENT -- CMD...: exit code, one stderr line, fragment
expect_fail() {
  local name=$1 want=$2 frag=$3
  shift 4
  "$@" >"$W/out" 2>"$W/err"
  local rc=$? lines
  lines=$(wc -l <"$W/err")
  if [[ $rc -ne $want ]]; then
    bad "$name: exit $rc, want $want; stderr: $(cat "$W/err")"
  elif [[ $lines -ne 1 ]]; then
    bad "$name: stderr has $lines lines, want 1: $(cat "$W/err")"
  elif ! grep -qF -- "$frag" "$W/err"; then
    bad "$name: stderr lacks '$frag': $(cat "$W/err")"
  else
    ok "$name"
  fi
}

# expect_ok NAME CMD...: exit 0
expect_ok() {
  local name=$1
  shift
  if "$@" >"$W/out" 2>"$W/err"; then ok "$name"; else bad "$name: exit $?: $(cat "$W/err")"; fi
}

# The environment of a test that runs mpirun (after setting W): StarPU quiet and unbound
# (ranks share two cores), Open MPI allowed as root, StarPU's perf models in the scratch
# folder unless STARPU_HOME is set.
mpi_test_env() {
  export STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export STARPU_HOME=${STARPU_HOME:-$W/starpu}
}
