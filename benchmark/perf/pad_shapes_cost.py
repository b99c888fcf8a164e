#!/usr/bin/env python3
"""What padding every training batch to a few fixed shapes (data.pad_to_shapes, data::batch_shape)
costs against padding each batch to its own size: padded pixels and the forward FLOPs of the
backbone, the FPN and the RPN head per epoch, on a sample of COCO's size distribution.

The batches are the project's own, computed from the annotations alone (no image is decoded):
  - the training filter of benchmark/data/coco_dataset.h (an image is kept when one of its
    annotations, crowd ones included, has a box wider and taller than 1 px), images in ascending
    id order (several annotation files are merged in that order);
  - the resize of benchmark/data/transforms.h (reference_resize_size: Python's round, then
    truncation), at --min-size / --max-size (MLPerf: 800 / 1333);
  - the sampler of benchmark/data/sampler.cpp (aspect groups h >= w, the seeded shuffle of
    benchmark/data/rng.h and model/seeding.h ported bit for bit, LastBatch::kPad), at --batch
    images per GPU and --world-size ranks; every rank's batches are counted;
  - the padded size of benchmark/data/batch.cpp's batch_shape: the batch's largest height and
    width rounded up to --size-divisible, or the smallest-area shape that holds it (ties: the first
    listed); a batch no shape holds keeps its own size.
FLOPs: the convolutions of ResNet-50 (stride in the 1x1, the reference's and model/options.h's
default), the FPN (1x1 laterals, 3x3 outputs; P6 a max pool) and the RPN head (3x3, then 1x1 to 3
objectness and 12 box outputs, on P2..P6), forward, 2 FLOPs per multiply-add: model/flop_count.h's
convention (torch.utils.flop_counter's). Counted per padded shape by formula; --check-torch counts
the same network built from torchvision's modules with torch.utils.flop_counter on the meta device
and stops on any difference.

  pad_shapes_cost.py [COCO_DIR | ANNOTATION_JSON ...] [--batch 12] [--world-size 1] [--seed 1]
                     [--epochs 1] [--policy NAME=HxW,HxW ...] [--check-torch] [--json OUT]

Defaults: ../shared/coco-real's two folders (208 genuine train2017 images, 206 kept by the
filter), batch 12, one rank, epochs 0..--epochs-1 of seed 1; policies: batch-own, NVIDIA's two
shapes, and two or three per orientation (800 x 1088 never helps at batch 12: nearly every batch of
landscape images holds one resized 1199 or more wide).

The resize and the sampler here were compared with the C++ (sampler.cpp and transforms.cpp built
alone into a throwaway probe, 2026-11-28): the same sizes for 3,212 source sizes and the same
batches for (batch, ranks, epochs, seed) = (12, 1, 5, 1), (12, 8, 2, 7), (2, 3, 3, 12345678901234).
"""
import argparse
import collections
import datetime
import json
import pathlib
import platform
import sys

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


# ---- model/seeding.h and benchmark/data/rng.h -----------------------------------------------------

def mix64(x):
    z = (x + GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class SplitMix:
    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        out = mix64(self.state)
        self.state = (self.state + GOLDEN) & MASK64
        return out


def derive_seed(parts):
    sm = SplitMix(0x6A09E667F3BCC909)
    h = sm.next()
    for p in parts:
        sm.state ^= (p + GOLDEN + ((h << 6) & MASK64) + (h >> 2)) & MASK64
        h = sm.next()
    return h


def epoch_order_seed(seed, epoch):
    return derive_seed([seed & MASK64, 0x5A3F, epoch & MASK64])


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK64


class Rng:  # xoshiro256** seeded through SplitMix64
    def __init__(self, seed):
        sm = SplitMix(seed)
        self.s = [sm.next() for _ in range(4)]

    def next_u64(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):  # Lemire's multiply-and-reject
        m = self.next_u64() * n
        low = m & MASK64
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next_u64() * n
                low = m & MASK64
        return m >> 64

    def shuffle(self, v):
        for i in range(len(v), 1, -1):
            j = self.below(i)
            v[i - 1], v[j] = v[j], v[i - 1]


# ---- benchmark/data: the dataset, the resize, the sampler, the padded size ------------------------

def reference_resize_size(h, w, min_size, max_size):
    size = min_size
    if max_size > 0:
        lo, hi = float(min(w, h)), float(max(w, h))
        if hi / lo * size > max_size:
            size = int(round(max_size * lo / hi))  # half to even, as std::nearbyint
    if (w <= h and w == size) or (h <= w and h == size):
        return h, w
    if w < h:
        return int(float(size * h) / float(w)), size
    return size, int(float(size * w) / float(h))


def training_images(annotation_files):
    """(id, height, width) of the images the training filter keeps, in ascending id order."""
    images, usable = {}, set()
    for path in annotation_files:
        d = json.loads(pathlib.Path(path).read_text())
        for im in d["images"]:
            if im["id"] in images:
                sys.exit(f"{path}: image id {im['id']} also in another annotation file")
            images[im["id"]] = (im["height"], im["width"])
        for a in d["annotations"]:
            if a["bbox"][2] > 1 and a["bbox"][3] > 1:
                usable.add(a["image_id"])
    return [(i, *images[i]) for i in sorted(images) if i in usable]


def aspect_group(h, w):
    return 1 if h >= w else 0


def sampler_epoch(groups, batch, world, seed, epoch):
    """BatchSampler::epoch (shuffle on, LastBatch::kPad) for every rank: [rank][batch] -> indices."""
    n = len(groups)
    order = list(range(n))
    Rng(epoch_order_seed(seed, epoch)).shuffle(order)
    glob = batch * world
    globals_, open_ = [], {0: [], 1: []}
    for idx in order:
        g = open_[groups[idx]]
        g.append(idx)
        if len(g) == glob:
            globals_.append(list(g))
            g.clear()
    for gi in (0, 1):
        g = open_[gi]
        if not g:
            continue
        members = [i for i in order if groups[i] == gi]
        k = 0
        while len(g) < glob:
            g.append(members[k % len(members)])
            k += 1
        globals_.append(g)
    return [[gb[r::world] for gb in globals_ if gb[r::world]] for r in range(world)]


def round_up(x, d):
    return (x + d - 1) // d * d


def batch_shape(sizes, shapes, size_divisible):
    own = (round_up(max(h for h, _ in sizes), size_divisible), round_up(max(w for _, w in sizes), size_divisible))
    best = None
    for s in shapes:
        if s[0] >= own[0] and s[1] >= own[1] and (best is None or s[0] * s[1] < best[0] * best[1]):
            best = s
    return best if best is not None else own


# ---- FLOPs: ResNet-50 (stride in the 1x1) + FPN + RPN head, forward ----------------------------------

def conv(cin, cout, k, h, w):
    """2 * C_out * C_in * k * k * H_out * W_out, per image."""
    return 2 * cout * cin * k * k * h * w


def ceil_div(a, b):
    return -(-a // b)


def network_flops(H, W, fpn_channels=256, anchors=3):
    """Forward FLOPs per image of padded size H x W (multiples of 32), by stage."""
    assert H % 32 == 0 and W % 32 == 0, (H, W)
    backbone = conv(3, 64, 7, H // 2, W // 2)  # stem, stride 2; then a 3x3/2 max pool
    cin = 64
    c_out = []
    for stage, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        stride = 4 << stage  # res2: 4, res3: 8, res4: 16, res5: 32
        h, w = H // stride, W // stride
        out = 4 * width
        for b in range(blocks):
            # stride in the 1x1: every convolution of the block runs at the output's size
            backbone += conv(cin, width, 1, h, w) + conv(width, width, 3, h, w) + conv(width, out, 1, h, w)
            if b == 0:
                backbone += conv(cin, out, 1, h, w)  # the shortcut's projection
            cin = out
        c_out.append((out, h, w))
    fpn = sum(conv(c, fpn_channels, 1, h, w) + conv(fpn_channels, fpn_channels, 3, h, w) for c, h, w in c_out)
    levels = [(h, w) for _, h, w in c_out] + [(ceil_div(H, 64), ceil_div(W, 64))]  # P6: max pool 1x1/2 of P5
    rpn = sum(conv(fpn_channels, fpn_channels, 3, h, w) + conv(fpn_channels, anchors, 1, h, w)
              + conv(fpn_channels, 4 * anchors, 1, h, w) for h, w in levels)
    return {"backbone": backbone, "fpn": fpn, "rpn_head": rpn}


def torch_flops(H, W):
    """The same network from torchvision's modules, counted by torch.utils.flop_counter (meta)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from torchvision.models import resnet50
    from torchvision.models.detection.rpn import RPNHead
    from torchvision.ops import FeaturePyramidNetwork
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

    with torch.device("meta"):
        body = resnet50()
        for layer in (body.layer2, body.layer3, body.layer4):  # the stride into the 1x1 (MSRA)
            layer[0].conv1.stride, layer[0].conv2.stride = (2, 2), (1, 1)
        fpn = FeaturePyramidNetwork([256, 512, 1024, 2048], 256, extra_blocks=LastLevelMaxPool())
        head = RPNHead(256, 3)
        x = torch.empty(1, 3, H, W)
    out = {}
    with FlopCounterMode(display=False) as fc:
        y = body.maxpool(body.relu(body.bn1(body.conv1(x))))
        feats = []
        for layer in (body.layer1, body.layer2, body.layer3, body.layer4):
            y = layer(y)
            feats.append(y)
    out["backbone"] = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        p = fpn(collections.OrderedDict((str(i), f) for i, f in enumerate(feats)))
    out["fpn"] = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        head(list(p.values()))
    out["rpn_head"] = fc.get_total_flops()
    return out


# ---- the report ---------------------------------------------------------------------------------------

def parse_policy(text):
    name, _, shapes = text.partition("=")
    out = []
    for s in filter(None, shapes.split(",")):
        h, w = s.lower().split("x")
        out.append((int(h), int(w)))
    return name, out


DEFAULT_POLICIES = [
    "batch-own=",
    "NVIDIA 2 (800x1344 each way)=800x1344,1344x800",
    "2 per orientation (1216, 1344)=800x1216,800x1344,1216x800,1344x800",
    "3 per orientation (1216, 1280, 1344)=800x1216,800x1280,800x1344,1216x800,1280x800,1344x800",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = pathlib.Path(__file__).resolve()
    default_real = here.parents[3] / "shared" / "coco-real"
    ap.add_argument("data", nargs="*", help="COCO folders (annotations/instances_train2017.json) or annotation files "
                    f"(default: the folders under {default_real})")
    ap.add_argument("--min-size", type=int, default=800)
    ap.add_argument("--max-size", type=int, default=1333)
    ap.add_argument("--size-divisible", type=int, default=32)
    ap.add_argument("--batch", type=int, default=12, help="images per GPU")
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1, help="epochs 0..N-1 of --seed, summed")
    ap.add_argument("--policy", action="append", help="NAME=HxW,HxW,... (empty list: batch-own); repeatable")
    ap.add_argument("--check-torch", action="store_true", help="count every padded shape with torch too")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    files = []
    for d in (args.data or sorted(p for p in default_real.iterdir() if p.is_dir())):
        p = pathlib.Path(d)
        files.append(p / "annotations" / "instances_train2017.json" if p.is_dir() else p)
    images = training_images(files)
    sizes = [reference_resize_size(h, w, args.min_size, args.max_size) for _, h, w in images]
    groups = [aspect_group(h, w) for _, h, w in images]
    policies = [parse_policy(p) for p in (args.policy or DEFAULT_POLICIES)]
    for name, shapes in policies:
        for s in shapes:
            if s[0] % args.size_divisible or s[1] % args.size_divisible:
                sys.exit(f"policy {name}: {s[0]}x{s[1]} is not a multiple of {args.size_divisible}")

    batches = []  # one list of sizes per batch, every rank, every epoch
    for e in range(args.epochs):
        for rank_batches in sampler_epoch(groups, args.batch, args.world_size, args.seed, e):
            batches += [[sizes[i] for i in b] for b in rank_batches]
    valid = sum(h * w for b in batches for h, w in b)

    flops_cache = {}

    def flops(shape):
        if shape not in flops_cache:
            f = network_flops(*shape)
            if args.check_torch:
                t = torch_flops(*shape)
                if t != f:
                    sys.exit(f"FLOPs of {shape[0]}x{shape[1]}: formula {f}, torch {t}")
            flops_cache[shape] = f
        return flops_cache[shape]

    rows = []
    for name, shapes in policies:
        pixels, total, by_stage, seen = 0, 0, collections.Counter(), collections.Counter()
        for b in batches:
            shape = batch_shape(b, shapes, args.size_divisible)
            seen[shape] += 1
            pixels += len(b) * shape[0] * shape[1]
            f = flops(shape)
            for k, v in f.items():
                by_stage[k] += len(b) * v
            total += len(b) * sum(f.values())
        rows.append({"policy": name, "shapes": [list(s) for s in shapes], "padded_pixels": pixels, "flops": total,
                     "flops_by_stage": dict(by_stage),
                     "batch_shapes": {f"{h}x{w}": n for (h, w), n in sorted(seen.items())}})
    base = rows[0]
    for r in rows:
        r["pixels_vs_first"] = r["padded_pixels"] / base["padded_pixels"] - 1
        r["flops_vs_first"] = r["flops"] / base["flops"] - 1
        r["padding_share"] = 1 - valid / r["padded_pixels"]

    n_land = sum(1 for g in groups if g == 0)
    print(f"{len(images)} training images ({n_land} landscape, {len(images) - n_land} portrait or square) from "
          f"{', '.join(str(f) for f in files)}")
    print(f"resize {args.min_size}/{args.max_size}, batch {args.batch} per GPU x {args.world_size} rank(s), "
          f"seed {args.seed}, epochs 0..{args.epochs - 1}: {len(batches)} batches, {valid / 1e6:.1f} M image pixels; "
          f"FLOPs: backbone + FPN + RPN head forward{' (checked with torch)' if args.check_torch else ''}")
    print()
    print(f"| policy | distinct shapes met | padded Mpx | padding share | px vs {base['policy']} | "
          f"forward TFLOP | FLOPs vs {base['policy']} |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {len(r['batch_shapes'])} | {r['padded_pixels'] / 1e6:.1f} | "
              f"{100 * r['padding_share']:.1f} % | {100 * r['pixels_vs_first']:+.1f} % | {r['flops'] / 1e12:.2f} | "
              f"{100 * r['flops_vs_first']:+.1f} % |")
    print()
    for r in rows:
        print(f"{r['policy']}: " + ", ".join(f"{s} x{n}" for s, n in r["batch_shapes"].items()))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({
            "date": datetime.date.today().isoformat(), "machine": platform.node(), "args": vars(args),
            "images": len(images), "batches": len(batches), "image_pixels": valid, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
