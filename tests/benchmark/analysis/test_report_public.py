"""`mlperf-maskrcnn report` on published MLPerf Training results, against the official tools.

The fixture (public_v3.0_maskrcnn.tar.xz, made by make_public_fixture.py from
mlcommons/training_results_v3.0; logs trimmed of their tracked_stats records) holds NVIDIA's DGX H100
results at 1, 8 and 48 nodes (one run aborted at 8 nodes; train_samples logged as 40000 and 20000
while every epoch is COCO's 117,266 images) and Dell's XE8545 A100 results at 1, 2 and 4 nodes
(train_samples 80000 at one node), with one BERT result beside them. `report` reads the whole tree
and, per system, must give:
  - the score result_summarizer computes (ruleset 3.0.0, the round's) and its RCP verdict, and the
    rcp_checker's message (ruleset 3.1.0: the Mask R-CNN RCPs of 2.1.0, 3.0.0 and 3.1.0 are one file);
  - images/s per accelerator equal to the median of the log's own throughput events; the same logs
    stripped of their throughput events give the epochs x 117,266 figure, within 10 % of the events'
    (the independent check); train_samples named as not used;
  - submitter, accelerator model and count, nodes and framework from systems/<name>.json, and the
    scaling efficiency of each node count against the smallest, from the official scores;
  - no system for the BERT result and no word of it.
The same logs marked as the open division show the RCP as not applying. The HTML page is checked in
headless Chromium (tests/report_page.py): numbers, no overlapping labels, a screenshot.

MRCNN_PUBLIC_RESULTS=PATH[:PATH...] (whole training_results_vX.Y checkouts) runs the same checks on
every Mask R-CNN result in them, for example:
    MRCNN_PUBLIC_RESULTS=/src/training_results_v3.0:/src/training_results_v2.1 \\
        .venv/bin/python tests/benchmark/analysis/test_report_public.py
"""
import json
import os
import pathlib
import re
import shutil
import statistics
import tarfile

import mrcnn_testenv as env
import report_page

FIXTURE = pathlib.Path(__file__).with_name("public_v3.0_maskrcnn.tar.xz")
COCO_TRAIN = 117266


def report(paths, cwd, *extra):
    js = pathlib.Path(cwd) / "report.json"
    p = env.run([env.mlperf_maskrcnn(), "report", *paths, "--json", js, *extra], cwd=cwd)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stderr == "", p.stderr[-2000:]
    return json.loads(js.read_text())["systems"], p.stdout


def ruleset_of(tree):
    m = re.search(r"v(\d+)\.(\d+)", pathlib.Path(tree).name)
    assert m, f"{tree}: name a training_results_vX.Y checkout"
    return f"{m.group(1)}.{m.group(2)}.0"


def official_summary(tree, cwd):
    """{system folder name: result_summarizer's row}, every submitter of the tree."""
    rows = {}
    for org in sorted(p for p in pathlib.Path(tree).iterdir() if (p / "results").is_dir()):
        out = pathlib.Path(cwd) / "summarizer" / org.name
        out.mkdir(parents=True, exist_ok=True)
        p = env.run([env.PYTHON, "-m", "mlperf_logging.result_summarizer", org, "training", ruleset_of(tree)], cwd=out)
        assert (out / "summary.json").is_file(), p.stdout[-3000:] + p.stderr[-3000:]
        for row in json.loads((out / "summary.json").read_text()):
            if row.get("maskrcnn:time_to_train") is not None or row.get("maskrcnn:RCP"):
                rows[pathlib.Path(row["details_url"]).stem] = row
    return rows


def official_rcp(folder, cwd, ruleset="3.1.0"):
    """The official rcp_checker of `ruleset` on one system's folder: (passed, its message), or
    (False, None) where it raises on runs of different batch sizes (v2.1 Dell 32xXE8545 has one run
    at 128 among four at 256; result_summarizer leaves its RCP column empty)."""
    p = env.run([env.PYTHON, "-m", "mlperf_logging.rcp_checker", "--rcp_version", ruleset, "--log_output",
                 pathlib.Path(cwd) / "rcp.log", folder], cwd=cwd)
    text = p.stdout + p.stderr
    if "Batch sizes in files do not match" in text and "KeyError" in text:
        return False, None
    m = re.search(r"(?:INFO|ERROR) - (.*), RCP test (PASSED|FAILED)", text)
    assert m, text[-2000:]
    return m.group(2) == "PASSED", m.group(1)


def check_rcp_message(got, official):
    """`report`'s RCP message beside the official one; where the official checker raised, `report`
    says what the runs logged."""
    if official is None:
        assert re.fullmatch(r"global batch size differs between runs \(\d+ x\d+(, \d+ x\d+)+\)", got), got
    else:
        assert got == official, (got, official)


def events_throughput(folder):
    """The median over the runs of each log's median `throughput` event (images/s of the system)."""
    medians = []
    for log in sorted(pathlib.Path(folder).glob("result_*.txt")):
        values = [r["value"] for r in env.mllog_records(log) if r.get("key") == "throughput"]
        if values:
            medians.append(statistics.median(values))
    return statistics.median(medians) if medians else None


def check_tree(tree, tmp):
    """Every Mask R-CNN system of a training_results tree against the official tools; returns the
    report's systems by folder."""
    systems, table = report([tree], tmp)
    official = official_summary(tree, tmp)
    by_folder = {pathlib.Path(s["folder"]).parent.name: s for s in systems}
    assert set(by_folder) == set(official), (sorted(set(by_folder) ^ set(official)))
    worst = 0.0
    for name, s in by_folder.items():
        row = official[name]
        want = row["maskrcnn:time_to_train"]
        assert (s["score_minutes"] is None) == (want is None), (name, s["score_minutes"], want)
        if want is not None:  # summary.json rounds to 10 decimals
            assert abs(s["score_minutes"] - want) <= 5e-11, (name, s["score_minutes"], want)
        passed, message = official_rcp(s["folder"], tmp)
        verdict = {"Pass": True, "Fail": False, "": False}[row["maskrcnn:RCP"]]
        assert s["rcp"]["passed"] == passed == verdict, (name, s["rcp"], passed, row["maskrcnn:RCP"])
        check_rcp_message(s["rcp"]["message"], message)
        assert s["submitter"] == row["submitter"] and s["accelerator_model"] == row["accelerator_model_name"], (name, s)
        assert s["accelerators"] == int(row["accelerators_count"]) and s["nodes"] == int(row["number_of_nodes"]), (name, s)
        assert s["framework"] == row["framework"], (name, s["framework"], row["framework"])
        if want is not None:
            assert abs(s["accelerator_hours"] - want / 60 * s["accelerators"]) < 1e-9, (name, s["accelerator_hours"])
        events = events_throughput(s["folder"])
        if events is not None:
            mine = s["images_per_s_per_accelerator"] * s["accelerators"]
            worst = max(worst, abs(mine / events - 1))
            assert abs(mine / events - 1) <= 1e-9, (name, mine, events)  # the runs' median of their medians
            assert s["throughput_source"] == "throughput events", (name, s["throughput_source"])
    assert "bert" not in table.lower(), "the BERT results were mentioned"
    print(f"{tree}: {len(by_folder)} systems; scores, RCP verdicts and messages equal the official tools'; "
          f"images/s from the logs' throughput events (largest relative difference {worst:.1e})")
    return by_folder


def strip_throughput(src, dst):
    dst.mkdir(parents=True)
    for log in sorted(src.glob("result_*.txt")):
        lines = log.read_text("latin-1").splitlines(keepends=True)
        (dst / log.name).write_text("".join(l for l in lines if '"key": "throughput"' not in l), "latin-1")


def main():
    with env.scratch_dir("report-public") as tmp:
        tmp = pathlib.Path(tmp)
        with tarfile.open(FIXTURE) as tar:
            tar.extractall(tmp / "public", filter="data")
        tree = tmp / "public" / "training_results_v3.0"
        got = check_tree(tree, tmp)
        assert len(got) == 6, got.keys()

        # NVIDIA's train_samples (40000 at one node, 20000 at more) is named and not used.
        one = got["dgxh100_ngc23.04_pytorch"]
        assert "train_samples 40000 not used" in one["throughput_note"], one["throughput_note"]
        assert "train_samples 20000 not used" in got["dgxh100_n48_ngc23.04_pytorch"]["throughput_note"]
        assert 170 < one["images_per_s_per_accelerator"] < 190, one["images_per_s_per_accelerator"]

        # Scaling: each node count against the smallest, from the official scores.
        for base, others in (("dgxh100_ngc23.04_pytorch", ("dgxh100_n8_ngc23.04_pytorch", "dgxh100_n48_ngc23.04_pytorch")),
                             ("XE8545x4A100-SXM-40GB", ("2xXE8545x4A100-SXM-40GB", "4xXE8545x4A100-SXM-40GB"))):
            b = got[base]
            assert b["scaling"]["efficiency"] == 1.0, b["scaling"]
            for name in others:
                s = got[name]
                speedup = b["score_minutes"] / s["score_minutes"]
                want = speedup / (s["nodes"] / b["nodes"])
                assert abs(s["scaling"]["efficiency"] - want) < 1e-12 and s["scaling"]["base"] == base, (name, s["scaling"], want)
                print(f"{name}: {speedup:.2f}x faster than {base} on {s['nodes']}x the nodes: efficiency {want:.3f}")

        # Without throughput events: epochs x COCO's 117,266 images over the training time.
        bare = tmp / "bare" / "NVIDIA" / "results"
        for name in ("dgxh100_ngc23.04_pytorch", "dgxh100_n48_ngc23.04_pytorch", "XE8545x4A100-SXM-40GB"):
            src = tree / ("Dell" if name.startswith("XE") else "NVIDIA") / "results" / name / "maskrcnn"
            strip_throughput(src, bare / name / "maskrcnn")
        (tmp / "bare" / "NVIDIA" / "systems").mkdir()
        for sys_file in (tree / "NVIDIA" / "systems").glob("*.json"):
            shutil.copy(sys_file, tmp / "bare" / "NVIDIA" / "systems")
        shutil.copy(tree / "Dell" / "systems" / "XE8545x4A100-SXM-40GB.json", tmp / "bare" / "NVIDIA" / "systems")
        bare_systems, _ = report([tmp / "bare"], tmp)
        for s in bare_systems:
            name = pathlib.Path(s["folder"]).parent.name
            with_events = got[name]["images_per_s_per_accelerator"]
            ratio = s["images_per_s_per_accelerator"] / with_events
            assert s["throughput_source"] == f"epochs x {COCO_TRAIN} (COCO train2017)", s["throughput_source"]
            assert abs(ratio - 1) <= 0.10 and "not used" in s["throughput_note"], (name, ratio, s["throughput_note"])
            print(f"{name} without throughput events: {s['images_per_s_per_accelerator']:.1f} images/s per accelerator "
                  f"from epochs x {COCO_TRAIN}, {ratio:.3f}x the events' figure")

        # The open division: the RCP does not apply.
        open_tree = tmp / "open" / "results" / "dgxh100_ngc23.04_pytorch" / "maskrcnn"
        open_tree.mkdir(parents=True)
        for log in (tree / "NVIDIA" / "results" / "dgxh100_ngc23.04_pytorch" / "maskrcnn").glob("result_*.txt"):
            text = log.read_text("latin-1").replace('"key": "submission_division", "value": "closed"',
                                                    '"key": "submission_division", "value": "open"')
            (open_tree / log.name).write_text(text, "latin-1")
        (tmp / "open" / "systems").mkdir()
        shutil.copy(tree / "NVIDIA" / "systems" / "dgxh100_ngc23.04_pytorch.json", tmp / "open" / "systems")
        opened, table = report([tmp / "open"], tmp)
        assert opened[0]["division"] == "open" and opened[0]["rcp"]["applies"] is False, opened[0]["rcp"]
        assert opened[0]["rcp_normalized_minutes"] is None and "n/a (open)" in table, table[:2000]

        # The page, both trees side by side.
        systems, _ = report([tree, tmp / "open"], tmp, "--html", tmp / "html")
        labels = {s["label"] for s in systems}
        assert len(labels) == len(systems) == 7, labels
        assert "dgxh100_ngc23.04_pytorch [open]" in labels, labels
        seen = report_page.check(tmp / "html" / "index.html", {s["label"]: s for s in systems})
        assert seen is None or len(seen["svgs"]) == 5 + len(systems), len(seen["svgs"])

        extra = [pathlib.Path(p) for p in os.environ.get("MRCNN_PUBLIC_RESULTS", "").split(os.pathsep) if p]
        for path in extra:
            (tmp / path.name).mkdir()
            check_tree(path, tmp / path.name)
        if extra:  # the whole trees side by side on one page
            systems, _ = report(extra, tmp, "--html", tmp / "html-public")
            report_page.check(tmp / "html-public" / "index.html", {s["label"]: s for s in systems})
            shutil.copy(tmp / "html-public" / "screenshot.png", tmp.parent / "mrcnn-report-public-screenshot.png")


if __name__ == "__main__":
    main()
