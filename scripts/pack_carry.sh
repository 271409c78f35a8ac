#!/usr/bin/env bash
# Packs the `collwatch` CLI and the benchmark (built here, with gRPC/abseil) with their
# shared libraries into .carry/ for a device-tool run on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .carry && mkdir -p .carry/bin .carry/lib
cp build/cli/collwatch .carry/bin/
for binary in .carry/bin/*; do
  ldd "$binary" | awk '/=> \// { print $3 }' | grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux' |
    xargs -r -I{} cp -L {} .carry/lib/
done
du -sh .carry
