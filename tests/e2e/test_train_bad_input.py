"""Bad input to `mlperf-maskrcnn train` is one clear error before run_start, exit status 2, and
nothing written that could pass for a result; a missing dataset gets the hint that fits the system
(synthetic or COCO 2017). Data with nothing to train on or to evaluate is
refused the same way when first read, right after run_start (run_stop "aborted", no step). Bad data found only during the run (a corrupt
image) ends it with run_stop "aborted", exit status 1 and an error naming the file; the log
written until then stays whole and no weights are saved."""
# Its runs train systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import json
import pathlib

import mrcnn_testenv as env

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"


def expect_refused(name, cmd, needle, out_dir):
    p = env.run([env.mlperf_maskrcnn(), "train", *cmd])
    assert p.returncode == 2, f"{name}: exit {p.returncode}\n{p.stderr}"
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    # One error; a list of broken rules may follow it as "  - " lines.
    assert lines and "error" in lines[0] and all(l.startswith("  - ") for l in lines[1:]), \
        f"{name}: expected one error, got\n{p.stderr}"
    assert needle in p.stderr, f"{name}: '{needle}' not in: {p.stderr}"
    assert "Traceback" not in p.stderr and "terminate called" not in p.stderr
    assert not any(pathlib.Path(out_dir).rglob("mlperf_log.txt")), f"{name}: a log was written"
    print(f"{name:28s} -> {lines[0]}")
    return p.stderr


def main():
    with env.scratch_dir("bad-input") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "4", "--val", "2")
        out = tmp / "out"
        base = ["--system", SYSTEM, "--out", out, "--set", f'run.data_dir="{data}"']
        # A missing dataset, with the hint that fits what the system trains: the synthetic set for
        # the CPU system, a COCO 2017 folder (and how to name and check it) for the AWS and Habana ones.
        said = expect_refused("missing dataset", ["--system", SYSTEM, "--out", out, "--set",
                                                  'run.data_dir="/nonexistent/coco"'], "/nonexistent/coco", out)
        assert "'mlperf-maskrcnn synth --out DIR' generates it" in said and "COCO" not in said, said
        for gpu_system in ("aws-p5.48xlarge", "habana-gaudi2-hls"):
            said = expect_refused(f"missing COCO ({gpu_system})",
                                  ["--system", SYSTEM.parent / f"{gpu_system}.json", "--out", out,
                                   "--set", 'run.data_dir="/nonexistent/coco2017"'],
                                  "dataset folder /nonexistent/coco2017 does not exist (this system trains on COCO 2017", out)
            for needle in ("run.data_dir", "--data DIR", "MRCNN_DATA_DIR", "DATADIR", "mlperf-maskrcnn data verify DIR"):
                assert needle in said, (gpu_system, needle, said)
            assert "synth" not in said and "demo.sh" not in said, said
        bad_json = tmp / "bad.json"
        bad_json.write_text(SYSTEM.read_text()[:500])
        expect_refused("malformed system JSON", ["--system", bad_json, "--out", out], "bad.json", out)
        expect_refused("unknown --set key", base + ["--set", "run.max_epoch=3"], "run.max_epoch", out)
        expect_refused("wrong --set type", base + ["--set", "run.max_epochs=\"many\""], "run.max_epochs", out)
        expect_refused("impossible value", base + ["--set", "run.max_epochs=0"], "run.max_epochs", out)
        expect_refused("unknown key in the file", ["--system", _with(tmp, {"run": {"max_epocs": 3}}), "--out", out,
                                                   "--set", f'run.data_dir="{data}"'], "max_epocs", out)
        closed = ["--set", "submission.division=\"closed\"", "--set", "system.division=\"closed\""]
        expect_refused("closed division rule", base + closed, "fixed to the reference's 800/1333", out)
        corrupt = tmp / "corrupt.safetensors"
        corrupt.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
        expect_refused("corrupt checkpoint", base + ["--resume", corrupt], "corrupt.safetensors", out)
        expect_refused("unknown option", base + ["--epochs", "3"], "--epochs", out)
        folder = tmp / "a-folder.json"
        folder.mkdir()
        expect_refused("folder as system file", ["--system", folder, "--out", out], f"{folder}: is a directory", out)
        expect_refused("folder as checkpoint", base + ["--resume", folder], f"checkpoint {folder} is a directory", out)
        huge = tmp / "huge.json"
        huge.write_text(SYSTEM.read_text().replace('"max_epochs": 30', '"max_epochs": 1e999'))
        expect_refused("number beyond a double", ["--system", huge, "--out", out], f"{huge}: number overflow", out)
        expect_refused("--set beyond a double", base + ["--set", "run.target_bbox=1e999"],
                       "--set run.target_bbox=1e999: 1e999 is beyond the range of a double", out)
        expect_refused("--set on a missing section", ["--system", _without(tmp, "run"), "--out", out,
                                                      "--set", "run.seed=3"], 'no "run" section', out)

        # A device without a backend in this process, before anything is written (issue: Gaudi's path).
        out_dev = tmp / "out-device"
        dev_base = ["--system", SYSTEM, "--out", out_dev, "--set", f'run.data_dir="{data}"']
        for dev, hint in (("hpu", "libhabana_pytorch_plugin.so"), ("xpu", "XPU support"), ("mps", "Apple silicon")):
            said = expect_refused(f"device {dev} without backend", dev_base + ["--set", f'run.device="{dev}"'],
                                  f"run.device: {dev}: no backend for '{dev}' is registered in this process; ", out_dev)
            assert hint in said, (dev, said)
        expect_refused("native ops on hpu", dev_base + ["--set", 'run.device="hpu"', "--set", 'run.ops="native"'],
                       "run.ops: \"native\" kernels exist for the CPU and NVIDIA GPUs only", out_dev)
        expect_refused("unknown device", dev_base + ["--set", 'run.device="tpu"'], 'got \"tpu\"', out_dev)
        missing_lib = tmp / "no-such-bridge.so"
        expect_refused("backend library missing", dev_base + ["--set", 'run.device="hpu"', "--set",
                                                          f'launch.backend_library="{missing_lib}"'],
                       f"launch.backend_library: {missing_lib}: cannot be loaded: ", out_dev)
        # A real shared library that registers no device: loaded, then the device is still refused.
        libz = next((p for p in sorted(pathlib.Path("/usr/lib").glob("*/libz.so.1")) +
                     sorted(pathlib.Path("/lib").glob("*/libz.so.1"))), None)
        assert libz is not None, "no libz.so.1 under /usr/lib or /lib (zlib is a dependency of the build)"
        expect_refused("backend library without hpu", dev_base + ["--set", 'run.device="hpu"', "--set",
                                                              f'launch.backend_library="{libz}"'],
                       f"(launch.backend_library {libz} was loaded but registered none)", out_dev)
        assert not out_dev.exists(), f"a refused device left {sorted(out_dev.rglob('*'))}"

        a_file = tmp / "a-file"
        a_file.write_text("keep me")
        expect_refused("output folder is a file", base + ["--out", a_file], f"run.output_dir {a_file} is a file, not a folder", a_file.parent / "none")
        expect_refused("output folder under a file", base + ["--out", a_file / "runs"],
                       f"run.output_dir {a_file / 'runs'} ({a_file}) is a file, not a folder", a_file.parent / "none")
        assert a_file.read_text() == "keep me"

        # Data with nothing to train on or to evaluate: refused when first read, exit status 2.
        expect_unusable(tmp, data, "empty training set", "train", lambda d: d.update(images=[], annotations=[]),
                        "instances_train2017.json: no image to train on")
        expect_unusable(tmp, data, "no training annotations", "train", lambda d: d.update(annotations=[]),
                        "instances_train2017.json: no image to train on (0 of 4 images kept")
        expect_unusable(tmp, data, "only crowd regions", "train", _all_crowd, "instances_train2017.json: no object to train on")
        expect_unusable(tmp, data, "empty validation set", "val", lambda d: d.update(images=[], annotations=[]),
                        "instances_val2017.json: no image to evaluate")
        expect_unusable(tmp, data, "validation only crowd", "val", _all_crowd,
                        "instances_val2017.json: no object to evaluate against")

        # A training image that turns out corrupt when the loader reaches it.
        victim = sorted((data / "train2017").glob("*.jpg"))[2]
        victim.write_bytes(victim.read_bytes()[:300])
        p = env.run([env.mlperf_maskrcnn(), "train", *base, "--quiet", "--no-progress"])
        assert p.returncode == 1, f"corrupt image: exit {p.returncode}\n{p.stderr}"
        assert str(victim) in p.stderr and "JPEG" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and "terminate called" not in p.stderr
        run = (out / "latest").resolve()
        records = env.mllog_records(run / "mlperf_log.txt")
        assert records[-1]["key"] == "run_stop" and records[-1]["metadata"]["status"] == "aborted", records[-1]
        assert [r["key"] for r in records].count("run_start") == 1
        assert not (run / "model.safetensors").exists(), "weights saved from an aborted run"
        print(f"{'corrupt image mid-run':28s} -> exit 1, run_stop aborted, {victim.name} named")


def expect_unusable(tmp, data, name, split, edit, needle):
    """A copy of `data` whose `split` annotations went through `edit` is refused with exit status
    2 when first read: one error naming the file, run_stop "aborted", no step, no weights."""
    variant = tmp / ("data-" + name.replace(" ", "-"))
    (variant / "annotations").mkdir(parents=True)
    for folder in ("train2017", "val2017"):
        (variant / folder).symlink_to(data / folder)
    for s in ("train", "val"):
        ann = json.loads((data / "annotations" / f"instances_{s}2017.json").read_text())
        if s == split:
            edit(ann)
        (variant / "annotations" / f"instances_{s}2017.json").write_text(json.dumps(ann))
    out = tmp / ("out-" + name.replace(" ", "-"))
    p = env.run([env.mlperf_maskrcnn(), "train", "--system", SYSTEM, "--out", out, "--quiet", "--no-progress",
                 "--set", f'run.data_dir="{variant}"'])
    assert p.returncode == 2, f"{name}: exit {p.returncode}\n{p.stderr}"
    errors = [l for l in p.stderr.splitlines() if "error" in l]
    assert len(errors) == 1 and needle in errors[0], f"{name}: expected one error with '{needle}', got\n{p.stderr}"
    assert "Traceback" not in p.stderr and "terminate called" not in p.stderr
    run = (out / "latest").resolve()
    keys = [r["key"] for r in env.mllog_records(run / "mlperf_log.txt")]
    assert keys[-1] == "run_stop" and "epoch_start" not in keys, f"{name}: {keys}"
    assert not (run / "model.safetensors").exists() and not any(run.rglob("*.safetensors")), f"{name}: weights saved"
    print(f"{name:28s} -> {errors[0]}")


def _all_crowd(ann):
    for a in ann["annotations"]:
        a["iscrowd"] = 1


def _with(tmp, patch):
    cfg = json.loads(SYSTEM.read_text())
    for section, values in patch.items():
        cfg[section].update(values)
    p = tmp / "patched.json"
    p.write_text(json.dumps(cfg))
    return p


def _without(tmp, section):
    cfg = json.loads(SYSTEM.read_text())
    del cfg[section]
    p = tmp / f"without-{section}.json"
    p.write_text(json.dumps(cfg))
    return p


if __name__ == "__main__":
    main()
