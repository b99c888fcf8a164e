"""Reference checks of the data pipeline against the Python tools the MLPerf reference runs on.

* resize sizes: data_probe against the reference's Resize.get_size formula (maskrcnn-benchmark),
  written out here in Python, for thousands of image shapes;
* JPEG decoding: identical bytes to PIL's Image.open(...).convert("RGB");
* resizing: identical bytes to PIL's Image.resize(..., BILINEAR), up- and downscaling;
* the whole image transform (resize, flip, to tensor, BGR x255 or RGB, normalize): identical
  floats to the reference's torchvision pipeline, for the MLPerf and the torchvision presets;
* the synthetic dataset (mlperf-maskrcnn synth): byte-identical across runs and thread counts,
  readable by pycocotools, masks that cover exactly the drawn shapes, and a perfect COCOeval
  score of the ground truth against itself; bad arguments give exit status 2.
"""
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from scipy import ndimage
from torchvision.transforms import functional as F

BUILD = os.environ["MRCNN_BUILD_DIR"]
PROBE = os.path.join(BUILD, "tests", "benchmark", "data", "data_probe")
EXE = os.path.join(BUILD, "benchmark", "mlperf-maskrcnn")

MLPERF_MEAN, MLPERF_STD = [102.9801, 115.9465, 122.7717], [1.0, 1.0, 1.0]
TV_MEAN, TV_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def probe_batch(commands):
    """Runs data_probe once over many commands; returns one result line per command."""
    text = "".join(" ".join(map(str, c)) + "\n" for c in commands)
    r = subprocess.run([PROBE, "batch"], input=text, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"data_probe batch failed: {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    if len(lines) != len(commands):
        raise RuntimeError(f"data_probe answered {len(lines)} lines for {len(commands)} commands")
    for c, line in zip(commands, lines):
        if line.startswith("error:"):
            raise RuntimeError(f"data_probe {c[0]} failed: {line}")
    return lines


def reference_size(w, h, min_size, max_size):
    """The reference's Resize.get_size: Python's round() and int() semantics."""
    size = min_size
    if max_size is not None:
        lo, hi = float(min((w, h))), float(max((w, h)))
        if hi / lo * size > max_size:
            size = int(round(max_size * lo / hi))
    if (w <= h and w == size) or (h <= w and h == size):
        return h, w
    if w < h:
        return int(size * h / w), size
    return size, int(size * w / h)


def test_sizes(tmp):
    rng = random.Random(3)
    shapes = [(640, 480), (480, 640), (500, 500), (800, 1000), (1000, 800), (2666, 5), (2666, 3),
              (1333, 800), (1, 1), (10000, 7)]
    shapes += [(rng.randint(1, 2000), rng.randint(1, 2000)) for _ in range(3000)]
    shapes += [(rng.randint(300, 640), rng.randint(200, 640)) for _ in range(2000)]  # COCO-like
    src = os.path.join(tmp, "shapes.txt")
    with open(src, "w") as f:
        f.write("".join(f"{w} {h}\n" for w, h in shapes))
    limits = [(800, 1333), (600, 1000), (320, 512)]
    probe_batch([("sizes", lo, hi, src, os.path.join(tmp, f"sizes{lo}.txt")) for lo, hi in limits])
    for min_size, max_size in limits:
        with open(os.path.join(tmp, f"sizes{min_size}.txt")) as f:
            got = [tuple(map(int, line.split())) for line in f]
        check(len(got) == len(shapes), f"sizes: {len(got)} answers for {len(shapes)} shapes")
        bad = [(s, g, reference_size(*s, min_size, max_size)) for s, g in zip(shapes, got)
               if g != reference_size(*s, min_size, max_size)]
        check(not bad, f"sizes ({min_size}, {max_size}): {len(bad)} differ, e.g. {bad[:3]}")
    print(f"sizes: {3 * len(shapes)} shapes compared")


def random_image(rng, h, w):
    # Smooth content plus noise: realistic for JPEG, and every resize weight matters.
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 3 + y) % 256, (y * 5) % 256, ((x + y) * 2) % 256], -1)
    noise = rng.integers(0, 40, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def test_decode_resize_transform(tmp):
    rng = np.random.default_rng(7)
    cases = [(48, 64, 96, 128), (61, 83, 800, 1088), (480, 640, 800, 1066), (97, 75, 36, 28), (50, 50, 17, 50)]
    commands, checks = [], []
    for i, (h, w, oh, ow) in enumerate(cases):
        arr = random_image(rng, h, w)
        png = os.path.join(tmp, f"r{i}.png")
        Image.fromarray(arr).save(png)
        # resize: byte-identical to PIL's
        out = os.path.join(tmp, f"r{i}.bin")
        commands.append(("resize", png, oh, ow, out))
        ref = np.asarray(Image.fromarray(arr).resize((ow, oh), Image.BILINEAR))
        checks.append(("resize", f"resize {h}x{w} -> {oh}x{ow}", out, ref))
        # decode: JPEG with 4:4:4 and 4:2:0 chroma, identical to PIL's
        for sub in (0, 2):
            jpg = os.path.join(tmp, f"d{i}_{sub}.jpg")
            Image.fromarray(arr).save(jpg, quality=85, subsampling=sub)
            out = os.path.join(tmp, f"d{i}_{sub}.bin")
            commands.append(("decode", jpg, out))
            checks.append(("decode", f"decode {jpg}", out, np.asarray(Image.open(jpg).convert("RGB"))))
        # transform: the reference pipeline on the PNG
        for flip in (0, 1):
            for preset in ("mlperf", "torchvision"):
                out = os.path.join(tmp, f"t{i}_{flip}_{preset}.bin")
                commands.append(("transform", png, oh, ow, flip, preset, out))
                img = F.resize(Image.open(png).convert("RGB"), [oh, ow])
                if flip:
                    img = F.hflip(img)
                t = F.to_tensor(img)
                if preset == "mlperf":
                    t = F.normalize(t[[2, 1, 0]] * 255, MLPERF_MEAN, MLPERF_STD)
                else:
                    t = F.normalize(t, TV_MEAN, TV_STD)
                checks.append(("transform", f"transform {h}x{w}->{oh}x{ow} flip={flip} {preset}", out, t))
    results = probe_batch(commands)
    for (kind, name, out, ref), line in zip(checks, results):
        if kind == "transform":
            ours = torch.from_numpy(np.fromfile(out, np.float32).reshape(ref.shape))
            diff = float((ours - ref).abs().max())
            check(diff <= 1e-5, f"{name}: max difference {diff} from the reference")
            continue
        if kind == "decode":
            hw = tuple(map(int, line.split()))
            check(hw == ref.shape[:2], f"{name}: size {hw}, PIL says {ref.shape[:2]}")
        ours = np.fromfile(out, np.uint8)
        check(ours.size == ref.size, f"{name}: {ours.size} bytes, PIL has {ref.size}")
        if ours.size == ref.size:
            diff = int(np.abs(ours.reshape(ref.shape).astype(int) - ref.astype(int)).max())
            check(diff == 0, f"{name}: max difference {diff} from PIL")
    print(f"decode/resize/transform: {len(cases)} images compared")


def run_synth(out, *extra):
    return subprocess.run([EXE, "synth", "--out", out, "--train", "24", "--val", "8", "--seed", "11",
                           "--quiet", *extra], capture_output=True, text=True)


def tree(root):
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, root)] = f.read()
    return files


def test_synth(tmp):
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    for out, threads in ((a, "1"), (b, "2")):
        r = run_synth(out, "--threads", threads)
        check(r.returncode == 0, f"synth exited {r.returncode}: {r.stderr}")
    ta, tb = tree(a), tree(b)
    check(len(ta) == 24 + 8 + 2, f"synth wrote {len(ta)} files")
    check(ta == tb, "synth: two runs with the same arguments differ")

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(os.path.join(a, "annotations", "instances_train2017.json"))
    check(len(coco.getImgIds()) == 24, "pycocotools sees the training images")
    check(sorted(c["name"] for c in coco.loadCats(coco.getCatIds())) == ["cross", "disc", "square", "triangle"],
          "categories")
    inside_ok = ring_ok = n = 0
    for img in coco.loadImgs(coco.getImgIds()):
        pix = np.asarray(Image.open(os.path.join(a, "train2017", img["file_name"])).convert("RGB")).astype(int)
        sat = pix.max(-1) - pix.min(-1)
        for ann in coco.loadAnns(coco.getAnnIds(imgIds=img["id"])):
            m = coco.annToMask(ann).astype(bool)
            check(abs(m.sum() - ann["area"]) <= 0.08 * ann["area"] + 4, f"area of annotation {ann['id']}")
            core = ndimage.binary_erosion(m, iterations=1)
            ring = ndimage.binary_dilation(m, iterations=2) & ~ndimage.binary_dilation(m, iterations=1)
            inside_ok += (sat[core] > 60).mean() > 0.98
            ring_ok += (sat[ring] > 60).mean() < 0.02
            n += 1
    check(n >= 24 and inside_ok == n, f"mask interiors are the drawn shape: {inside_ok}/{n}")
    check(ring_ok == n, f"just outside each mask is background: {ring_ok}/{n}")

    # The ground truth scored against itself is perfect for boxes and masks.
    anns = coco.loadAnns(coco.getAnnIds())
    dets = [{"image_id": x["image_id"], "category_id": x["category_id"], "bbox": x["bbox"],
             "segmentation": x["segmentation"], "score": 1.0} for x in anns]
    with contextlib.redirect_stdout(io.StringIO()):
        res = coco.loadRes(dets)
        for iou in ("bbox", "segm"):
            ev = COCOeval(coco, res, iou)
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
            check(abs(ev.stats[0] - 1.0) < 1e-9, f"{iou} AP of the ground truth against itself: {ev.stats[0]}")

    with open(os.path.join(a, "annotations", "instances_val2017.json")) as f:
        val = json.load(f)
    check(min(i["id"] for i in val["images"]) == 25, "validation ids follow the training ids")

    r = subprocess.run([EXE, "synth", "--train", "3"], capture_output=True, text=True)
    check(r.returncode == 2 and "--out" in r.stderr, f"missing --out: exit {r.returncode}, {r.stderr[:80]}")
    r = run_synth(os.path.join(tmp, "c"), "--size", "12x")
    check(r.returncode == 2 and "--size" in r.stderr, f"bad --size: exit {r.returncode}, {r.stderr[:80]}")
    print(f"synth: {len(ta)} files identical across runs, {n} masks checked")


def main():
    for p in (PROBE, EXE):
        if not os.path.exists(p):
            print(f"missing {p}: build the targets data_probe and mlperf-maskrcnn first")
            return 1
    with tempfile.TemporaryDirectory(prefix="mrcnn_data_ref_") as tmp:
        test_sizes(tmp)
        test_decode_resize_transform(tmp)
        test_synth(tmp)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all data reference checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
