"""`mlperf-maskrcnn report` end to end, against the official tools and a real browser.

Two local "systems" (cpu-dev with 2 and with 1 intra-op thread per rank) each make five short timed
runs through run_scripts/run_and_time.sh (a tiny synthetic set, the targets lowered), which files
the logs and keeps the run folders. Then:
  1. `report` on the results tree: per system, the score equals the official result_summarizer's
     on the same runs laid out as a submission, and the RCP verdict and message equal the official
     rcp_checker's; the time breakdown adds up to the runs' time to train.
  2. `report` on the submission folder gives the same scores (systems/<name>.json read there).
  The first run of one system is profiled (train --profile): its Chrome trace and per-stage table
  are kept and the report shows the table.
  3. The HTML page in headless Chromium (tests/report_page.py): it renders, every plot has a size,
     no two labels of a plot overlap, and every number in its tables equals the JSON report's value.
  4. Bad input: a folder without results, a missing folder, a bad --price: exit 2, one clear line.
"""
# Its timed runs train systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import json
import os
import pathlib
import re
import shutil

import mrcnn_testenv as env
import report_page

SCRIPT = env.SOURCE_DIR / "run_scripts" / "run_and_time.sh"
SYSTEMS = {"cpu-dev-2t": 2, "cpu-dev-1t": 1}


def make_results(tmp):
    data = env.synth_dataset(tmp / "data", "--train", "96", "--val", "16", "--seed", "4")
    base = json.loads((env.SOURCE_DIR / "systems" / "cpu-dev.json").read_text())
    for name, threads in SYSTEMS.items():
        s = json.loads(json.dumps(base))
        s["system"]["system_name"] = name
        s["launch"]["threads_per_rank"] = threads
        file = tmp / f"{name}.json"
        file.write_text(json.dumps(s, indent=2))
        for i in range(5):
            extra = (f'--quiet --set run.data_dir="{data}" --set run.max_epochs=5 --set run.target_bbox=0.01 '
                     f'--set run.target_segm=0.01 --set data.loader_threads=1')
            if name == "cpu-dev-2t" and i == 0:
                extra += " --profile 4@3"  # a profiled run: its per-stage table reaches the report
            e = dict(os.environ, SYSTEM=name, SYSTEM_FILE=str(file), BUILD_DIR=str(env.BUILD_DIR), SEED=str(i + 1),
                     RESULT_INDEX=str(i), RESULTS_DIR=str(tmp / "results"), EXTRA_ARGS=extra)
            p = env.run(["bash", SCRIPT], env=e, timeout=600)
            assert p.returncode in (0, 3), p.stdout[-2000:] + p.stderr[-3000:]
            kept = tmp / "results" / name / "maskrcnn" / "runs" / f"result_{i}"
            for f in ("mlperf_log.txt", "metrics.jsonl", "config.json", "fingerprint.json"):
                assert (kept / f).is_file(), f"run_and_time.sh did not keep {kept / f}"
    return tmp / "results"


def submission(tmp, results):
    """The results laid out as a submission (what result_summarizer and package_checker read)."""
    org = tmp / "submission" / "mlperf-maskrcnn"
    for name in SYSTEMS:
        (org / "systems").mkdir(parents=True, exist_ok=True)
        desc = json.loads((tmp / f"{name}.json").read_text())["system"]
        (org / "systems" / f"{name}.json").write_text(json.dumps(desc, indent=2))
        dest = org / "results" / name / "maskrcnn"
        dest.mkdir(parents=True)
        for log in sorted((results / name / "maskrcnn").glob("result_*.txt")):
            shutil.copy(log, dest / log.name)
    return org


def report(paths, out_dir, *extra):
    js = out_dir / "report.json"
    p = env.run([env.mlperf_maskrcnn(), "report", *paths, "--json", js, *extra], cwd=out_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    return {s["system"]: s for s in json.loads(js.read_text())["systems"]}, p.stdout


def official_scores(org, cwd):
    p = env.run([env.PYTHON, "-m", "mlperf_logging.result_summarizer", org, "training", "3.1.0"], cwd=cwd)
    summary = pathlib.Path(cwd) / "summary.json"
    assert summary.is_file(), p.stdout[-3000:] + p.stderr[-3000:]
    return {r["system"]: r["maskrcnn:time_to_train"] for r in json.loads(summary.read_text())}


def official_rcp(folder, cwd):
    p = env.run([env.PYTHON, "-m", "mlperf_logging.rcp_checker", "--rcp_version", "3.1.0", "--log_output",
                 pathlib.Path(cwd) / "rcp.log", folder], cwd=cwd)
    text = p.stdout + p.stderr
    m = re.search(r"(?:INFO|ERROR) - (.*), RCP test (PASSED|FAILED)", text)
    assert m, text[-2000:]
    return m.group(2) == "PASSED", m.group(1)


def main():
    with env.scratch_dir("report") as tmp:
        tmp = pathlib.Path(tmp)
        results = make_results(tmp)

        # 1. results tree: score and RCP against the official tools
        got, table = report([results], tmp, "--html", tmp / "html", "--price", "cpu-dev-2t=3.5")
        assert set(got) == set(SYSTEMS), got.keys()
        org = submission(tmp, results)
        scores = official_scores(org, tmp)
        for name, s in got.items():
            assert s["runs_count"] == 5, s
            # result_summarizer's summary.json holds the score rounded to 10 decimals
            assert s["score_minutes"] is not None and abs(s["score_minutes"] - scores[name]) <= 5e-11, \
                (name, s["score_minutes"], scores[name])
            passed, msg = official_rcp(results / name / "maskrcnn", tmp)
            assert (s["rcp"]["passed"], s["rcp"]["message"]) == (passed, msg), (name, s["rcp"], passed, msg)
            assert s["accelerators"] == 1 and not s["has_accelerators"], s
            # the harness's own runs: the images their kept steps cover, train_samples agreeing
            assert s["images_per_s_per_accelerator"] > 0, s
            assert s["throughput_source"] == "steps x global_batch_size (metrics.jsonl)", s["throughput_source"]
            assert s["throughput_note"] == "", s["throughput_note"]
            for r in s["runs"]:
                t = r["time"]
                parts = t["training_s"] + t["eval_inference_s"] + t["final_scoring_wait_s"] + t["idle_s"]
                assert abs(parts - r["minutes"] * 60) < 1e-6, (r["file"], t, r["minutes"])
                assert t["training_s"] > 0 and t["init_s"] > 0, t
            print(f"{name}: score {s['score_minutes']:.6f} min = result_summarizer's; RCP "
                  f"{'pass' if passed else 'fail'} '{msg}' = rcp_checker's; "
                  f"{s['images_per_s_per_accelerator']:.1f} img/s per host processor")
        assert got["cpu-dev-2t"]["cost_per_result"] == got["cpu-dev-2t"]["score_minutes"] / 60 * 3.5
        # the profiled run: a Chrome trace, the per-stage table, and the table in the report
        kept = results / "cpu-dev-2t" / "maskrcnn" / "runs" / "result_0"
        trace = json.loads((kept / "profile_trace.json").read_text())
        assert any(e.get("name") == "mrcnn::backward" for e in trace["traceEvents"]), "no mrcnn::backward in the trace"
        profile = json.loads((kept / "profile.json").read_text())
        assert profile["steps"] == 4 and profile["first_step"] == 3, profile
        stages = {st["stage"]: st for st in got["cpu-dev-2t"]["stages"]}
        assert got["cpu-dev-2t"]["profiled_runs"] == 1 and got["cpu-dev-1t"]["profiled_runs"] == 0
        for name in ("data_wait", "train_step", "forward", "backbone", "rpn", "roi_box", "roi_mask", "backward", "optimizer"):
            assert name in stages and stages[name]["per_step_ms"] > 0, (name, stages.keys())
        inner = sum(stages[n]["per_step_ms"] for n in ("forward", "backward", "optimizer"))
        assert inner <= stages["train_step"]["per_step_ms"] * 1.001, (inner, stages["train_step"])
        assert "per-stage time of a training step" in table, table
        print(f"profile: {len(stages)} stages; forward {stages['forward']['per_step_ms']:.1f} ms, backward "
              f"{stages['backward']['per_step_ms']:.1f} ms of a {stages['train_step']['per_step_ms']:.1f} ms step")
        assert got["cpu-dev-1t"]["cost_per_result"] is None
        assert "cpu-dev-2t" in table and "score (min)" in table, table

        # 2. the submission folder gives the same scores
        sub, _ = report([org], tmp)
        for name in SYSTEMS:
            assert sub[name]["score_minutes"] == got[name]["score_minutes"], name
            assert sub[name]["accelerators"] == 1, sub[name]

        # audit of two results folders: result_N against result_N, the same seeds on 2 and 1 threads
        p = env.run([env.mlperf_maskrcnn(), "audit", results / "cpu-dev-2t", results / "cpu-dev-1t"])
        assert p.returncode == 3 and "5 pairs:" in p.stdout, (p.returncode, p.stdout[-2000:], p.stderr)
        assert p.stdout.count("differ in setup: threads.intra_op 2 vs 1") >= 5, p.stdout[-3000:]
        p = env.run([env.mlperf_maskrcnn(), "audit", results / "cpu-dev-1t" / "maskrcnn", results / "cpu-dev-1t"])
        assert p.returncode == 0 and p.stdout.count("bit-identical") == 10, p.stdout[-2000:]
        print("audit of two results folders: 5 pairs, each explained by the intra-op threads (exit 3)")

        # 3. the page in a real browser
        page = tmp / "html" / "index.html"
        # score, throughput, box and mask AP, time; one accuracy plot per system
        assert page.is_file() and len(list(page.parent.glob("*.svg"))) == 5 + len(SYSTEMS)
        seen = report_page.check(page, got)
        assert seen is None or len(seen["svgs"]) == 5 + len(SYSTEMS), seen["svgs"]

        # 4. bad input
        (tmp / "empty").mkdir()
        for args, text in (([tmp / "empty"], "no results found"), ([tmp / "nowhere"], "does not exist"),
                           ([results, "--price", "x=abc"], "--price x=abc")):
            p = env.run([env.mlperf_maskrcnn(), "report", *args])
            assert p.returncode == 2 and text in p.stderr and p.stderr.count("\n") == 1, (args, p.returncode, p.stderr)
        print("bad input: exit 2 with one line naming the folder or argument")


if __name__ == "__main__":
    main()
