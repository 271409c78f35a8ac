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
  # The names sanitizer_variants.txt lists for this preset, as one alternation. For an
  # executable the preset does not build (@TARGET), the test GoogleTest stands in for its
  # tests with (TARGET_NOT_BUILT), or the one add_test gave it (a fuzz target's replay),
  # written without a group: ctest's regular expressions take at most 9 groups, and one
  # with more excludes nothing, silently.
  skipped="$(awk -v preset="$preset" '$0 !~ /^#/ && NF >= 2 && index("," $1 ",", "," preset ",") {
      if ($2 ~ /^@/) print "^" substr($2, 2) "_NOT_BUILT$|^" substr($2, 2) "\\.replay$"; else print $2 }' \
    tests/sanitizer_variants.txt | paste -sd '|')"
  # Twice as many tests as cores, as in scripts/test.sh: most wait on the processes they start.
  groups="$(printf '%s' "$skipped" | tr -cd '(' | wc -c)"
  [ "$groups" -le 9 ] || { echo "sanitizers: $groups groups in the names to leave out; ctest takes 9" >&2; exit 1; }
  ctest --preset "$preset" -j "$(($(nproc) * 2))" ${skipped:+-E "$skipped"}
  echo "sanitizers: $preset: configure+build $((built - start)) s, tests $(($(date +%s) - built)) s" >&2
done
