#!/usr/bin/env python3
"""mrcnn_ops against torchvision at the MLPerf Mask R-CNN shapes, in one run, interleaved.

Cases (batch 2, images 800x1333 and 800x1200 padded to 800x1344, FPN P2..P6, 256 channels):
  multilevel_roi_align_box    box head pooling: 512 RoIs per image, 7x7, sampling ratio 2,
                              forward + backward w.r.t. P2..P5 (torchvision: MultiScaleRoIAlign)
  multilevel_roi_align_mask   mask head pooling: 128 RoIs per image, 14x14, same otherwise
  *_channels_last             the same with channels-last features (torchvision converts them)
  proposals_train             proposal generation from the RPN head outputs: pre-NMS top 2000
                              per level, NMS 0.7, 1000 per image (torchvision: box decoding of
                              every anchor + RegionProposalNetwork.filter_proposals)
  proposals_test              the same with pre-NMS top 1000 per level
Both sides get the same tensors and the same thread count (--threads, default 2). Each case is
warmed up once, then the implementations alternate for --reps repetitions; medians are
reported with ours/peer speed-up. Peak RSS comes from a fresh subprocess per (case, side) that
builds the inputs, then runs the side three times (VmHWM; the resident size with the inputs
built is printed as the baseline). One machine-readable RESULT line per case.

--device cuda runs both sides on the GPU (inputs built on the CPU with the same generator, then
moved; proposal image sizes stay on the host, as the network passes them); each timed phase ends
with torch.cuda.synchronize(), and peak GPU memory (torch.cuda.max_memory_allocated over three
runs of one side, after the inputs) replaces peak RSS.

usage: compare_ops_torchvision.py [--build-dir build] [--threads 2] [--reps 7] [--cases ...]
                                  [--device cpu|cuda]
"""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import OrderedDict

import torch
import torchvision
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.rpn import (RegionProposalNetwork, RPNHead,
                                              concat_box_prediction_layers)

PAD_H, PAD_W = 800, 1344
IMAGE_SIZES = [(800, 1333), (800, 1200)]
CHANNELS = 256
SCALES = [0.25, 0.125, 0.0625, 0.03125]
SIZES = (32.0, 64.0, 128.0, 256.0, 512.0)
DEVICE = torch.device("cpu")


def sync():
    """Waits for the device, so that a phase's time includes its kernels."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def grids():
    g = [(PAD_H // 4, PAD_W // 4)]
    for _ in range(3):
        g.append(((g[-1][0] + 1) // 2, (g[-1][1] + 1) // 2))
    g.append(((g[-1][0] + 1) // 2, (g[-1][1] + 1) // 2))   # P6: max-pool of P5
    return g


def roi_boxes(gen, per_image):
    """Proposal-like boxes: log-uniform sizes 16..700 px, aspect 0.5..2, inside each image."""
    out = []
    for h, w in IMAGE_SIZES:
        size = torch.exp(torch.empty(per_image).uniform_(2.77, 6.55, generator=gen))
        aspect = torch.exp(torch.empty(per_image).uniform_(-0.69, 0.69, generator=gen))
        bw = (size / aspect.sqrt()).clamp(max=w - 1)
        bh = (size * aspect.sqrt()).clamp(max=h - 1)
        x1 = torch.rand(per_image, generator=gen) * (w - bw)
        y1 = torch.rand(per_image, generator=gen) * (h - bh)
        out.append(torch.stack([x1, y1, x1 + bw, y1 + bh], 1))
    return out


class RoiCase:
    def __init__(self, ops, per_image, output_size, channels_last):
        gen = torch.Generator().manual_seed(1)
        self.ops = ops
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        self.feats = [torch.randn(2, CHANNELS, gh, gw, generator=gen).to(DEVICE)
                      .contiguous(memory_format=fmt) for gh, gw in grids()[:4]]
        boxes = roi_boxes(gen, per_image)
        self.rois = torch.cat([torch.cat([torch.full((b.shape[0], 1), float(i)), b], 1)
                               for i, b in enumerate(boxes)]).to(DEVICE)
        self.boxes = [b.to(DEVICE) for b in boxes]
        self.output_size = output_size
        self.pool = torchvision.ops.MultiScaleRoIAlign(["0", "1", "2", "3"], output_size, 2)
        self.grad = torch.randn(self.rois.shape[0], CHANNELS, output_size, output_size,
                                generator=gen).to(DEVICE)

    def ours(self):
        fs = [f.detach().requires_grad_(True) for f in self.feats]
        sync()
        t0 = time.perf_counter()
        out = self.ops.multilevel_roi_align(fs, self.rois, self.output_size, 2, False, SCALES)
        sync()
        t1 = time.perf_counter()
        torch.autograd.grad(out, fs, self.grad)
        sync()
        return {"forward": t1 - t0, "backward": time.perf_counter() - t1}

    def peer(self):
        fs = [f.detach().requires_grad_(True) for f in self.feats]
        sync()
        t0 = time.perf_counter()
        out = self.pool(OrderedDict((str(i), f) for i, f in enumerate(fs)), self.boxes,
                        IMAGE_SIZES)
        sync()
        t1 = time.perf_counter()
        torch.autograd.grad(out, fs, self.grad)
        sync()
        return {"forward": t1 - t0, "backward": time.perf_counter() - t1}


class ProposalCase:
    def __init__(self, ops, pre_nms, post_nms):
        gen = torch.Generator().manual_seed(2)
        self.ops = ops
        self.pre, self.post = pre_nms, post_nms
        g = grids()
        self.obj = [torch.randn(2, 3, gh, gw, generator=gen).to(DEVICE) for gh, gw in g]
        self.deltas = [(torch.randn(2, 12, gh, gw, generator=gen) * 0.2).to(DEVICE) for gh, gw in g]
        self.anchor_gen = AnchorGenerator(tuple((s,) for s in SIZES), ((0.5, 1.0, 2.0),) * 5)
        images = ImageList(torch.zeros(2, 3, PAD_H, PAD_W), IMAGE_SIZES)
        self.tv_anchors = self.anchor_gen(images, [torch.zeros(2, 1, gh, gw) for gh, gw in g])
        self.anchors = ops.grid_anchors(list(SIZES), [0.5, 1.0, 2.0], [x for s in g for x in s],
                                        [PAD_H, PAD_W])
        assert torch.equal(torch.cat(self.anchors), self.tv_anchors[0])
        self.anchors = [a.to(DEVICE) for a in self.anchors]
        self.tv_anchors = [a.to(DEVICE) for a in self.tv_anchors]
        self.rpn = RegionProposalNetwork(self.anchor_gen, RPNHead(1, 3), 0.7, 0.3, 256, 0.5,
                                         dict(training=pre_nms, testing=pre_nms),
                                         dict(training=post_nms, testing=post_nms), 0.7).eval()
        self.rpn.to(DEVICE)
        self.sizes = torch.tensor(IMAGE_SIZES)

    def ours(self):
        sync()
        t0 = time.perf_counter()
        self.ops.generate_proposals(self.obj, self.deltas, self.anchors, self.sizes, self.pre,
                                    self.post, 0.7, 1e-3, False, 0.0)
        sync()
        return {"total": time.perf_counter() - t0}

    def peer(self):
        sync()
        t0 = time.perf_counter()
        o_flat, d_flat = concat_box_prediction_layers(self.obj, self.deltas)
        proposals = self.rpn.box_coder.decode(d_flat.detach(), self.tv_anchors).view(2, -1, 4)
        sync()
        t1 = time.perf_counter()
        self.rpn.filter_proposals(proposals, o_flat, IMAGE_SIZES,
                                  [o[0].numel() for o in self.obj])
        sync()
        return {"decode": t1 - t0, "filter": time.perf_counter() - t1}


CASES = OrderedDict([
    ("multilevel_roi_align_box", lambda ops: RoiCase(ops, 512, 7, False)),
    ("multilevel_roi_align_mask", lambda ops: RoiCase(ops, 128, 14, False)),
    ("multilevel_roi_align_box_channels_last", lambda ops: RoiCase(ops, 512, 7, True)),
    ("multilevel_roi_align_mask_channels_last", lambda ops: RoiCase(ops, 128, 14, True)),
    ("proposals_train", lambda ops: ProposalCase(ops, 2000, 1000)),
    ("proposals_test", lambda ops: ProposalCase(ops, 1000, 1000)),
])


def load_ops(build_dir):
    lib = os.path.join(build_dir, "model", "libmrcnn_ops.so")
    if not os.path.exists(lib):
        sys.exit(f"{lib} not found: build mrcnn_ops first (or pass --build-dir)")
    torch.ops.load_library(lib)
    return torch.ops.mrcnn, lib


def status_mb(field):
    """VmRSS / VmHWM of this process image. (getrusage's ru_maxrss is not used: after fork +
    exec it still holds the parent's resident size.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"{field} not in /proc/self/status")


def probe_rss(args):
    """Subprocess mode: peak RSS of one side of one case."""
    ops, _ = load_ops(args.build_dir)
    torch.set_num_threads(args.threads)
    case = CASES[args.rss_probe[0]](ops)
    fn = case.ours if args.rss_probe[1] == "ours" else case.peer
    if DEVICE.type == "cuda":  # peak GPU memory instead
        base = torch.cuda.memory_allocated() / 2**20
        torch.cuda.reset_peak_memory_stats()
        for _ in range(3):
            fn()
        print(f"{base:.1f} {torch.cuda.max_memory_allocated() / 2**20:.1f}")
        return
    base = status_mb("VmRSS")
    for _ in range(3):
        fn()
    print(f"{base:.1f} {status_mb('VmHWM'):.1f}")


def environment(lib):
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                                check=False).stdout.strip()
    except OSError:
        commit = "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return [f"date        {datetime.datetime.now().isoformat(timespec='seconds')}",
            f"host        {platform.node()} ({cpu}, {os.cpu_count()} cpus)",
            f"python      {platform.python_version()}  torch {torch.__version__}  "
            f"torchvision {torchvision.__version__}",
            f"threads     {torch.get_num_threads()} (both sides)",
            f"device      {DEVICE}" + (f" ({torch.cuda.get_device_name(DEVICE)})" if DEVICE.type == "cuda" else ""),
            f"library     {lib} (commit {commit})"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("MRCNN_BUILD_DIR", "build"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--cases", nargs="*", default=list(CASES))
    p.add_argument("--no-rss", action="store_true", help="skip the peak-RSS subprocesses")
    p.add_argument("--plot", help="write a PNG of the medians here")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where both sides run (cuda: synchronized timing, peak GPU memory)")
    p.add_argument("--rss-probe", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device here")
    if args.rss_probe:
        return probe_rss(args)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {unknown}; choose from {list(CASES)}")

    ops, lib = load_ops(args.build_dir)
    torch.set_num_threads(args.threads)
    for line in environment(lib):
        print("# " + line)
    if args.threads < 2:
        print("# WARNING: one thread: the parallel kernels are not exercised")
    print(f"# {args.reps} interleaved repetitions after one warm-up; medians in ms")
    print()
    figures = {}
    for name in args.cases:
        case = CASES[name](ops)
        case.ours()
        case.peer()
        runs = {"ours": [], "peer": []}
        for _ in range(args.reps):
            runs["ours"].append(case.ours())
            runs["peer"].append(case.peer())
        med = {}
        parts = {}
        for side, rs in runs.items():
            med[side] = statistics.median(sum(r.values()) for r in rs) * 1e3
            parts[side] = {k: statistics.median(r[k] for r in rs) * 1e3 for k in rs[0]}
        rss = {}
        if not args.no_rss:
            for side in ("ours", "peer"):
                out = subprocess.run([sys.executable, __file__, "--build-dir", args.build_dir,
                                      "--threads", str(args.threads), "--device", args.device,
                                      "--rss-probe", name, side],
                                     capture_output=True, text=True, check=True).stdout.split()
                rss[side] = (float(out[0]), float(out[1]))
        print(f"{name}")
        for side, label in (("ours", "mrcnn_ops"), ("peer", "torchvision")):
            split = "  ".join(f"{k} {v:8.1f}" for k, v in parts[side].items())
            kind = "GPU memory" if DEVICE.type == "cuda" else "RSS"
            mem = f"  peak {kind} {rss[side][1]:7.0f} MB (inputs {rss[side][0]:.0f} MB)" if rss else ""
            print(f"  {label:12s} {med[side]:9.1f} ms   ({split}){mem}")
        ratio = med["peer"] / med["ours"]
        print(f"  speed-up     {ratio:9.2f}x")
        rss_fields = (f" ours_rss_mb={rss['ours'][1]:.0f} peer_rss_mb={rss['peer'][1]:.0f}"
                      if rss else "")
        print(f"RESULT case={name} ours_ms={med['ours']:.1f} peer_ms={med['peer']:.1f} "
              f"speedup={ratio:.2f} threads={args.threads} device={args.device}{rss_fields}")
        print(flush=True)
        figures[name] = med
    if args.plot:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from plot_compare import plot_comparison
        plot_comparison(args.plot, f"detection ops against torchvision, {args.threads} threads (median ms)", [
            (name, "ms", {"mrcnn_ops": m["ours"], "torchvision": m["peer"]}, "lower") for name, m in figures.items()
        ])
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
