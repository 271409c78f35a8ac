#!/usr/bin/env bash
# Packs the `collwatch` CLI and the benchmark (built here, with gRPC/abseil) with their
# shared libraries into .carry/ for a device-tool run on a GPU machine, with the CLI11
# headers the trainer builds with there (GPU machines lack the package). An internal tool
# for the project's own GPU runs, not an installer: users install the .deb or run
# `cmake --install` (docs/quickstart.md, "Install"; docs/multi-node.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .carry && mkdir -p .carry/bin .carry/lib .carry/bench .carry/interposer .carry/include
cp build/cli/collwatch .carry/bin/
cp -r /usr/include/CLI .carry/include/
# The interposer benchmark (Release) with its libraries, in the build tree's layout.
if [ -x build-release/bench/collwatch_interposer_benchmark ]; then
  cp build-release/bench/collwatch_interposer_benchmark build-release/bench/libcollwatch_noop_nccl.so \
    .carry/bench/
  cp build-release/interposer/libcollwatch.so .carry/interposer/
  cp .carry/bench/collwatch_interposer_benchmark .carry/bin/
fi
# The analyzer's scale benchmark (Release), for its figures on a machine of many cores.
if [ -x build-release/bench/collwatch_analyzer_scale ]; then
  cp build-release/bench/collwatch_analyzer_scale .carry/bin/
fi
for binary in .carry/bin/*; do
  ldd "$binary" | awk '/=> \// { print $3 }' | grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux' |
    xargs -r -I{} cp -L {} .carry/lib/
done
# Debug information is not needed there and would crowd the 64 MiB a device call carries.
strip --strip-debug .carry/bin/* .carry/lib/*
du -sh .carry
