"""`mlperf-maskrcnn check` against the official compliance checker, verdict for verdict.

Builds a valid Mask R-CNN log and many variants that each break (or deliberately keep) one rule,
including every gotcha of MLPERF_RULES.md section 5, then runs

    python -m mlperf_logging.compliance_checker --usage training --ruleset 3.1.0 LOG

and `mlperf-maskrcnn check LOG` on each one. The verdicts (pass = exit status 0) must agree on
every log, and the expected verdict written beside each case must hold, so that a checker that
failed (or passed) everything could not pass this test.
"""
import json
import os
import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor

import mrcnn_testenv as env

T0 = 1700000000000


def rec(key, value=None, meta=None, t=None, **extra):
    et = "INTERVAL_START" if key.endswith("_start") else "INTERVAL_END" if key.endswith("_stop") else "POINT_IN_TIME"
    m = {"file": "benchmark/run/timed_run.cpp", "lineno": 10}
    m.update(meta or {})
    r = {"namespace": "", "time_ms": t, "event_type": et, "key": key, "value": value, "metadata": m}
    r.update(extra)
    return r


def base(division="closed", gbs=64, lr=0.08, candidates=6000, decay=(18000, 24000), epochs=2,
         final=(0.3781, 0.342), blocks=True, epoch_events=True):
    r = [rec("submission_benchmark", "maskrcnn"), rec("submission_org", "ExampleOrg"),
         rec("submission_division", division), rec("submission_status", "onprem"),
         rec("submission_platform", "1xCPU"), rec("cache_clear", True), rec("init_start"), rec("seed", 1234),
         rec("global_batch_size", gbs), rec("gradient_accumulation_steps", 1),
         rec("num_image_candidates", candidates), rec("opt_base_learning_rate", lr),
         rec("opt_learning_rate_warmup_steps", 800), rec("opt_learning_rate_warmup_factor", 0.0001),
         rec("opt_learning_rate_decay_factor", 0.1), rec("opt_learning_rate_decay_steps", list(decay)),
         rec("opt_weight_decay", 0.0001), rec("min_image_size", 800), rec("max_image_size", 1333),
         rec("train_samples", 117266), rec("eval_samples", 5000), rec("init_stop"), rec("run_start")]
    for e in range(1, epochs + 1):
        if blocks:
            r.append(rec("block_start", meta={"first_epoch_num": e, "epoch_count": 1}))
        if epoch_events:
            r.append(rec("epoch_start", meta={"epoch_num": e}))
            r.append(rec("epoch_stop", meta={"epoch_num": e}))
        if blocks:
            r.append(rec("block_stop", meta={"first_epoch_num": e}))
        r.append(rec("eval_start", meta={"epoch_num": e}))
        acc = {"BBOX": final[0], "SEGM": final[1]} if e == epochs else {"BBOX": 0.2, "SEGM": 0.18}
        r.append(rec("eval_accuracy", acc, {"epoch_num": e}))
        r.append(rec("eval_stop", meta={"epoch_num": e}))
    r.append(rec("run_stop", meta={"status": "success"}))
    for i, x in enumerate(r):
        if x["time_ms"] is None:
            x["time_ms"] = T0 + 1000 * i
    return r


def idx(log, key):
    return next(i for i, r in enumerate(log) if r["key"] == key)


def drop(log, key):
    log = list(log)
    del log[idx(log, key)]
    return log


def setv(log, key, value):
    log = [dict(r) for r in log]
    log[idx(log, key)]["value"] = value
    return log


def setm(log, key, meta, occurrence=0):
    log = [dict(r) for r in log]
    hits = [i for i, r in enumerate(log) if r["key"] == key]
    log[hits[occurrence]]["metadata"] = meta
    return log


def text(log, prefix="", newline="\n"):
    return "".join(prefix + ":::MLLOG " + (r if isinstance(r, str) else json.dumps(r)) + newline for r in log)


def moved(log, key, after_key):
    log = list(log)
    item = log.pop(idx(log, key))
    log.insert(idx(log, after_key) + 1, item)
    return log


def cases():
    """(name, file contents, expected verdict: True = passes)."""
    b = base()
    c = []
    add = lambda name, log, ok, **kw: c.append((name, log if isinstance(log, str) else text(log, **kw), ok))
    add("valid_closed", b, True)
    add("valid_open", base(division="open", final=(0.2, 0.1)), True)
    add("missing_num_image_candidates", drop(b, "num_image_candidates"), False)
    add("segm_below_target", base(final=(0.39, 0.338)), False)
    add("bbox_below_target", base(final=(0.376, 0.35)), False)
    add("target_split_across_lines", base(final=(0.38, 0.30))[:-3] + [
        rec("eval_accuracy", {"BBOX": 0.30, "SEGM": 0.35}, {"epoch_num": 2}, t=T0 + 10**6)] + base()[-2:], False)
    add("lr_not_multiple_of_0.02", base(lr=0.03), False)
    add("decay_steps_one_entry", base(decay=(18000,)), False)
    add("run_stop_without_status", setm(b, "run_stop", {"file": "x", "lineno": 1}), False)
    late = [dict(r) for r in b]
    late[idx(late, "init_stop")]["time_ms"] = T0 + int(31.6 * 60000)
    for i in range(idx(late, "run_start"), len(late)):
        late[i]["time_ms"] = T0 + int(31.6 * 60000) + i
    add("init_longer_than_30_min_closed", late, False)
    late_open = setv(late, "submission_division", "open")
    add("init_31_min_open_limit_240", late_open, True)
    dup = list(b)
    dup.insert(idx(b, "global_batch_size"), rec("global_batch_size", 64, t=T0 + 8500))
    add("exactly_one_twice_same_value", dup, True)
    dup2 = list(b)
    dup2.insert(idx(b, "global_batch_size"), rec("global_batch_size", 32, t=T0 + 8500))
    add("exactly_one_twice_different_values", dup2, False)
    add("only_epoch_events", base(blocks=False), True)
    add("only_block_events", base(epoch_events=False), True)
    add("neither_block_nor_epoch_events", base(blocks=False, epoch_events=False), False)
    add("eval_accuracy_with_step_num", setm(b, "eval_accuracy", {"file": "x", "lineno": 1, "step_num": 5}, 1), False)
    add("prefixed_lines_and_noise", "starting\n" + text(b, prefix="[rank0] 12:00:01 ") + "done\n", True)
    nometa = [dict(r) for r in b]
    del nometa[idx(nometa, "seed")]["metadata"]
    add("line_missing_metadata", nometa, False)
    add("gbs_as_string", setv(b, "global_batch_size", "64"), False)
    add("gbs8_lr_0.01_allowed", base(gbs=8, lr=0.01, candidates=1000, decay=(144000, 192000)), True)
    add("gbs32_lr_0.01_refused", base(gbs=32, lr=0.01), False)
    add("lr_before_gbs_keyerror", moved(base(gbs=8, lr=0.01), "global_batch_size", "opt_base_learning_rate"), False)
    add("lr_before_gbs_but_multiple", moved(b, "global_batch_size", "opt_base_learning_rate"), True)
    bad_json = text(b).splitlines(keepends=True)
    bad_json[7] = ':::MLLOG {"namespace": "", "time_ms": 1, "key": "seed", \n'
    add("invalid_json_line", "".join(bad_json), False)
    add("init_start_after_run_start", b[:idx(b, "run_start") + 1] + [rec("init_start", t=T0 + 30000)] +
        b[idx(b, "run_start") + 1:], False)
    add("missing_run_start", drop(b, "run_start"), False)
    add("eval_accuracy_without_segm", setv(base(epochs=1), "eval_accuracy", {"BBOX": 0.4}), False)
    add("division_unknown", setv(b, "submission_division", "closed-ish"), False)
    add("benchmark_other", setv(b, "submission_benchmark", "ssd"), False)
    add("missing_cache_clear", drop(b, "cache_clear"), False)
    add("status_cloud", setv(b, "submission_status", "cloud"), True)
    add("status_unknown", setv(b, "submission_status", "datacenter"), False)
    add("block_epoch_count_zero", setm(b, "block_start", {"file": "x", "lineno": 1, "first_epoch_num": 1,
                                                          "epoch_count": 0}), False)
    add("candidates_within_tolerance", base(candidates=6000.000001), True)
    add("candidates_not_multiple", base(candidates=6500), False)
    add("empty_file", "", False)
    add("no_mllog_lines", "hello\nworld\n", False)
    add("decay_factor_equal_float", setv(b, "opt_learning_rate_decay_factor", 0.10000000000000001), True)
    add("decay_factor_wrong", setv(b, "opt_learning_rate_decay_factor", 0.2), False)
    ts_str = [dict(r) for r in b]
    for r in ts_str:
        r["time_ms"] = str(r["time_ms"])
    add("time_ms_as_numeric_string", ts_str, True)
    ts_bad = [dict(r) for r in b]
    ts_bad[3]["time_ms"] = "soon"
    add("time_ms_not_a_number", ts_bad, False)
    add("crlf_line_endings", b, True, newline="\r\n")
    add("eval_accuracy_value_string", setv(base(epochs=1), "eval_accuracy", "BBOX SEGM"), False)
    add("init_stop_before_init_start", moved(b, "init_start", "init_stop"), False)
    add("division_after_init_stop", moved(b, "submission_division", "init_stop"), False)
    add("warmup_factor_nan", setv(b, "opt_learning_rate_warmup_factor", float("nan")), False)
    add("warmup_steps_zero", setv(b, "opt_learning_rate_warmup_steps", 0), True)
    add("warmup_steps_negative", setv(b, "opt_learning_rate_warmup_steps", -1), False)
    nonstr = list(b)
    nonstr.insert(5, rec("x", 1, t=T0 + 4500) | {"key": 5})
    add("non_string_key_ignored", nonstr, True)
    add("run_stop_metadata_list", setm(b, "run_stop", ["status"]), True)
    add("train_samples_empty_string", setv(b, "train_samples", ""), False)
    add("decay_steps_string_len2", setv(b, "opt_learning_rate_decay_steps", "ab"), True)
    add("gbs_bool_true", setv(b, "global_batch_size", True), True)
    add("aborted_run", setm(base(final=(0.2, 0.1)), "run_stop", {"file": "x", "lineno": 1, "status": "aborted"}),
        False)
    add("record_not_object", text(b[:5]) + ":::MLLOG [1, 2]\n" + text(b[5:]), False)
    add("nothing_after_token", text(b[:5]) + ":::MLLOG   \n" + text(b[5:]), False)
    return c


def official(path, workdir):
    p = env.run([env.PYTHON, "-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset",
                 "3.1.0", path, "--log_output", os.path.join(workdir, path.name + ".cc.log")], cwd=workdir)
    return p.returncode == 0, (p.stdout + p.stderr)[-600:]


def ours(path):
    p = env.run([env.mlperf_maskrcnn(), "check", path])
    assert p.returncode in (0, 1, 2), (path, p.returncode, p.stderr)
    assert "Traceback" not in p.stderr and "terminate" not in p.stderr
    return p.returncode == 0, p.stdout[-1500:]


def main():
    all_cases = cases()
    with env.scratch_dir("checker-parity") as tmp:
        tmp = pathlib.Path(tmp)
        paths = []
        for name, content, _ in all_cases:
            p = tmp / f"{name}.log"
            p.write_bytes(content.encode("latin-1"))
            paths.append(p)
        with ThreadPoolExecutor(max_workers=2) as pool:
            off = list(pool.map(lambda p: official(p, str(tmp)), paths))
        mine = [ours(p) for p in paths]
    failures = []
    for (name, _, expected), (o_ok, o_out), (m_ok, m_out) in zip(all_cases, off, mine):
        status = "pass" if o_ok else "FAIL"
        print(f"{name:40s} official={status:4s} ours={'pass' if m_ok else 'FAIL'}")
        if o_ok != m_ok:
            failures.append(f"{name}: official {o_ok}, ours {m_ok}\n--- official ---\n{o_out}\n--- ours ---\n{m_out}")
        elif o_ok != expected:
            failures.append(f"{name}: both checkers say {o_ok}, the case expects {expected}\n{o_out}")
    passes = sum(1 for _, _, e in all_cases if e)
    print(f"{len(all_cases)} logs ({passes} valid, {len(all_cases) - passes} invalid)")
    assert len(all_cases) >= 30
    if failures:
        print("\n\n".join(failures))
        sys.exit(1)
    print("verdicts identical on every log")


if __name__ == "__main__":
    main()
