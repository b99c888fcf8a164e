"""`mlperf-maskrcnn audit` on real runs, and the fingerprint every run writes.

Short deterministic runs of the local system on a tiny synthetic set:
  1. two runs with the same seed and setup (one with another loader thread count): "bit-identical",
     exit 0, the loader difference named as without effect;
  2. a run with 1 intra-op thread instead of 2: exit 3, "threads.intra_op 2 vs 1" named as changing
     results, and the first diverging step;
  3. a copy of run 1 whose metrics.jsonl is edited at step 7: exit 1, that step named;
  4. a run with another seed: the seed is the first thing said;
  5. --replay of run 1 from its own config.json: bit-identical;
  6. the fingerprint: config hash (= sha256 of config.json's text), binary hash (= sha256 of the executable), the
     project libraries' hashes (= sha256 of libmrcnn_ops.so and libmrcnn_model.so; one edited: audit names it), thread counts, the
     data checksums (= sha256 of the annotation files), and the log's run_fingerprint summary;
  7. bad input: a missing run, a folder that is no run, a bad --tolerance: exit 2, one line.
"""
# Its runs train systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import hashlib
import json
import os
import pathlib
import shutil

import mrcnn_testenv as env


def train(data, out, *extra):
    p = env.run([env.mlperf_maskrcnn(), "train", "--system", env.SOURCE_DIR / "systems" / "cpu-dev.json",
                 "--quiet", "--no-progress", "--deterministic", "--out", out,
                 "--set", f'run.data_dir="{data}"', "--set", "run.max_epochs=2", "--set", "run.target_bbox=0",
                 "--set", "run.target_segm=0", "--set", "data.loader_threads=1", *extra], timeout=600)
    assert p.returncode in (0, 3), p.stderr[-3000:]  # 3: the targets not reached, as some runs here mean
    return pathlib.Path(out, "latest").resolve()


def audit(*args, **environ):
    p = env.run([env.mlperf_maskrcnn(), "audit", *args], timeout=600, env=dict(os.environ, **environ))
    return p.returncode, p.stdout, p.stderr


def main():
    with env.scratch_dir("audit") as tmp:
        tmp = pathlib.Path(tmp)
        data = env.synth_dataset(tmp / "data", "--train", "32", "--val", "8", "--seed", "5")
        a = train(data, tmp / "a", "--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99")
        b = train(data, tmp / "b", "--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99",
                  "--set", "data.loader_threads=2")
        steps = len(env.step_losses(a))
        assert steps >= 10, steps

        # 1. identical
        rc, out, err = audit(a, b, "--json", tmp / "ab.json")
        assert rc == 0 and f"bit-identical: {steps} steps and 3 epoch accuracies" in out, (rc, out, err)
        j = json.loads((tmp / "ab.json").read_text())
        assert j["verdict"] == "identical" and j["steps_compared"] == steps, j
        loader = [d for d in j["setup"] if d["what"] == "threads.loader"]
        assert loader and not loader[0]["changes_results"], j["setup"]
        print(f"same seed and setup: bit-identical over {steps} steps (loader threads named, without effect)")

        # 2. intra-op threads
        c = train(data, tmp / "c", "--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99",
                  "--set", "launch.threads_per_rank=1")
        rc, out, _ = audit(a, c, "--json", tmp / "ac.json")
        j = json.loads((tmp / "ac.json").read_text())
        assert rc == 3 and j["verdict"] == "setup_differs", (rc, out)
        assert out.splitlines()[3].startswith("differ in setup: threads.intra_op 2 vs 1"), out
        assert j["first_difference"]["where"].startswith("step "), j
        print(f"intra-op threads 2 vs 1: exit 3, first difference at {j['first_difference']['where']} "
              f"{j['first_difference']['field']}")

        # 3. edited metrics
        edited = tmp / "edited"
        shutil.copytree(a, edited)
        lines = (edited / "metrics.jsonl").read_text().splitlines()
        for i, line in enumerate(lines):
            m = json.loads(line)
            if m.get("event") == "step" and m["step"] == 7:
                m["losses"]["loss_mask"] = m["losses"]["loss_mask"] * (1 + 1e-7)
                lines[i] = json.dumps(m)
        (edited / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        rc, out, _ = audit(a, edited)
        assert rc == 1 and "identical up to step 6, then diverges (first differing value: step 7 losses.loss_mask" in out, out
        rc, out, _ = audit(a, edited, "--tolerance", "1e-5")
        assert rc == 0 and "equal within tolerance" in out, out
        print("metrics edited at step 7: exit 1, step 7 named; within --tolerance 1e-5: exit 0")

        # 4. another seed
        d = train(data, tmp / "d", "--seed", "9")
        rc, out, _ = audit(a, d)
        assert rc == 3 and out.splitlines()[3].startswith("differ in setup: seed 1 vs 9"), out
        print("another seed: said first")

        # 5. replay
        # The caller's MRCNN_DATA_DIR does not redirect the replay: config.json's data is the run's.
        rc, out, err = audit("--replay", a, "--replay-out", tmp / "replay", MRCNN_DATA_DIR=str(tmp / "elsewhere"))
        assert rc == 0 and "bit-identical" in out, (rc, out, err[-2000:])
        print("--replay: bit-identical (a caller's MRCNN_DATA_DIR left out)")

        # 6. fingerprint
        fp = json.loads((a / "fingerprint.json").read_text())
        exe = env.mlperf_maskrcnn().resolve()
        assert fp["binary"]["sha256"] == hashlib.sha256(exe.read_bytes()).hexdigest(), fp["binary"]
        # The project's shared libraries the program maps: the kernels' and the network's.
        libs, paths = fp["binary"]["libraries"], fp["binary"]["library_paths"]
        assert {"libmrcnn_ops.so", "libmrcnn_model.so"} <= set(libs) and set(libs) == set(paths), fp["binary"]
        for name, path in paths.items():
            assert libs[name] == hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest(), (name, path)
        rebuilt = tmp / "rebuilt"
        shutil.copytree(a, rebuilt)
        other = json.loads((rebuilt / "fingerprint.json").read_text())
        other["binary"]["libraries"]["libmrcnn_ops.so"] = "0" * 64
        (rebuilt / "fingerprint.json").write_text(json.dumps(other))
        rc, out, _ = audit(a, rebuilt)
        # The same values (exit 0), with the library named as what would change them.
        assert rc == 0 and "changes results  binary.libraries.libmrcnn_ops.so: " in out, (rc, out)
        config_text = (a / "config.json").read_bytes()  # the resolved configuration and a newline
        assert fp["config_sha256"] == hashlib.sha256(config_text.rstrip(b"\n")).hexdigest(), fp["config_sha256"]
        assert fp["threads"]["intra_op"] == 2 and fp["threads"]["loader"] == 1, fp["threads"]
        assert fp["seed"] == 1 and fp["ranks"]["world_size"] == 1 and fp["settings"]["deterministic"] is True, fp
        ann = data / "annotations" / "instances_train2017.json"
        assert fp["data"]["train_annotations"]["sha256"] == hashlib.sha256(ann.read_bytes()).hexdigest(), fp["data"]
        assert fp["data"]["train_images"] == 32 and fp["data"]["val_images"] == 8, fp["data"]
        assert fp["host"]["cpu_model"] and fp["libraries"]["libtorch"], fp
        assert pathlib.Path(fp["libraries"]["libtorch_dir"], "libtorch_cpu.so").is_file(), fp["libraries"]
        summary = [r for r in env.mllog_records(a / "mlperf_log.txt") if r["key"] == "run_fingerprint"]
        assert len(summary) == 1 and summary[0]["value"]["binary_sha256"] == fp["binary"]["sha256"], summary
        print("fingerprint: binary, project library and annotation checksums equal sha256 of the files "
              "(a rebuilt libmrcnn_ops.so is named by audit); summary in the MLPerf log")

        # 7. bad input
        (tmp / "empty").mkdir()
        for args, text in (([a, tmp / "nowhere"], "does not exist"), ([a, tmp / "empty"], "not a run folder"),
                           ([a, b, "--tolerance", "2"], "--tolerance 2"), ([a], "expected two runs")):
            rc, out, err = audit(*args)
            assert rc == 2 and text in err and err.count("\n") == 1, (args, rc, err)
        print("bad input: exit 2 with one line")


if __name__ == "__main__":
    main()
