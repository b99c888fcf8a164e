"""`report`'s RCP check against the official one (mlperf_logging.rcp_checker, ruleset 3.1.0).

Result trees of 5 runs with every batch size class (below the smallest reference point, exact,
interpolated between two, above the largest) and epochs to converge around each acceptance
threshold (means in thirds of an epoch, so several fall within 0.01 of a threshold), with one and
two non-converged runs. (Runs of different batch sizes make the official checker raise; `report`
says "Could not detect global_batch_size", the message the official code means for it.) For every tree, the official check_directory (the
package checker's call: pruned RCPs) and `mlperf-maskrcnn report --json` must give the same
verdict, the same message and the same normalization factor.
"""
import itertools
import json
import logging
import pathlib

import mrcnn_testenv as env

from mlperf_logging.rcp_checker import rcp_checker


def log_text(bs, epochs, converged):
    t = 1_000_000
    lines = []

    def rec(key, value=None, **meta):
        nonlocal t
        t += 1000
        lines.append(":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME",
                                               "key": key, "value": value, "metadata": meta}))
    rec("submission_benchmark", "maskrcnn")
    rec("submission_division", "closed")
    rec("global_batch_size", bs)
    rec("run_start")
    for e in range(1, epochs + 1):
        rec("eval_accuracy", {"BBOX": 0.1 * e, "SEGM": 0.1 * e}, epoch_num=e)
    rec("run_stop", status="success" if converged else "aborted")
    return "\n".join(lines) + "\n"


def cases():
    out = []
    for bs in (2, 8, 16, 32, 48, 64, 96, 128, 200, 256, 272, 512):
        for base in range(11, 19):
            out.append((bs, [base] * 5, [True] * 5))
            out.append((bs, [base, base, base, base + 1, base + 1], [True] * 5))
            out.append((bs, [base, base, base + 1, base + 1, base + 1], [True] * 5))
        out.append((bs, [12, 13, 14, 15, 16], [True, True, True, True, False]))
        out.append((bs, [12, 13, 14, 15, 16], [True, True, True, False, False]))
    return out


def main():
    logging.disable(logging.CRITICAL)  # the official checker logs every step
    with env.scratch_dir("rcp") as tmp:
        tree = pathlib.Path(tmp) / "results"
        expected = {}
        for i, (bs, epochs, conv) in enumerate(cases()):
            folder = tree / f"case{i:03d}" / "maskrcnn"
            folder.mkdir(parents=True)
            for k, (e, c) in enumerate(zip(epochs, conv)):
                (folder / f"result_{k}.txt").write_text(log_text(bs, e, c))
            passed, msg, norm = rcp_checker.check_directory(str(folder), "training", "3.1.0", False, False,
                                                            rcp_pass="pruned_rcps")
            expected[f"case{i:03d}"] = (passed, msg, norm, bs, epochs, conv)
        out = pathlib.Path(tmp) / "report.json"
        p = env.run([env.mlperf_maskrcnn(), "report", tree, "--json", out])
        assert p.returncode == 0, p.stderr
        got = {s["system"]: s["rcp"] for s in json.loads(out.read_text())["systems"]}
        assert sorted(got) == sorted(expected), (len(got), len(expected))
        verdicts = {True: 0, False: 0}
        for name, (passed, msg, norm, bs, epochs, conv) in sorted(expected.items()):
            r = got[name]
            where = f"{name}: BS {bs}, epochs {epochs}, converged {conv}"
            assert r["passed"] == passed, f"{where}: report {r['passed']} ({r['message']}), official {passed} ({msg})"
            assert r["message"] == msg, f"{where}: report '{r['message']}', official '{msg}'"
            assert abs(r["norm_factor"] - norm) <= 1e-12 * max(1.0, norm), f"{where}: {r['norm_factor']} vs {norm}"
            verdicts[passed] += 1
        assert verdicts[True] >= 20 and verdicts[False] >= 20, verdicts
        print(f"{len(expected)} result trees: the official rcp_checker's verdict, message and normalization factor "
              f"({verdicts[True]} pass, {verdicts[False]} fail)")


if __name__ == "__main__":
    main()
