#!/usr/bin/env bash
# Configures the build folder that demo.sh and test.sh share, with the one set of flags both use
# (warnings as errors, RelWithDebInfo): the same flags give the same compile commands, so the test
# build after a demo compiles only what the demo did not need (the tests), and a demo after the
# tests compiles nothing. Usage: run_scripts/configure_build.sh BUILD_DIR [extra cmake -D...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:?usage: configure_build.sh BUILD_DIR [cmake arguments...]}"
shift
cmake -S "$repo" -B "$build" -G Ninja -DMRCNN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
