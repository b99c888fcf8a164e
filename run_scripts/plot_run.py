#!/usr/bin/env python3
"""Plots a training run: losses and learning rate over time, COCO box/mask AP per epoch against
the MLPerf targets, with the time to train, and where that time went: training (epoch_start to
epoch_stop), validation inference (the log's eval_inference_seconds: training stands still), the
wait for the last score after the last epoch, and the rest (checkpoints, the step in which a
target was met); the COCO scoring that ran in the background beside it. Reads
RUN_DIR/metrics.jsonl and RUN_DIR/mlperf_log.txt, writes RUN_DIR/training.png (or --out) and
prints the breakdown as one JSON line.

    .venv/bin/python run_scripts/plot_run.py out/cpu-dev/latest
"""
import argparse
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mlperf_log_reader import records  # noqa: E402


def time_breakdown(keyed, t0, metrics_file):
    """Seconds of the time to train (run_start to run_stop, or to the last event of a run that
    has not stopped) by what the training thread did."""
    end = keyed["run_stop"][0]["time_ms"] if "run_stop" in keyed else max(
        e["time_ms"] for events in keyed.values() for e in events)
    starts = {e["metadata"]["epoch_num"]: e["time_ms"] for e in keyed.get("epoch_start", [])}
    stops = {e["metadata"]["epoch_num"]: e["time_ms"] for e in keyed.get("epoch_stop", [])}
    training = sum(stops[k] - starts[k] for k in stops if k in starts) / 1000
    inference = sum(e["value"] for e in keyed.get("eval_inference_seconds", []))
    # After the last epoch's inference, until run_stop: the wait for the outstanding scores.
    last_eval = keyed.get("eval_inference_seconds", [])
    wait = 0.0
    if last_eval and stops and "run_stop" in keyed and last_eval[-1]["metadata"]["epoch_num"] == max(stops):
        wait = max(0.0, (end - last_eval[-1]["time_ms"]) / 1000)
    total = (end - t0) / 1000
    scoring = sum(json.loads(l).get("scoring_seconds", 0) for l in metrics_file.read_text().splitlines()
                  if '"event":"eval"' in l)
    return {"total": total, "training": training, "inference": inference, "final_score_wait": wait,
            "other": max(0.0, total - training - inference - wait), "scoring_background": scoring}


TARGETS = (0.377, 0.339)  # MLPerf's box and mask AP targets


def load_run(run):
    """(log events by key, run_start's time_ms, step records, metrics file); exits if one is missing."""
    metrics_file, log_file = run / "metrics.jsonl", run / "mlperf_log.txt"
    for f in (metrics_file, log_file):
        if not f.is_file():
            sys.exit(f"plot_run: {f} does not exist (is {run} a run folder?)")
    events = records(log_file)
    keyed = {}
    for e in events:
        keyed.setdefault(e["key"], []).append(e)
    if "run_start" not in keyed:
        sys.exit(f"plot_run: {log_file} has no run_start")
    t0 = keyed["run_start"][0]["time_ms"]
    steps = [json.loads(l) for l in metrics_file.read_text().splitlines() if '"event":"step"' in l]
    if not steps:
        sys.exit(f"plot_run: {metrics_file} has no steps")
    return keyed, t0, steps, metrics_file


def smooth(v, window):
    """The moving mean of v over the last `window` values (fewer at the start)."""
    out, acc = [], 0.0
    for i, x in enumerate(v):
        acc += x
        if i >= window:
            acc -= v[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot_losses(ax1, steps, t0):
    """Draws the smoothed losses and the learning rate over time on ax1; returns nothing."""
    t = [(s["time_ms"] - t0) / 60000 for s in steps]
    names = sorted(steps[0]["losses"])
    window = max(1, len(steps) // 50)
    ax1.plot(t, smooth([s["loss"] for s in steps], window), color="black", lw=2, label="total")
    for n in names:
        ax1.plot(t, smooth([s["losses"][n] for s in steps], window), lw=1, label=n)
    ax1.set_yscale("log")
    ax1.set_xlabel("minutes since run_start")
    ax1.set_ylabel(f"loss (moving mean of {window} steps)")
    ax1.set_title(f"training losses ({len(steps)} steps)")
    lr_ax = ax1.twinx()
    lr_ax.plot(t, [s["lr"] for s in steps], color="grey", ls=":", lw=1)
    lr_ax.set_ylabel("learning rate (dotted)")
    ax1.legend(fontsize=8, loc="upper right")


def plot_accuracy(ax2, keyed, t0):
    """Draws box and mask AP per epoch against the targets on ax2; returns nothing."""
    acc = keyed.get("eval_accuracy", [])
    epochs = [e["metadata"]["epoch_num"] for e in acc]
    ax2.plot(epochs, [e["value"]["BBOX"] for e in acc], "o-", label="box AP (BBOX)")
    ax2.plot(epochs, [e["value"]["SEGM"] for e in acc], "s-", label="mask AP (SEGM)")
    ax2.axhline(TARGETS[0], color="C0", ls="--", lw=1, label=f"BBOX target {TARGETS[0]}")
    ax2.axhline(TARGETS[1], color="C1", ls="--", lw=1, label=f"SEGM target {TARGETS[1]}")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("COCO AP@[.5:.95]")
    ax2.set_ylim(0, 1)
    ax2.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    stop = keyed.get("run_stop", [{}])[0]
    status = stop.get("metadata", {}).get("status", "running")
    title = f"accuracy per epoch: {status}"
    if "time_ms" in stop:
        title += f", time to train {(stop['time_ms'] - t0) / 60000:.2f} min"
    ax2.set_title(title)
    ax2.legend(fontsize=8, loc="lower right")
    ax2.grid(alpha=0.3)


def plot_breakdown(ax3, parts):
    """Draws the time to train by part, and the background scoring beside it, on ax3; returns nothing."""
    shown = [("training", "C0"), ("inference", "C1"), ("final_score_wait", "C2"), ("other", "C7")]
    bottom = 0.0
    for name, color in shown:
        ax3.bar(0, parts[name], bottom=bottom, color=color, label=f"{name.replace('_', ' ')} {parts[name]:.1f} s")
        bottom += parts[name]
    ax3.bar(1, parts["scoring_background"], color="C3", hatch="//", alpha=0.6,
            label=f"COCO scoring, in the background {parts['scoring_background']:.1f} s")
    ax3.set_xticks([0, 1], ["time to train", "beside it"])
    ax3.set_ylabel("seconds")
    ax3.set_ylim(0, max(parts["total"], parts["scoring_background"]) * 1.7)  # room for the legend
    ax3.set_title(f"where the {parts['total']:.1f} s went")
    ax3.legend(fontsize=8, loc="upper right")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    run = args.run_dir.resolve()
    keyed, t0, steps, metrics_file = load_run(run)

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(18, 4.8), gridspec_kw={"width_ratios": [3, 3, 2]})
    plot_losses(ax1, steps, t0)
    plot_accuracy(ax2, keyed, t0)
    parts = time_breakdown(keyed, t0, metrics_file)
    print(json.dumps(parts))
    plot_breakdown(ax3, parts)
    fig.tight_layout()
    out = args.out or run / "training.png"
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
