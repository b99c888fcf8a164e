#!/usr/bin/env bash
# usage: SYSTEM=NAME [VARIABLE=VALUE ...] run_scripts/run_and_time.sh   (the variables: Environment, below)
# Timed MLPerf runs of a system, each saved as an MLPerf result file:
#   SYSTEM=aws-p3dn.24xlarge RESULT_INDEX=0 run_scripts/run_and_time.sh
#   SYSTEM=aws-p3dn.24xlarge NEXP=5 DATADIR=/data/coco2017 run_scripts/run_and_time.sh
# Run i (of NEXP, from RESULT_INDEX on) writes results/<system>/maskrcnn/result_<i>.txt (the run's
# :::MLLOG log), keeps the whole run folder (config.json, fingerprint.json, metrics.jsonl, the log,
# the weights) as results/<system>/maskrcnn/runs/result_<i>/ for `mlperf-maskrcnn report` and
# `audit`, checks the log with the official compliance checker (mlperf_logging, from .venv; the
# project's `check` where .venv has none), and prints one machine-readable line:
# RESULT,MASKRCNN,<seed>,<seconds>,mlperf-maskrcnn,<start time>.
# The ranks are started by `mlperf-maskrcnn launch` as the system file says: through mpirun
# (SCHEDULER=mpirun, the default; HOSTFILE names the nodes), torchrun (SCHEDULER=torchrun) or a
# Slurm batch script submitted with sbatch --wait (SCHEDULER=slurm; with NEXP > 1 one job runs
# them all in one allocation, as NVIDIA's run.sub does; SRUN_MPI=none starts its ranks without
# MPI). The launch command or script is kept in the run folder too.
# The exit status is the first failing run's: the trainer's (3 targets not reached, 1 error, 2 bad
# input), or 1 for a log the compliance check fails; 0 when every run reached the targets with a
# compliant log.
# Environment: NEXP (runs, default 1), SEED (the first run's; each later run the next; default:
# random for every run), RESULT_INDEX (the first run's index, 0), DATADIR (the COCO folder:
# run.data_dir), LOGDIR (where result files and run folders go, default
# RESULTS_DIR/<system>/maskrcnn), BUILD_DIR, RESULTS_DIR, EXTRA_ARGS (more `train` arguments,
# e.g. "--set run.max_epochs=30"), SYSTEM_FILE (default systems/<SYSTEM>.json), SCHEDULER (mpirun,
# torchrun or slurm), HOSTFILE (mpirun), SRUN_MPI (slurm: pmix or none), DRY_RUN=1 (print the
# first run's launch command, or the batch script).
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

: "${SYSTEM:?SYSTEM not set (the name of a systems/<name>.json)}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# ---- defaults -------------------------------------------------------------------------------------
: "${RESULT_INDEX:=0}"
: "${NEXP:=1}"
[[ $NEXP =~ ^[1-9][0-9]*$ ]] || { echo "run_and_time: NEXP=$NEXP: expected a number of runs (1 or more)" >&2; exit 2; }
[[ $RESULT_INDEX =~ ^[0-9]+$ ]] || { echo "run_and_time: RESULT_INDEX=$RESULT_INDEX: expected 0 or more" >&2; exit 2; }
[[ -z "${SEED:-}" || $SEED =~ ^[0-9]+$ ]] || { echo "run_and_time: SEED=$SEED: expected a number" >&2; exit 2; }
: "${BUILD_DIR:=$repo/build}"
: "${RESULTS_DIR:=$repo/results}"
: "${EXTRA_ARGS:=}"
system_file="${SYSTEM_FILE:-$repo/systems/$SYSTEM.json}"
bin="$BUILD_DIR/benchmark/mlperf-maskrcnn"
[[ -f "$system_file" ]] || { echo "run_and_time: no system file $system_file" >&2; exit 2; }
[[ -x "$bin" ]] || { echo "run_and_time: $bin not built (run_scripts/bootstrap.sh, then cmake --build)" >&2; exit 2; }
[[ -z "${DATADIR:-}" || -d "$DATADIR" ]] || { echo "run_and_time: DATADIR=$DATADIR is not a folder" >&2; exit 2; }
dest="${LOGDIR:-$RESULTS_DIR/$SYSTEM/maskrcnn}"
# Where the results go must take them before hours of training, not after.
if [[ ${DRY_RUN:-0} != 1 ]]; then
  mkdir -p "$dest/runs" 2>/dev/null && [[ -w "$dest" ]] ||
    { echo "run_and_time: cannot write results into $dest (LOGDIR or RESULTS_DIR)" >&2; exit 2; }
fi
data_args=()
[[ -n "${DATADIR:-}" ]] && data_args=(--set "run.data_dir=\"$(cd "$DATADIR" && pwd)\"")

py="$repo/.venv/bin/python"
# The official checker where .venv has it (bootstrap.sh installs mlperf-logging); else the project's.
compliance() {  # LOG FOLDER -> exit status of the check; its report in FOLDER/compliance_checker.log
  if [[ -x "$py" ]] && "$py" -c 'import mlperf_logging' 2>/dev/null; then
    "$py" -m mlperf_logging.compliance_checker --usage training --ruleset 3.1.0 \
      --log_output "$2/compliance_checker.log" "$1" >/dev/null 2>&1
  else
    "$bin" check "$1" >"$2/compliance_checker.log" 2>&1
  fi
}
# The runs write under RESULTS_DIR (rank 0 may run on another node: with several nodes it must be
# a folder every node shares), then each run's folder is filed below.
mkdir -p "$RESULTS_DIR/.inflight"
out_root="$(mktemp -d -p "$RESULTS_DIR/.inflight" "$SYSTEM-XXXX")"
trap 'rm -rf "$out_root"' EXIT

# `launch` builds the command from the system file: mpirun with the rank count, core binding and
# network environment of its launch settings for several ranks, the training command alone for one.
launch=("$bin" launch --system "$system_file" --scheduler "${SCHEDULER:-mpirun}")
[[ -n "${HOSTFILE:-}" ]] && launch+=(--hostfile "$HOSTFILE")
[[ -n "${SRUN_MPI:-}" ]] && launch+=(--srun-mpi "$SRUN_MPI")

# one_run INDEX SEED: one timed run filed as result_INDEX; returns its status (see the header).
one_run() {
  local index=$1 seed=$2 run_out="$out_root/run_$1" launch_record
  mkdir -p "$run_out" || return 1
  local cmd=("${launch[@]}")
  launch_record="$run_out/launch.txt"
  if [[ "${SCHEDULER:-mpirun}" == slurm ]]; then
    launch_record="$run_out/launch.sbatch"
    cmd+=(--script "$launch_record")
  fi
  local train_args=(-- --seed "$seed" --out "$run_out" --no-progress "${data_args[@]}")
  if [[ "${DRY_RUN:-0}" == 1 ]]; then  # print the launch command and stop
    # shellcheck disable=SC2086
    "${cmd[@]}" --dry-run "${train_args[@]}" $EXTRA_ARGS
    return $?
  fi
  # shellcheck disable=SC2086
  "${cmd[@]}" --dry-run "${train_args[@]}" $EXTRA_ARGS > "$launch_record.tmp" || return $?  # refuses a bad layout
  mv "$launch_record.tmp" "$launch_record" || return 1
  local start_fmt ret_code
  start_fmt=$(date +"%Y-%m-%d %r")
  echo "STARTING TIMING RUN AT $start_fmt"
  # shellcheck disable=SC2086
  "${cmd[@]}" "${train_args[@]}" $EXTRA_ARGS && ret_code=0 || ret_code=$?
  echo "ENDING TIMING RUN AT $(date +"%Y-%m-%d %r")"
  file_run "$index" "$seed" "$run_out" "$ret_code" "$start_fmt" "$launch_record"
}

# slurm_runs FIRST_SEED: the NEXP runs as one Slurm job (launch --runs: one allocation, run i with
# seed FIRST_SEED + i in $out_root/batch/run_<i>), each filed as result_<RESULT_INDEX + i>;
# returns the first failing run's status.
slurm_runs() {
  local seed0=$1 batch="$out_root/batch"
  mkdir -p "$batch" || return 1
  local cmd=("${launch[@]}" --runs "$NEXP" --script "$batch/launch.sbatch")
  local train_args=(-- --seed "$seed0" --out "$batch" --no-progress "${data_args[@]}")
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    # shellcheck disable=SC2086
    "${cmd[@]}" --dry-run "${train_args[@]}" $EXTRA_ARGS
    return $?
  fi
  # shellcheck disable=SC2086
  "${cmd[@]}" --dry-run "${train_args[@]}" $EXTRA_ARGS > /dev/null || return $?  # refuses a bad layout
  local start_fmt job_status=0 status=0 rc i
  start_fmt=$(date +"%Y-%m-%d %r")
  echo "STARTING $NEXP TIMING RUNS IN ONE SLURM JOB AT $start_fmt"
  # shellcheck disable=SC2086
  "${cmd[@]}" "${train_args[@]}" $EXTRA_ARGS && job_status=0 || job_status=$?
  echo "ENDING THE SLURM JOB AT $(date +"%Y-%m-%d %r") (status $job_status)"
  for ((i = 0; i < NEXP; i++)); do
    # The job's status is its first failing run's; the batch script keeps each run's own.
    rc=$job_status
    [[ -f "$batch/run_$i/exit_status" ]] && rc=$(<"$batch/run_$i/exit_status")
    file_run "$((10#$RESULT_INDEX + i))" "$((seed0 + i))" "$batch/run_$i" "$rc" "$start_fmt" \
      "$batch/launch.sbatch" || rc=$?
    ((status == 0)) && status=$rc
  done
  return $status
}

# file_run INDEX SEED RUN_OUT STATUS START LAUNCH_RECORD: files the run in RUN_OUT as result_INDEX
# (its log, its folder with the launch record), prints its RESULT line and checks its log;
# returns STATUS, or 1 for a log the compliance check fails or a run that cannot be filed.
file_run() {
  local index=$1 seed=$2 run_out=$3 ret_code=$4 start_fmt=$5 launch_record=$6
  local log
  log="$(readlink -f "$run_out/latest")/mlperf_log.txt"
  if [[ ! -f "$log" ]]; then
    if [[ $ret_code == 0 || $ret_code == 3 ]]; then
      echo "run_and_time: the run ended ($ret_code) but left no MLPerf log in $run_out: did rank 0 run on" \
           "another node? RESULTS_DIR ($RESULTS_DIR) must be a folder every node shares" >&2
      return 1
    fi
    return $ret_code
  fi
  # file_run runs where errexit does not reach (a condition): each step says when it fails.
  local kept="$dest/runs/result_$index"   # the run folder, for report and audit
  cp "$log" "$dest/result_$index.txt" && rm -rf "$kept" && mv "$(dirname "$log")" "$kept" &&
    cp "$launch_record" "$kept/" ||
    { echo "run_and_time: cannot file the run as $dest/result_$index.txt; it is still in $run_out" >&2
      trap - EXIT; return 1; }
  local result
  result=$("$py" "$repo/run_scripts/mlperf_log_reader.py" --run-seconds "$dest/result_$index.txt") ||
    { echo "run_and_time: cannot read the run's time from $dest/result_$index.txt" >&2; return 1; }
  echo "RESULT,MASKRCNN,$seed,$result,mlperf-maskrcnn,$start_fmt"
  echo "result file: $dest/result_$index.txt (run folder: $kept)"
  if compliance "$dest/result_$index.txt" "$kept"; then
    echo "compliance check: result_$index.txt passed ($kept/compliance_checker.log)"
  else
    echo "run_and_time: result_$index.txt fails the compliance check: see $kept/compliance_checker.log" >&2
    [[ $ret_code == 0 ]] && ret_code=1
  fi
  return $ret_code
}

random_seed() { od -An -N4 -tu4 /dev/urandom | tr -d ' '; }

if [[ "${SCHEDULER:-mpirun}" == slurm ]] && ((NEXP > 1)); then
  # NVIDIA's run.sub: the NEXP runs share one allocation (one queue wait, the same nodes).
  seed0=${SEED:+$((10#$SEED))}
  status=0
  slurm_runs "${seed0:-$(random_seed)}" || status=$?
  exit $status
fi

status=0
for ((i = 0; i < NEXP; i++)); do
  index=$((10#$RESULT_INDEX + i))   # decimal, leading zeros or not
  # MLPerf: a different seed for every run.
  if [[ -n "${SEED:-}" ]]; then seed=$((10#$SEED + i)); else seed=$(random_seed); fi
  ((NEXP > 1)) && echo "run_and_time: run $((i + 1)) of $NEXP (result_$index, seed $seed)"
  # A failing step inside one_run ends that run (its status), not the runs after it.
  rc=0
  one_run "$index" "$seed" || rc=$?
  [[ ${DRY_RUN:-0} == 1 ]] && exit $rc
  ((status == 0)) && status=$rc
done
exit $status
