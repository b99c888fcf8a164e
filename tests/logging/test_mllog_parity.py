"""The C++ emitter's encode() against the reference emitter's _encode_log, line for line.

Every record below goes through mlperf_logging.mllog.mllog._encode_log and through the
mllog_encode_tool (which calls mrcnn::logging::encode); the lines must be byte-identical.
"""
import json
import math
import random
import sys

from mlperf_logging.mllog import mllog

import mrcnn_testenv as env


def records():
    vals = [None, True, False, 0, -1, 64, 2**53 + 1, 117266, 0.08, 0.1, 1e-4, 2e-5, 1.5e-7, 1e16, 1e15,
            123456789.125, 1 / 3, 5e-324, -0.0, 0.0, 1e308, float("nan"), float("inf"), -float("inf"),
            "", "maskrcnn", "sgd_with_momentum", "quote\" backslash\\ newline\n tab\t ctrl\x01",
            "café", "emoji \U0001F600", "del\x7f", [18000, 24000], [], {}, {"BBOX": 0.3781, "SEGM": 0.342},
            {"nested": {"list": [1, 2.5, None, "x"]}, "b": [[]]}]
    rng = random.Random(1234)
    for _ in range(200):
        vals.append(rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-12, 12))
    keys = ["global_batch_size", "run_start", "epoch_stop", "eval_accuracy", "weights_initialization"]
    types = ["POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"]
    for i, v in enumerate(vals):
        meta = {"file": "benchmark/run/timed_run.cpp", "lineno": i}
        if i % 3 == 0:
            meta["epoch_num"] = i
        if i % 5 == 0:
            meta["tensor"] = "FPN_inner_block1"
        if i % 7 == 0:
            meta["status"] = "success"
        yield {"namespace": "" if i % 4 else "worker0", "time_ms": 1700000000000 + i,
               "event_type": types[i % 3], "key": keys[i % len(keys)], "value": v, "metadata": meta}


def main():
    recs = list(records())
    tool = env.binary("mllog_encode_tool")
    stdin = "".join(json.dumps(r) + "\n" for r in recs)
    out = env.run([tool], input=stdin)
    assert out.returncode == 0, out.stderr
    ours = out.stdout.splitlines()
    assert len(ours) == len(recs), (len(ours), len(recs))
    bad = 0
    for r, line in zip(recs, ours):
        ref = mllog._encode_log(r["namespace"], r["time_ms"], r["event_type"], r["key"], r["value"], r["metadata"])
        if ref != line:
            bad += 1
            print(f"MISMATCH\n  ref:  {ref}\n  ours: {line}")
    assert bad == 0, f"{bad} of {len(recs)} lines differ"
    print(f"{len(recs)} lines identical to mllog._encode_log")


if __name__ == "__main__":
    main()
