"""`mlperf-maskrcnn forecast`: a system's score from one measured node, and the method on published results.

1. Generated results with known times (first step 2 s, epochs of 60 s after a first of 50 s, eval
   pauses of 3 s, a tail of 12 s, 14 epochs, batch 12 on 8 accelerators, global 96): the forecast of
   the node onto itself takes back each part exactly (the step 60 s / 1222 steps, the pauses, the
   tail, the first step, the measured epochs); 2 nodes add the ring all-reduce of the published
   harnesses' float16 gradient (2 (N-1)/N x 88.26 MB over the described 200 Gb/s at 1/1.1 of the
   line rate, 5 us a hop) and take the RCP's epochs at the new global batch; a second measured batch
   replaces the assumed fixed cost (the batch is then interpolated, no k in the band); a global
   batch beyond the RCP table is refused, as the RCP check would refuse its result; --nodes with
   --global-batch auto takes the fastest batch with an RCP.
2. The published fixture (NVIDIA DGX H100 at 1, 8 and 48 nodes; Dell XE8545 4xA100 at 1, 2 and 4):
   `--validate` projects each base onto itself within 1 % of its own score, forecasts the 8-node
   DGX and the 2- and 4-node Dells within 15 %, and flags the 48-node DGX (dedicated evaluation
   ranks, batch 1) rather than scoring it silently.
3. The page (--html, --published): the table's numbers equal the JSON's, two plots (minutes against
   nodes with the band and the published scores; where the time goes), no label overlapping or cut
   off in headless Chromium; 48 nodes refused (even one image an accelerator is a global batch of
   384, beyond the RCP table).
4. Broken system descriptions (a copy of the fixture): a description that is not JSON, one whose
   number_of_nodes is not a count, one with accelerators of no model, and a folder where a result
   file should be. `report` names each and shows the figures that need the counts as unknown
   (none of the 8x-too-high images/s per accelerator a one-accelerator guess gave); `forecast`
   refuses those targets, naming the file.

MRCNN_PUBLIC_RESULTS=PATH[:PATH...] (whole training_results_v2.1 and v3.0 checkouts) validates on
every series in them: at least 10 of the 13 distinct pairs within 15 % and 11 within 25 %, every
pair whose target trains at least 2 images an accelerator without dedicated evaluation ranks within
15 %.
"""
import json
import math
import os
import pathlib
import shutil
import tarfile

import mrcnn_testenv as env
import report_page

FIXTURE = pathlib.Path(__file__).with_name("public_v3.0_maskrcnn.tar.xz")
COCO_TRAIN = 117266


def forecast(args, cwd, expect=0):
    js = pathlib.Path(cwd) / "forecast.json"
    if js.exists():
        js.unlink()
    p = env.run([env.mlperf_maskrcnn(), "forecast", *args, "--json", js], cwd=cwd)
    assert p.returncode == expect, (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return (json.loads(js.read_text()) if expect == 0 else None), p


def mllog(key, t, value=None, **meta):
    rec = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value,
           "metadata": {"file": "gen.py", "lineno": 1, **meta}}
    return ":::MLLOG " + json.dumps(rec) + "\n"


def generated_run(first_s, epoch1_s, epoch_s, pause_s, tail_s, epochs, global_batch, batch, status="success",
                  rank_steps=None, max_steps=None):
    t = 1_700_000_000_000.0
    lines = [mllog("submission_benchmark", t, "maskrcnn"), mllog("submission_division", t, "open"),
             mllog("submission_org", t, "gen"), mllog("global_batch_size", t, global_batch),
             mllog("train_samples", t, COCO_TRAIN),
             mllog("d_batch_size", t, batch), mllog("init_start", t - 5000), mllog("init_stop", t),
             mllog("run_start", t)]
    if max_steps:  # a measurement (run.max_steps_per_epoch): every epoch cut to this many steps
        lines.append(mllog("max_steps_per_epoch", t, max_steps))
    t += first_s * 1000
    for e in range(1, epochs + 1):
        lines.append(mllog("epoch_start", t, epoch_num=e))
        t += (epoch1_s if e == 1 else epoch_s) * 1000
        lines.append(mllog("epoch_stop", t, epoch_num=e))
        if rank_steps:  # this project's harness: every rank's own step, median and p95
            lines.append(mllog("rank_step_seconds", t, {"median": [m for m, _ in rank_steps],
                                                        "p95": [p for _, p in rank_steps]}, epoch_num=e))
        lines.append(mllog("eval_accuracy", t + 500, {"BBOX": 0.1 + 0.02 * e, "SEGM": 0.1 + 0.02 * e}, epoch_num=e))
        if e < epochs:
            t += pause_s * 1000
    t += tail_s * 1000
    lines.append(mllog("run_stop", t, None, status=status))
    return "".join(lines)


def generated_system(root, name, nodes, per_node, global_batch, batch, epoch_s, network="2x 100Gb/s", status="success",
                     rank_steps=None, max_steps=None):
    folder = root / "gen" / "results" / name / "maskrcnn"
    folder.mkdir(parents=True)
    for i in range(5):
        (folder / f"result_{i}.txt").write_text(generated_run(2.0, 50.0, epoch_s, 3.0, 12.0, 14, global_batch, batch, status,
                                                              rank_steps, max_steps))
    desc = {"submitter": "gen", "division": "open", "system_name": name, "number_of_nodes": str(nodes),
            "accelerators_per_node": str(per_node), "accelerator_model_name": "Test GPU", "framework": "test",
            "host_networking": network}
    (root / "gen" / "systems").mkdir(exist_ok=True)
    (root / "gen" / "systems" / f"{name}.json").write_text(json.dumps(desc))
    return folder.parent


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def check_generated(tmp):
    root = tmp / "gen-tree"
    generated_system(root, "node-b12", 1, 8, 96, 12, 60.0)
    out, p = forecast(["--measured", root, "--nodes", "1,2", "--global-batch", "96"], tmp)
    one, two = out["forecasts"]
    steps = math.ceil(COCO_TRAIN / 96)
    parts = one["parts_s"]
    assert parts["steps_per_epoch"] == steps and parts["epochs"] == 14, parts
    assert close(parts["step_compute"], 60.0 / steps) and parts["step_allreduce"] == 0, parts
    assert close(parts["compute"], 14 * 60.0) and close(parts["eval_pauses"], 13 * 3.0), parts
    assert close(parts["tail"], 12.0) and close(parts["first_step"], 2.0), parts
    assert close(one["minutes"], (2 + 14 * 60 + 13 * 3 + 12) / 60), one
    assert one["batch_source"] == "measured" and one["low"] == one["high"] == one["minutes"], one
    # Two nodes at the same global batch: 6 images an accelerator, the ring over 200 Gb/s.
    parts2 = two["parts_s"]
    ring = 2 * 1 / 2 * 44.13e6 * 2 / (200e9 / 8 / 1.1) + 2 * 1 * 5e-6
    assert close(parts2["step_allreduce"], ring, 1e-6), (parts2, ring)
    assert close(parts2["step_compute"], 60.0 / steps * (6 + 2) / (12 + 2)), parts2
    assert two["batch_source"] == "extrapolated" and "batch extrapolated" in two["flags"], two
    assert close(parts2["eval_pauses"], 13 * 3.0 * 8 / 16) and close(parts2["tail"], 12 - 3 + 3 * 8 / 16), parts2
    assert two["low"] < two["minutes"] < two["high"], two
    assert any(w in two["dominant"] for w in ("fixed cost", "network")) and two["remedy"], two
    print(f"generated node: parts back exactly ({one['minutes']:.4f} min); 2 nodes {two['minutes']:.4f} min "
          f"({two['low']:.3f}-{two['high']:.3f}), all-reduce {parts2['step_allreduce'] * 1e3:.3f} ms a step")

    # A second measured batch: 6 an accelerator (global 48) at 70 s an epoch of 2444 steps (more
    # time an image than at 12: the fixed cost a step).
    generated_system(root, "node-b6", 1, 8, 48, 6, 70.0)
    out, _ = forecast(["--measured", root, "--nodes", "1", "--global-batch", "64"], tmp)
    f = out["forecasts"][0]
    t12, t6 = 60.0 / steps, 70.0 / math.ceil(COCO_TRAIN / 48)
    want = t6 + (t12 - t6) / 6 * (8 - 6)
    assert close(f["parts_s"]["step_compute"], want), (f["parts_s"], want)
    assert "fixed cost" not in (f["dominant"] or "") and f["parts_s"]["epochs"] == 14, f  # RCP 64: 14 epochs
    # Beyond the RCP table: refused; auto picks the fastest global batch that has an RCP.
    out, _ = forecast(["--measured", root, "--nodes", "8", "--global-batch", "768"], tmp)
    assert "no RCP" in out["forecasts"][0]["refused"], out
    auto, _ = forecast(["--measured", root, "--nodes", "2,4"], tmp)
    for f in auto["forecasts"]:
        assert f["refused"] is None and f["global_batch_size"] <= 272, f
    # Runs stopped at their epoch budget (not converged) still time the node; the epochs then come
    # from the RCP (13.7 at global batch 96, between the pruned points 8 and 128: 14).
    stopped = tmp / "stopped-tree"
    generated_system(stopped, "node-stopped", 1, 8, 96, 12, 60.0, status="aborted")
    out, p = forecast(["--measured", stopped, "--nodes", "1", "--global-batch", "96"], tmp)
    f = out["forecasts"][0]
    assert "not converged" in p.stdout and f["parts_s"]["epochs"] == 14 and "epochs to converge" in f["dominant"], f
    assert close(f["parts_s"]["step_compute"], 60.0 / steps), f["parts_s"]
    # A measurement's log alone (no metrics.jsonl): its epochs hold the steps it was cut to.
    cut = tmp / "cut-tree"
    generated_system(cut, "node-cut", 1, 8, 96, 12, 6.0, status="aborted", max_steps=50)
    out, _ = forecast(["--measured", cut, "--nodes", "1", "--global-batch", "96"], tmp)
    assert close(out["forecasts"][0]["parts_s"]["step_compute"], 6.0 / 50), out["forecasts"][0]["parts_s"]
    print("two measured batches: the step interpolated between them; global batch 768 refused; a run stopped at "
          "its budget measures the step (epochs from the RCP); auto: "
          + ", ".join(f"{f['nodes']} nodes at global batch {f['global_batch_size']}" for f in auto["forecasts"]))


def check_stragglers(tmp):
    """Logged rank_step_seconds grow the step with the ranks: cv * t_compute * (z(R) - z(R0))."""
    from statistics import NormalDist
    root = tmp / "straggler-tree"
    median = 0.05
    ranks = [(median, median * (1 + 1.645 * cv)) for cv in (0.03, 0.04, 0.04, 0.05, 0.04, 0.02, 0.06, 0.04)]
    generated_system(root, "node-timed", 1, 8, 96, 12, 60.0, rank_steps=ranks)
    out, p = forecast(["--measured", root, "--nodes", "1,4", "--global-batch", "128"], tmp)
    assert "spread 4.0 % (8 timed)" in p.stdout, p.stdout
    one, four = out["forecasts"]
    assert one["parts_s"]["step_straggler"] == 0, one

    def z(r):
        return NormalDist().inv_cdf((r - 0.375) / (r + 0.25))
    want = 0.04 * four["parts_s"]["step_compute"] * (z(32) - z(8))
    assert close(four["parts_s"]["step_straggler"], want, 1e-6), (four["parts_s"], want)
    assert four["parts_s"]["stragglers"] > 0 and four["low"] < four["minutes"] < four["high"], four
    # The same runs as `train --out DIR` leaves them (DIR/<run>/mlperf_log.txt, config.json with the
    # description, a `latest` link): one measurement of this project's harness.
    out_dir = tmp / "train-out"
    desc = json.loads((root / "gen" / "systems" / "node-timed.json").read_text())
    for i in range(2):
        run = out_dir / f"20261127T00000{i}Z-seed{i}"
        run.mkdir(parents=True)
        run.joinpath("mlperf_log.txt").write_text(generated_run(2.0, 50.0, 60.0, 3.0, 12.0, 3, 96, 12, "aborted", ranks))
        run.joinpath("config.json").write_text(json.dumps({"system": desc, "run": {"max_steps_per_epoch": 0}}))
    (out_dir / "latest").symlink_to(run.name)
    folder, p = forecast(["--measured", out_dir, "--nodes", "1", "--global-batch", "96"], tmp)
    assert "train-out: 1x8 Test GPU" in p.stdout and "2 run(s)" in p.stdout and "(8 timed)" in p.stdout, p.stdout
    assert close(folder["forecasts"][0]["parts_s"]["step_compute"], 60.0 / math.ceil(COCO_TRAIN / 96)), folder
    print(f"stragglers: 8 ranks timed at a 4.0 % spread add {want * 1e3:.3f} ms a step at 32 ranks "
          f"({four['parts_s']['stragglers'] / 60:.3f} of {four['minutes']:.2f} min)")


def validate(trees, tmp):
    out, p = forecast(["--validate", *trees], tmp)
    return out, p.stdout


def check_fixture(tmp):
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp / "public", filter="data")
    tree = tmp / "public" / "training_results_v3.0"
    out, table = validate([tree], tmp)
    rows = {(r["measured"], r["target"]): r for r in out["rows"]}
    for r in out["rows"]:
        if r["self"]:
            assert abs(r["error"]) <= 0.01, r
    nv8 = rows[("dgxh100_ngc23.04_pytorch", "dgxh100_n8_ngc23.04_pytorch")]
    nv48 = rows[("dgxh100_ngc23.04_pytorch", "dgxh100_n48_ngc23.04_pytorch")]
    assert abs(nv8["error"]) <= 0.15, nv8
    assert any("dedicated evaluation ranks" in f for f in nv48["flags"]) and nv48["dedicated_eval_ranks"] == 128, nv48
    for n in (2, 4):
        r = rows[("XE8545x4A100-SXM-40GB", f"{n}xXE8545x4A100-SXM-40GB")]
        assert abs(r["error"]) <= 0.15, r
    assert out["pairs"] == 4, out["pairs"]
    print(table)
    # The project's own system files as targets: the global batch from their hyperparameters, the
    # network from launch.network_gbps; another accelerator than the measured one refused.
    systems = env.SOURCE_DIR / "systems"
    got, _ = forecast(["--measured", tree / "NVIDIA" / "results" / "dgxh100_ngc23.04_pytorch",
                       "--system", systems / "aws-p5.48xlarge-2n.json", "--system", systems / "aws-p3dn.24xlarge-2n.json"], tmp)
    p5, p3dn = got["forecasts"]
    assert p5["refused"] is None and p5["global_batch_size"] == 128 and p5["network_gbps"] == 3200, p5
    assert p5["nodes"] == 2 and p5["accelerators_per_node"] == 8, p5
    assert "another accelerator" in p3dn["refused"], p3dn
    print(f"aws-p5.48xlarge-2n from the one-node DGX H100: {p5['minutes']:.2f} min ({p5['low']:.2f}-{p5['high']:.2f}); "
          f"aws-p3dn.24xlarge-2n refused: {p3dn['refused']}")
    return tree


def check_page(tree, tmp):
    """The DGX H100 node measured, forecast at 1-48 nodes, the published scores beside it."""
    base = tree / "NVIDIA" / "results" / "dgxh100_ngc23.04_pytorch"
    out, p = forecast(["--measured", base, "--nodes", "1,2,4,8,16,48", "--html", tmp / "page", "--published", tree], tmp)
    by_target = {f["target"]: f for f in out["forecasts"]}
    assert "no RCP" in by_target["48 x dgxh100_ngc23.04_pytorch"]["refused"] and "384" in by_target["48 x dgxh100_ngc23.04_pytorch"]["refused"]
    page = tmp / "page" / "index.html"
    text = page.read_text()
    assert "published scores of this node" in text and "ideal scaling from the measured node" in text
    for f in ("scaling.svg", "time.svg"):
        assert (tmp / "page" / f).stat().st_size > 1000, f
    seen = report_page.check(page, by_target, min_cells_per_system=6, title="mlperf-maskrcnn forecast")
    assert seen is None or len(seen["svgs"]) == 2, seen and len(seen["svgs"])


def broken_copy(tree, tmp):
    broken = tmp / "broken" / "training_results_v3.0"
    shutil.copytree(tree, broken)
    systems = broken / "Dell" / "systems"
    (systems / "2xXE8545x4A100-SXM-40GB.json").write_text('{"submitter": "Dell", "number_of_nodes": "2",')  # cut off
    d4 = json.loads((systems / "4xXE8545x4A100-SXM-40GB.json").read_text("latin-1"))
    d4["number_of_nodes"] = "four"
    (systems / "4xXE8545x4A100-SXM-40GB.json").write_text(json.dumps(d4))
    nv = json.loads((broken / "NVIDIA" / "systems" / "dgxh100_n8_ngc23.04_pytorch.json").read_text("latin-1"))
    del nv["accelerator_model_name"]
    (broken / "NVIDIA" / "systems" / "dgxh100_n8_ngc23.04_pytorch.json").write_text(json.dumps(nv))
    res = broken / "Dell" / "results" / "XE8545x4A100-SXM-40GB" / "maskrcnn"
    (res / "result_4.txt").unlink()
    (res / "result_4.txt").mkdir()
    return broken


def check_broken(tree, tmp):
    broken = broken_copy(tree, tmp)
    js = tmp / "broken-report.json"
    p = env.run([env.mlperf_maskrcnn(), "report", broken, "--json", js], cwd=tmp)
    assert p.returncode == 0, p.stderr[-3000:]
    systems = {pathlib.Path(s["folder"]).parent.name: s for s in json.loads(js.read_text())["systems"]}
    for name, why in (("2xXE8545x4A100-SXM-40GB", "not readable as JSON"),
                      ("4xXE8545x4A100-SXM-40GB", 'number_of_nodes is "four"'),
                      ("dgxh100_n8_ngc23.04_pytorch", "of no accelerator_model_name")):
        s = systems[name]
        assert s["described"] is False and s["accelerators"] is None and s["nodes"] is None, s
        assert s["images_per_s_per_accelerator"] is None and s["accelerator_hours"] is None, s
        assert s["score_minutes"] is not None, s  # the score needs no description
        assert any(why in x and f"{name}.json" in x for x in s["problems"]), s["problems"]
        assert why in p.stdout, p.stdout[-3000:]
    dell1 = systems["XE8545x4A100-SXM-40GB"]
    assert any("result_4.txt: not a result file (a folder)" in x for x in dell1["problems"]), dell1["problems"]
    assert dell1["runs_count"] == 4 and dell1["described"], dell1
    out, _ = validate([broken], tmp)
    refused = {r["target"]: r["refused"] for r in out["rows"] if r["refused"]}
    for name in ("2xXE8545x4A100-SXM-40GB", "4xXE8545x4A100-SXM-40GB", "dgxh100_n8_ngc23.04_pytorch"):
        assert name in refused and f"{name}.json" in refused[name], (name, refused)
    print("broken descriptions: named by report, their per-accelerator figures unknown; forecast refuses them: "
          + "; ".join(f"{k}: {v}" for k, v in sorted(refused.items())))


def check_public(trees, tmp):
    out, table = validate(trees, tmp)
    print(table)
    rows = [r for r in out["rows"] if not r["self"] and not r["republished"] and r["error"] is not None]
    assert out["pairs"] == len(rows)
    within15 = sum(abs(r["error"]) <= 0.15 for r in rows)
    within25 = sum(abs(r["error"]) <= 0.25 for r in rows)
    assert within15 >= 10 and within25 >= 11, (within15, within25, len(rows))
    for r in rows:
        if r["batch_per_accelerator"] >= 2 and r["dedicated_eval_ranks"] == 0:
            assert abs(r["error"]) <= 0.15, r
    for r in out["rows"]:
        if r["self"] and r["error"] is not None:
            assert abs(r["error"]) <= 0.01, r
    print(f"public results: {len(rows)} distinct pairs, {within15} within 15 %, {within25} within 25 %, "
          f"band held {out['in_band']}")


def main():
    with env.scratch_dir("forecast") as tmp:
        tmp = pathlib.Path(tmp)
        check_generated(tmp)
        check_stragglers(tmp)
        tree = check_fixture(tmp)
        check_page(tree, tmp)
        check_broken(tree, tmp)
        extra = [pathlib.Path(p) for p in os.environ.get("MRCNN_PUBLIC_RESULTS", "").split(os.pathsep) if p]
        if extra:
            check_public(extra, tmp)


if __name__ == "__main__":
    main()
