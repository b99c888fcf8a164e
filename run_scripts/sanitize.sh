#!/usr/bin/env bash
# Builds the project with a sanitizer and runs the test suite under it.
#
# usage: run_scripts/sanitize.sh asan [--core] [CTEST ARGS...]   AddressSanitizer + UBSan, every test
#        run_scripts/sanitize.sh ubsan [--core] [CTEST ARGS...]  UBSan alone, every test
#        run_scripts/sanitize.sh tsan [--core] [CTEST ARGS...]   ThreadSanitizer, the threaded
#                                      parts: the data loader, the asynchronous evaluator, the
#                                      logger, the communicator (2 MPI ranks), the timed run,
#                                      stop signals
#
# --core builds without LibTorch: eval/, logging/, the image codec and the replays of their fuzz
# corpora (a few minutes; CI runs `asan --core`). Without it the model, the data pipeline and the
# harness are built and tested too (a full build, about twice the normal one).
# Only project code is instrumented. LibTorch, OpenMP and the system libraries are not: the run-time
# options below keep their own start-up allocations and OpenMP's thread pool out of the reports,
# and LibTorch runs on one intra-op thread under tsan (its OpenMP barriers are invisible to tsan).
# Any report fails the test that produced it (halt_on_error; -fno-sanitize-recover).
#
# Environment: MRCNN_SANITIZE_BUILD_DIR (default <repo>/build-<mode>[-core]), MRCNN_JOBS, MRCNN_TEST_JOBS.
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: run_scripts/sanitize.sh {asan|ubsan|tsan} [--core] [ctest arguments...]"
mode="${1:-}"
[[ $# -ge 1 ]] && shift
case "$mode" in
  asan) flags="address,undefined" ;;
  ubsan) flags="undefined" ;;
  tsan) flags="thread" ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
core=0
if [[ "${1:-}" == --core ]]; then core=1; shift; fi
suffix=""; [[ $core == 1 ]] && suffix="-core"
build="${MRCNN_SANITIZE_BUILD_DIR:-$repo/build-$mode$suffix}"
jobs="${MRCNN_JOBS:-$(nproc)}"
test_jobs="${MRCNN_TEST_JOBS:-$(nproc)}"

cd "$repo"
[[ -x .venv/bin/python ]] || bash run_scripts/bootstrap.sh --test
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMRCNN_SANITIZE="$flags" -DMRCNN_WERROR=ON \
      -DMRCNN_BUILD_BENCHMARKS=OFF -DMRCNN_WITH_TORCH=$([[ $core == 1 ]] && echo OFF || echo ON) >/dev/null
targets=()
if [[ $mode == tsan && $core == 0 && $# -eq 0 ]]; then
  # Only what the threaded tests below run: the model's own suites (the slowest to build under
  # tsan) have no threads of their own.
  targets=(--target mlperf-maskrcnn test_benchmark_data test_benchmark_run test_benchmark_comm test_eval test_logging)
fi
cmake --build "$build" -j "$jobs" "${targets[@]}"
echo "[sanitize] $mode$suffix build took $(( $(date +%s) - start )) s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:alloc_dealloc_mismatch=0:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$repo/run_scripts/tsan.supp}"
export MRCNN_SANITIZER="$mode"   # tests that time things or need many threads may relax under it
args=("$@")
if [[ $mode == asan && ${#args[@]} -eq 0 ]]; then
  # The ops' Python checks load the instrumented libmrcnn_ops.so into an uninstrumented Python,
  # where ASan's runtime cannot come first (preloaded, its __cxa_throw interceptor fails on the
  # first LibTorch error). The same ops run under ASan in the C++ suite (test_model_ops).
  args=(-E '^py\.model\.ops\.')
fi
if [[ $mode == tsan ]]; then
  export OMP_NUM_THREADS=1
  [[ ${#args[@]} -eq 0 ]] && args=(-R 'Loader|AsyncEvaluator|Async|MLLog|MLLogger|Console|Progress|Communicator|TimedRun|Parallel|CocoEval\.|ThreadPool|Signal|test_train_signals|test_train_mpi')
fi
ctest --test-dir "$build" --output-on-failure --timeout 3000 -j "$test_jobs" "${args[@]}"
echo "[sanitize] $mode: all selected tests passed under the sanitizer (total $(( $(date +%s) - start )) s)"
