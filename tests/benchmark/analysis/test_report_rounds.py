"""`mlperf-maskrcnn report` over published results of several rounds, each by its own round's rules,
against the official tools of that round.

The fixture (public_rounds_maskrcnn.tar.xz, made by make_rounds_fixture.py) holds 11 systems of
v1.0, v1.1, v2.0 and v2.1, each tree under its own name: Google's TPU v4 pods of v1.0 and v2.0 (their
logs count blocks, not epochs; the v1.0 ones log their submission lines after run_stop), a v1.0
Supermicro server whose division comes after init_stop (both scored by the 1.0.0 rules and by no
later ruleset), NVIDIA's DGX A100 of every round and the first DGX H100 (v2.1), a v1.1 system with a
run that misses the target, NVIDIA's A30 at a global batch of 8 (the RCP point 1.x lacks), and
Dell's 32-node system whose runs log two global batch sizes. `report` reads all four trees at once
and, per system, must give:
  - the round: ruleset X.Y.0 of the tree training_results_vX.Y, in the JSON and the table;
  - the score result_summarizer of that ruleset computes, and the verdict and message of
    rcp_checker --rcp_version X.Y.0 (where that crashes, on runs of different batch sizes: a
    failure saying which sizes were found);
  - images/s per accelerator from the logs' throughput events where they have them, else from the
    epochs (the blocks' epoch_count in a log of blocks, said so), and a time breakdown in which
    every converged run has trained;
the same logs stripped of their epoch and throughput records must give, from their blocks alone,
images/s within 15 % of the events' and the same scores. Read by the 3.1.0 rules instead
(--ruleset 3.1.0), the v1.0 TPU and Supermicro systems get no score, as result_summarizer 3.1.0
says. The HTML page of all four rounds is checked in headless Chromium (tests/report_page.py).

MRCNN_PUBLIC_RESULTS=PATH[:PATH...] (whole training_results_vX.Y checkouts of any round) runs the
same comparison on every Mask R-CNN result in them.
"""
import json
import os
import pathlib
import re
import shutil
import tarfile

import mrcnn_testenv as env
import report_page
from test_report_public import check_rcp_message, events_throughput, official_rcp

FIXTURE = pathlib.Path(__file__).with_name("public_rounds_maskrcnn.tar.xz")
ROUNDS = ("training_results_v1.0", "training_results_v1.1", "training_results_v2.0", "training_results_v2.1")
BLOCKS = "epochs x 117266 (COCO train2017), the epochs counted in blocks"


def report(paths, cwd, *extra):
    js = pathlib.Path(cwd) / "report.json"
    p = env.run([env.mlperf_maskrcnn(), "report", *paths, "--json", js, *extra], cwd=cwd)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stderr == "", p.stderr[-2000:]
    return json.loads(js.read_text()), p.stdout


def round_of(folder):
    m = re.search(r"training_results_v(\d)\.(\d)", str(folder))
    return f"{m.group(1)}.{m.group(2)}.0"


def official_scores(tree, ruleset, cwd):
    """{(org, system): result_summarizer's row} of every submitter of a tree, on a copy of it (the
    summarizer writes scaling.json files)."""
    copy = pathlib.Path(cwd) / "copies" / f"{tree.name}-{ruleset}"
    shutil.copytree(tree, copy)
    rows = {}
    for org in sorted(p for p in copy.iterdir() if (p / "results").is_dir()):
        out = pathlib.Path(cwd) / "summarizer" / f"{tree.name}-{ruleset}" / org.name
        out.mkdir(parents=True)
        p = env.run([env.PYTHON, "-m", "mlperf_logging.result_summarizer", org, "training", ruleset], cwd=out)
        assert (out / "summary.json").is_file(), p.stdout[-3000:] + p.stderr[-3000:]
        for row in json.loads((out / "summary.json").read_text()):
            if row.get("maskrcnn:time_to_train") is not None or row.get("maskrcnn:RCP"):
                rows[(org.name, pathlib.Path(row["details_url"]).stem)] = row
    return rows


def key(system):
    parts = pathlib.Path(system["folder"]).parts
    return parts[-4], parts[-2]  # org, system


def check_trees(trees, tmp):
    """Every Mask R-CNN system of the trees against the official tools of its round; returns the
    report's systems by (round, org, system)."""
    rep, table = report(trees, tmp)
    systems = rep["systems"]
    official = {}
    for tree in trees:
        for k, row in official_scores(pathlib.Path(tree), round_of(tree), tmp).items():
            official[(round_of(tree),) + k] = row
    got = {(s["ruleset"],) + key(s): s for s in systems}
    assert set(got) == set(official), sorted(set(got) ^ set(official))
    assert rep["rulesets"] == sorted({round_of(t) for t in trees}), rep["rulesets"]
    worst = 0.0
    for k, s in sorted(got.items()):
        row = official[k]
        assert s["ruleset"] == round_of(s["folder"]) and s["ruleset_source"] == "path", (k, s["ruleset"])
        assert all(r["ruleset"] == s["ruleset"] for r in s["runs"]) and s["rcp"]["ruleset"] == s["ruleset"], k
        want = row["maskrcnn:time_to_train"]
        assert (s["score_minutes"] is None) == (want is None), (k, s["score_minutes"], want, s["score_note"])
        if want is not None:  # summary.json rounds to 10 decimals
            assert abs(s["score_minutes"] - want) <= 5e-11, (k, s["score_minutes"], want)
        passed, message = official_rcp(s["folder"], tmp, s["ruleset"])
        verdict = {"Pass": True, "Fail": False, "": False}[row["maskrcnn:RCP"]]
        assert s["rcp"]["passed"] == passed == verdict, (k, s["rcp"], passed, row["maskrcnn:RCP"])
        check_rcp_message(s["rcp"]["message"], message)
        ev = events_throughput(s["folder"])
        ips = s["images_per_s_per_accelerator"]
        assert ips is not None and ips > 0, (k, s["throughput_source"])
        if ev is not None:
            worst = max(worst, abs(ips * s["accelerators"] / ev - 1))
            assert abs(ips * s["accelerators"] / ev - 1) <= 1e-9 and s["throughput_source"] == "throughput events", k
        for r in s["runs"]:
            if r["status"] == "success" and r["epochs_to_converge"] is not None:
                assert r["time"]["training_s"] > 0 and r["epochs_trained"] > 0, (k, r["file"], r["time"])
        row = next(cells for cells in (re.split(r"\s{2,}", l.strip()) for l in table.splitlines()) if s["label"] in cells)
        assert s["ruleset"] in row, (k, s["label"], row)
    print(f"{', '.join(pathlib.Path(t).name for t in trees)}: {len(got)} systems, each by its round's rules; scores, "
          f"RCP verdicts and messages equal the official tools' of that round; images/s from the throughput events "
          f"(largest relative difference {worst:.1e}) or the epochs")
    return got


def strip_epochs(src, dst):
    """The results with every epoch_start, epoch_stop and throughput record removed: logs of blocks."""
    for log in src.rglob("result_*.txt"):
        out = dst / log.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(line for line in log.read_text("latin-1").splitlines(keepends=True)
                               if not any(f'"key": "{k}"' in line for k in ("epoch_start", "epoch_stop", "throughput"))),
                       "latin-1")
    for desc in src.rglob("systems/*.json"):
        (dst / desc.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(desc, dst / desc.relative_to(src))


def main():
    with env.scratch_dir("report-rounds") as tmp:
        tmp = pathlib.Path(tmp)
        with tarfile.open(FIXTURE) as tar:
            tar.extractall(tmp / "public", filter="data")
        trees = [tmp / "public" / r for r in ROUNDS]
        got = check_trees(trees, tmp)
        assert len(got) == 11, sorted(got)

        # Logs of blocks: Google's TPUs train in their blocks, and say so.
        for k in (("1.0.0", "Google", "tpu-v4-128-TF"), ("2.0.0", "Google", "cloud-tpu-v4-2048-TF")):
            s = got[k]
            assert s["block_counted_runs"] == 5 and s["throughput_source"] == BLOCKS, (k, s["throughput_source"])
            assert s["mean_time"]["training_s"] > s["mean_time"]["idle_s"], (k, s["mean_time"])
            print(f"{k[2]}: {s['images_per_s_per_accelerator']:.1f} images/s per accelerator from its blocks; "
                  f"mean time per run: {s['mean_time']['training_s']:.0f} s training, "
                  f"{s['mean_time']['eval_inference_s']:.0f} s evaluation, {s['mean_time']['idle_s']:.0f} s idle")
        # v1.0's Google and Supermicro logs log their division late: the 1.0.0 rules score them.
        assert got[("1.0.0", "Google", "tpu-v4-128-TF")]["score_minutes"] is not None
        assert got[("1.0.0", "Supermicro", "SYS-420GP-TNAR+")]["score_minutes"] is not None
        # Dell's runs at two batch sizes: the message says what was found.
        dell = got[("2.1.0", "Dell", "32xXE8545x4A100-SXM-40GB")]["rcp"]["message"]
        assert dell == "global batch size differs between runs (256 x4, 128 x1)", dell
        # The A30 at a batch of 8: a point of 2.0.0's RCPs (1.0.0 and 1.1.0 have none below 48).
        assert got[("2.0.0", "NVIDIA", "2xa30_ngc22.04_pytorch")]["rcp"]["message"] == "RCP found"

        # The same logs without epochs or throughput events: images/s and the scores from the blocks.
        strip_epochs(tmp / "public", tmp / "blocks")
        bare, _ = report([tmp / "blocks" / r for r in ROUNDS], tmp)
        for s in bare["systems"]:
            k = (s["ruleset"],) + key(s)
            ratio = s["images_per_s_per_accelerator"] / got[k]["images_per_s_per_accelerator"]
            assert s["block_counted_runs"] == len(s["runs"]) and s["throughput_source"] == BLOCKS, (k, s["throughput_source"])
            assert abs(ratio - 1) <= 0.15 and s["score_minutes"] == got[k]["score_minutes"], (k, ratio)
            if got[k]["throughput_source"] == "throughput events":
                print(f"{k[2]} ({k[0]}) from its blocks alone: {ratio:.3f}x the throughput events' images/s")

        # Read by the 3.1.0 rules instead: v1.0's late division fails every run, and no score.
        v10 = tmp / "public" / "training_results_v1.0"
        as_310, _ = report([v10], tmp, "--ruleset", "3.1.0")
        off_310 = official_scores(v10, "3.1.0", tmp)
        for s in as_310["systems"]:
            assert s["ruleset"] == "3.1.0" and s["ruleset_source"] == "given", s["ruleset"]
            want = off_310[key(s)]["maskrcnn:time_to_train"]
            assert (s["score_minutes"] is None) == (want is None), (key(s), s["score_minutes"], want)
            if want is None:
                assert s["score_note"].startswith("no score: 5 runs fail the compliance check"), s["score_note"]
        print("training_results_v1.0 by the 3.1.0 rules: " + "; ".join(
            f"{key(s)[1]} {'no score' if s['score_minutes'] is None else format(s['score_minutes'], '.2f') + ' min'}"
            for s in as_310["systems"]) + " (result_summarizer 3.1.0 alike)")

        # The page, four rounds side by side.
        rep, _ = report(trees, tmp, "--html", tmp / "html")
        labels = {s["label"] for s in rep["systems"]}
        assert len(labels) == len(rep["systems"]), labels
        page = (tmp / "html" / "index.html").read_text()
        for r in rep["rulesets"]:
            assert f"<td>{r}</td>" in page, r
        report_page.check(tmp / "html" / "index.html", {s["label"]: s for s in rep["systems"]})

        extra = [pathlib.Path(p) for p in os.environ.get("MRCNN_PUBLIC_RESULTS", "").split(os.pathsep) if p]
        if extra:
            (tmp / "extra").mkdir()
            check_trees(extra, tmp / "extra")


if __name__ == "__main__":
    main()
