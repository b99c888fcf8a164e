"""Checks of benchmark/perf/make_coco_scale.py, the generated train2017-scale annotation file.

The annotation-load benchmark is only as honest as its input, so at a small scale (0.002 of
train2017: 237 images) the file is read with pycocotools and checked to be what the generator
promises and what COCO's readers accept:
  * counts: images and instances exactly the release's scaled and rounded (118,287 and 860,001
    x 0.002), images without annotations present (1,021 x 0.002 -> 2), crowd 0.5..1.5%;
  * COCO's 80 category ids and file names (12-digit id + ".jpg");
  * every polygon valid: >= 3 points, inside its image, 2 decimals, bbox = the extent of the
    instance's points to 0.01, area = the sum of the shoelace areas within 1e-6 relative, every
    box wider and taller than 1 px (so the reference's training filter keeps every annotated image);
  * every crowd region an uncompressed RLE that pycocotools decodes to the image's size, with
    COCO's integer bbox one pixel narrower and shorter than the mask's box;
  * the same seed gives the same bytes, another seed other bytes; --images writes a JPEG of the
    record's size per image.
"""
import contextlib
import filecmp
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

SOURCE = os.environ.get("MRCNN_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GEN = os.path.join(SOURCE, "benchmark", "perf", "make_coco_scale.py")
SCALE = 0.002
COCO_IDS = sorted(set(range(1, 91)) - {12, 26, 29, 30, 45, 66, 68, 69, 71, 83})

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def generate(out, *args):
    r = subprocess.run([sys.executable, GEN, "--out", out, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"make_coco_scale.py {' '.join(args)} failed: {r.stderr.strip()}")
    return os.path.join(out, "annotations", "instances_train2017.json")


def shoelace(poly):
    x, y = np.asarray(poly[0::2]), np.asarray(poly[1::2])
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)))


def check_polygon_instance(a, img):
    W, H = img["width"], img["height"]
    seg = a["segmentation"]
    ok = isinstance(seg, list) and len(seg) >= 1
    xs, ys, area = [], [], 0.0
    for poly in seg if ok else []:
        ok &= len(poly) >= 6 and len(poly) % 2 == 0
        xs += poly[0::2]
        ys += poly[1::2]
        area += shoelace(poly)
    if not ok:
        return f"annotation {a['id']}: a polygon with fewer than 3 points"
    v = np.asarray(xs + ys)
    if np.abs(v * 100 - np.round(v * 100)).max() > 1e-6:
        return f"annotation {a['id']}: coordinates with more than 2 decimals"
    if min(xs) < 0 or max(xs) > W or min(ys) < 0 or max(ys) > H:
        return f"annotation {a['id']}: a point outside its {W}x{H} image"
    extent = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
    if max(abs(b - e) for b, e in zip(a["bbox"], extent)) > 0.01 + 1e-9:
        return f"annotation {a['id']}: bbox {a['bbox']} is not the extent {extent}"
    if abs(a["area"] - area) > 1e-6 * area:
        return f"annotation {a['id']}: area {a['area']} is not the shoelace area {area}"
    if not (a["bbox"][2] > 1 and a["bbox"][3] > 1):
        return f"annotation {a['id']}: box {a['bbox']} not wider and taller than 1 px"
    return None


def check_crowd(a, img):
    W, H = img["width"], img["height"]
    seg = a["segmentation"]
    if not (isinstance(seg, dict) and isinstance(seg["counts"], list)):
        return f"crowd {a['id']}: not an uncompressed RLE"
    if seg["size"] != [H, W] or sum(seg["counts"]) != H * W:
        return f"crowd {a['id']}: size {seg['size']} / {sum(seg['counts'])} pixels for a {W}x{H} image"
    rle = mask_utils.frPyObjects(seg, H, W)
    m = mask_utils.decode(rle)
    if m.shape != (H, W) or int(m.sum()) != int(mask_utils.area(rle)) or m.sum() == 0:
        return f"crowd {a['id']}: decodes to {m.shape}, {int(m.sum())} pixels"
    box = [int(v) for v in mask_utils.toBbox(rle)]
    if not all(isinstance(v, int) for v in a["bbox"]) or a["bbox"] != [box[0], box[1], box[2] - 1, box[3] - 1]:
        return f"crowd {a['id']}: bbox {a['bbox']} against the mask's box {box}"
    if a["id"] != 900_000_000_000 + a["category_id"] * 100_000_000 + a["image_id"]:
        return f"crowd {a['id']}: not COCO's crowd id of image {a['image_id']}"
    return None


def test_contents(path):
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(path)
    d = coco.dataset
    check(list(d) == ["info", "licenses", "images", "annotations", "categories"], f"top-level keys {list(d)}")
    n_img, n_ann = len(d["images"]), len(d["annotations"])
    check(n_img == round(118_287 * SCALE) == len(coco.imgs), f"{n_img} images, expected {round(118_287 * SCALE)}")
    check(n_ann == round(860_001 * SCALE) == len(coco.anns), f"{n_ann} instances, expected {round(860_001 * SCALE)}"
          " (with unique ids)")
    empty = sum(1 for i in coco.imgs if not coco.imgToAnns[i])
    check(empty == round(1_021 * SCALE), f"{empty} images without annotations, expected {round(1_021 * SCALE)}")
    crowd = [a for a in d["annotations"] if a["iscrowd"]]
    check(0.005 <= len(crowd) / n_ann <= 0.015, f"{len(crowd)} crowd regions of {n_ann}")
    check(sorted(coco.getCatIds()) == COCO_IDS, f"category ids {sorted(coco.getCatIds())}")
    check(len({c["name"] for c in d["categories"]}) == 80 and coco.cats[1]["name"] == "person"
          and coco.cats[90]["name"] == "toothbrush", "category names are not COCO's")
    bad_names = [i for i in d["images"] if i["file_name"] != f"{i['id']:012d}.jpg"]
    check(not bad_names, f"file names not 12-digit ids: {bad_names[:2]}")
    check(all(max(i["width"], i["height"]) <= 640 for i in d["images"]), "an image larger than 640 px")

    errors = []
    for a in d["annotations"]:
        img = coco.imgs[a["image_id"]]
        e = check_crowd(a, img) if a["iscrowd"] else check_polygon_instance(a, img)
        if e:
            errors.append(e)
    check(not errors, f"{len(errors)} bad annotations, first: {errors[:3]}")
    multi = sum(1 for a in d["annotations"] if not a["iscrowd"] and len(a["segmentation"]) >= 2)
    check(multi > 0, "no instance with 2+ polygons")
    # The MLPerf reference's training filter: an image with an annotation wider and taller than 1 px.
    kept = sum(1 for i in coco.imgs if any(a["bbox"][2] > 1 and a["bbox"][3] > 1 for a in coco.imgToAnns[i]))
    check(kept == n_img - empty, f"the training filter keeps {kept} images of {n_img - empty} annotated")
    size = os.path.getsize(path)
    check(0.7 < size / (469_785_474 * SCALE) < 1.3, f"{size} bytes, far from train2017's x {SCALE}")
    print(f"contents: {n_img} images ({empty} empty), {n_ann} instances ({len(crowd)} crowd, {multi} "
          f"with 2+ polygons), {size:,} bytes")


def main():
    with tempfile.TemporaryDirectory(prefix="mrcnn_coco_scale_") as tmp:
        a = generate(os.path.join(tmp, "a"), "--scale", str(SCALE), "--seed", "5")
        b = generate(os.path.join(tmp, "b"), "--scale", str(SCALE), "--seed", "5")
        c = generate(os.path.join(tmp, "c"), "--scale", str(SCALE), "--seed", "6")
        check(filecmp.cmp(a, b, shallow=False), "the same seed gave different bytes")
        check(not filecmp.cmp(a, c, shallow=False), "another seed gave the same bytes")
        check(os.path.isdir(os.path.join(tmp, "a", "train2017")) and not os.listdir(os.path.join(tmp, "a", "train2017")),
              "train2017/ missing or not empty without --images")
        test_contents(a)

        p = generate(os.path.join(tmp, "d"), "--scale", "0.0002", "--images")
        with open(p) as f:
            images = json.load(f)["images"]
        wrong = []
        for im in images:
            with Image.open(os.path.join(tmp, "d", "train2017", im["file_name"])) as j:
                if j.size != (im["width"], im["height"]) or j.format != "JPEG":
                    wrong.append(im["file_name"])
        check(not wrong, f"--images: JPEGs not of their record's size: {wrong[:3]}")
        r = subprocess.run([sys.executable, GEN, "--scale", "0.1"], capture_output=True, text=True)
        check(r.returncode == 2 and "--out" in r.stderr, f"missing --out: exit {r.returncode}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all coco-scale checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
