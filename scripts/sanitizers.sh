#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (asan preset),
# then under ThreadSanitizer (tsan preset), less the variants tests/sanitizer_variants.txt
# leaves to the default build. CI runs it after scripts/test.sh.
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
  # The names sanitizer_variants.txt lists for this preset, as one alternation.
  skipped="$(awk -v preset="$preset" '$0 !~ /^#/ && NF >= 2 && index("," $1 ",", "," preset ",") { print $2 }' \
    tests/sanitizer_variants.txt | paste -sd '|')"
  # Twice as many tests as cores, as in scripts/test.sh: most wait on the processes they start.
  ctest --preset "$preset" -j "$(($(nproc) * 2))" ${skipped:+-E "$skipped"}
  echo "sanitizers: $preset: configure+build $((built - start)) s, tests $(($(date +%s) - built)) s" >&2
done
