#!/usr/bin/env bash
# Fuzzes one reader of outside input with libFuzzer, AddressSanitizer and UBSan.
#
# usage: run_scripts/fuzz.sh TARGET SECONDS     TARGET: coco_json rle mllog image system_config checkpoint
#        run_scripts/fuzz.sh all SECONDS        every target in turn, SECONDS each
#        run_scripts/fuzz.sh list
#
# Builds build-fuzz/ with clang (clang++-16 from Debian, or clang++; bootstrap does not install
# it: apt-get install clang-16 libclang-rt-16-dev), then runs tests/fuzz/fuzz_TARGET from the
# seeds in tests/fuzz/corpus/TARGET/ plus what earlier runs found interesting (build-fuzz/corpus/).
# A finding (crash, sanitizer report, leak, timeout, memory blow-up, or a broken rule of
# tests/fuzz/fuzz_common.h) stops the run and is saved under build-fuzz/findings/TARGET/; the exit
# status is then 1. Once fixed, copy it to tests/fuzz/corpus/TARGET/finding-<what> so that the
# ctest fuzz.TARGET.corpus replays it in every build from then on.
#
# Environment: MRCNN_FUZZ_BUILD_DIR (default <repo>/build-fuzz), MRCNN_JOBS (compile jobs).
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MRCNN_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
targets=(coco_json rle mllog image system_config checkpoint)
usage="usage: run_scripts/fuzz.sh {$(IFS='|'; echo "${targets[*]}")|all} SECONDS  |  run_scripts/fuzz.sh list"

[[ "${1:-}" == list ]] && { printf '%s\n' "${targets[@]}"; exit 0; }
[[ $# -eq 2 ]] || { echo "$usage" >&2; exit 2; }
target="$1" seconds="$2"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
if [[ "$target" == all ]]; then
  status=0
  for t in "${targets[@]}"; do "$0" "$t" "$seconds" || status=1; done
  exit $status
fi
[[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz.sh: unknown target '$target'"$'\n'"$usage" >&2; exit 2; }

cxx="" cc=""
for v in 16 17 18 15 ""; do
  if command -v "clang++${v:+-$v}" >/dev/null; then cxx="clang++${v:+-$v}" cc="clang${v:+-$v}"; break; fi
done
[[ -n "$cxx" ]] || { echo "fuzz.sh: no clang++ found (apt-get install clang-16 libclang-rt-16-dev)" >&2; exit 2; }
[[ -x "$repo/.venv/bin/python" ]] || { echo "fuzz.sh: no .venv (run run_scripts/bootstrap.sh first)" >&2; exit 2; }

if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DMRCNN_FUZZ=ON \
        -DMRCNN_BUILD_BENCHMARKS=OFF -DMRCNN_WERROR=ON >/dev/null
fi
cmake --build "$build" -j "${MRCNN_JOBS:-$(nproc)}" --target "fuzz_$target"

seeds="$repo/tests/fuzz/corpus/$target"
more_seeds=()
[[ $target == system_config ]] && more_seeds=("$repo/systems")   # the real system files
work="$build/corpus/$target"
findings="$build/findings/$target"
mkdir -p "$work" "$findings"
# LibTorch and the system libraries are not instrumented: their allocations at start-up are not
# ours to report, and their allocator pairs may differ from ours.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:alloc_dealloc_mismatch=0:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TMPDIR="${TMPDIR:-/tmp}"
echo "[fuzz] $target for $seconds s (seeds $seeds, corpus $work, findings $findings)"
set +e
"$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "$seeds" "${more_seeds[@]}" 2>&1 | tee "$build/fuzz-$target.log" |
    grep -E --line-buffered "^#[0-9]+ +(pulse|REDUCE|NEW)|DONE|ERROR|FINDING|SUMMARY|stat::|Test unit written|==[0-9]+=="
status=${PIPESTATUS[0]}
set -e
found=$(find "$findings" -type f | wc -l)
echo "[fuzz] $target: exit $status, $(find "$work" -type f | wc -l) inputs in the corpus, $found finding(s) in $findings"
[[ $status -eq 0 && $found -eq 0 ]] || exit 1
