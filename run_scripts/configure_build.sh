#!/usr/bin/env bash
# Configures the build folder that demo.sh and test.sh share, with the one set of flags both use
# (warnings as errors, RelWithDebInfo): the same flags give the same compile commands, so the test
# build after a demo compiles only what the demo did not need (the tests), and a demo after the
# tests compiles nothing. On a machine without a GPU the CUDA kernels are compiled for the oldest
# and the newest architecture LibTorch carries (proof that they build; a third of the build was
# the kernels for all seven); a GPU's own architecture where there is one. A build for GPUs made
# on a machine without one: cmake by hand (every architecture) or MRCNN_CUDA_ARCHITECTURES.
# usage: run_scripts/configure_build.sh BUILD_DIR [extra cmake -D...]
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:?usage: configure_build.sh BUILD_DIR [cmake arguments...]}"
shift
cmake -S "$repo" -B "$build" -G Ninja -DMRCNN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMRCNN_CUDA_ARCHS_WITHOUT_GPU=edges "$@" >/dev/null
