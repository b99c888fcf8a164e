"""coco-eval against pycocotools on generated datasets: the 12 stats agree (to 1e-12; in fact
exactly) and accumulate()'s precision / recall / scores arrays are identical, for bbox and segm,
for every way a results file can be written, with results independent of the thread count.

The datasets (tests/eval/coco_gen.py, seeded) hold crowd regions, tied scores, more than 100
detections in a cell, images without ground truth or detections, ids above 2^32, categories
without ground truth / detections / unknown to the ground truth, tiny and whole-image objects,
multi-part polygons and all three segmentation encodings.
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_gen  # noqa: E402
import eval_helpers  # noqa: E402

SCENARIOS = [
    # (name, generator arguments, iou types)
    ("bbox+rle", dict(seed=0, results_mode="bbox+rle"), ["bbox", "segm"]),
    ("bbox only", dict(seed=1, results_mode="bbox", gt_id_zero=True), ["bbox", "segm"]),
    ("segm only", dict(seed=2, results_mode="segm"), ["bbox", "segm"]),
    ("mixed encodings", dict(seed=3, results_mode="bbox+mixed"), ["bbox", "segm"]),
    ("gt id 0", dict(seed=4, results_mode="bbox+rle", gt_id_zero=True, images=30), ["bbox", "segm"]),
]


def pycocotools_eval(gt_path, res_path, iou_type):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(gt_path)
        dt = gt.loadRes(res_path)
        e = COCOeval(gt, dt, iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e


def main():
    coco_eval = eval_helpers.binary("benchmark/analysis/coco-eval")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs, types in SCENARIOS:
            gt, res = coco_gen.generate(**kwargs)
            gt_path = os.path.join(tmp, "gt.json")
            res_path = os.path.join(tmp, "res.json")
            with open(gt_path, "w") as f:
                json.dump(gt, f)
            with open(res_path, "w") as f:
                json.dump(res, f)
            outs = {}
            for threads in (1, 3):
                out_path = os.path.join(tmp, f"ours{threads}.json")
                subprocess.run([coco_eval, gt_path, res_path, "--iou-type", ",".join(types),
                                "--threads", str(threads), "--json", out_path, "--arrays", "--quiet"],
                               check=True, stdout=subprocess.DEVNULL)
                with open(out_path) as f:
                    outs[threads] = json.load(f)
            for t in types:
                ref = pycocotools_eval(gt_path, res_path, t)
                ours = outs[1][t]
                where = f"{name} / {t}"
                stats = np.array(ours["stats"])
                diff = float(np.max(np.abs(stats - ref.stats)))
                if diff > 1e-12:
                    failures.append(f"{where}: stats differ by {diff}\n  ours {stats}\n  ref  {ref.stats}")
                for key in ("precision", "recall", "scores"):
                    a = np.array(ours[key]).reshape(ref.eval[key].shape)
                    if not np.array_equal(a, ref.eval[key]):
                        bad = np.argwhere(a != ref.eval[key])
                        failures.append(f"{where}: {key} differs at {len(bad)} entries, first "
                                        f"{tuple(bad[0])}: {a[tuple(bad[0])]} vs {ref.eval[key][tuple(bad[0])]}")
                if outs[3][t]["stats"] != ours["stats"] or outs[3][t]["precision"] != ours["precision"]:
                    failures.append(f"{where}: 3 threads give other numbers than 1 thread")
                # A dataset that exercises nothing would pass trivially: make sure it scores.
                if not (0.05 < ref.stats[0] < 0.95):
                    failures.append(f"{where}: degenerate scenario, AP {ref.stats[0]}")
            print(f"{name}: {len(gt['images'])} images, {len(gt['annotations'])} annotations, "
                  f"{len(res)} detections: " + ", ".join(
                      f"{t} AP {outs[1][t]['stats'][0]:.4f}" for t in types))
    if failures:
        print("\n".join(failures))
        print(f"0 passed, {len(failures)} failed")
        sys.exit(1)
    print(f"{len(SCENARIOS)} scenarios: stats and arrays identical to pycocotools")


if __name__ == "__main__":
    main()
