#!/usr/bin/env bash
# Installs the Debian 12 packages collwatch builds with, where missing. Idempotent:
# does nothing (and needs no network) when everything is there.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libgtest-dev googletest libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libtorch-dev libncurses-dev tmux
  libdw-dev  # elfutils: native stacks of stuck ranks (stacks/)
  clang-14 libclang-rt-14-dev  # the asan preset: clang, its sanitizer runtimes, libFuzzer
  dpkg-dev  # cpack -G DEB: dpkg-shlibdeps computes the packages' Depends
  prometheus-cpp-dev  # the collector's --metrics endpoint (docs/monitoring.md)
  prometheus libcurl4-openssl-dev  # the monitoring test scrapes with a real Prometheus, asks it with libcurl
  libroaring-dev  # compressed rank sets in the tree's digests (analyzer/rank_set.h)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "collwatch: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

# CUDA/NCCL headers come with the machine image (/usr/local/cuda); say so clearly.
if [ ! -f /usr/local/cuda/include/nccl.h ] && [ -z "${COLLWATCH_NCCL_ROOT:-}" ]; then
  echo "collwatch: /usr/local/cuda/include/nccl.h not found; install the CUDA 13 and NCCL 2.28 headers" \
    "(docs/quickstart.md, Prerequisites) or set COLLWATCH_NCCL_ROOT" >&2
  exit 1
fi
