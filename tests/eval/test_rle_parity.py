"""The RLE codec (eval/rle.h) against pycocotools' mask API on random and corner cases: encode,
decode, polygon and box rasterization (bit-exact compressed strings), merge (union and
intersection), area, toBbox and IoU with crowd semantics -- all compared exactly."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from pycocotools import mask as mask_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_helpers  # noqa: E402


def random_mask(rng, h, w):
    kind = rng.integers(4)
    if kind == 0:
        return (rng.random((h, w)) < rng.random()).astype(np.uint8)
    m = np.zeros((h, w), np.uint8)
    if kind == 1:
        return m if rng.random() < 0.5 else np.ones((h, w), np.uint8)
    for _ in range(int(rng.integers(1, 4))):
        y0, x0 = int(rng.integers(h)), int(rng.integers(w))
        m[y0:y0 + int(rng.integers(1, h + 1)), x0:x0 + int(rng.integers(1, w + 1))] = 1
    return m


def random_polygon(rng, h, w):
    kind = rng.integers(6)
    k = int(rng.integers(3, 12))
    if kind == 0:    # anywhere, even outside the image
        return [float(v) for v in rng.uniform(-0.3 * max(h, w), 1.3 * max(h, w), 2 * k)]
    if kind == 1:    # tiny, sub-pixel
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        return [float(v) for pt in zip(cx + rng.uniform(-0.4, 0.4, k), cy + rng.uniform(-0.4, 0.4, k)) for v in pt]
    if kind == 2:    # repeated vertices and collinear points
        p = [float(v) for v in np.round(rng.uniform(0, max(h, w), 2 * k))]
        return p[:4] + p[:4] + p[4:] + p[-2:]
    if kind == 3:    # integer and half-integer coordinates (rounding ties)
        return [float(v) / 2 for v in rng.integers(-2, 2 * max(h, w) + 2, 2 * k)]
    if kind == 4:    # the whole image
        return [0.0, 0.0, float(w), 0.0, float(w), float(h), 0.0, float(h)]
    return [float(v) for v in np.round(rng.uniform(0, max(h, w), 2 * k), 2)]


def main():
    probe = eval_helpers.binary("tests/eval/eval_rle_probe")
    rng = np.random.default_rng(2024)
    cases = {"encode": [], "polygons": [], "boxes": [], "pairs": []}
    expect = {"encode": [], "polygons": [], "boxes": [], "pairs": []}
    for _ in range(300):
        h, w = int(rng.integers(1, 50)), int(rng.integers(1, 50))
        m = random_mask(rng, h, w)
        cases["encode"].append({"h": h, "w": w, "mask": m.flatten().tolist()})
        expect["encode"].append(mask_utils.encode(np.asfortranarray(m))["counts"].decode())
    for _ in range(600):
        h, w = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        polys = [random_polygon(rng, h, w) for _ in range(int(rng.integers(1, 4)))]
        cases["polygons"].append({"h": h, "w": w, "polys": polys})
        each = mask_utils.frPyObjects(polys, h, w)
        expect["polygons"].append({"union": mask_utils.merge(each)["counts"].decode(),
                                   "each": [r["counts"].decode() for r in each]})
    for _ in range(300):
        h, w = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        box = [float(v) for v in np.round(rng.uniform(-5, 60, 4) * [1, 1, 0.7, 0.7], int(rng.integers(0, 3)))]
        cases["boxes"].append({"h": h, "w": w, "box": box})
        expect["boxes"].append(mask_utils.frPyObjects(np.array([box], dtype=np.float64), h, w)[0]["counts"].decode())
    for _ in range(400):
        h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        a = mask_utils.encode(np.asfortranarray(random_mask(rng, h, w)))
        b = mask_utils.encode(np.asfortranarray(random_mask(rng, h, w)))
        cases["pairs"].append({"h": h, "w": w, "a": a["counts"].decode(), "b": b["counts"].decode()})
        iou = mask_utils.iou([a], [b], [0])
        iou_c = mask_utils.iou([a], [b], [1])
        expect["pairs"].append({
            "union": mask_utils.merge([a, b], intersect=0)["counts"].decode(),
            "intersection": mask_utils.merge([a, b], intersect=1)["counts"].decode(),
            "area_a": int(mask_utils.area(a)),
            "bbox_a": [float(v) for v in mask_utils.toBbox(a)],
            "iou": float(np.asarray(iou).reshape(-1)[0]) if len(iou) else 0.0,
            "iou_crowd": float(np.asarray(iou_c).reshape(-1)[0]) if len(iou_c) else 0.0,
            "decode_a": mask_utils.decode(a).flatten().tolist(),
        })
    with tempfile.TemporaryDirectory() as tmp:
        cpath, opath = os.path.join(tmp, "cases.json"), os.path.join(tmp, "out.json")
        with open(cpath, "w") as f:
            json.dump(cases, f)
        subprocess.run([probe, cpath, opath], check=True)
        with open(opath) as f:
            got = json.load(f)
    failures = []
    for kind in expect:
        for i, (e, g) in enumerate(zip(expect[kind], got[kind])):
            if e != g:
                failures.append(f"{kind}[{i}]: case {json.dumps(cases[kind][i])[:300]}\n"
                                f"  pycocotools {json.dumps(e)[:300]}\n  ours        {json.dumps(g)[:300]}")
        if len(got[kind]) != len(expect[kind]):
            failures.append(f"{kind}: {len(got[kind])} answers for {len(expect[kind])} cases")
    total = sum(len(v) for v in expect.values())
    if failures:
        print("\n".join(failures[:20]))
        print(f"{total - len(failures)} passed, {len(failures)} failed")
        sys.exit(1)
    print(f"{total} RLE cases identical to pycocotools")


if __name__ == "__main__":
    main()
