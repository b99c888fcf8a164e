"""`mlperf-maskrcnn export` on a real run, read back by TensorBoard's own reader and by csv:

  1. a two-epoch run of the local system on a tiny synthetic set;
  2. export --tensorboard: TensorBoard's EventAccumulator sees train/loss, every named loss,
     train/lr, train/images_per_s, train/grad_norm and train/skipped at each step with the values
     of metrics.jsonl (as float32), and eval/bbox_map and eval/segm_map at each epoch's last step
     with the run's accuracies;
  3. export --csv: steps.csv has a row per step with the same losses, epochs.csv a row per epoch;
  4. bad input: nothing to write, a folder that is no run, an unknown option: exit 2, one line.
"""
# Its run trains systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import csv
import json
import pathlib
import sys

import numpy as np

import mrcnn_testenv as env

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:  # bootstrap.sh --test installs it (run_scripts/requirements-test.txt)
    print(f"skipped: TensorBoard's reader is not installed ({e})")
    sys.exit(77)


def export(*args):
    return env.run([env.mlperf_maskrcnn(), "export", *args], timeout=120)


def main():
    with env.scratch_dir("export") as tmp:
        tmp = pathlib.Path(tmp)
        data = env.synth_dataset(tmp / "data", "--train", "16", "--val", "8", "--seed", "3")
        p = env.run([env.mlperf_maskrcnn(), "train", "--system", env.SOURCE_DIR / "systems" / "cpu-dev.json",
                     "--quiet", "--no-progress", "--out", tmp / "runs", "--set", f'run.data_dir="{data}"',
                     "--set", "run.max_epochs=2", "--set", "run.target_bbox=0.99"], timeout=600)
        assert p.returncode in (0, 3), p.stderr[-3000:]
        run = (tmp / "runs" / "latest").resolve()
        metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
        steps = [m for m in metrics if m["event"] == "step"]
        evals = [m for m in metrics if m["event"] == "eval"]
        assert len(steps) >= 4 and len(evals) == 2, (len(steps), len(evals))

        # 2. TensorBoard
        p = export(run, "--tensorboard", tmp / "tb", "--csv", tmp / "csv")
        assert p.returncode == 0 and "TensorBoard: " in p.stdout, (p.returncode, p.stdout, p.stderr)
        files = list((tmp / "tb").glob("events.out.tfevents.*"))
        assert len(files) == 1, files
        ea = EventAccumulator(str(tmp / "tb"), size_guidance={"scalars": 0})
        ea.Reload()
        tags = set(ea.Tags()["scalars"])
        names = list(steps[0]["losses"])
        want = {"train/loss", "train/lr", "train/images_per_s", "train/grad_norm", "train/skipped",
                "eval/bbox_map", "eval/segm_map", "eval/inference_seconds", "eval/scoring_seconds"}
        want |= {f"train/{n}" for n in names}
        assert want <= tags, sorted(want - tags)

        def series(tag):
            return {e.step: e.value for e in ea.Scalars(tag)}

        loss, lr = series("train/loss"), series("train/lr")
        assert sorted(loss) == [s["step"] for s in steps], sorted(loss)
        for s in steps:
            assert loss[s["step"]] == np.float32(s["loss"]), (s["step"], loss[s["step"]], s["loss"])
            assert lr[s["step"]] == np.float32(s["lr"]), s
            for n in names:
                assert series(f"train/{n}")[s["step"]] == np.float32(s["losses"][n]), (n, s)
        last = {}
        for s in steps:
            last[s["epoch"]] = max(last.get(s["epoch"], s["step"]), s["step"])
        bbox, segm = series("eval/bbox_map"), series("eval/segm_map")
        for e in evals:
            assert bbox[last[e["epoch"]]] == np.float32(e["bbox"]), (e, bbox)
            assert segm[last[e["epoch"]]] == np.float32(e["segm"]), (e, segm)
        print(f"TensorBoard's reader: {len(tags)} scalar series, {len(steps)} steps and {len(evals)} "
              "evaluations equal to metrics.jsonl")

        # 3. CSV
        with open(tmp / "csv" / "steps.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == len(steps), (len(rows), len(steps))
        for row, s in zip(rows, steps):
            assert int(row["step"]) == s["step"] and float(row["loss"]) == s["loss"], (row, s)
            for n in names:
                assert float(row[n]) == s["losses"][n], (n, row, s)
        with open(tmp / "csv" / "epochs.csv", newline="") as f:
            epochs = list(csv.DictReader(f))
        assert [int(r["epoch"]) for r in epochs] == [1, 2], epochs
        assert [float(r["bbox_map"]) for r in epochs] == [e["bbox"] for e in evals], (epochs, evals)
        print(f"CSV: {len(rows)} step rows with every loss, {len(epochs)} epoch rows")

        # 4. bad input
        (tmp / "empty").mkdir()
        for args, text in (([run], "nothing to write"), ([tmp / "empty", "--csv", tmp / "x"], "not a run folder"),
                           ([run, "--tb", tmp / "x"], "unknown option '--tb'")):
            p = export(*args)
            assert p.returncode == 2 and text in p.stderr and p.stderr.count("\n") == 1, (args, p.returncode, p.stderr)
        print("bad input: exit 2 with one line")


if __name__ == "__main__":
    main()
