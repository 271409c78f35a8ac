#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (asan preset),
# then under ThreadSanitizer (tsan preset). CI runs it after scripts/test.sh.
# Usage: scripts/sanitizers.sh [asan] [tsan]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(asan tsan)
scripts/install_deps.sh
for preset in "${presets[@]}"; do
  start=$(date +%s)
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)"
  built=$(date +%s)
  ctest --preset "$preset" -j "$(nproc)"
  echo "sanitizers: $preset: configure+build $((built - start)) s, tests $(($(date +%s) - built)) s" >&2
done
