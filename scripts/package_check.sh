#!/usr/bin/env bash
# CI: the Debian packages as a user gets them. `cpack -G DEB` from the default build
# (scripts/test.sh built it), `dpkg -i` of collwatch and collwatch-trainer into /usr,
# /usr/bin/collwatch --version, the bundled trainer run healthy under the installed
# collwatch, then both packages purged. It installs into /usr, so it is no ctest: it runs
# as root on a throwaway machine (.ci/run), and refuses where collwatch is installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "package_check: needs root (dpkg -i into /usr); CI runs it" >&2; exit 1; }
if dpkg-query -W -f='${Status}' collwatch 2>/dev/null | grep -q installed; then
  echo "package_check: a collwatch package is installed here already; not replacing it" >&2
  exit 1
fi
scripts/install_deps.sh  # dpkg-dev: CPack computes Depends with dpkg-shlibdeps
[ -f build/CPackConfig.cmake ] || { echo "package_check: no build/CPackConfig.cmake: run scripts/test.sh first" >&2; exit 1; }

work=$(mktemp -d /tmp/collwatch-package-XXXXXX)
cleanup() {
  dpkg --purge collwatch-trainer collwatch >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cpack -G DEB --config build/CPackConfig.cmake -B "$work" >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log" >&2; exit 1; }
debs=("$work"/collwatch_*.deb)
[ -f "${debs[0]}" ] || { echo "package_check: cpack made no collwatch_*.deb" >&2; ls "$work" >&2; exit 1; }
trainer_debs=("$work"/collwatch-trainer_*.deb)
[ -f "${trainer_debs[0]}" ] && debs+=("${trainer_debs[0]}")
for deb in "${debs[@]}"; do
  echo "package_check: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB, Depends: $(dpkg-deb -f "$deb" Depends)"
done
dpkg -i "${debs[@]}" >/dev/null

version=$(/usr/bin/collwatch --version)
echo "package_check: /usr/bin/collwatch --version: $version"
[[ "$version" =~ ^collwatch\ [0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "package_check: unexpected version line" >&2; exit 1; }
for file in /usr/lib/libcollwatch.so /usr/lib/collwatch-cpu-nccl/libnccl.so.2 /usr/share/doc/collwatch/README.md; do
  [ -e "$file" ] || { echo "package_check: the package lacks $file" >&2; exit 1; }
done
# The demo job's smallest run, from /usr alone: the preload and backend as installed.
if [ -x /usr/bin/collwatch-trainer ]; then
  env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR="$work" COLLWATCH_CPU_NCCL_SHM_DIR="$work" \
    collwatch run --no-dashboard --out "$work/out" -- collwatch-trainer --nproc 2 --scenario clean --steps 1 \
    --hidden 32 --layers 2 --vision-layers 1 --seq 16 --vocab 32 >"$work/run.log" 2>&1 ||
    { cat "$work/run.log" >&2; echo "package_check: collwatch run of the installed trainer failed" >&2; exit 1; }
  grep -q '"healthy": true' "$work/out/report.json" ||
    { cat "$work/out/report.txt" >&2; echo "package_check: the installed run was not healthy" >&2; exit 1; }
  echo "package_check: /usr/bin/collwatch run -- collwatch-trainer: healthy"
fi
dpkg --purge collwatch-trainer collwatch >/dev/null
! [ -e /usr/bin/collwatch ] || { echo "package_check: dpkg --purge left /usr/bin/collwatch" >&2; exit 1; }
echo "package_check: installed, ran and removed"
