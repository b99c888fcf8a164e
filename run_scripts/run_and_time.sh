#!/usr/bin/env bash
# One timed MLPerf run of a system, saved as an MLPerf result file:
#   SYSTEM=aws-p3dn.24xlarge RESULT_INDEX=0 run_scripts/run_and_time.sh
# writes results/<system>/maskrcnn/result_<RESULT_INDEX>.txt (the run's :::MLLOG log), keeps the
# whole run folder (config.json, fingerprint.json, metrics.jsonl, the log, the weights) as
# results/<system>/maskrcnn/runs/result_<RESULT_INDEX>/ for `mlperf-maskrcnn report` and `audit`,
# and prints one machine-readable line: RESULT,MASKRCNN,<seed>,<seconds>,mlperf-maskrcnn,<start time>.
# The ranks are started by `mlperf-maskrcnn launch` as the system file says: through mpirun
# (SCHEDULER=mpirun, the default; HOSTFILE names the nodes) or a Slurm batch script submitted with
# sbatch --wait (SCHEDULER=slurm). The launch command or script is kept in the run folder too.
# The exit status is the trainer's (0 targets reached, 3 not reached, 1 error, 2 bad input).
# Environment: SEED (default: random), RESULT_INDEX (0), BUILD_DIR, RESULTS_DIR, EXTRA_ARGS
# (more `train` arguments, e.g. "--set run.data_dir=\"/data/coco\""), SYSTEM_FILE (default
# systems/<SYSTEM>.json), SCHEDULER (mpirun or slurm), HOSTFILE (mpirun), DRY_RUN=1 (print the
# launch command or batch script only).
set -euo pipefail

: "${SYSTEM:?SYSTEM not set (the name of a systems/<name>.json)}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# ---- defaults -------------------------------------------------------------------------------------
: "${RESULT_INDEX:=0}"
: "${SEED:=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"   # MLPerf: a different seed for every run
: "${BUILD_DIR:=$repo/build}"
: "${RESULTS_DIR:=$repo/results}"
: "${EXTRA_ARGS:=}"
system_file="${SYSTEM_FILE:-$repo/systems/$SYSTEM.json}"
bin="$BUILD_DIR/benchmark/mlperf-maskrcnn"
[[ -f "$system_file" ]] || { echo "run_and_time: no system file $system_file" >&2; exit 2; }
[[ -x "$bin" ]] || { echo "run_and_time: $bin not built (run_scripts/bootstrap.sh, then cmake --build)" >&2; exit 2; }

py="$repo/.venv/bin/python"
# The run writes under RESULTS_DIR (rank 0 may run on another node: with several nodes it must be
# a folder every node shares), then its folder is filed below.
mkdir -p "$RESULTS_DIR/.inflight"
out_root="$(mktemp -d -p "$RESULTS_DIR/.inflight" "$SYSTEM-XXXX")"
trap 'rm -rf "$out_root"' EXIT

# `launch` builds the command from the system file: mpirun with the rank count, core binding and
# network environment of its launch settings for several ranks, the training command alone for one.
launch=("$bin" launch --system "$system_file" --scheduler "${SCHEDULER:-mpirun}")
[[ -n "${HOSTFILE:-}" ]] && launch+=(--hostfile "$HOSTFILE")
launch_record="$out_root/launch.txt"
if [[ "${SCHEDULER:-mpirun}" == slurm ]]; then
  launch_record="$out_root/launch.sbatch"
  launch+=(--script "$launch_record")
fi
train_args=(-- --seed "$SEED" --out "$out_root" --no-progress)
if [[ "${DRY_RUN:-0}" == 1 ]]; then  # print the launch command and stop
  # shellcheck disable=SC2086
  "${launch[@]}" --dry-run "${train_args[@]}" $EXTRA_ARGS
  exit $?
fi

# shellcheck disable=SC2086
"${launch[@]}" --dry-run "${train_args[@]}" $EXTRA_ARGS > "$launch_record.tmp"  # refuses a bad layout
mv "$launch_record.tmp" "$launch_record"
start_fmt=$(date +"%Y-%m-%d %r")
echo "STARTING TIMING RUN AT $start_fmt"
set +e
# shellcheck disable=SC2086
"${launch[@]}" "${train_args[@]}" $EXTRA_ARGS
ret_code=$?
set -e
end_fmt=$(date +"%Y-%m-%d %r")
echo "ENDING TIMING RUN AT $end_fmt"

log="$(readlink -f "$out_root/latest")/mlperf_log.txt"
if [[ -f "$log" ]]; then
  dest="$RESULTS_DIR/$SYSTEM/maskrcnn"
  mkdir -p "$dest"
  cp "$log" "$dest/result_$RESULT_INDEX.txt"
  kept="$dest/runs/result_$RESULT_INDEX"   # the run folder, for report and audit
  mkdir -p "$dest/runs"
  rm -rf "$kept"
  mv "$(dirname "$log")" "$kept"
  cp "$launch_record" "$kept/"
  result=$("$py" "$repo/run_scripts/mlperf_log_reader.py" --run-seconds "$dest/result_$RESULT_INDEX.txt")
  echo "RESULT,MASKRCNN,$SEED,$result,mlperf-maskrcnn,$start_fmt"
  echo "result file: $dest/result_$RESULT_INDEX.txt (run folder: $kept)"
elif [[ $ret_code == 0 || $ret_code == 3 ]]; then
  echo "run_and_time: the run ended ($ret_code) but left no MLPerf log in $out_root: did rank 0 run on" \
       "another node? RESULTS_DIR ($RESULTS_DIR) must be a folder every node shares" >&2
  exit 1
fi
exit $ret_code
