#!/usr/bin/env bash
# One timed MLPerf run of a system, saved as an MLPerf result file:
#   SYSTEM=aws-p3dn.24xlarge RESULT_INDEX=0 run_scripts/run_and_time.sh
# writes results/<system>/maskrcnn/result_<RESULT_INDEX>.txt (the run's :::MLLOG log) and prints
# one machine-readable line: RESULT,MASKRCNN,<seed>,<seconds>,mlperf-maskrcnn,<start time>.
# Multi-rank systems are started through mpirun with the launch settings of the system file.
# The exit status is the trainer's (0 targets reached, 3 not reached, 1 error, 2 bad input).
# Environment: SEED (default: random), RESULT_INDEX (0), BUILD_DIR, RESULTS_DIR, EXTRA_ARGS
# (more `train` arguments, e.g. "--set run.data_dir=\"/data/coco\""), DRY_RUN=1 (print the
# launch command only).
set -euo pipefail

: "${SYSTEM:?SYSTEM not set (the name of a systems/<name>.json)}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# ---- defaults -------------------------------------------------------------------------------------
: "${RESULT_INDEX:=0}"
: "${SEED:=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"   # MLPerf: a different seed for every run
: "${BUILD_DIR:=$repo/build}"
: "${RESULTS_DIR:=$repo/results}"
: "${EXTRA_ARGS:=}"
system_file="$repo/systems/$SYSTEM.json"
bin="$BUILD_DIR/benchmark/mlperf-maskrcnn"
[[ -f "$system_file" ]] || { echo "run_and_time: no system file $system_file" >&2; exit 2; }
[[ -x "$bin" ]] || { echo "run_and_time: $bin not built (run_scripts/bootstrap.sh, then cmake --build)" >&2; exit 2; }

py="$repo/.venv/bin/python"
ranks=$("$py" -c "import json,sys; l=json.load(open(sys.argv[1]))['launch']; print(l['nodes']*l['ranks_per_node'])" "$system_file")
out_root="$(mktemp -d -t "mrcnn-$SYSTEM-XXXX")"
trap 'rm -rf "$out_root"' EXIT

cmd=("$bin" train --system "$system_file" --seed "$SEED" --out "$out_root" --no-progress)
if (( ranks > 1 )); then
  mapfile -t mpi < <("$py" - "$system_file" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["launch"]
args = ["mpirun", "-np", str(l["nodes"] * l["ranks_per_node"]), "--npernode", str(l["ranks_per_node"])]
# launch.cpu_binding: core -- each rank pinned to threads_per_rank cores of its own, ranks spread
# over the sockets; socket -- each rank confined to one socket; none -- the OS decides.
binding = {
    "core": ["--map-by", f"socket:PE={l['threads_per_rank']}", "--bind-to", "core"],
    "socket": ["--map-by", "socket", "--bind-to", "socket"],
    "none": ["--map-by", "slot", "--bind-to", "none"],
}[l.get("cpu_binding", "none")]
args += binding + ["--report-bindings"] * (l.get("cpu_binding", "none") != "none")
for k, v in l.get("env", {}).items():
    args += ["-x", f"{k}={v}"]
args += ["-x", f"OMP_NUM_THREADS={l['threads_per_rank']}"] + l.get("mpirun_args", [])
print("\n".join(args))
PY
)
  cmd=("${mpi[@]}" "${cmd[@]}")
fi

if [[ "${DRY_RUN:-0}" == 1 ]]; then  # print the launch command and stop
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi

start_fmt=$(date +"%Y-%m-%d %r")
echo "STARTING TIMING RUN AT $start_fmt"
set +e
# shellcheck disable=SC2086
"${cmd[@]}" $EXTRA_ARGS
ret_code=$?
set -e
end_fmt=$(date +"%Y-%m-%d %r")
echo "ENDING TIMING RUN AT $end_fmt"

log="$(readlink -f "$out_root/latest")/mlperf_log.txt"
if [[ -f "$log" ]]; then
  dest="$RESULTS_DIR/$SYSTEM/maskrcnn"
  mkdir -p "$dest"
  cp "$log" "$dest/result_$RESULT_INDEX.txt"
  result=$("$py" - "$log" <<'PY'
import json, sys
t = {}
for line in open(sys.argv[1], encoding="latin-1"):
    if ":::MLLOG " in line:
        r = json.loads(line.split(":::MLLOG ", 1)[1])
        if r["key"] in ("run_start", "run_stop"):
            t[r["key"]] = r["time_ms"]
print(f"{(t['run_stop'] - t['run_start']) / 1000:.3f}" if len(t) == 2 else "NA")
PY
)
  echo "RESULT,MASKRCNN,$SEED,$result,mlperf-maskrcnn,$start_fmt"
  echo "result file: $dest/result_$RESULT_INDEX.txt"
fi
exit $ret_code
