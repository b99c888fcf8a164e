#!/usr/bin/env python3
"""The portable ops (torch.ops.mrcnn_portable) against the native kernels (torch.ops.mrcnn) and
torchvision, at the MLPerf Mask R-CNN shapes, in one run, interleaved.

The portable ops are the compositions of standard ATen operators in model/ops/portable/ (what
run.ops=portable runs, on any LibTorch device); here they run on the CPU, where the native
kernels are the reference, to show what the portability costs. Cases (batch 2, images 800x1333
and 800x1200 padded to 800x1344, FPN P2..P5 with 256 channels for pooling, P2..P6 for proposals;
the inputs are compare_ops_torchvision.py's where it has the case):
  multilevel_roi_align_box    box head pooling: 512 RoIs per image, 7x7, sampling ratio 2,
                              forward + backward w.r.t. P2..P5 (torchvision: MultiScaleRoIAlign)
  multilevel_roi_align_mask   mask head pooling: 128 RoIs per image, 14x14, same otherwise
  *_channels_last             the same with channels-last features
  nms                         NMS of 2000 random boxes at IoU 0.7 (a pre-NMS level of the RPN;
                              torchvision.ops.nms)
  batched_nms                 the box head's inference NMS of one image: 1000 proposals x 80
                              classes, the boxes scoring > 0.05 (11,202), IoU 0.5
                              (torchvision.ops.batched_nms)
  proposals_train             proposal generation from the RPN head outputs: pre-NMS top 2000
                              per level, NMS 0.7, 1000 per image (torchvision: box decoding of
                              every anchor + RegionProposalNetwork.filter_proposals)
  proposals_test              the same with pre-NMS top 1000 per level
  mask_targets                28x28 targets of 256 positive proposals from polygons (20
                              instances of 3 polygons; no torchvision peer: torchvision resamples
                              bitmaps with roi_align, another recipe)
  paste_masks_binary          100 28x28 masks pasted into 800x1333 and thresholded at 0.5
                              (torchvision: roi_heads.paste_masks_in_image, then > 0.5)
Every side gets the same tensors and the same thread count (--threads, default 2). Each case is
run once per side untimed (warm-up; the outputs are compared: portable against native, which
must agree to rounding for RoIAlign and exactly otherwise), then the sides alternate for --reps
repetitions; medians (and the fastest repetition, a hint of the noise on a shared machine) are
reported with the ratios of the medians portable/native and portable/torchvision
(above 1: the portable op is slower). A portable op not registered in the library (not written
yet), or one that fails on the case's inputs, is reported as such for its case, which is then
timed without it. One machine-readable RESULT line per case. --profile runs the portable side
once more under torch.profiler and prints the ATen operators that took its time.

usage: compare_ops_portable.py [--build-dir build] [--threads 2] [--reps 5] [--cases ...]
                               [--plot FILE.png] [--profile]
"""
import argparse
import os
import statistics
import sys
import time
from collections import OrderedDict

import torch
import torchvision
from torchvision.models.detection import roi_heads as tv_roi_heads

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_ops_torchvision as cot  # noqa: E402  (input builders, library loading, environment)

SIDES = ("native", "portable", "torchvision")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, {"total": time.perf_counter() - t0}


class PeerCase:
    """A case of compare_ops_torchvision (self.case): native and portable take turns as its `ops`,
    torchvision runs as its peer."""

    def run(self, side, ops):
        if side == "torchvision":
            return self.case.peer()
        self.case.ops = ops
        return self.case.ours()


class RoiAlign(PeerCase):
    """compare_ops_torchvision's RoiCase."""
    op = "multilevel_roi_align"

    def __init__(self, per_image, output_size, channels_last):
        self.case = cot.RoiCase(None, per_image, output_size, channels_last)

    def outputs(self, side, ops):
        c = self.case
        fs = [f.detach().requires_grad_(True) for f in c.feats]
        if side == "torchvision":
            out = c.pool(OrderedDict((str(i), f) for i, f in enumerate(fs)), c.boxes, cot.IMAGE_SIZES)
        else:
            out = ops.multilevel_roi_align(fs, c.rois, c.output_size, 2, False, cot.SCALES)
        return [out.detach()] + list(torch.autograd.grad(out, fs, c.grad))


class Nms:
    """2000 random boxes (bench_ops_kernels.cpp's Nms/2000), IoU 0.7."""
    op = "nms"

    def __init__(self, n=2000):
        gen = torch.Generator().manual_seed(3)
        xy = torch.rand(n, 2, generator=gen) * 1200
        self.boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=gen) * 300 + 4], 1)
        self.scores = torch.rand(n, generator=gen)

    def outputs(self, side, ops):
        if side == "torchvision":
            return [torchvision.ops.nms(self.boxes, self.scores, 0.7)]
        return [ops.nms(self.boxes, self.scores, 0.7)]

    def run(self, side, ops):
        return timed(lambda: self.outputs(side, ops))[1]


class BatchedNms:
    """The box head's inference NMS of one image (torchvision's postprocess_detections, the
    reference's PostProcessor): 1000 proposals, each decoded per class (80 classes, boxes
    jittered about the proposal), the scores > 0.05 kept (11,202 boxes), IoU 0.5 per class."""
    op = "batched_nms"

    def __init__(self, proposals=1000, classes=80):
        gen = torch.Generator().manual_seed(6)
        props = cot.roi_boxes(gen, proposals)[0]
        wh = (props[:, 2:] - props[:, :2]).repeat(1, 2)
        boxes = props[:, None, :] + torch.randn(proposals, classes, 4, generator=gen) * 0.1 * wh[:, None, :]
        boxes = torch.cat([torch.minimum(boxes[..., :2], boxes[..., 2:]),
                           torch.maximum(boxes[..., :2], boxes[..., 2:])], -1)
        h, w = cot.IMAGE_SIZES[0]
        boxes[..., 0::2] = boxes[..., 0::2].clamp(0, w)
        boxes[..., 1::2] = boxes[..., 1::2].clamp(0, h)
        # Post-softmax-like scores: P(u^20 > 0.05) = 1 - 0.05^(1/20) ~ 0.14 of the 80,000.
        scores = torch.rand(proposals, classes, generator=gen) ** 20
        labels = torch.arange(1, classes + 1).expand(proposals, classes)
        keep = scores.reshape(-1) > 0.05
        self.boxes = boxes.reshape(-1, 4)[keep].contiguous()
        self.scores = scores.reshape(-1)[keep].contiguous()
        self.labels = labels.reshape(-1)[keep].contiguous()

    def outputs(self, side, ops):
        if side == "torchvision":
            return [torchvision.ops.batched_nms(self.boxes, self.scores, self.labels, 0.5)]
        return [ops.batched_nms(self.boxes, self.scores, self.labels, 0.5)]

    def run(self, side, ops):
        return timed(lambda: self.outputs(side, ops))[1]


class Proposals(PeerCase):
    """compare_ops_torchvision's ProposalCase (built with the native ops, whose anchors it uses)."""
    op = "generate_proposals"

    def __init__(self, native, pre_nms, post_nms):
        self.case = cot.ProposalCase(native, pre_nms, post_nms)

    def outputs(self, side, ops):
        c = self.case
        if side == "torchvision":
            return []  # torchvision's RPN keeps per image in another layout: not compared
        return list(ops.generate_proposals(c.obj, c.deltas, c.anchors, c.sizes, c.pre, c.post,
                                           0.7, 1e-3, False, 0.0))


class MaskTargets:
    """bench_ops_kernels.cpp's MaskTargets: 20 instances of 3 polygons of 16 points, 256
    proposals around them, 28x28."""
    op = "mask_targets"

    def __init__(self):
        gen = torch.Generator().manual_seed(5)
        coords, poly_off, inst_off = [], [0], [0]
        a = 2 * torch.pi * torch.arange(16, dtype=torch.float64) / 16
        for i in range(20):
            cx, cy, r = 100 + 50 * i, 300, 60
            for p in range(3):
                xs = cx + (r - 10 * p) * torch.cos(a) + 5 * p
                ys = cy + (r - 10 * p) * torch.sin(a)
                coords.append(torch.stack([xs, ys], 1).reshape(-1))
                poly_off.append(poly_off[-1] + 32)
            inst_off.append(len(poly_off) - 1)
        self.coords = torch.cat(coords)
        self.poly_off = torch.tensor(poly_off)
        self.inst_off = torch.tensor(inst_off)
        self.matched = torch.randint(0, 20, (256,), generator=gen)
        centre = self.matched.float() * 50 + 100
        jitter = torch.randn(256, 4, generator=gen) * 10
        self.proposals = torch.stack([centre - 60, torch.full((256,), 240.0), centre + 60,
                                      torch.full((256,), 360.0)], 1) + jitter

    def outputs(self, side, ops):
        return [ops.mask_targets(self.coords, self.poly_off, self.inst_off, self.matched,
                                 self.proposals, 28)]

    def run(self, side, ops):
        return timed(lambda: self.outputs(side, ops))[1]


class PasteMasks:
    """bench_ops_kernels.cpp's PasteMasks/Binary, 100 28x28 probabilities into 800x1333, with
    every box's corner inside the image (torchvision fails on a box below or right of it)."""
    op = "paste_masks_in_image_binary"

    def __init__(self):
        gen = torch.Generator().manual_seed(4)
        self.masks = torch.rand(100, 28, 28, generator=gen)
        xy = torch.rand(100, 2, generator=gen) * torch.tensor([1333.0 - 8, 800.0 - 8])
        self.boxes = torch.cat([xy, xy + torch.rand(100, 2, generator=gen) * 400 + 8], 1)

    def outputs(self, side, ops):
        if side == "torchvision":
            return [(tv_roi_heads.paste_masks_in_image(self.masks[:, None], self.boxes, (800, 1333), 1)
                     > 0.5)[:, 0].to(torch.uint8)]
        return [ops.paste_masks_in_image_binary(self.masks, self.boxes, 800, 1333, 1, 0.5)]

    def run(self, side, ops):
        return timed(lambda: self.outputs(side, ops))[1]


CASES = OrderedDict([
    ("multilevel_roi_align_box", lambda native: RoiAlign(512, 7, False)),
    ("multilevel_roi_align_mask", lambda native: RoiAlign(128, 14, False)),
    ("multilevel_roi_align_box_channels_last", lambda native: RoiAlign(512, 7, True)),
    ("multilevel_roi_align_mask_channels_last", lambda native: RoiAlign(128, 14, True)),
    ("nms", lambda native: Nms()),
    ("batched_nms", lambda native: BatchedNms()),
    ("proposals_train", lambda native: Proposals(native, 2000, 1000)),
    ("proposals_test", lambda native: Proposals(native, 1000, 1000)),
    ("mask_targets", lambda native: MaskTargets()),
    ("paste_masks_binary", lambda native: PasteMasks()),
])
NO_PEER = {"mask_targets"}


def portable_ops():
    """torch.ops.mrcnn_portable, and the names it has (an op not registered is absent)."""
    ns = torch.ops.mrcnn_portable
    have = set()
    for name in ("multilevel_roi_align", "nms", "batched_nms", "generate_proposals", "mask_targets",
                 "paste_masks_in_image_binary"):
        try:
            getattr(ns, name)
            have.add(name)
        except (AttributeError, RuntimeError):
            pass
    return ns, have


def agreement(ref, got):
    """'equal', or the largest absolute difference, or what differs in shape."""
    if len(ref) != len(got):
        return "different outputs"
    worst = 0.0
    for a, b in zip(ref, got):
        if a.shape != b.shape:
            return f"shapes {tuple(a.shape)} vs {tuple(b.shape)}"
        if torch.equal(a, b):
            continue
        if not a.is_floating_point():
            if a.dim() == 1 and torch.equal(a.sort()[0], b.sort()[0]):
                return "same indices, in another order (ties)"
            return f"{int((a != b).sum())} of {a.numel()} elements differ"
        worst = max(worst, float((a.double() - b.double()).abs().max()))
    return "equal" if worst == 0 else f"max |diff| {worst:.2e}"


def profile_side(case, ops):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        case.run("portable", ops)
    print("  portable, one more run under torch.profiler (top ATen ops by self CPU time):")
    for line in prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12).splitlines():
        print("    " + line)


def fmt(v):
    return "n/a" if v is None else f"{v:.1f}"


def parse_args():
    """The command line's arguments; exits naming an unknown case."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("MRCNN_BUILD_DIR", "build"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--cases", nargs="*", default=list(CASES))
    p.add_argument("--plot", help="write a PNG of the medians here")
    p.add_argument("--profile", action="store_true",
                   help="profile one more run of each portable op and print its top ATen ops")
    args = p.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    return args


def print_header(args, lib, have):
    """Prints the environment, the library and the registered portable ops; returns nothing."""
    for line in cot.environment(lib):
        print("# " + line.replace("(both sides)", "(every side)"))
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(lib)))
    print(f"# built       {built} (the library's modification time)")
    print(f"# portable ops registered: {', '.join(sorted(have)) or 'none'}")
    if args.threads < 2:
        print("# WARNING: one thread: the parallel kernels are not exercised")
    print(f"# {args.reps} interleaved repetitions after one warm-up; medians in ms")
    print()


def warm_up(case, ops, sides):
    """None, or the portable op's first error line if it failed (then dropped from sides and ops)."""
    # Warm-up, and the outputs compared. A portable op that fails is reported, not timed.
    outs, failed = {}, None
    for s in list(sides):
        try:
            outs[s] = case.outputs(s, ops[s])
        except RuntimeError as e:
            if s != "portable":
                raise
            failed = str(e).splitlines()[0]
            print(f"  portable     mrcnn_portable::{case.op} failed: {failed}")
            sides.remove(s)
            ops[s] = None
    if "portable" in outs:
        print(f"  agreement    portable vs native: {agreement(outs['native'], outs['portable'])}")
    if "torchvision" in outs and outs["torchvision"]:
        print(f"               torchvision vs native: {agreement(outs['native'], outs['torchvision'])}")
    return failed


def time_sides(case, ops, sides, reps):
    """(median, fastest) ms per side (None for a side not timed), each side's line printed."""
    runs = {s: [] for s in sides}
    for _ in range(reps):
        for s in sides:
            runs[s].append(case.run(s, ops[s]))
    med = {s: None for s in SIDES}
    low = {s: None for s in SIDES}
    for s, rs in runs.items():
        med[s] = statistics.median(sum(r.values()) for r in rs) * 1e3
        low[s] = min(sum(r.values()) for r in rs) * 1e3
        parts = {k: statistics.median(r[k] for r in rs) * 1e3 for k in rs[0]}
        split = "  ".join(f"{k} {v:8.1f}" for k, v in parts.items())
        print(f"  {s:12s} {med[s]:9.1f} ms   ({split})   min {low[s]:.1f}")
    return med, low


def run_case(name, native, portable, have, lib, args):
    """The case's median ms per side (None for a side not timed), its lines and RESULT printed."""
    case = CASES[name](native)
    ops = {"native": native, "portable": portable if case.op in have else None,
           "torchvision": None if name in NO_PEER else torchvision}
    sides = [s for s in SIDES if ops[s] is not None]
    print(f"{name}")
    if ops["portable"] is None:
        print(f"  portable     mrcnn_portable::{case.op} is not registered in {lib}: not timed")
    failed = warm_up(case, ops, sides)
    med, low = time_sides(case, ops, sides, args.reps)
    pn = med["portable"] / med["native"] if med["portable"] is not None else None
    pt = (med["portable"] / med["torchvision"]
          if med["portable"] is not None and med["torchvision"] is not None else None)
    if pn is not None:
        print(f"  portable/native      {pn:6.2f}x")
    if pt is not None:
        print(f"  portable/torchvision {pt:6.2f}x")
    if args.profile and ops["portable"] is not None:
        profile_side(case, portable)
    r = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    print(f"RESULT case={name} native_ms={fmt(med['native'])} portable_ms="
          f"{fmt(med['portable']) if ops['portable'] is not None else 'failed' if failed else 'unregistered'} "
          f"torchvision_ms={fmt(med['torchvision'])} portable_over_native={r(pn)} "
          f"portable_over_torchvision={r(pt)} native_min_ms={fmt(low['native'])} "
          f"portable_min_ms={fmt(low['portable'])} torchvision_min_ms={fmt(low['torchvision'])} "
          f"threads={args.threads} reps={args.reps} device=cpu")
    print(flush=True)
    return med


def plot_figures(figures, args):
    """Writes the PNG of every case's medians to --plot; returns nothing."""
    from plot_compare import plot_comparison
    panels = [(name, "ms", {label: m[s] for s, label in (("native", "native"), ("portable", "portable"),
                                                           ("torchvision", "torchvision"))
                            if m[s] is not None}, "lower")
              for name, m in figures.items()]
    plot_comparison(args.plot, f"portable ops against the native kernels and torchvision on the CPU, "
                    f"{args.threads} threads (median ms)", panels,
                    note="ratios in brackets: time over the native kernel's")
    print(f"plot: {args.plot}")


def main():
    args = parse_args()
    native, lib = cot.load_ops(args.build_dir)
    portable, have = portable_ops()
    torch.set_num_threads(args.threads)
    print_header(args, lib, have)
    figures = {}
    for name in args.cases:
        # One case at a time: its inputs and outputs are freed when run_case returns.
        figures[name] = run_case(name, native, portable, have, lib, args)
    if args.plot:
        plot_figures(figures, args)


if __name__ == "__main__":
    main()
