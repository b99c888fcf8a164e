"""`mlperf-maskrcnn data verify|prepare|load` as a user runs them: exit statuses and messages.

verify: 0 on a clean folder, 1 with one error line per problem class naming the files, 2 on bad
arguments. prepare writes the index; load reads it (one JSON line) and says so; a corrupted index
is an error naming it and what to do; a stale one is read around (auto) with the reason.
"""
import json
import pathlib

import mrcnn_testenv as env

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"


def data(*args):
    return env.run([env.mlperf_maskrcnn(), "data", *map(str, args)])


def main():
    with env.scratch_dir("data-cmd") as tmp:
        root = pathlib.Path(tmp) / "coco"
        env.synth_dataset(root, "--train", "12", "--val", "4", "--seed", "2")

        ok = data("verify", root, "--threads", "2")
        assert ok.returncode == 0 and ok.stdout.rstrip().endswith("usable"), ok.stdout + ok.stderr
        assert "12 images, " in ok.stdout and "not the COCO 2017 release's file" in ok.stdout, ok.stdout
        strict = data("verify", root, "--release")
        assert strict.returncode == 1 and "error: " in strict.stdout and "is not the COCO 2017 release's" in strict.stdout

        for bad, why in ((["verify"], "the dataset folder DIR is required"),
                         (["verify", root / "nowhere"], "does not exist"),
                         (["verify", root, "--threads", "0"], "--threads must be 1..1024"),
                         (["load", root, "--source", "yaml"], "--source must be auto, json or index"),
                         (["fetch", root], "unknown subcommand 'fetch'")):
            p = data(*bad)
            assert p.returncode == 2 and why in p.stderr and p.stderr.count("\n") == 1, (bad, p.returncode, p.stderr)

        # Prepare, then load from the index and from the JSON: the same images and instances.
        p = data("prepare", root, "--system", SYSTEM)
        index = root / "annotations" / "instances_train2017.mrcnn-index"
        assert p.returncode == 0 and index.is_file(), p.stdout + p.stderr
        lines = {}
        for source in ("index", "json"):
            p = data("load", root, "--system", SYSTEM, "--source", source)
            assert p.returncode == 0, p.stderr
            lines[source] = json.loads(p.stdout)
            assert lines[source]["source"] == source and lines[source]["seconds"] >= 0, lines[source]
        assert lines["index"]["images"] == lines["json"]["images"] == 12, lines
        assert lines["index"]["instances"] == lines["json"]["instances"] > 0, lines

        # A stale index (the JSON changed since prepare): auto reads the JSON and says why; "index" refuses.
        ann = root / "annotations" / "instances_train2017.json"
        ann.write_text(ann.read_text() + "\n")
        p = data("load", root, "--system", SYSTEM, "--source", "auto")
        line = json.loads(p.stdout)
        assert p.returncode == 0 and line["source"] == "json" and "changed since the index was prepared" in line["note"], p.stdout
        p = data("load", root, "--system", SYSTEM, "--source", "index")
        assert p.returncode == 1 and "changed since the index was prepared" in p.stderr, p.stderr

        # A corrupted index: one error naming it and the remedy, for auto too.
        assert data("prepare", root, "--system", SYSTEM).returncode == 0
        raw = bytearray(index.read_bytes())
        raw[-5] ^= 0xFF
        index.write_bytes(bytes(raw))
        p = data("load", root, "--system", SYSTEM)
        assert p.returncode == 1 and f"{index}: corrupt index (checksum mismatch)" in p.stderr, p.stderr
        assert "data prepare" in p.stderr and p.stderr.count("\n") == 1, p.stderr

        # A defect in the images: verify names it and exits 1.
        next(iter(sorted((root / "train2017").iterdir()))).unlink()
        p = data("verify", root, "--split", "train2017")
        assert p.returncode == 1 and "1 images missing from" in p.stdout, p.stdout
        print("data verify/prepare/load: exit statuses, messages, index against JSON, stale and corrupt indexes")


if __name__ == "__main__":
    main()
