#!/usr/bin/env bash
# usage: run_scripts/test.sh [ctest arguments...]
# Sets up everything (bootstrap), builds with warnings as errors, and runs every test through
# ctest: the GoogleTest suites and the Python reference checks (pycocotools, torchvision,
# mlperf-logging). Then, unless arguments were given, the LibTorch-free libraries (eval/, logging/,
# the image codec and their fuzz corpora) again under AddressSanitizer + UBSan
# (run_scripts/sanitize.sh asan --core, a few minutes). Extra arguments go to ctest (e.g. -R eval,
# -L python) and skip the sanitizer pass.
#
# Environment:
#   MRCNN_BUILD_DIR   build folder (default: <repo>/build)
#   MRCNN_JOBS        parallel compile jobs (default: number of cores)
#   MRCNN_TEST_JOBS   parallel tests (default: number of cores)
#   MRCNN_NO_SANITIZE=1  skip the sanitizer pass
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${MRCNN_BUILD_DIR:-$repo/build}"
jobs="${MRCNN_JOBS:-$(nproc)}"
test_jobs="${MRCNN_TEST_JOBS:-$(nproc)}"

start=$(date +%s)
bash run_scripts/bootstrap.sh --test   # the run profile plus the test-only packages
bash run_scripts/configure_build.sh "$build"   # demo.sh's flags: its objects are reused
cmake --build "$build" -j "$jobs"
built=$(date +%s)
echo "[test] build took $((built - start)) s"
ctest --test-dir "$build" --output-on-failure --timeout 1500 -j "$test_jobs" "$@"
echo "[test] all tests passed in $(( $(date +%s) - built )) s (total $(( $(date +%s) - start )) s)"
if [[ $# -eq 0 && "${MRCNN_NO_SANITIZE:-0}" != 1 ]]; then
  MRCNN_SANITIZE_BUILD_DIR="$build-asan-core" bash run_scripts/sanitize.sh asan --core
  echo "[test] done, sanitizer pass included (total $(( $(date +%s) - start )) s)"
fi
