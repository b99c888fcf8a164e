"""`mlperf-maskrcnn check` against the official compliance checker on published logs of every round.

The fixture (public_rulesets_maskrcnn.tar.xz, made by make_ruleset_fixtures.py from
mlcommons/training_results_v1.0 ... v3.1) holds 15 published Mask R-CNN logs, trimmed to their
:::MLLOG records less NVIDIA's per-step `throughput` and `tracked_stats` ones (the rules read
neither), each in its tree's path. FIXTURES below gives each log's official verdict under the six
rulesets, measured on the whole published log and on the trimmed one alike (P pass, F fail, in the
order 1.0.0 1.1.0 2.0.0 2.1.0 3.0.0 3.1.0). Among them: Google's TPU logs of v1.0 (blocks only,
their submission lines logged after run_stop: 1.0.0 passes them, every later ruleset does not),
Fujitsu's v1.0 log without weights_initialization (1.1.0 to 2.1.0 require it), a Supermicro v1.0 log
whose division comes after init_stop (from 2.0.0 the division sets the init limit), NVIDIA's A30
at a global batch of 8 with a learning rate of 0.02/K (2.0.0 on), and runs that miss the target.

BROKEN copies each break (or keep) one rule of one round in a published log, with the verdict
vector written beside it. For every file and ruleset the test runs

    python -m mlperf_logging.compliance_checker --usage training --ruleset V LOG

and `mlperf-maskrcnn check --ruleset V LOG`: both must give the vector written here. Without
--ruleset, `check` must take the round from the path (training_results_vX.Y) and agree with the
official checker of that round.
"""
import json
import os
import pathlib
import re
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor

import mrcnn_testenv as env

FIXTURE = pathlib.Path(__file__).with_name("public_rulesets_maskrcnn.tar.xz")
RULESETS = ["1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"]

# Published logs and their official verdicts (1.0.0 1.1.0 2.0.0 2.1.0 3.0.0 3.1.0).
FIXTURES = {
    "training_results_v1.0/Google/results/tpu-v4-128-TF/maskrcnn/result_0.txt": "PFFFFF",
    "training_results_v1.0/Fujitsu/results/gx_A100x4_pytorch_NGC_21.04/maskrcnn/result_1.txt": "PFFFPP",
    "training_results_v1.0/Supermicro/results/SYS-420GP-TNAR+/maskrcnn/result_1.txt": "PPFFFF",
    "training_results_v1.0/NVIDIA/results/dgxa100_ngc21.05_pytorch/maskrcnn/result_0.txt": "PPPPPP",
    "training_results_v1.1/NVIDIA/results/dgxa100_n4_ngc21.09_pytorch/maskrcnn/result_4.txt": "FFFFFF",
    "training_results_v1.1/Dell/results/XE8545x4A100-SXM-80GB/maskrcnn/result_0.txt": "PPPPPP",
    "training_results_v2.0/NVIDIA/results/2xa30_ngc22.04_pytorch/maskrcnn/result_0.txt": "FFPPPP",
    "training_results_v2.0/Google/results/cloud-tpu-v4-2048-TF/maskrcnn/result_0.txt": "PPPPPP",
    "training_results_v2.0/H3C/results/2R5500G5-Intelx8A100-SXM-80GB/maskrcnn/result_4.txt": "FFFFFF",
    "training_results_v2.1/NVIDIA/results/dgxh100_preview/maskrcnn/result_0.txt": "PPPPPP",
    "training_results_v2.1/Dell/results/32xXE8545x4A100-SXM-40GB/maskrcnn/result_0.txt": "PPPPPP",
    "training_results_v3.0/NVIDIA/results/dgxh100_ngc23.04_pytorch/maskrcnn/result_2.txt": "FFFFFF",
    "training_results_v3.0/Dell/results/XE9680x8H100-SXM-80GB/maskrcnn/result_0.txt": "PPPPPP",
    "training_results_v3.1/xFusion/results/G5500V7x8L40/maskrcnn/result_2.txt": "FFFFFF",
    "training_results_v3.1/NVIDIA/results/eos_ngc23.04_pytorch/maskrcnn/result_0.txt": "PPPPPP",
}


def records(text):
    """[(prefix, record or None, raw line)] of a log's lines."""
    out = []
    for line in text.splitlines(keepends=True):
        i = line.rfind(":::MLLOG ")
        rec = None
        if i >= 0:
            try:
                rec = json.loads(line[i + 9:])
            except ValueError:
                rec = None
        out.append((line, rec))
    return out


def render(recs):
    return "".join(line if rec is None else ":::MLLOG " + json.dumps(rec) + "\n" for line, rec in recs)


def edit(text, fn):
    recs = records(text)
    fn(recs)
    return render(recs)


def find(recs, key, n=0):
    return [i for i, (_, r) in enumerate(recs) if r and r.get("key") == key][n]


def move_submission_first(recs):  # Google v1.0: its five submission lines before everything else
    sub = [x for x in recs if x[1] and str(x[1].get("key")).startswith("submission_")]
    rest = [x for x in recs if x not in sub]
    recs[:] = sub + rest


def drop_tensor(recs):
    del recs[find(recs, "weights_initialization", 3)]


def repeat_tensor(recs):
    i = find(recs, "weights_initialization", 5)
    recs.insert(i, recs[i])


def tensor_not_a_string(recs):  # sorted() over str and int raises in the END check
    recs[find(recs, "weights_initialization", 2)][1]["metadata"]["tensor"] = 5


def batch_after_learning_rate(recs):  # 2.x's BEGIN: None < 16 (TypeError); 3.x: KeyError
    g = recs.pop(find(recs, "global_batch_size"))
    recs.insert(find(recs, "opt_base_learning_rate") + 1, g)


def eval_step_num(recs):  # 3.1.0 takes step_num on eval_start / eval_stop
    for _, r in recs:
        if r and r.get("key") in ("eval_start", "eval_stop"):
            r["metadata"]["step_num"] = r["metadata"].pop("epoch_num")


def block_step_num(recs):  # 3.1.0 takes step_num on block_start instead of epoch_count
    for _, r in recs:
        if r and r.get("key") == "block_start":
            r["metadata"]["step_num"] = r["metadata"].pop("epoch_count")


def block_epoch_count_zero(recs):
    recs[find(recs, "block_start", 1)][1]["metadata"]["epoch_count"] = 0


def open_division_slow_init(recs):  # open: 240 minutes from 2.0.0; 30 fixed before
    recs[find(recs, "submission_division")][1]["value"] = "open"
    start = recs[find(recs, "init_start")][1]["time_ms"]
    shift = start + 31 * 60000 - recs[find(recs, "init_stop")][1]["time_ms"]
    after = False
    for _, r in recs:
        after = after or (r is not None and r.get("key") == "init_stop")
        if after and r is not None:
            r["time_ms"] += shift


def run_stop_without_status(recs):
    del recs[find(recs, "run_stop")][1]["metadata"]["status"]


def learning_rate_not_multiple(recs):
    recs[find(recs, "opt_base_learning_rate")][1]["value"] = 0.03


V10, V11, V20, V21, V30, V31 = (f"training_results_v{v}" for v in ("1.0", "1.1", "2.0", "2.1", "3.0", "3.1"))
# (name, source log, edit, official verdicts 1.0.0 ... 3.1.0)
BROKEN = [
    ("google_v1.0_submission_first", f"{V10}/Google/results/tpu-v4-128-TF/maskrcnn/result_0.txt",
     move_submission_first, "PFFFPP"),
    ("nvidia_v1.0_one_tensor_missing", f"{V10}/NVIDIA/results/dgxa100_ngc21.05_pytorch/maskrcnn/result_0.txt",
     drop_tensor, "PFFFPP"),
    ("nvidia_v2.1_tensor_twice", f"{V21}/NVIDIA/results/dgxh100_preview/maskrcnn/result_0.txt",
     repeat_tensor, "PFFFPP"),
    ("dell_v2.1_tensor_not_a_string", f"{V21}/Dell/results/32xXE8545x4A100-SXM-40GB/maskrcnn/result_0.txt",
     tensor_not_a_string, "PFFFPP"),
    ("a30_v2.0_batch_after_learning_rate", f"{V20}/NVIDIA/results/2xa30_ngc22.04_pytorch/maskrcnn/result_0.txt",
     batch_after_learning_rate, "FFFFFF"),
    ("eos_v3.1_eval_step_num", f"{V31}/NVIDIA/results/eos_ngc23.04_pytorch/maskrcnn/result_0.txt",
     eval_step_num, "FFFFFP"),
    ("google_v2.0_block_step_num", f"{V20}/Google/results/cloud-tpu-v4-2048-TF/maskrcnn/result_0.txt",
     block_step_num, "FFFFFP"),
    ("eos_v3.1_epoch_count_zero", f"{V31}/NVIDIA/results/eos_ngc23.04_pytorch/maskrcnn/result_0.txt",
     block_epoch_count_zero, "FFFFFF"),
    ("dell_v1.1_open_init_31_min", f"{V11}/Dell/results/XE8545x4A100-SXM-80GB/maskrcnn/result_0.txt",
     open_division_slow_init, "FFPPPP"),
    ("dell_v3.0_run_stop_without_status", f"{V30}/Dell/results/XE9680x8H100-SXM-80GB/maskrcnn/result_0.txt",
     run_stop_without_status, "FFFFFF"),
    ("google_v1.0_learning_rate_0.03", f"{V10}/Google/results/tpu-v4-128-TF/maskrcnn/result_0.txt",
     learning_rate_not_multiple, "FFFFFF"),
]


def official(path, ruleset, workdir):
    log = pathlib.Path(workdir) / f"cc-{abs(hash((str(path), ruleset)))}.log"
    p = env.run([env.PYTHON, "-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset", ruleset,
                 path, "--log_output", log], cwd=workdir)
    return p.returncode == 0


def ours(paths, ruleset, workdir):
    """{path: report} of one `check` over every file (--ruleset when given)."""
    js = pathlib.Path(workdir) / f"ours-{ruleset or 'auto'}.json"
    p = env.run([env.mlperf_maskrcnn(), "check", "--quiet", "--json", js, *(["--ruleset", ruleset] if ruleset else []),
                 *paths], cwd=workdir)
    assert p.returncode in (0, 1), (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr and "terminate" not in p.stderr
    return {r["file"]: r for r in json.loads(js.read_text())}


def main():
    with env.scratch_dir("rulesets-public") as tmp:
        tmp = pathlib.Path(tmp)
        with tarfile.open(FIXTURE) as tar:
            tar.extractall(tmp, filter="data")
        cases = [(name, want) for name, want in FIXTURES.items()]
        assert all((tmp / name).is_file() for name, _ in cases), sorted(p for p in tmp.rglob("*.txt"))
        for name, source, fn, want in BROKEN:
            m = re.match(r"(training_results_v\d\.\d)/", source)
            dst = tmp / m.group(1) / "broken" / f"{name}.txt"  # in its round's tree: `check` reads the round
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(edit((tmp / source).read_text("latin-1"), fn), "latin-1")
            cases.append((str(dst.relative_to(tmp)), want))
        paths = [name for name, _ in cases]
        jobs = [(name, r) for name in paths for r in RULESETS]
        with ThreadPoolExecutor(max_workers=2) as pool:
            off = dict(zip(jobs, pool.map(lambda j: official(j[0], j[1], tmp), jobs)))
        mine = {r: ours(paths, r, tmp) for r in RULESETS}
        auto = ours(paths, None, tmp)
    failures = []
    for name, want in cases:
        got_off = "".join("P" if off[(name, r)] else "F" for r in RULESETS)
        got_ours = "".join("P" if mine[r][name]["passed"] else "F" for r in RULESETS)
        round_ruleset = re.search(r"training_results_v(\d\.\d)/", name).group(1) + ".0"
        a = auto[name]
        print(f"{name:100s} official {got_off}  ours {got_ours}  (expected {want}); without --ruleset: "
              f"{a['ruleset']} from the {a['ruleset_source']}: {'pass' if a['passed'] else 'FAIL'}")
        if got_off != want:
            failures.append(f"{name}: the official checker says {got_off}, the case expects {want}")
        if got_ours != got_off:
            bad = [r for r in RULESETS if mine[r][name]["passed"] != off[(name, r)]]
            failures.append(f"{name}: ours {got_ours}, official {got_off}\n" +
                            "\n".join(f"  {r}: {mine[r][name]['errors'][:3]}" for r in bad))
        if (a["ruleset"], a["ruleset_source"]) != (round_ruleset, "path") or a["passed"] != off[(name, round_ruleset)]:
            failures.append(f"{name}: without --ruleset {a['ruleset']} ({a['ruleset_source']}) {a['passed']}, "
                            f"official {round_ruleset} {off[(name, round_ruleset)]}")
    flips = sum(1 for _, w in cases if len(set(w)) > 1)
    print(f"{len(cases)} logs ({len(FIXTURES)} published, {len(BROKEN)} broken) x {len(RULESETS)} rulesets; "
          f"{flips} logs whose verdict depends on the ruleset")
    assert len(cases) >= 20 and flips >= 8
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("verdicts identical on every log under every ruleset")


if __name__ == "__main__":
    main()
