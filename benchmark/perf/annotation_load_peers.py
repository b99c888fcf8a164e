"""Time and memory from run_start to a training-ready COCO train2017 dataset, against the peers.

Under MLPerf's rules every rank reads instances_train2017.json on the clock. Four readers of the
same file, each measured in its own fresh process (so that its peak RSS is its own):
  pycocotools     COCO(annotation_file)
  torchvision     torchvision.datasets.CocoDetection(root, annFile) plus the MLPerf reference's
                  training filter (maskrcnn-benchmark's COCODataset: keep an image with at least
                  one annotation, crowd included, whose box is wider and taller than 1 px), its
                  sorted ids and category map: the reference's training-ready dataset
  harness json    mlperf-maskrcnn data load DIR --source json
  harness index   mlperf-maskrcnn data load DIR --source index, after `data prepare DIR`
                  (timed and reported apart: it runs once, before the clock)
Each reader runs as 1 rank (repeated, medians) and as N ranks (default 8) started together, all
holding their dataset at once (`--hold-until FILE`: each prints its line, then waits for FILE):
per-rank peak RSS, the sum of the ranks' PSS read from /proc/PID/smaps_rollup while all are
alive (a page shared by k processes counts 1/k in each: the honest node total; RSS counts a
shared mapping once per process), and the wall time until the last rank was ready.

Figures per process: seconds from the start of the load to training-ready, measured inside it
(Python peers: time.perf_counter around the construction, imports excluded; the harness: its own
"seconds"), the parent's wall time from spawn to the process's line (interpreter start, imports
and library loading included), peak RSS at training-ready (the process's own getrusage; wait4's
whole-life peak is kept beside it, and the table says where it is higher) and PSS.

With --baseline-data (a tiny file of the same form), each reader also runs 1 and N ranks on it:
what a process costs before there is data in it (the interpreter, torch, LibTorch), subtracted to
tell the memory the annotations take, 1 rank against N.

  python benchmark/perf/annotation_load_peers.py --data /tmp/coco-scale [--build-dir build]
      [--baseline-data /tmp/coco-scale-tiny] [--ranks 8] [--repeat 5] [--json OUT.json] [--plot OUT.png]
  python benchmark/perf/annotation_load_peers.py --from-json OUT.json [--plot OUT.png]   # print again

The data: benchmark/perf/make_coco_scale.py --out /tmp/coco-scale writes a train2017-scale file.
Run under `flock -x /tmp/mrcnn-cpu.lock`: nothing else may compete for the cores. Before the N
ranks of a reader start, their memory is estimated from its 1-rank peak; if MemAvailable would
not hold them with --reserve-gb to spare, fewer ranks run and the table says so.
"""
import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from annotation_load_report import GiB, LABELS, MB, SHORT, fmt_b, goals, markdown, median, plot, summarize

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
READERS = ["pycocotools", "torchvision", "harness-json", "harness-index"]

# ---- the Python peers (child process) ----------------------------------------------------------

def smaps_rollup(pid="self"):
    """Rss, Pss, Pss_Anon, Pss_File ... of a process, in bytes."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def vm_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def reference_training_ids(coco):
    """maskrcnn-benchmark's COCODataset over a pycocotools COCO: the images it trains on.

    Its constructor sorts the ids (as CocoDetection does), drops an image whose annotations
    (crowd included) all have a box side <= 1 px, and maps category ids to contiguous labels.
    """
    ids = sorted(coco.imgs.keys())
    kept = [i for i in ids if any(a["bbox"][2] > 1 and a["bbox"][3] > 1 for a in coco.imgToAnns[i])]
    cat_to_label = {c: k + 1 for k, c in enumerate(sorted(coco.getCatIds()))}
    id_to_img = dict(enumerate(kept))
    return kept, cat_to_label, id_to_img


def worker(kind, data, split, hold_until):
    ann = os.path.join(data, "annotations", f"instances_{split}.json")
    if kind == "pycocotools":
        from pycocotools.coco import COCO
    else:
        import torchvision
    rss_imported = vm_rss()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):   # pycocotools prints progress on stdout
        if kind == "pycocotools":
            coco = COCO(ann)
            images, instances = len(coco.imgs), len(coco.anns)
        else:
            ds = torchvision.datasets.CocoDetection(os.path.join(data, split), ann)
            kept, _, _ = reference_training_ids(ds.coco)
            images = len(kept)
            # What the reference trains on: the non-crowd instances of the kept images.
            instances = sum(1 for i in kept for a in ds.coco.imgToAnns[i] if not a["iscrowd"])
    seconds = time.perf_counter() - t0
    roll = smaps_rollup()
    print(json.dumps({"source": kind, "seconds": seconds, "images": images, "instances": instances,
                      "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "pss_bytes": roll.get("Pss", 0), "rss_after_import_bytes": rss_imported}),
          flush=True)
    parent = os.getppid()
    while hold_until and not os.path.exists(hold_until):
        if os.getppid() != parent:   # the benchmark died: do not linger
            break
        time.sleep(0.02)
    return 0


# ---- the parent: spawning, measuring ----------------------------------------------------------

def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def machine():
    model, flags = "unknown", ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1]
    isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "SSE"
    return {"cpu_model": model, "isa": isa, "cores": os.cpu_count(), "mem_total_bytes": meminfo("MemTotal"),
            "kernel": platform.release()}


class Spawner:
    """Starts processes, reads the one JSON line each prints, releases them, reaps them."""

    def __init__(self, exe, system, data, split, threads):
        self.exe, self.system, self.data, self.split, self.threads = exe, system, data, split, threads

    def command(self, kind, hold):
        if kind in ("pycocotools", "torchvision"):
            return [sys.executable, os.path.abspath(__file__), "--worker", kind, "--data", self.data,
                    "--split", self.split, "--hold-until", hold]
        source = "json" if kind == "harness-json" else "index"
        return [self.exe, "data", "load", self.data, "--system", self.system, "--split", self.split,
                "--source", source, "--hold-until", hold]

    def run(self, kind, n, tmp, watch_memory_gb=1.0):
        """n processes of one reader started together; returns per-process records and the wall
        time until the last one was ready."""
        hold = os.path.join(tmp, f"release-{kind}-{time.monotonic_ns()}")
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), PYTHONDONTWRITEBYTECODE="1")
        procs, recs, threads = [], [], []
        t0 = time.perf_counter()
        for r in range(n):
            err = open(os.path.join(tmp, f"{kind}-{r}.stderr"), "w+")
            p = subprocess.Popen(self.command(kind, hold), stdout=subprocess.PIPE, stderr=err, text=True, env=env)
            procs.append((p, err))
            recs.append({"rank": r, "pid": p.pid})
        ready = threading.Event()
        lock = threading.Lock()
        pending = [n]

        def read(i):
            p = procs[i][0]
            for line in p.stdout:
                if line.startswith("{"):
                    recs[i]["wall_s"] = time.perf_counter() - t0
                    recs[i].update(json.loads(line))
                    break
            with lock:
                pending[0] -= 1
                if pending[0] == 0:
                    ready.set()

        for i in range(n):
            th = threading.Thread(target=read, args=(i,), daemon=True)
            th.start()
            threads.append(th)
        aborted = None
        while not ready.wait(0.1):
            if meminfo("MemAvailable") < watch_memory_gb * GiB:   # others share this machine
                aborted = f"stopped: MemAvailable fell below {watch_memory_gb:g} GiB"
                for p, _ in procs:
                    p.kill()
                break
        # All ready (or gone): the node total while every rank holds its data.
        for rec in recs:
            if "seconds" in rec:
                try:
                    roll = smaps_rollup(rec["pid"])
                    rec["pss_all_alive_bytes"] = roll.get("Pss", 0)
                    rec["pss_file_all_alive_bytes"] = roll.get("Pss_File", 0)
                    rec["rss_all_alive_bytes"] = roll.get("Rss", 0)
                except OSError:
                    pass
        with open(hold, "w"):
            pass
        for (p, err), rec in zip(procs, recs):
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            rec["exit"] = p.returncode
            rec["wait4_max_rss_bytes"] = ru.ru_maxrss * 1024
            p.stdout.close()
            err.seek(0)
            tail = err.read()[-2000:]
            err.close()
            if "seconds" not in rec:
                rec["error"] = aborted or f"exit {p.returncode}, no result line: {tail.strip()[-600:]}"
        for th in threads:
            th.join(timeout=1)
        os.unlink(hold)
        done = [r["wall_s"] for r in recs if "wall_s" in r]
        return recs, (max(done) if len(done) == n else None), aborted


def harness_ready(exe):
    if not os.path.exists(exe):
        return f"not built ({exe} is missing)"
    try:
        r = subprocess.run([exe, "data", "load", "--help"], capture_output=True, text=True)
    except OSError as e:   # e.g. being relinked
        return f"not built ({exe}: {e.strerror})"
    if r.returncode != 0:
        return "not built (`mlperf-maskrcnn data load --help` fails: " + (r.stderr or r.stdout).strip().splitlines()[0][:80] + ")"
    return None


def prepare(exe, system, data, split):
    """`data prepare DIR`, timed (wall and peak RSS), with the files it left in annotations/."""
    adir = os.path.join(data, "annotations")
    before = {f: os.stat(os.path.join(adir, f)).st_mtime_ns for f in os.listdir(adir)}
    t0 = time.perf_counter()
    p = subprocess.Popen([exe, "data", "prepare", data, "--system", system, "--split", split], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out, err = p.stdout.read(), p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    files = {f: os.path.getsize(os.path.join(adir, f)) for f in os.listdir(adir)
             if before.get(f) != os.stat(os.path.join(adir, f)).st_mtime_ns}
    rec = {"exit": code, "wall_s": wall, "max_rss_bytes": ru.ru_maxrss * 1024, "files": files,
           "stdout_tail": out[-1500:]}
    if code != 0:
        rec["error"] = (err.strip() or out.strip())[-600:]
    return rec


def warm_cache(paths):
    """Reads the files once: every run then reads from the page cache, as the ranks after the
    first on a node would."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


# ---- main ---------------------------------------------------------------------------------------

def measure_baseline(a, exe, live, report, tmp, cores):
    """The same readers on a tiny file: what a process costs before there is data in it (the
    interpreter, torch, LibTorch). Subtracted, it leaves the memory that the annotations take."""
    if "harness-index" in live:
        p = prepare(exe, a.system, a.baseline_data, a.split)
        if "error" in p:
            report["notes"].append(f"baseline: `data prepare` failed: {p['error'][:200]}")
            live = [k for k in live if k != "harness-index"]
    with open(os.path.join(a.baseline_data, "annotations", f"instances_{a.split}.json")) as f:
        report["baseline_images"] = len(json.load(f)["images"])
    one = Spawner(exe, a.system, a.baseline_data, a.split, threads=cores)
    many = Spawner(exe, a.system, a.baseline_data, a.split, threads=max(1, cores // a.ranks))
    for k in live:
        r1, _, _ = one.run(k, 1, tmp)
        rn, _, _ = many.run(k, a.ranks, tmp)
        if "seconds" in r1[0] and all("seconds" in r for r in rn):
            report["results"][k]["baseline"] = {"one_rank": r1[0], "ranks": rn}
            print(f"{LABELS[k]}, baseline: {fmt_b(r1[0]['max_rss_bytes'])} peak RSS", file=sys.stderr, flush=True)


def finish(report):
    """Summaries, the file's counts and the goals from the raw records (also on a saved report)."""
    readers = report["readers"]
    for k in readers:
        if report["results"][k]["status"] == "ok":
            report["results"][k]["summary"] = summarize(report["results"][k])
    ok = [report["results"][k]["summary"] for k in readers if report["results"][k].get("summary", {}).get("images")]
    py = report["results"].get("pycocotools", {}).get("summary", {})
    report["file"]["images"] = py.get("images") or (ok[0]["images"] if ok else 0)
    report["file"]["instances"] = py.get("instances") or (ok[0]["instances"] if ok else 0)
    report["goals"] = goals(report)
    # The figures take a process's peak at training-ready (its own getrusage); wait4 sees its whole
    # life. Where the two part, the process grew after it was ready: say by how much.
    report["exit_peaks"] = {}
    for k in readers:
        res = report["results"][k]
        recs = res.get("one_rank_runs", []) + (res.get("ranks_run") or [])
        b = res.get("baseline")
        recs += [b["one_rank"]] + b["ranks"] if b else []
        extra = [r["wait4_max_rss_bytes"] - r["max_rss_bytes"] for r in recs
                 if "wait4_max_rss_bytes" in r and "max_rss_bytes" in r]
        if extra and max(extra) > 32 * 2**20:
            report["exit_peaks"][k] = max(extra)


def new_report(a, ann, readers):
    """The report's skeleton: the date, command, machine, readers, file and package versions."""
    report = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "command": " ".join([os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
              "machine": machine(), "readers": readers, "ranks_requested": a.ranks, "repeat": a.repeat,
              "file": {"path": ann, "bytes": os.path.getsize(ann)}, "results": {}, "notes": []}
    from importlib import metadata
    report["versions"] = {"python": platform.python_version()}
    for pkg in ("pycocotools", "torchvision", "torch"):
        try:
            report["versions"][pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            report["versions"][pkg] = None
    return report


def prepare_index(a, exe, report):
    """Runs `data prepare` on the data (recorded in the report), warms its files; returns nothing."""
    print("data prepare ...", file=sys.stderr, flush=True)
    p = prepare(exe, a.system, a.data, a.split)
    report["prepare"] = p
    if "error" in p:
        report["results"]["harness-index"]["status"] = "prepare failed"
    else:
        warm_cache([os.path.join(a.data, "annotations", f) for f in p["files"]])


def one_rank_rounds(a, one, live, report, tmp):
    """The readers still ok after the interleaved 1-rank rounds (their runs in the report)."""
    for k in live:
        report["results"][k]["one_rank_runs"] = []
    # Interleaved rounds, the first a warm-up: every reader meets the same machine state.
    for rnd in range(a.warmup + a.repeat):
        for k in live:
            recs, _, aborted = one.run(k, 1, tmp)
            rec = recs[0]
            want = {"harness-json": "json", "harness-index": "index"}.get(k)
            if want and "seconds" in rec and rec.get("source") != want:   # e.g. a stale index
                rec["error"] = f"read from {rec.get('source')} instead of {want}: {rec.get('note', '')}"
            tag = "warm-up" if rnd < a.warmup else f"run {rnd - a.warmup + 1}/{a.repeat}"
            print(f"{LABELS[k]}, 1 rank, {tag}: " + (f"{rec['seconds']:.2f} s, {fmt_b(rec['max_rss_bytes'])}"
                  if "seconds" in rec else rec.get("error", "?")), file=sys.stderr, flush=True)
            if "error" in rec:
                report["results"][k]["status"] = "error: " + rec["error"][:200]
            elif rnd >= a.warmup:
                report["results"][k]["one_rank_runs"].append(rec)
        live = [k for k in live if report["results"][k]["status"] == "ok"]
    return live


def ranks_that_fit(a, k, report):
    """How many of --ranks ranks of reader k the available memory holds (a note when fewer)."""
    s1 = summarize(report["results"][k])
    n = a.ranks
    avail = meminfo("MemAvailable")
    # Per-rank need: the 1-rank peak RSS; too much where ranks share pages (the index
    # mapping, library text), never too little.
    per = max(1, s1.get("max_rss_bytes", 0))
    fits = int((avail - a.reserve_gb * GiB) // per)
    if fits < n:
        n = max(1, fits)
        report["notes"].append(
            f"{LABELS[k]}: {n} of {a.ranks} ranks ran: {a.ranks} would need about "
            f"{fmt_b(a.ranks * per)} (the 1-rank peak each) and this machine had {fmt_b(avail)} available "
            f"with {a.reserve_gb:g} GiB kept for other work.")
    return n


def many_rank_run(a, many, k, report, tmp):
    """Runs reader k as N ranks together (records, wall time, notes into the report); returns nothing."""
    res = report["results"][k]
    n = ranks_that_fit(a, k, report)
    recs, wall, aborted = many.run(k, n, tmp)
    res["ranks_run"], res["ranks_wall"] = recs, wall
    if aborted:
        report["notes"].append(f"{LABELS[k]}: the {n}-rank run was {aborted}.")
    errs = [r["error"] for r in recs if "error" in r]
    if errs:
        report["notes"].append(f"{LABELS[k]}, {n} ranks: {errs[0][:200]}")
    print(f"{LABELS[k]}, {n} ranks: last ready after " + (f"{wall:.1f} s" if wall else "(failed)"),
          file=sys.stderr, flush=True)


def closing_notes(a, report, cores):
    """The report's closing notes: RSS after the imports, the cores, the cache, what RSS and PSS count."""
    notes = []
    for k in ("pycocotools", "torchvision"):
        one = [r for r in report["results"].get(k, {}).get("one_rank_runs", []) if "rss_after_import_bytes" in r]
        if one:
            notes.append(f"{LABELS[k]}: {fmt_b(median(r['rss_after_import_bytes'] for r in one))} of "
                         "its RSS is there after the imports, before the file is opened.")
    return notes + [
        f"{cores} cores: the {a.ranks} ranks are time-sliced on them (threads per rank: OMP_NUM_THREADS="
        f"{max(1, cores // a.ranks)}; 1 rank: {cores}), so the wall time to the last rank is no node's "
        f"figure with a core per rank; their memory is.",
        "Warm page cache: the file is read once before the runs (the ranks after the first on a node "
        "find it cached).",
        "Peak RSS counts every page a process touched, shared or not; PSS divides a shared page among "
        "the processes mapping it (read from /proc/PID/smaps_rollup while all ranks are alive). "
        "torchvision's and the harness's figures include their libraries (torch, LibTorch); pycocotools' do not.",
    ]


def run_benchmark(a):
    """The report of every reader's runs: 1 rank repeated, N ranks together, and the baseline."""
    exe = os.path.join(os.path.abspath(a.build_dir), "benchmark", "mlperf-maskrcnn")
    ann = os.path.join(a.data, "annotations", f"instances_{a.split}.json")
    if not os.path.exists(ann):
        sys.exit(f"error: {ann} is missing (benchmark/perf/make_coco_scale.py --out {a.data} writes one)")
    readers = [k for k in READERS if k in a.readers.split(",")]
    report = new_report(a, ann, readers)
    cores = os.cpu_count() or 1
    not_built = harness_ready(exe) if any(k.startswith("harness") for k in readers) else None
    for k in readers:
        report["results"][k] = {"status": not_built if (k.startswith("harness") and not_built) else "ok"}
        if k.startswith("harness") and not_built:
            print(f"{LABELS[k]}: {not_built}: row skipped", file=sys.stderr)
    warm_cache([ann])

    with tempfile.TemporaryDirectory(prefix="mrcnn_annload_") as tmp:
        if "harness-index" in readers and not not_built:
            prepare_index(a, exe, report)
        live = [k for k in readers if report["results"][k]["status"] == "ok"]
        one = Spawner(exe, a.system, a.data, a.split, threads=cores)
        live = one_rank_rounds(a, one, live, report, tmp)
        many = Spawner(exe, a.system, a.data, a.split, threads=max(1, cores // a.ranks))
        for k in live:
            many_rank_run(a, many, k, report, tmp)
        if a.baseline_data:
            measure_baseline(a, exe, live, report, tmp, cores)
    finish(report)
    report["notes"] += closing_notes(a, report, cores)
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/tmp/coco-scale", help="COCO folder (annotations/instances_SPLIT.json)")
    ap.add_argument("--split", default="train2017")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--system", default=os.path.join(REPO, "systems", "cpu-dev.json"),
                    help="the harness's data settings (data.annotation_source, ...) come from here")
    ap.add_argument("--readers", default=",".join(READERS), help="comma-separated subset of " + ",".join(READERS))
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5, help="1-rank runs per reader after the warm-up")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reserve-gb", type=float, default=3.0,
                    help="memory left to other work when sizing the multi-rank run (GiB)")
    ap.add_argument("--baseline-data", help="a tiny COCO folder (make_coco_scale.py --scale 0.002): each "
                    "reader's fixed cost per process, to tell it from the memory the annotations take")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--plot", help="write a PNG of time and memory per reader here")
    ap.add_argument("--worker", choices=["pycocotools", "torchvision"], help=argparse.SUPPRESS)
    ap.add_argument("--hold-until", help=argparse.SUPPRESS)
    ap.add_argument("--from-json", metavar="REPORT", help="print (and --plot) a report written by --json, run nothing")
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.data, a.split, a.hold_until)
    if a.ranks < 1 or a.repeat < 1:
        ap.error("--ranks and --repeat must be at least 1")
    if a.from_json:
        with open(a.from_json) as fh:
            report = json.load(fh)
        finish(report)
        a.ranks = report["ranks_requested"]
    else:
        report = run_benchmark(a)
    f = report["file"]
    m = report["machine"]
    print(f"Annotation load: `{f['path']}`, {f['bytes']:,} bytes, {f['images']:,} images, "
          f"{f['instances']:,} instances; {m['cpu_model']} ({m['isa']}), {m['cores']} cores, "
          f"{m['mem_total_bytes'] / GiB:.0f} GiB; {report['date']}\n")
    print(markdown(report))
    if report["goals"]:
        print("\nGoals (training-ready from the index under 1 s, from JSON under 5 s; <= 1 GB per rank; "
              f"{a.ranks} ranks together <= 2x one rank):")
        print("\n".join(f"- {g}" for g in report["goals"]))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
    if a.plot:
        plot(report, a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
