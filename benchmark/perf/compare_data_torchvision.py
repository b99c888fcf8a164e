"""Data pipeline throughput, this project's Loader against torchvision's Python pipeline, same run.

Both sides do the same work on the same images: read and decode each JPEG, resize it to the
MLPerf size (short side 800, long side at most 1333), flip half of the images with their boxes
and polygons, convert to BGR 0..255 float and subtract the pixel mean, then pad a batch of 2 to
a multiple of 32 with the ground truth padded to the batch's largest count, images grouped by
aspect ratio, one shuffled epoch.
  ours:        bench_data_pipeline's BM_LoaderEpoch/T (libjpeg-turbo, fused resize/normalize,
               T worker threads, in-order delivery);
  torchvision: a torch DataLoader with T worker processes over a Dataset doing PIL decode,
               torchvision.transforms.functional resize / hflip / to_tensor / normalize, and the
               reference's box and polygon arithmetic in torch; a collate function that pads.
Each measured run is a fresh process; the figure is images/s over the epoch (from creating the
loader to its last batch: worker start-up included, library import and annotation indexing not).
Runs alternate (ours, torchvision, ...) after one warm-up of each; medians and their ratio are
reported, with the peak memory of each side (the largest process's VmHWM, and the summed RSS of
the process tree, sampled every 20 ms: DataLoader workers are processes, ours are threads).

The images: DATA (default /tmp/mrcnn-data-bench) is written with `mlperf-maskrcnn synth --size
640x480` if it holds no instances_train2017.json; any COCO-format folder works (--data).

  python benchmark/perf/compare_data_torchvision.py --build-dir build-data [--workers 2] [--repeat 5]

Run it under `flock -x /tmp/mrcnn-cpu.lock` so that nothing else competes for the cores.
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

MLPERF_MEAN = [102.9801, 115.9465, 122.7717]


# ---- the torchvision peer (child process) -----------------------------------------------------

def mlperf_size(w, h, min_size=800, max_size=1333):
    """(height, width) of a w x h image at the MLPerf size: short side 800, long side at most 1333."""
    size = min_size
    lo, hi = float(min(w, h)), float(max(w, h))
    if hi / lo * size > max_size:
        size = int(round(max_size * lo / hi))
    if (w <= h and w == size) or (h <= w and h == size):
        return h, w
    if w < h:
        return int(size * h / w), size
    return size, int(size * w / h)


def coco_train_dataset(root, seed):
    """The peer's torch Dataset over root's train2017: (image, boxes, labels, polygons, id) per item."""
    import contextlib
    import io

    import torch
    from PIL import Image
    from pycocotools.coco import COCO
    from torchvision.transforms import functional as F

    class CocoTrain(torch.utils.data.Dataset):
        def __init__(self):
            with contextlib.redirect_stdout(io.StringIO()):
                self.coco = COCO(os.path.join(root, "annotations", "instances_train2017.json"))
            ids = []
            for i in sorted(self.coco.imgs):
                anns = self.coco.loadAnns(self.coco.getAnnIds(imgIds=i))
                if anns and not all(any(o <= 1 for o in a["bbox"][2:]) for a in anns):
                    ids.append(i)
            self.ids = ids
            self.label = {c: k + 1 for k, c in enumerate(sorted(self.coco.getCatIds()))}
            self.epoch = 0

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, idx):
            info = self.coco.imgs[self.ids[idx]]
            img = Image.open(os.path.join(root, "train2017", info["file_name"])).convert("RGB")
            anns = [a for a in self.coco.loadAnns(self.coco.getAnnIds(imgIds=info["id"])) if not a["iscrowd"]]
            w, h = img.size
            boxes = torch.as_tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
            boxes[:, 2:] = boxes[:, :2] + (boxes[:, 2:] - 1).clamp(min=0)
            boxes[:, 0::2] = boxes[:, 0::2].clamp(0, w - 1)
            boxes[:, 1::2] = boxes[:, 1::2].clamp(0, h - 1)
            keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
            polys = [[torch.as_tensor(p, dtype=torch.float32) for p in a["segmentation"] if len(p) >= 6]
                     for a, k in zip(anns, keep.tolist()) if k]
            boxes = boxes[keep]
            labels = torch.tensor([self.label[a["category_id"]] for a, k in zip(anns, keep.tolist()) if k])
            oh, ow = mlperf_size(w, h)
            img = F.resize(img, [oh, ow])
            rw, rh = ow / w, oh / h
            boxes = boxes * torch.tensor([rw, rh, rw, rh])
            polys = [[p * torch.tensor([rw, rh]).repeat(len(p) // 2) for p in inst] for inst in polys]
            if random.Random(seed * 1000003 + self.epoch * 7919 + idx).random() < 0.5:
                img = F.hflip(img)
                boxes = torch.stack([ow - boxes[:, 2] - 1, boxes[:, 1], ow - boxes[:, 0] - 1, boxes[:, 3]], 1)
                for inst in polys:
                    for p in inst:
                        p[0::2] = ow - p[0::2] - 1
            t = F.to_tensor(img)
            t = F.normalize(t[[2, 1, 0]] * 255, MLPERF_MEAN, [1.0, 1.0, 1.0])
            return t, boxes, labels, polys, info["id"]

    return CocoTrain()


def pad_collate(items):
    """A padded batch: (images, gt boxes, gt labels, counts, polygons, ids)."""
    import torch
    n = len(items)
    hmax = max(t.shape[1] for t, *_ in items)
    wmax = max(t.shape[2] for t, *_ in items)
    hp, wp = (hmax + 31) // 32 * 32, (wmax + 31) // 32 * 32
    images = torch.zeros(n, 3, hp, wp)
    g = max(len(b) for _, b, *_ in items)
    gt_boxes, gt_labels = torch.zeros(n, g, 4), torch.zeros(n, g, dtype=torch.long)
    counts = torch.tensor([len(b) for _, b, *_ in items])
    for i, (t, b, l, _, _) in enumerate(items):
        images[i, :, : t.shape[1], : t.shape[2]].copy_(t)
        gt_boxes[i, : len(b)] = b
        gt_labels[i, : len(l)] = l
    return images, gt_boxes, gt_labels, counts, [p for *_, p, _ in items], [i for *_, i in items]


def aspect_grouped_batches(ds, batch_size, seed):
    """The epoch's batches of dataset indices: shuffled, each of one aspect group (landscape or not)."""
    # Aspect-grouped, shuffled batches (the same rule as ours, drawn with Python's generator).
    order = list(range(len(ds)))
    random.Random(seed).shuffle(order)
    batches, open_groups = [], {0: [], 1: []}
    for i in order:
        info = ds.coco.imgs[ds.ids[i]]
        g = open_groups[1 if info["height"] >= info["width"] else 0]
        g.append(i)
        if len(g) == batch_size:
            batches.append(list(g))
            g.clear()
    batches += [g for g in open_groups.values() if g]
    return batches


def peer_epoch(root, workers, batch_size, seed, out_path):
    """Times one epoch of the torchvision pipeline into out_path ({images, seconds}); returns nothing."""
    import torch

    torch.set_num_threads(1)
    ds = coco_train_dataset(root, seed)
    batches = aspect_grouped_batches(ds, batch_size, seed)

    t0 = time.perf_counter()
    loader = torch.utils.data.DataLoader(ds, batch_sampler=batches, num_workers=workers, collate_fn=pad_collate)
    images = 0
    for images_t, *_ in loader:
        images += images_t.shape[0]
    seconds = time.perf_counter() - t0
    with open(out_path, "w") as f:
        json.dump({"images": images, "seconds": seconds}, f)


# ---- the parent ----------------------------------------------------------------------------------

def tree_memory_mib(pid):
    """(summed VmRSS of pid and its descendants, largest VmHWM among them), in MiB."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    total, hwm, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                    elif line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
        except OSError:
            pass
    return total / 1024.0, hwm / 1024.0


def measure(cmd, env=None):
    """Runs cmd; returns (stdout, peak RSS of the largest process, peak summed RSS of the tree) in
    MiB, sampled from /proc every 20 ms (VmHWM: wait4's ru_maxrss would report the size of this
    Python parent, which the child inherits across fork + exec)."""
    import tempfile
    err_file = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, env=env, text=True)
    peak = [0.0, 0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            tree, hwm = tree_memory_mib(p.pid)
            peak[0] = max(peak[0], hwm)
            peak[1] = max(peak[1], tree)
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    out = p.stdout.read()
    p.wait()
    done.set()
    t.join()
    err_file.seek(0)
    if p.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{err_file.read()}")
    return out, peak[0], peak[1]


def run_ours(bench, data, workers):
    env = dict(os.environ, MRCNN_DATA_BENCH_DIR=data)
    out, rss, tree = measure([bench, f"--benchmark_filter=^BM_LoaderEpoch/{workers}/",
                              "--benchmark_min_time=0.01", "--benchmark_format=json"], env)
    b = json.loads(out)["benchmarks"][0]
    return b["items_per_second"], rss, tree


def run_peer(data, workers, batch, seed, tmp):
    out_path = os.path.join(tmp, "peer.json")
    _, rss, tree = measure([sys.executable, os.path.abspath(__file__), "--child", "--data", data,
                            "--workers", str(workers), "--batch", str(batch), "--seed", str(seed),
                            "--out", out_path])
    with open(out_path) as f:
        r = json.load(f)
    return r["images"] / r["seconds"], rss, tree


def environment(build_dir):
    import PIL
    import torch
    import torchvision
    from PIL import features
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    build_type = "?"
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("CMAKE_BUILD_TYPE:"):
                build_type = line.split("=", 1)[1].strip()
    tj = subprocess.run(["pkg-config", "--modversion", "libturbojpeg"], capture_output=True, text=True).stdout.strip()
    return (f"host: {platform.node()}  cpu: {cpu}  cores: {os.cpu_count()}  python {platform.python_version()}\n"
            f"ours: {build_type} build, libjpeg-turbo {tj}\n"
            f"peer: torch {torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__} "
            f"(libjpeg-turbo {features.version('libjpeg_turbo')})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--data", default="/tmp/mrcnn-data-bench")
    ap.add_argument("--images", type=int, default=256, help="images to generate when DATA is empty")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plot", help="write a PNG of the medians here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        peer_epoch(a.data, a.workers, a.batch, a.seed, a.out)
        return 0

    bench = os.path.join(a.build_dir, "benchmark", "perf", "bench_data_pipeline")
    exe = os.path.join(a.build_dir, "benchmark", "mlperf-maskrcnn")
    if not os.path.exists(bench):
        sys.exit(f"missing {bench}: build the bench_data_pipeline target")
    if not os.path.exists(os.path.join(a.data, "annotations", "instances_train2017.json")):
        subprocess.run([exe, "synth", "--out", a.data, "--train", str(a.images), "--val", "0",
                        "--size", "640x480", "--seed", "1", "--quiet"], check=True)

    import tempfile
    print(environment(a.build_dir))
    print(f"data: {a.data}, batch {a.batch}, {a.workers} workers, {a.repeat} runs each after a warm-up\n")
    ours, peer = [], []
    with tempfile.TemporaryDirectory() as tmp:
        run_ours(bench, a.data, a.workers)
        run_peer(a.data, a.workers, a.batch, a.seed, tmp)
        for r in range(a.repeat):
            o = run_ours(bench, a.data, a.workers)
            p = run_peer(a.data, a.workers, a.batch, a.seed, tmp)
            ours.append(o)
            peer.append(p)
            print(f"run {r + 1}: ours {o[0]:7.1f} img/s   torchvision {p[0]:7.1f} img/s   ratio {o[0] / p[0]:.2f}")
    med = lambda rows, k: statistics.median(x[k] for x in rows)
    print()
    print(f"{'':12} {'img/s (median)':>15} {'peak RSS largest':>17} {'peak RSS tree':>14}")
    print(f"{'ours':12} {med(ours, 0):15.1f} {med(ours, 1):14.0f} MiB {med(ours, 2):10.0f} MiB")
    print(f"{'torchvision':12} {med(peer, 0):15.1f} {med(peer, 1):14.0f} MiB {med(peer, 2):10.0f} MiB")
    print(f"ratio ours/torchvision: {med(ours, 0) / med(peer, 0):.2f}x "
          f"(per-run ratios {', '.join(f'{o[0] / p[0]:.2f}' for o, p in zip(ours, peer))})")
    if a.plot:
        sys.path.insert(0, HERE)
        from plot_compare import plot_comparison
        plot_comparison(a.plot, f"data pipeline, batch {a.batch}, {a.workers} workers: {a.data}", [
            ("throughput (median)", "images/s", {"mlperf-maskrcnn": med(ours, 0), "torchvision": med(peer, 0)},
             "higher"),
            ("peak memory, process tree", "MiB", {"mlperf-maskrcnn": med(ours, 2), "torchvision": med(peer, 2)},
             "lower"),
        ])
        print(f"plot: {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
