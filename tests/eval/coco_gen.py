"""Deterministic generator of COCO ground truth + results for the evaluator's checks.

generate(seed, ...) returns (ground_truth_dict, results_list), the same for the same arguments on
any machine. The data deliberately holds what makes COCO evaluation subtle:
  * crowd regions (uncompressed RLE, iscrowd=1) and ground truth in all three segmentation
    encodings (polygons with several parts, uncompressed RLE, compressed RLE);
  * many tied scores; more than 100 detections in some (image, category) cells;
  * images without ground truth, images without detections, image, category and annotation
    ids above 2^32;
  * categories without ground truth, categories without detections, detections whose category
    is not in the ground truth (pycocotools drops them);
  * tiny (sub-pixel) and huge (whole-image) objects, areas exactly on the 32^2 / 96^2 boundaries;
  * optionally a ground-truth annotation with id 0 (pycocotools counts a match to it as none).
Results can carry bbox + compressed RLE (the usual), bbox only, segmentation only, or bbox with
mixed segmentation encodings (polygons, uncompressed and compressed RLE).

Command line (the benchmark uses it):  python coco_gen.py OUT_DIR --images 5000 --seed 0 --scale val
writes OUT_DIR/gt.json and OUT_DIR/results.json.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
from pycocotools import mask as mask_utils


def _star_polygon(rng, cx, cy, r, n):
    angles = np.sort(rng.uniform(0, 2 * math.pi, n))
    radii = r * rng.uniform(0.55, 1.0, n)
    xs = cx + radii * np.cos(angles)
    ys = cy + radii * np.sin(angles)
    return [float(round(v, 2)) for pair in zip(xs, ys) for v in pair]


def _shoelace(poly):
    x = np.array(poly[0::2])
    y = np.array(poly[1::2])
    return float(0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def _uncompressed_fast(rle_obj):
    """Compressed RLE -> the same mask as uncompressed counts (a list)."""
    m = mask_utils.decode(rle_obj).flatten(order="F").astype(np.int8)
    change = np.flatnonzero(np.diff(np.concatenate([[0], m, [1 - m[-1]]])) != 0)
    counts = np.diff(np.concatenate([[0], change]))
    return {"size": list(rle_obj["size"]), "counts": [int(c) for c in counts]}


def _object(rng, w, h, scale):
    """A random object: (list of polygons, nominal size class)."""
    kind = rng.random()
    if scale == "val":
        # COCO-like sizes: many small, fewer large.
        r = float(np.exp(rng.uniform(math.log(3), math.log(min(w, h) * 0.45))))
    else:
        r = float(rng.choice([0.4, 2.0, 6.0, 12.0, 25.0, 60.0, 200.0]))
    cx = float(rng.uniform(0, w))
    cy = float(rng.uniform(0, h))
    parts = [_star_polygon(rng, cx, cy, r, int(rng.integers(5, 14)))]
    if kind < 0.15:  # several parts (occluded object)
        for _ in range(int(rng.integers(1, 3))):
            parts.append(_star_polygon(rng, cx + rng.uniform(-2, 2) * r, cy + rng.uniform(-2, 2) * r,
                                       r * rng.uniform(0.3, 0.8), int(rng.integers(4, 10))))
    return parts


def _jitter(rng, parts, amount):
    return [[float(round(v + rng.normal(0, amount), 2)) for v in p] for p in parts]


def generate(seed=0, images=40, categories=10, gt_per_image=6.0, dets_per_image=30, scale="test",
             results_mode="bbox+rle", gt_id_zero=False, big_cells=True):
    """Returns (gt, results). results_mode: bbox+rle | bbox | segm | bbox+mixed."""
    rng = np.random.default_rng(seed)
    # Category ids with gaps, like COCO's 1..90 for 80 classes.
    cat_ids = sorted(int(c) for c in rng.choice(np.arange(1, categories * 2 + 3), categories,
                                                replace=False))
    if scale != "val":
        cat_ids[len(cat_ids) // 2] = (1 << 40) + 5  # a category id above 2^32
        cat_ids.sort()
    cats = [{"id": c, "name": f"class{c}", "supercategory": "thing"} for c in cat_ids]
    # (in test scale the largest id is the one above 2^32, which should have ground truth)
    off = 1 if scale != "val" and categories >= 4 else 0
    no_gt_cat = cat_ids[-1 - off] if categories >= 3 else None   # never has ground truth
    no_dt_cat = cat_ids[-2 - off] if categories >= 3 else None   # never detected
    unknown_cat = max(cat_ids) + 7                         # not a ground-truth category

    imgs = []
    for i in range(images):
        if scale == "val":
            w, h = (640, int(rng.choice([427, 480, 512, 360]))) if rng.random() < 0.7 else \
                   (int(rng.choice([480, 500, 427, 375])), 640)
        else:
            w, h = int(rng.integers(24, 160)), int(rng.integers(24, 160))
        image_id = i + 1 if (scale == "val" or i % 7) else (1 << 32) + 3 * i + 5  # ids > 2^32
        imgs.append({"id": image_id, "width": w, "height": h, "file_name": f"{image_id:012d}.jpg"})

    anns = []
    next_ann_id = 0 if gt_id_zero else 1
    gt_masks = {}  # image index -> list of (category, parts, rle)
    for i, im in enumerate(imgs):
        w, h = im["width"], im["height"]
        gt_masks[i] = []
        if scale != "val" and i % 9 == 4:
            continue  # image without ground truth
        n = int(rng.poisson(gt_per_image))
        for _ in range(n):
            cat = int(rng.choice([c for c in cat_ids if c != no_gt_cat] or cat_ids))
            parts = _object(rng, w, h, scale)
            rles = mask_utils.frPyObjects(parts, h, w)
            rle = mask_utils.merge(rles)
            mask_area = float(mask_utils.area(rle))
            bbox = [float(v) for v in mask_utils.toBbox(rle)]
            u = rng.random()
            iscrowd = 0
            if u < 0.07:
                iscrowd = 1
                seg = _uncompressed_fast(rle)
                area = mask_area
            elif u < 0.14 and scale != "val":
                seg = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
                area = mask_area
            elif u < 0.18 and scale != "val":
                seg = _uncompressed_fast(rle)
                area = mask_area
            else:
                seg = parts
                area = sum(_shoelace(p) for p in parts)
            if scale != "val" and rng.random() < 0.05:
                area = float(rng.choice([1024.0, 9216.0, 0.0]))  # exactly on a range boundary
            anns.append({"id": next_ann_id, "image_id": im["id"], "category_id": cat,
                         "segmentation": seg, "area": area, "bbox": bbox, "iscrowd": iscrowd})
            next_ann_id += 1
            if scale != "val" and next_ann_id == 2:
                next_ann_id = (1 << 33) + 1  # annotation ids above 2^32 from here on
            gt_masks[i].append((cat, parts, rle))
        if scale != "val" and i % 11 == 3:
            # a huge object covering the whole image
            parts = [[0.0, 0.0, float(w), 0.0, float(w), float(h), 0.0, float(h)]]
            cat = cat_ids[0]
            anns.append({"id": next_ann_id, "image_id": im["id"], "category_id": cat,
                         "segmentation": parts, "area": float(w * h), "bbox": [0.0, 0.0, float(w), float(h)],
                         "iscrowd": 0})
            next_ann_id += 1
            rle = mask_utils.merge(mask_utils.frPyObjects(parts, h, w))
            gt_masks[i].append((cat, parts, rle))

    results = []
    score_levels = np.round(np.linspace(0.05, 1.0, 20), 2)
    for i, im in enumerate(imgs):
        w, h = im["width"], im["height"]
        if scale != "val" and i % 10 == 6:
            continue  # image without detections
        n = int(rng.poisson(dets_per_image)) if scale != "val" else dets_per_image
        objs = gt_masks[i]
        for j in range(n):
            if objs and rng.random() < 0.6:
                cat, parts, _ = objs[int(rng.integers(len(objs)))]
                if rng.random() < 0.15:
                    cat = int(rng.choice(cat_ids))  # right place, wrong class
                size = max(1.0, math.sqrt(max(mask_utils.area(mask_utils.merge(
                    mask_utils.frPyObjects(parts, h, w))), 1)))
                parts = _jitter(rng, parts, 0.04 * size + 0.3)
            else:
                cat = int(rng.choice(cat_ids))
                parts = _object(rng, w, h, scale)
            if no_dt_cat is not None and cat == no_dt_cat:
                cat = cat_ids[0]
            if scale != "val" and rng.random() < 0.02:
                cat = unknown_cat
            rle = mask_utils.merge(mask_utils.frPyObjects(parts, h, w))
            # Ties: most scores come from 20 levels.
            score = float(rng.choice(score_levels)) if rng.random() < 0.7 else float(round(rng.random(), 4))
            bbox = [float(round(v, 2)) for v in mask_utils.toBbox(rle)]
            if scale != "val" and rng.random() < 0.02:
                bbox = [float(round(rng.uniform(0, w), 1)), float(round(rng.uniform(0, h), 1)), 32.0, 32.0]
            det = {"image_id": im["id"], "category_id": cat, "score": score}
            if results_mode in ("bbox+rle", "bbox", "bbox+mixed"):
                det["bbox"] = bbox
            if results_mode in ("bbox+rle", "segm"):
                det["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
            elif results_mode == "bbox+mixed":
                u = rng.random()
                if u < 0.3:
                    det["segmentation"] = parts
                elif u < 0.5:
                    det["segmentation"] = _uncompressed_fast(rle)
                elif u < 0.9:
                    det["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
                # else: no segmentation -> the box polygon
            results.append(det)
        if big_cells and scale != "val" and i % 13 == 2 and objs:
            # one cell with more than 100 detections, all with the same score
            cat, parts, _ = objs[0]
            for _ in range(105):
                p = _jitter(rng, parts, 1.5)
                rle = mask_utils.merge(mask_utils.frPyObjects(p, h, w))
                det = {"image_id": im["id"], "category_id": cat, "score": 0.5}
                if results_mode != "segm":
                    det["bbox"] = [float(round(v, 2)) for v in mask_utils.toBbox(rle)]
                if results_mode != "bbox":
                    det["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
                results.append(det)

    gt = {"info": {"description": f"generated, seed {seed}"}, "licenses": [],
          "images": imgs, "categories": cats, "annotations": anns}
    # The first result decides pycocotools' loadRes mode: keep it a valid, known-category one.
    if results and results[0]["category_id"] == unknown_cat:
        results[0]["category_id"] = cat_ids[0]
    return gt, results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--categories", type=int, default=80)
    ap.add_argument("--gt-per-image", type=float, default=7.7)
    ap.add_argument("--dets-per-image", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", choices=["val", "test"], default="val")
    ap.add_argument("--results-mode", default="bbox+rle")
    a = ap.parse_args()
    gt, res = generate(a.seed, a.images, a.categories, a.gt_per_image, a.dets_per_image, a.scale,
                       a.results_mode)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "gt.json"), "w") as f:
        json.dump(gt, f)
    with open(os.path.join(a.out_dir, "results.json"), "w") as f:
        json.dump(res, f)
    print(f"{len(gt['images'])} images, {len(gt['annotations'])} annotations, {len(res)} detections "
          f"-> {a.out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
