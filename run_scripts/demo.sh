#!/usr/bin/env bash
# usage: run_scripts/demo.sh [train arguments...]
# Sets up everything (bootstrap + build) and runs the project's main job on its built-in default:
# a timed MLPerf Mask R-CNN run of the local CPU system (systems/cpu-dev.json) on the synthetic
# dataset, generated on first use into data/synthetic. Leaves under out/cpu-dev/latest/:
#   mlperf_log.txt  the MLPerf log (checked here with the project's and the official checker)
#   metrics.jsonl   per-step losses, learning rate, images/s; per-epoch accuracy
#   training.png    losses and accuracy over time, with the time to train
# Extra arguments go to `mlperf-maskrcnn train` (e.g. --seed 7, --set run.max_epochs=5).
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${MRCNN_BUILD_DIR:-$repo/build}"
data="$repo/data/synthetic"
out="$repo/out/cpu-dev"

phase=$(date +%s)
took() { local now; now=$(date +%s); echo "[demo] $1 in $((now - phase)) s"; phase=$now; }

bash run_scripts/bootstrap.sh
took "set up"
echo "[demo] building mlperf-maskrcnn in $build (the first time: about 17 minutes on 2 cores, CUDA kernels included; progress below)"
bash run_scripts/configure_build.sh "$build"
cmake --build "$build" -j "$(nproc)" --target mlperf-maskrcnn
bin="$build/benchmark/mlperf-maskrcnn"
took "built"

if [[ ! -f "$data/annotations/instances_val2017.json" ]]; then
  echo "[demo] generating the synthetic dataset in $data"
  "$bin" synth --out "$data"
  took "generated the dataset"
fi

echo "[demo] training systems/cpu-dev.json to the MLPerf targets (box AP 0.377, mask AP 0.339)"
set +e
"$bin" train --system systems/cpu-dev.json --set "run.data_dir=\"$data\"" --out "$out" --quiet "$@"
status=$?
set -e
run="$(readlink -f "$out/latest")"
if [[ ! -f "$run/mlperf_log.txt" ]]; then
  echo "[demo] the run did not start (exit $status)" >&2
  exit "$status"
fi

"$repo/.venv/bin/python" run_scripts/plot_run.py "$run" >/dev/null
"$bin" check "$run/mlperf_log.txt" || true
(cd "$run" && "$repo/.venv/bin/python" -m mlperf_logging.compliance_checker --usage training --ruleset 3.1.0 \
   mlperf_log.txt --log_output compliance_checker.log 2>&1 | tail -1)

echo
case $status in
  0) echo "[demo] targets reached." ;;
  3) echo "[demo] targets NOT reached within run.max_epochs (run_stop aborted)." ;;
  *) echo "[demo] the run failed (exit $status)." ;;
esac
echo "[demo] MLPerf log: $run/mlperf_log.txt"
echo "[demo] metrics:    $run/metrics.jsonl"
echo "[demo] plot:       $run/training.png"
exit "$status"
