# What `cmake --install` puts under the prefix, and the Debian packages `cpack -G DEB`
# makes of it (scripts/package_check.sh builds and installs them in CI):
#
#   PREFIX/bin/collwatch                         the command              package collwatch
#   PREFIX/lib/libcollwatch.so                   the preload              package collwatch
#   PREFIX/lib/collwatch-cpu-nccl/libnccl.so.2   the CPU NCCL backend     package collwatch
#   PREFIX/share/doc/collwatch/                  README.md and docs/      package collwatch
#   PREFIX/bin/collwatch-trainer                 the bundled trainer      package collwatch-trainer
#
# Plain "lib", not GNUInstallDirs' libdir (lib/x86_64-linux-gnu under /usr on Debian): the
# pieces find each other by fixed relative paths, bin/collwatch its preload and backend in
# ../lib (cli/run_environment.cc, cli/one_gpu_mode.cc) and the preload its agent in
# ../bin (interposer/agent_spawn.cc). The install rules of each target sit beside it.
install(FILES README.md DESTINATION share/doc/collwatch COMPONENT collwatch)
file(GLOB collwatch_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${collwatch_docs} DESTINATION share/doc/collwatch/docs COMPONENT collwatch)

set(COLLWATCH_PACKAGE_MAINTAINER "collwatch maintainers <maintainers@users.noreply.a-seed-27530f47.example>"
  CACHE STRING "Maintainer field of the Debian packages")
set(CPACK_PACKAGE_NAME collwatch)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${COLLWATCH_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_GENERATOR DEB)
# Binaries in a package carry no debug information: the RelWithDebInfo build's line tables
# would double the .deb for nothing a user's report needs.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL collwatch)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Depends from the libraries the binaries link (gRPC, protobuf, abseil, ncurses, elfutils,
# prometheus-cpp and its civetweb for the collector's --metrics;
# LibTorch for the trainer), as dpkg-shlibdeps (dpkg-dev) finds them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_COLLWATCH_PACKAGE_NAME collwatch)
# Each description's first line is its package's summary (so no package-wide
# CPACK_PACKAGE_DESCRIPTION_SUMMARY, which CPack would put first in both); CPack indents
# the rest and makes the empty line a paragraph break.
set(CPACK_DEBIAN_COLLWATCH_DESCRIPTION
  "catches collective-ordering bugs and hangs in NCCL jobs while they happen
collwatch records every NCCL call of every rank through an LD_PRELOAD library
and names the first divergence between the ranks (which ranks, which collective,
which code region, why) or the stall, while the job runs or post-mortem.

Holds the collwatch command (run, top, analyze, diff, check, export, agent,
collector), the preload libcollwatch.so, and a CPU NCCL backend for checking
jobs without a GPU.")
if(TARGET collwatch_trainer)
  list(APPEND CPACK_COMPONENTS_ALL trainer)
  set(CPACK_DEBIAN_TRAINER_PACKAGE_NAME collwatch-trainer)
  set(CPACK_DEBIAN_TRAINER_PACKAGE_DEPENDS "collwatch (= ${PROJECT_VERSION})")
  set(CPACK_DEBIAN_TRAINER_DESCRIPTION
    "ZeRO-3 VLM/MTP trainer whose scenarios reproduce NCCL ordering bugs
collwatch-trainer (LibTorch, NCCL C API) reproduces a divergent image/text path,
a skipped expert reduce-scatter, a dtype mismatch and a late rank, and their
fixes, on collwatch's CPU NCCL backend: the demo job of collwatch's quick start.")
  # Its libnccl.so.2 is the collwatch package's private CPU backend: dpkg-shlibdeps finds
  # it there, not in a package of the system.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/cpu_nccl)
endif()
include(CPack)
