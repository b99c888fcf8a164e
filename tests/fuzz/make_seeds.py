"""Writes the fuzz targets' seed corpora (corpus/<target>/seed-*): small valid inputs of every
kind each reader accepts, and a few near misses. The seeds are committed; run this again only to
change them (inputs kept from findings are named finding-* and are not touched).

    .venv/bin/python tests/fuzz/make_seeds.py
"""
import io
import json
import pathlib
import struct

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]


def write(target, name, data):
    folder = HERE / "corpus" / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())


def coco_json():
    mask = np.zeros((20, 30), np.uint8, order="F")
    mask[4:12, 6:20] = 1
    rle = mask_utils.encode(mask)
    gt = {
        "images": [{"id": 1, "width": 30, "height": 20, "file_name": "a.jpg"},
                   {"id": 2, "width": 16, "height": 16, "file_name": "b.png"}],
        "categories": [{"id": 1, "name": "cat", "supercategory": "animal"}, {"id": 3, "name": "dog"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [6, 4, 14, 8], "area": 112, "iscrowd": 0,
             "segmentation": [[6, 4, 20, 4, 20, 12, 6, 12]]},
            {"id": 2, "image_id": 1, "category_id": 3, "bbox": [6, 4, 14, 8], "area": 112, "iscrowd": 1,
             "segmentation": {"size": [20, 30], "counts": rle["counts"].decode()}},
            {"id": 3, "image_id": 2, "category_id": 1, "bbox": [1, 1, 3, 3], "area": 9, "iscrowd": 0,
             "segmentation": {"size": [16, 16], "counts": [17, 3, 13, 3, 13, 3, 214]}},
        ],
        "info": {"year": 2017}, "licenses": [],
    }
    dt = [{"image_id": 1, "category_id": 1, "bbox": [5, 4, 14, 9], "score": 0.9,
           "segmentation": {"size": [20, 30], "counts": rle["counts"].decode()}},
          {"image_id": 2, "category_id": 1, "bbox": [1.5, 1, 3, 3.5], "score": 0.4,
           "segmentation": {"size": [16, 16], "counts": mask_utils.encode(np.asfortranarray(
               np.pad(np.ones((3, 3), np.uint8), ((1, 12), (1, 12)))))["counts"].decode()}},
          {"image_id": 1, "category_id": 3, "bbox": [0, 0, 2, 2], "score": 0.1}]
    write("coco_json", "gt", json.dumps(gt))
    write("coco_json", "gt-results", json.dumps(gt) + "\n#RESULTS\n" + json.dumps(dt))
    write("coco_json", "empty-lists", '{"images": [], "categories": [], "annotations": []}')
    write("coco_json", "results-only", "{}\n#RESULTS\n" + json.dumps(dt))
    write("coco_json", "unicode-escapes", json.dumps(gt, ensure_ascii=True).replace('"cat"', '"c\\u00e4t\\ud83d\\ude00"'))


def rle():
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(1, 1), (8, 8), (20, 30), (64, 64), (5, 60)]):
        m = np.asfortranarray((rng.random((h, w)) < [0.0, 0.5, 0.1, 0.9, 0.3][i]).astype(np.uint8))
        write("rle", f"{h}x{w}", bytes([h - 1, w - 1]) + mask_utils.encode(m)["counts"])
    write("rle", "bad-char", bytes([7, 7]) + b"0?\x7f~")


def mllog():
    lines = []
    t = 1700000000000
    def rec(key, value=None, meta=None, kind="POINT_IN_TIME"):
        nonlocal t
        t += 5
        lines.append(":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": kind, "key": key,
                                               "value": value, "metadata": {"file": "x.cpp", "lineno": 1, **(meta or {})}}))
    rec("submission_benchmark", "maskrcnn")
    rec("submission_division", "closed")
    rec("init_start", kind="INTERVAL_START")
    rec("seed", 1)
    rec("global_batch_size", 2)
    rec("init_stop", kind="INTERVAL_END")
    rec("run_start", kind="INTERVAL_START")
    rec("train_samples", 4)
    rec("epoch_start", meta={"epoch_num": 1}, kind="INTERVAL_START")
    rec("epoch_stop", meta={"epoch_num": 1}, kind="INTERVAL_END")
    rec("eval_accuracy", {"BBOX": 0.38, "SEGM": 0.35}, {"epoch_num": 1})
    rec("run_stop", None, {"status": "success"}, "INTERVAL_END")
    write("mllog", "short-run", "\n".join(lines) + "\n")
    write("mllog", "noise", "some line\n:::MLLOG {\"key\": 1}\n:::MLLOG not json\n\x00\x00\n" + lines[0] + "\n")
    write("mllog", "python-literals", lines[3].replace('"value": 1', '"value": NaN') + "\n" +
          lines[10].replace("0.38", "Infinity") + "\n")


def image():
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 255, (16, 24, 3), dtype=np.uint8)
    def save(name, im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        write("image", name, b.getvalue())
    save("rgb.jpg", Image.fromarray(rgb), "JPEG", quality=90)
    save("gray.jpg", Image.fromarray(rgb[..., 0]), "JPEG")
    save("progressive.jpg", Image.fromarray(rgb), "JPEG", progressive=True)
    save("cmyk.jpg", Image.fromarray(rgb).convert("CMYK"), "JPEG")
    save("rgb.png", Image.fromarray(rgb), "PNG")
    save("rgba.png", Image.fromarray(np.dstack([rgb, rgb[..., :1]])), "PNG")
    save("palette.png", Image.fromarray(rgb).convert("P"), "PNG")
    save("gray16.png", Image.fromarray((rgb[..., 0].astype(np.uint16) * 257)), "PNG")
    jpg = (HERE / "corpus" / "image" / "seed-rgb.jpg").read_bytes()
    write("image", "truncated.jpg", jpg[: len(jpg) // 2])


def system_config():
    # The system files themselves are seeds too: the replay and fuzz.sh read systems/ directly.
    cpu = (REPO / "systems" / "cpu-dev.json").read_text()
    write("system_config", "set-line.json", '--set run.max_epochs=2\n' + cpu)


def safetensors(tensors, metadata):
    """tensors: {name: np.ndarray}. The safetensors layout: 8-byte little-endian header length,
    the JSON header, then the tensors' bytes."""
    dtypes = {np.float32: "F32", np.int64: "I64", np.uint8: "U8", np.float16: "F16"}
    header, blobs, offset = {"__metadata__": metadata} if metadata else {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.tobytes()
        header[name] = {"dtype": dtypes[a.dtype.type], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def fnv1a64(data, h=14695981039346656037):
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def checkpoint():
    tensors = {"model/w": np.arange(6, dtype=np.float32).reshape(2, 3), "model/n": np.array([3], np.int64),
               "optimizer/w": np.ones((2, 3), np.float32)}
    h = 14695981039346656037
    for name in sorted(tensors):
        h = fnv1a64(name.encode(), h)
        h = fnv1a64(np.ascontiguousarray(tensors[name]).tobytes(), h)
    meta = {"format": "mlperf-maskrcnn-checkpoint-1", "epoch": "2", "step": "10", "seed": "1",
            "loss_scale": struct.unpack("<Q", struct.pack("<d", 1.0))[0].to_bytes(8, "big").hex(),
            "scaler_good_steps": "0", "config_fingerprint": "abc", "checksum_fnv1a64": f"{h:016x}"}
    write("checkpoint", "checkpoint", safetensors(tensors, meta))
    write("checkpoint", "weights", safetensors({"a": np.zeros((2, 2), np.float16),
                                                            "b": np.arange(3, dtype=np.uint8)}, None))
    write("checkpoint", "empty-header", safetensors({}, {"k": "v"}))


if __name__ == "__main__":
    for target in ("coco_json", "rle", "mllog", "image", "system_config", "checkpoint"):
        for f in (HERE / "corpus" / target).glob("seed-*") if (HERE / "corpus" / target).exists() else []:
            f.unlink()
        globals()[target]()
    for d in sorted((HERE / "corpus").iterdir()):
        print(f"{d.name}: {len(list(d.iterdir()))} inputs")
