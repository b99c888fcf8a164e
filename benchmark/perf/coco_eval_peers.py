"""End-to-end COCO evaluation, this library against pycocotools and faster-coco-eval, same run.

Each measured run is a fresh process that reads both JSON files, evaluates bbox and segm,
accumulates and summarizes (exactly what a training run's per-epoch evaluation costs); the
parent records its wall time and peak RSS (wait4). Runs are interleaved (ours, faster-coco-eval,
pycocotools, ours, ...) after one warm-up of ours and faster-coco-eval, and medians are reported
with their ratios. pycocotools takes minutes on the COCO-val-scale set, so it gets fewer
repetitions by default (--pycoco-repeat). The 24 stats of the three must be identical.

The data set is generated (tests/eval/coco_gen.py, seeded) if DATA/gt.json is missing:
5000 images, 80 categories, about 7.7 ground-truth objects and 100 detections with masks per
image. Keep it out of the repository (default /tmp/mrcnn-eval-bench).

  python benchmark/perf/coco_eval_peers.py --build-dir build-eval [--repeat 5] [--pycoco-repeat 1]

Timings are comparable only within one run: the machine is shared. Run it under
`flock -x /tmp/mrcnn-cpu.lock` so that nothing else competes for the cores.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


# ---- one measured run (child process) -----------------------------------------------------------

def run_python_peer(kind, gt_path, res_path, out_path):
    import contextlib
    import io
    t0 = time.perf_counter()
    if kind == "pycocotools":
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval as Eval
    else:
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as Eval
    phases = {}
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(gt_path)
        phases["read_gt"] = time.perf_counter() - t0
        t = time.perf_counter()
        dt = gt.loadRes(res_path)
        phases["read_results"] = time.perf_counter() - t
        stats = {}
        for iou_type in ("bbox", "segm"):
            t = time.perf_counter()
            e = Eval(gt, dt, iou_type)
            e.evaluate()
            t2 = time.perf_counter()
            e.accumulate()
            e.summarize()
            phases[f"{iou_type}_evaluate"] = t2 - t
            phases[f"{iou_type}_accumulate"] = time.perf_counter() - t2
            stats[iou_type] = [float(v) for v in e.stats]
    with open(out_path, "w") as f:
        json.dump({"stats": stats, "phases": phases}, f)


# ---- the parent ----------------------------------------------------------------------------------

def measure(cmd):
    """Runs cmd; returns (wall seconds, peak RSS in MiB)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {' '.join(cmd)}")
    return wall, ru.ru_maxrss / 1024.0


def environment(coco_eval, threads):
    import numpy
    import pycocotools
    import faster_coco_eval
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cache = os.path.join(os.path.dirname(os.path.dirname(coco_eval)), "CMakeCache.txt")
    build_type = "unknown"
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("CMAKE_BUILD_TYPE:"):
                build_type = line.split("=", 1)[1].strip()
    return {
        "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
        "numpy": numpy.__version__, "pycocotools": getattr(pycocotools, "__version__", "2.0.11"),
        "faster_coco_eval": faster_coco_eval.__version__, "coco_eval_build": build_type,
        "coco_eval_threads": threads,
    }


def parse_args():
    """The command line's arguments."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/tmp/mrcnn-eval-bench", help="folder with gt.json, results.json")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="coco-eval threads")
    ap.add_argument("--repeat", type=int, default=5, help="runs of ours and faster-coco-eval")
    ap.add_argument("--pycoco-repeat", type=int, default=1, help="runs of pycocotools (minutes each)")
    ap.add_argument("--skip-pycocotools", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--plot", help="write a PNG of the medians here")
    ap.add_argument("--run-one", nargs=4, metavar=("KIND", "GT", "RES", "OUT"), help=argparse.SUPPRESS)
    return ap.parse_args()


def print_data(gt_path, res_path):
    """Prints the two files' sizes and the ground truth's counts; returns nothing."""
    print(f"# data: {gt_path} ({os.path.getsize(gt_path) / 2**20:.1f} MiB), "
          f"{res_path} ({os.path.getsize(res_path) / 2**20:.1f} MiB)")
    with open(gt_path) as f:
        g = json.load(f)
    print(f"# {len(g['images'])} images, {len(g['categories'])} categories, "
          f"{len(g['annotations'])} ground-truth annotations")


def run_interleaved(a, coco_eval, gt_path, res_path, tmp):
    """{side: [(wall seconds, peak RSS MiB) per run]}, after one warm-up of ours and faster-coco-eval."""
    cmds = {
        "ours": lambda i: [coco_eval, gt_path, res_path, "--iou-type", "bbox,segm", "--threads",
                           str(a.threads), "--quiet", "--json", os.path.join(tmp, f"ours{i}.json")],
        "faster-coco-eval": lambda i: [sys.executable, __file__, "--run-one", "faster", gt_path, res_path,
                                       os.path.join(tmp, f"faster-coco-eval{i}.json")],
        "pycocotools": lambda i: [sys.executable, __file__, "--run-one", "pycocotools", gt_path, res_path,
                                  os.path.join(tmp, f"pycocotools{i}.json")],
    }
    repeats = {"ours": a.repeat, "faster-coco-eval": a.repeat,
               "pycocotools": 0 if a.skip_pycocotools else a.pycoco_repeat}
    print("# warm-up: ours, faster-coco-eval", flush=True)
    measure(cmds["ours"]("_warm"))
    measure(cmds["faster-coco-eval"]("_warm"))
    runs = {k: [] for k in cmds}
    for i in range(max(repeats.values())):
        for name in ("ours", "faster-coco-eval", "pycocotools"):
            if i < repeats[name]:
                wall, rss = measure(cmds[name](i))
                runs[name].append((wall, rss))
                print(f"run {i} {name:17s} {wall:8.2f} s  {rss:8.0f} MiB", flush=True)
    return runs


def load_run(tmp, name, i):
    """The JSON that run i of `name` wrote."""
    with open(os.path.join(tmp, f"{name}{i}.json")) as f:
        return json.load(f)


def compare_stats(runs, tmp, ours_stats):
    """{peer: "identical" or "DIFFERENT: " with the differences} for each peer that ran."""
    verdicts = {}
    for name in ("faster-coco-eval", "pycocotools"):
        if runs[name]:
            s = load_run(tmp, name, 0)["stats"]
            verdicts[name] = "identical" if s == ours_stats else \
                "DIFFERENT: " + json.dumps({t: [x - y for x, y in zip(s[t], ours_stats[t])] for t in s})
    return verdicts


def print_medians(runs, verdicts):
    """{side: (median wall seconds, peak RSS MiB)}, printed with the ratios to ours and the verdicts."""
    print("\n# medians (wall time end to end: read both files, bbox + segm evaluate, accumulate, summarize)")
    med = {k: (statistics.median(w for w, _ in v), max(r for _, r in v)) for k, v in runs.items() if v}
    for name, (wall, rss) in med.items():
        n = len(runs[name])
        ratio = "" if name == "ours" else f"   {wall / med['ours'][0]:6.1f}x ours"
        same = "" if name == "ours" else f"   stats {verdicts[name]}"
        print(f"{name:17s} {wall:8.2f} s  peak RSS {rss:7.0f} MiB  ({n} runs){ratio}{same}")
    return med


def read_throughput(runs, tmp, gt_path, res_path):
    """{file: bytes, seconds, GB/s} of our reads, the median of the runs, printed."""
    # Read throughput: bytes of each file over the read seconds coco-eval reports (median of the runs).
    ours_all = [load_run(tmp, "ours", i) for i in range(len(runs["ours"]))]
    read = {}
    for label, key, path in (("results", "read_results", res_path), ("ground truth", "read_ground_truth", gt_path)):
        secs = statistics.median(o["seconds"][key] for o in ours_all)
        read[label] = {"bytes": os.path.getsize(path), "seconds": secs,
                       "gb_per_s": os.path.getsize(path) / secs / 1e9}
    print("# our read throughput (median of the runs): " + ", ".join(
        f"{k} {v['bytes'] / 1e6:.1f} MB in {v['seconds']:.3f} s = {v['gb_per_s']:.2f} GB/s" for k, v in read.items()))
    return read


def print_our_phases(ours0):
    """Prints where our run 0's time went, by phase; returns nothing."""
    print("\n# where our time goes (run 0): " + ", ".join(
        f"{k} {v:.2f}s" for k, v in ours0["seconds"].items()) + "; bbox " + ", ".join(
        f"{k} {v:.2f}s" for k, v in ours0["bbox"]["seconds"].items()) + "; segm accumulate "
        f"{ours0['segm']['seconds']['accumulate']:.2f}s")


def print_peer_phases(runs, tmp):
    """Prints where each peer's run 0's time went, by phase; returns nothing."""
    for name in ("faster-coco-eval", "pycocotools"):
        if runs[name]:
            ph = load_run(tmp, name, 0)["phases"]
            print(f"# where {name}'s time goes (run 0): " + ", ".join(f"{k} {v:.2f}s" for k, v in ph.items()))


def write_plot(a, med, verdicts):
    """Writes the PNG of the medians to --plot; returns nothing."""
    sys.path.insert(0, HERE)
    from plot_compare import plot_comparison
    names = {"ours": "mlperf-maskrcnn", "faster-coco-eval": "faster-coco-eval", "pycocotools": "pycocotools"}
    plot_comparison(a.plot, "COCO bbox + segm evaluation end to end: " + os.path.basename(a.data.rstrip("/")), [
        ("wall time (median)", "seconds", {names[k]: v[0] for k, v in med.items()}, "lower"),
        ("peak memory", "MiB", {names[k]: v[1] for k, v in med.items()}, "lower"),
    ], note="; ".join(f"{k}: stats {v}" for k, v in verdicts.items()) + f"; {a.threads} threads for ours")
    print(f"plot: {a.plot}")


def main():
    a = parse_args()
    if a.run_one:
        run_python_peer(*a.run_one)
        return

    coco_eval = os.path.join(a.build_dir, "benchmark", "analysis", "coco-eval")
    if not os.access(coco_eval, os.X_OK):
        sys.exit(f"{coco_eval} is missing: build it (ninja -C {a.build_dir} coco-eval)")
    gt_path, res_path = os.path.join(a.data, "gt.json"), os.path.join(a.data, "results.json")
    if not (os.path.exists(gt_path) and os.path.exists(res_path)):
        print(f"generating the COCO-val-scale set into {a.data} (minutes) ...", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(REPO, "tests", "eval", "coco_gen.py"), a.data,
                        "--images", "5000", "--seed", "0"], check=True)

    env = environment(coco_eval, a.threads)
    print("# environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print_data(gt_path, res_path)

    tmp = tempfile.mkdtemp(prefix="coco_eval_peers_")
    runs = run_interleaved(a, coco_eval, gt_path, res_path, tmp)
    ours0 = load_run(tmp, "ours", 0)
    ours_stats = {t: ours0[t]["stats"] for t in ("bbox", "segm")}
    verdicts = compare_stats(runs, tmp, ours_stats)
    med = print_medians(runs, verdicts)
    print_our_phases(ours0)
    read = read_throughput(runs, tmp, gt_path, res_path)
    print_peer_phases(runs, tmp)
    print(f"\nours bbox stats: {ours_stats['bbox']}\nours segm stats: {ours_stats['segm']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"environment": env, "runs": runs, "medians": med, "verdicts": verdicts,
                       "ours_stats": ours_stats, "ours_read_throughput": read,
                       "ours_phases_run0": {"seconds": ours0["seconds"],
                                            "bbox": ours0["bbox"]["seconds"],
                                            "segm": ours0["segm"]["seconds"]}}, f, indent=1)
    if a.plot:
        write_plot(a, med, verdicts)


if __name__ == "__main__":
    main()
