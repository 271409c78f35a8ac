#!/usr/bin/env bash
# .ci/run's background work: configures and builds each preset named (asan, tsan) one after
# the other, or for the name fuzz runs scripts/fuzz.sh (60 CPU-s a target, from the asan
# build), and leaves NAME.done (or NAME.failed) in STATE_DIR when each ends, with its log in
# NAME.log. With --wait, waits for those files instead and fails (showing the log's end) if
# the step failed.
#   scripts/ci_builds.sh STATE_DIR NAME...
#   scripts/ci_builds.sh --wait STATE_DIR NAME
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--wait" ]; then
  state="$2" preset="$3"
  until [ -e "$state/$preset.done" ] || [ -e "$state/$preset.failed" ]; do sleep 2; done
  if [ -e "$state/$preset.failed" ]; then
    tail -n 80 "$state/$preset.log" >&2
    echo "ci_builds: the $preset build failed" >&2
    exit 1
  fi
  cat "$state/$preset.done" >&2
  grep "^$preset: " "$state/$preset.log" >&2 || true  # fuzz.sh's summary lines
  exit 0
fi

state="$1"
shift
# .ci/run starts this in a session of its own (setsid, so that it can stop it whole). With the
# kernel's autogroups on, nice works only within a session, and a session of its own gets as
# much CPU as CI's foreground (measured: the default build took 1,337 s instead of 840 s
# beside it): the session's own weight is lowered too, where this shell leads it.
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
  echo 19 >/proc/self/autogroup 2>/dev/null || true
fi
# The sanitizer presets' tests drive the default build's trainer (COLLWATCH_TRAINER_EXECUTABLE,
# looked for when configuring, so a sanitized LibTorch trainer is never built): wait for
# scripts/test.sh to have linked it.
trainer=build/trainer/collwatch-trainer
for _ in $(seq 3600); do
  [ -x "$trainer" ] && break
  sleep 1
done
# One named step: fuzzing, or a preset's build.
run_step() {
  if [ "$1" = fuzz ]; then
    bash scripts/fuzz.sh 60
  else
    cmake --preset "$1" && cmake --build --preset "$1" -j "$(nproc)"
  fi
}
for preset in "$@"; do
  start=$SECONDS
  cpu_before="$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)"
  what="built"
  [ "$preset" != fuzz ] || what="fuzzed"
  if run_step "$preset" >"$state/$preset.log" 2>&1; then
    # This shell's children's CPU (utime, stime, cutime, cstime in clock ticks).
    ticks="$(getconf CLK_TCK)"
    cpu_after="$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)"
    echo "ci_builds: $preset $what in $((SECONDS - start)) s, $(((cpu_after - cpu_before) / ticks)) CPU-s, in the background" >"$state/$preset.done"
  else
    touch "$state/$preset.failed"
    exit 1
  fi
done
