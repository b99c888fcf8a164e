"""coco-eval on bad input: every case ends with exit status 1 and one clear error line that names
the file (or detection), the place and what was expected -- never a crash, a hang or a number.
Also checks the usage errors (exit 2) and the printed summary block on good input."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_helpers  # noqa: E402

GT = {
    "images": [{"id": 1, "width": 20, "height": 10}, {"id": 2, "width": 8, "height": 8}],
    "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 2, 5, 5], "area": 25, "iscrowd": 0,
         "segmentation": [[2, 2, 7, 2, 7, 7, 2, 7]]},
        {"id": 2, "image_id": 2, "category_id": 2, "bbox": [0, 0, 4, 4], "area": 16, "iscrowd": 0,
         "segmentation": [[0, 0, 4, 0, 4, 4, 0, 4]]},
    ],
}
GOOD = [{"image_id": 1, "category_id": 1, "bbox": [2, 2, 5, 5], "score": 0.9},
        {"image_id": 2, "category_id": 2, "bbox": [0, 0, 4, 4], "score": 0.8}]

# (name, gt text or None for GT, results text, iou types, substrings the error must contain)
CASES = [
    ("truncated results", None, json.dumps(GOOD)[:-30], "bbox",
     ["res.json: byte", "expected", "the end of the file"]),
    ("truncated ground truth", json.dumps(GT)[:120], json.dumps(GOOD), "bbox",
     ["gt.json: byte", "the end of the file"]),
    ("not JSON", None, "hello", "bbox", ["res.json: byte 0 (line 1, column 1)", "expected a results array"]),
    ("wrong type", None, json.dumps([{"image_id": 1, "category_id": 1, "bbox": "0,0,1,1", "score": 1}]),
     "bbox", ["[0].bbox: expected an array"]),
    ("unknown image", None, json.dumps(GOOD + [{"image_id": 77, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1}]),
     "bbox", ["res.json: detections[2]: image_id 77 is not an image of the ground truth"]),
    ("NaN box", None, '[{"image_id": 1, "category_id": 1, "bbox": [0, 0, NaN, 1], "score": 1}]', "bbox",
     ["[0].bbox[2]: expected a finite number"]),
    ("negative box size", None, json.dumps([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 3, -1], "score": 1}]),
     "bbox", ["[0].bbox[3]: a bbox width or height must not be negative"]),
    ("RLE size differs from the image", None,
     json.dumps([{"image_id": 2, "category_id": 2, "score": 1, "segmentation": {"size": [8, 9], "counts": "0`1"}}]),
     "segm", ["res.json: detections[0]: RLE size [8, 9] differs from its image's [8, 8]"]),
    ("RLE counts malformed", None,
     json.dumps([{"image_id": 2, "category_id": 2, "score": 1, "segmentation": {"size": [8, 8], "counts": "0 "}}]),
     "segm", ["res.json: detections[0]: RLE: compressed counts hold an invalid character"]),
    ("empty results", None, "[]", "bbox", ["res.json: the results array is empty"]),
    ("inconsistent results", None,
     json.dumps(GOOD + [{"image_id": 1, "category_id": 1, "score": 1, "segmentation": [[0, 0, 1, 0, 1, 1]]}]),
     "bbox", ["detections[2]: has no bbox, but the first detection has one"]),
    ("ground truth without segmentation in segm", json.dumps(
        {**GT, "annotations": [{k: v for k, v in GT["annotations"][0].items() if k != "segmentation"}]}),
     json.dumps(GOOD[:1]), "segm", ["gt.json: ground truth annotations[0] (id 1): has no segmentation"]),
    ("ground-truth polygon with no points in segm", json.dumps(
        {**GT, "annotations": [{**GT["annotations"][0], "segmentation": [[]]}]}),
     json.dumps(GOOD[:1]), "segm", ["gt.json: ground truth annotations[0] (id 1): segmentation polygon 0 has 0 coordinates"]),
    ("ground-truth RLE of another size in segm", json.dumps(
        {**GT, "annotations": [{**GT["annotations"][0], "segmentation": {"size": [5, 5], "counts": "0U0"}}]}),
     json.dumps(GOOD[:1]), "segm", ["gt.json: ground truth annotations[0] (id 1): RLE size [5, 5] differs"]),
    ("a folder for the results", None, "FOLDER", "bbox", ["res.json: is a directory"]),
    ("duplicate annotation id", json.dumps({**GT, "annotations": [GT["annotations"][0]] * 2}),
     json.dumps(GOOD), "bbox", ["gt.json: annotations[1] (id 1): duplicate annotation id"]),
    ("missing file", "MISSING", json.dumps(GOOD), "bbox", ["cannot open"]),
]


def main():
    exe = eval_helpers.binary("benchmark/analysis/coco-eval")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        gt_path, res_path = os.path.join(tmp, "gt.json"), os.path.join(tmp, "res.json")
        for name, gt_text, res_text, types, needles in CASES:
            with open(gt_path, "w") as f:
                f.write(json.dumps(GT) if gt_text is None else gt_text)
            res_arg = res_path
            if res_text == "FOLDER":  # a directory where the results file should be
                res_arg = os.path.join(tmp, "folder", "res.json")
                os.makedirs(res_arg, exist_ok=True)
            else:
                with open(res_path, "w") as f:
                    f.write(res_text)
            gt_arg = os.path.join(tmp, "missing.json") if gt_text == "MISSING" else gt_path
            p = subprocess.run([exe, gt_arg, res_arg, "--iou-type", types, "--quiet"],
                               capture_output=True, text=True, timeout=60)
            err = p.stderr.strip()
            if p.returncode != 1:
                failures.append(f"{name}: exit status {p.returncode}, expected 1 (stderr: {err!r})")
            elif len(err.splitlines()) != 1 or not err.startswith("coco-eval: error: "):
                failures.append(f"{name}: expected one 'coco-eval: error:' line, got {err!r}")
            else:
                missing = [n for n in needles if n not in err]
                if missing:
                    failures.append(f"{name}: error {err!r} lacks {missing}")
        # Usage errors.
        for args in ([], [gt_path], [gt_path, res_path, "--iou-type", "keypoints"],
                     [gt_path, res_path, "--threads", "zero"], [gt_path, res_path, "--bogus"]):
            p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=60)
            err = p.stderr.strip()
            if p.returncode != 2 or len(err.splitlines()) != 1 or not err.startswith("coco-eval: error: "):
                failures.append(f"usage {args}: status {p.returncode}, stderr {p.stderr[:200]!r}")
        # Good input: the summary block and the JSON file.
        with open(gt_path, "w") as f:
            json.dump(GT, f)
        with open(res_path, "w") as f:
            json.dump(GOOD, f)
        out_json = os.path.join(tmp, "stats.json")
        p = subprocess.run([exe, gt_path, res_path, "--json", out_json], capture_output=True, text=True,
                           timeout=60)
        line = " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000"
        if p.returncode != 0 or p.stdout.count(line) != 2:
            failures.append(f"good input: status {p.returncode}, stdout {p.stdout[:600]!r}")
        else:
            stats = json.load(open(out_json))
            if len(stats["bbox"]["stats"]) != 12 or len(stats["segm"]["stats"]) != 12:
                failures.append(f"good input: JSON stats {stats}")
    total = len(CASES) + 6
    if failures:
        print("\n".join(failures))
        print(f"{total - len(failures)} passed, {len(failures)} failed")
        sys.exit(1)
    print(f"{total} passed, 0 failed")


if __name__ == "__main__":
    main()
