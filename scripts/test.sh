#!/usr/bin/env bash
# Builds collwatch (default preset) and runs every test. The README's second command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)"
