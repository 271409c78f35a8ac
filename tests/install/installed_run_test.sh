#!/usr/bin/env bash
# collwatch as a user installs it: `cmake --install` into a fresh prefix, then the prefix's
# own collwatch runs the bundled trainer with nothing of the build tree on PATH or in the
# environment, so its preload, its agent and the trainer's CPU NCCL backend are found in
# the prefix's bin/ and lib/ alone. Usage: installed_run_test.sh CMAKE BUILD_DIR.
# Run by ctest (collwatch_installed_run); about 5 s, nothing written outside a temporary folder.
set -euo pipefail
cmake=$1
build=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/collwatch-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "installed_run_test: $*" >&2
  exit 1
}

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log" >&2; fail "cmake --install failed"; }
for file in bin/collwatch bin/collwatch-trainer lib/libcollwatch.so lib/collwatch-cpu-nccl/libnccl.so.2 \
    share/doc/collwatch/README.md share/doc/collwatch/docs/quickstart.md; do
  [ -e "$prefix/$file" ] || fail "$file was not installed"
done
# Nothing installed may find anything in the build tree (its RPATHs are rewritten).
for file in "$prefix"/bin/* "$prefix"/lib/libcollwatch.so "$prefix"/lib/collwatch-cpu-nccl/libnccl.so.2; do
  if readelf -d "$file" | grep -E 'R(UN)?PATH' | grep -qF "$build"; then
    fail "$file has an RPATH into the build tree: $(readelf -d "$file" | grep -E 'R(UN)?PATH')"
  fi
done

# A bare environment: the prefix's bin and the system's, a home and shm folder of our own.
run_bare() {
  env -i PATH="$prefix/bin:/usr/bin:/bin" HOME="$work" TMPDIR="$work" COLLWATCH_CPU_NCCL_SHM_DIR="$work" "$@"
}
version=$(run_bare collwatch --version) || fail "collwatch --version failed"
[[ "$version" =~ ^collwatch\ [0-9]+\.[0-9]+\.[0-9]+(\ \(commit\ [0-9a-f]+\))?$ ]] || fail "--version printed '$version'"

status=0
run_bare collwatch run --no-dashboard --out "$work/out" -- \
  collwatch-trainer --nproc 2 --scenario clean --steps 1 --hidden 32 --layers 2 --vision-layers 1 --seq 16 --vocab 32 \
  >"$work/run.log" 2>&1 || status=$?
if [ "$status" != 0 ]; then
  cat "$work/run.log" >&2
  fail "collwatch run exited $status"
fi
# Healthy, every call of both ranks seen, and the version it was run with in each output.
python3 - "$work/out" "${version#collwatch }" <<'PYTHON' || { cat "$work/run.log" >&2; fail "report.json or run.json is not as expected"; }
import json, sys
out, version = sys.argv[1], sys.argv[2]
report = json.load(open(f"{out}/report.json"))
run = json.load(open(f"{out}/run.json"))
problems = []
if report.get("healthy") is not True: problems.append(f"not healthy: {report.get('findings')}")
if report.get("rank_count") != 2: problems.append(f"rank_count {report.get('rank_count')}, not 2")
if report.get("calls", 0) <= 0: problems.append("no call recorded")
for name, data in (("report.json", report), ("run.json", run)):
    if data.get("collwatch_version") != version:
        problems.append(f"{name} names version {data.get('collwatch_version')!r}, not {version!r}")
for problem in problems: print(f"installed_run_test: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
PYTHON
# The preload spawned no agent of the build tree: `run` embeds its own, and nothing in
# the log names the build folder.
if grep -qF "$build" "$work/run.log"; then
  cat "$work/run.log" >&2
  fail "the run's output names the build tree"
fi
echo "installed_run_test: $version installed, ran the trainer healthy from $prefix"
