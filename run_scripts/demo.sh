#!/usr/bin/env bash
# Sets up everything (bootstrap + build) and runs the project's main job on its built-in default.
# While the training harness is being built, the demo runs what exists: it writes a small MLPerf
# log with the project's logger and checks it with the project's compliance checker and with the
# official one.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${MRCNN_BUILD_DIR:-$repo/build}"
out="${MRCNN_OUT:-$repo/out/demo}"

bash run_scripts/bootstrap.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target mlperf-maskrcnn mllog_encode_tool

mkdir -p "$out"
echo "[demo] the training harness is not built yet; checking an MLPerf log written by the project's emitter"
"$repo/.venv/bin/python" - "$build" "$out/example_mlperf.log" <<'PY'
import json, subprocess, sys
tool = f"{sys.argv[1]}/tests/logging/mllog_encode_tool"
recs, t = [], 1700000000000
def add(key, value=None, **meta):
    global t
    et = "INTERVAL_START" if key.endswith("_start") else "INTERVAL_END" if key.endswith("_stop") else "POINT_IN_TIME"
    recs.append({"namespace": "", "time_ms": t, "event_type": et, "key": key, "value": value,
                 "metadata": {"file": "run_scripts/demo.sh", "lineno": len(recs) + 1, **meta}})
    t += 1000
for k, v in [("submission_benchmark", "maskrcnn"), ("submission_org", "mlperf-maskrcnn"), ("submission_division", "open"),
             ("submission_status", "research"), ("submission_platform", "1xCPU"), ("cache_clear", True)]:
    add(k, v)
add("init_start"); add("seed", 1)
for k, v in [("global_batch_size", 8), ("gradient_accumulation_steps", 1), ("num_image_candidates", 1000),
             ("opt_base_learning_rate", 0.01), ("opt_learning_rate_warmup_steps", 500),
             ("opt_learning_rate_warmup_factor", 2e-05), ("opt_learning_rate_decay_factor", 0.1),
             ("opt_learning_rate_decay_steps", [144000, 192000]), ("min_image_size", 800), ("max_image_size", 1333),
             ("train_samples", 117266), ("eval_samples", 5000)]:
    add(k, v)
add("init_stop"); add("run_start")
add("epoch_start", epoch_num=1); add("epoch_stop", epoch_num=1); add("eval_start", epoch_num=1)
add("eval_accuracy", {"BBOX": 0.2, "SEGM": 0.18}, epoch_num=1); add("eval_stop", epoch_num=1)
add("run_stop", status="aborted")
out = subprocess.run([tool], input="".join(json.dumps(r) + "\n" for r in recs), capture_output=True, text=True, check=True)
open(sys.argv[2], "w").write(out.stdout)
PY
"$build/benchmark/mlperf-maskrcnn" check "$out/example_mlperf.log"
(cd "$out" && "$repo/.venv/bin/python" -m mlperf_logging.compliance_checker --usage training --ruleset 3.1.0 \
   example_mlperf.log --log_output compliance_checker.log 2>&1 | tail -1)
echo "[demo] log: $out/example_mlperf.log"
