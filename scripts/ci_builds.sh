#!/usr/bin/env bash
# .ci/run's background builds: configures and builds each preset named (asan, tsan)
# one after the other, and leaves PRESET.done (or PRESET.failed) in STATE_DIR when each
# ends, with its log in PRESET.log. With --wait, waits for those files instead and fails
# (showing the log's end) if the build failed.
#   scripts/ci_builds.sh STATE_DIR PRESET...
#   scripts/ci_builds.sh --wait STATE_DIR PRESET
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
for preset in "$@"; do
  start=$SECONDS
  cpu_before="$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)"
  if { cmake --preset "$preset" && cmake --build --preset "$preset" -j "$(nproc)"; } >"$state/$preset.log" 2>&1; then
    # This shell's children's CPU (utime, stime, cutime, cstime in clock ticks).
    ticks="$(getconf CLK_TCK)"
    cpu_after="$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)"
    echo "ci_builds: $preset built in $((SECONDS - start)) s, $(((cpu_after - cpu_before) / ticks)) CPU-s, in the background" >"$state/$preset.done"
  else
    touch "$state/$preset.failed"
    exit 1
  fi
done
