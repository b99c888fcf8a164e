"""run_scripts/gpu_check.sh, the GPU check, as far as a machine without a GPU can take it.

1. Without a GPU, the full check says so and exits 77 (nothing to check); on a machine with one,
   this part is skipped.
2. MRCNN_GPU_STAGES=configure needs no GPU: with this environment's PyTorch it configures the
   project from a stand-in virtual environment. The stand-in must import the same torch (a link
   to a virtual environment's python would not: it leaves the environment behind), CMake must
   take LibTorch from it, and with nvcc present the CUDA kernels must be on. A link left there
   by an older version of the script is replaced, not written through: writing the stand-in
   through it once replaced a machine's python with a script that executed itself forever.
3. A stage that hangs is stopped at its limit, reported as timed out, and its log names the
   process it was waiting on; unknown stage names are refused.
4. The rehearsal (MRCNN_GPU_REHEARSAL=1) runs the op comparison, the step comparison and the
   epoch stage on the CPU with this build: two op cases against torchvision's, each reporting a
   RESULT line; a float16 channels-last step of both networks (the small one), reporting a
   RESULT line; the synthetic set at genuine COCO sizes, one epoch of the p5 system's own file
   as the check gives it (its shapes warmed before run_start; its expected exit 3, targets not
   reached, counts as passed) and the checker on its log, the epoch's line (images/s, the steps'
   compute, the warm-up), and two deterministic epochs that audit as bit-identical.
5. The profile stage, rehearsed on the CPU with this build (the small network, float32): both
   sides' gzipped traces hold 3 marked steps with ATen ops in each and no GPU activity, their
   tables come back beside them, summary.txt shows both sides, the A/B runs (batch 8 and 2,
   padding masks, the MLPerf option set) time their steps, memory.json has the allocator's
   figures, and the headline PROFILE lines reach the check's summary.

The parts run on their own when named (python test_gpu_check.py rehearsal_epoch); ctest runs each as a
test of its own, side by side:
# ctest parts: basics rehearsal_steps rehearsal_epoch rehearsal_nccl profile
The step, epoch and profile rehearsals train and trace on 2 threads (MRCNN_JOBS=2):
# ctest processors: rehearsal_steps=2 rehearsal_epoch=2 profile=2
"""
import json
import os
import pathlib
import shutil
import socket
import stat
import sys

import mrcnn_testenv as env

SCRIPT = env.SOURCE_DIR / "run_scripts" / "gpu_check.sh"


def check(out, timeout=300, **extra):
    e = dict(os.environ, MRCNN_JOBS="2", **extra)
    return env.run(["bash", SCRIPT, out], env=e, timeout=timeout)


def basics(tmp):
    # 1. No GPU: nothing to check, said so.
    has_gpu = shutil.which("nvidia-smi") and env.run(["nvidia-smi", "-L"]).returncode == 0
    if not has_gpu:
        p = check(tmp / "full", MRCNN_PYTHON=env.PYTHON)
        assert p.returncode == 77, (p.returncode, p.stderr)
        assert "no NVIDIA GPU here" in p.stderr, p.stderr
        print("no GPU: exit 77 with the reason")

    # 2. Configure only, from a stand-in environment around this python.
    out = tmp / "configure"
    victim = tmp / "victim"
    victim.write_text("not to be overwritten\n")
    (out / "pyenv" / "bin").mkdir(parents=True)
    (out / "pyenv" / "bin" / "python").symlink_to(victim)
    p = check(out, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_STAGES="configure")
    assert victim.read_text() == "not to be overwritten\n", "the stand-in was written through a link"
    assert not (out / "pyenv" / "bin" / "python").is_symlink()
    nvcc = shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")
    torch_prefix = env.run([env.PYTHON, "-c", "import torch; print(torch.utils.cmake_prefix_path)"])
    assert torch_prefix.returncode == 0, torch_prefix.stderr
    if nvcc:
        assert p.returncode == 0, p.stderr[-3000:]
        assert "configured:" in p.stderr, p.stderr
        assert "project CUDA kernels: ON" in (out / "configure.log").read_text()
    else:
        assert p.returncode == 1 and "would not compile the CUDA kernels" in p.stderr, p.stderr
    stand_in = out / "pyenv" / "bin" / "python"
    same = env.run([stand_in, "-c", "import torch; print(torch.utils.cmake_prefix_path)"])
    assert same.returncode == 0, f"the stand-in python cannot import torch: {same.stderr}"
    assert same.stdout == torch_prefix.stdout, (same.stdout, torch_prefix.stdout)
    cache = (out / "build" / "CMakeCache.txt").read_text()
    torch_dir = next(l.split("=", 1)[1] for l in cache.splitlines() if l.startswith("Torch_DIR:"))
    want = pathlib.Path(torch_prefix.stdout.strip()) / "Torch"
    assert pathlib.Path(torch_dir).resolve() == want.resolve(), (torch_dir, want)
    print(f"configure only: exit {p.returncode}, LibTorch from {torch_dir}")

    # 3. A hanging stage: the python CMake asks for LibTorch never answers in time.
    slow = tmp / "slow-python"
    slow.write_text("#!/bin/sh\n"
                    'case "$*" in *cmake_prefix_path*) sleep 90 </dev/null >/dev/null 2>&1;; esac\n'
                    f'exec "{env.PYTHON}" "$@"\n')
    slow.chmod(slow.stat().st_mode | stat.S_IXUSR)
    out = tmp / "hang"
    # CMake asks that python within the stage's first 2 s; the limit of 20 s puts the watchdog's
    # listing at 15 s (the limit was 40 s: 20 s more of waiting on a sleep).
    p = check(out, timeout=200, MRCNN_PYTHON=str(slow), MRCNN_GPU_STAGES="configure",
              MRCNN_STAGE_TIMEOUT="20")
    assert p.returncode == 1, (p.returncode, p.stderr)
    summary = (out / "summary.txt").read_text()
    assert "configure      TIMED OUT after 20 s" in summary, summary
    log = (out / "configure.log").read_text()
    assert "configure still running after" in log, log[-2000:]
    assert "sleep 90" in log, log[-2000:]
    print("a hanging configure: timed out at 20 s, its log shows the process it waited on")
    p = check(tmp / "typo", MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_STAGES="configure,bulid")
    assert p.returncode == 2 and "unknown stage 'bulid'" in p.stderr, (p.returncode, p.stderr)


def rehearsal_steps(tmp):
    # 4a. The op and step comparisons, rehearsed on the CPU.
    out = tmp / "rehearsal-steps"
    p = check(out, timeout=900, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_REHEARSAL="1",
              MRCNN_GPU_STAGES="ops,steps", MRCNN_STEP_CASES="2:1:g", MRCNN_GPU_CHECK_BUILD=str(env.BUILD_DIR))
    assert p.returncode == 0, p.stderr[-3000:]
    summary = (out / "summary.txt").read_text()
    # A graphs case ("2:1:g") is named for them and runs without them off the GPU.
    for name in ("ops_vs_tv", "step_b2_cl1_graphs"):
        assert any(l.startswith(f"[gpu_check] {name} ") and " passed " in l for l in summary.splitlines()), summary
    assert "RESULT config=" in summary and "precision=fp16 batch=2" in summary, summary
    for case in ("multilevel_roi_align_mask", "proposals_test"):
        assert f"RESULT case={case} " in summary and "device=cpu" in summary, summary
    print("rehearsal: two op comparisons and a step comparison on the CPU")


def rehearsal_epoch(tmp):
    # 4b. The epoch stage's command, rehearsed on the CPU: the p5 system's file itself at 160
    # pixels, 4 images a step (8 images of genuine COCO sizes), its shapes warmed up before
    # run_start.
    out = tmp / "rehearsal-epoch"
    p = check(out, timeout=900, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_REHEARSAL="1",
              MRCNN_GPU_STAGES="epoch", MRCNN_GPU_CHECK_BUILD=str(env.BUILD_DIR),
              MRCNN_EPOCH_IMAGES="8", MRCNN_EPOCH_BATCH="4")
    assert p.returncode == 0, p.stderr[-3000:]
    summary = (out / "summary.txt").read_text()
    for name in ("synth", "train_epoch", "log_check", "deterministic_a", "deterministic_b", "determinism"):
        assert any(l.startswith(f"[gpu_check] {name} ") and " passed " in l for l in summary.splitlines()), summary
    assert "targets not reached in one epoch (exit 3), as expected" in (out / "train_epoch.log").read_text()
    annotations = json.loads((out / "synthetic-coco-8" / "annotations" / "instances_train2017.json").read_text())
    sizes = json.loads((env.SOURCE_DIR / "benchmark" / "perf" / "coco_train2017_sizes.json").read_text())["images"]
    assert [(i["width"], i["height"]) for i in annotations["images"]] == [(s["width"], s["height"]) for s in sizes[:8]]
    records = env.mllog_records(out / "runs" / "latest" / "mlperf_log.txt")
    assert sum(r["key"] == "eval_accuracy" for r in records) == 1
    value = {r["key"]: r["value"] for r in records}
    assert value["global_batch_size"] == 4 and value["submission_platform"] == "8xNVIDIA H100-SXM5-80GB", value
    keys = [r["key"] for r in records]
    assert keys.index("init_warm_up") < keys.index("init_stop") < keys.index("run_start"), keys
    warm = next(r for r in records if r["key"] == "init_warm_up")
    assert warm["metadata"]["shapes"] == [[160, 224], [224, 160]] and warm["metadata"]["batches"] == 4, warm
    assert warm["metadata"]["mask_head_rois"] == [64], warm  # 4 images x 64 RoIs x 1/4 positive: one bucket
    # The epoch's rate, loader included, its steps' own compute, the warm-up; no profile ran here.
    epoch = next(l for l in summary.splitlines() if l.startswith("EPOCH "))
    fields = dict(f.split("=", 1) for f in epoch.split(" (")[0].split()[1:])
    # 8 images of COCO's first sizes, 6 landscape and 2 portrait, grouped by orientation: 3 steps of 4.
    assert fields["steps"] == "3" and fields["batch"] == "4" and float(fields["images_per_second_epoch"]) > 0, epoch
    assert float(fields["compute_slowest_ms"]) >= float(fields["compute_median_ms"]) > 0, epoch
    assert float(fields["warm_up_s"]) > 0 and fields["bench_row"] == "none", epoch
    assert json.loads(fields["rank_step_seconds"])["median"][0] > 0, epoch
    # The loader alone over the same images, on the largest thread count the machine has cores for.
    loader = next(l for l in summary.splitlines() if l.startswith("LOADER "))
    assert loader.startswith("LOADER threads=") and float(loader.split("images_per_second=")[1].split()[0]) > 0, loader
    # Two deterministic epochs of the same seed: bit-identical.
    assert "[gpu_check]   bit-identical: 3 steps and 1 epoch accuracies" in summary, summary
    print("rehearsal: one epoch of the p5 system's file on the CPU (warmed before run_start, its log passes the "
          "checker) and two deterministic epochs that audit as bit-identical")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rehearsal_nccl(tmp):
    # 4c. The nccl stage: on a GPU, allreduce_probe through NCCL as one torchrun-style rank; its
    # rehearsal runs the same probe and rank environment through the TCP ring on the CPU.
    out = tmp / "rehearsal-nccl"
    p = check(out, timeout=300, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_REHEARSAL="1",
              MRCNN_GPU_STAGES="nccl", MRCNN_GPU_CHECK_BUILD=str(env.BUILD_DIR), MRCNN_NCCL_PORT="0")
    assert p.returncode != 0 and "MASTER_PORT=0" in (out / "nccl_probe.log").read_text(), p.stderr[-3000:]
    port = free_port()
    p = check(out, timeout=300, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_REHEARSAL="1",
              MRCNN_GPU_STAGES="nccl", MRCNN_GPU_CHECK_BUILD=str(env.BUILD_DIR), MRCNN_NCCL_PORT=str(port))
    assert p.returncode == 0, p.stderr[-3000:]
    summary = (out / "summary.txt").read_text()
    assert any(l.startswith("[gpu_check] nccl_probe ") and " passed " in l for l in summary.splitlines()), summary
    line = next(l for l in summary.splitlines() if "NCCL_PROBE" in l)
    probe = json.loads(line.split("NCCL_PROBE ", 1)[1])
    assert probe["communicator"] == "tcp" and probe["ranks"] == 1 and probe["median_s"] >= 0, probe
    assert len(probe["seconds"]) == 2, probe
    print("rehearsal: the nccl stage's probe as one rank through the TCP ring (a sum over one rank moves no "
          "byte: its time is the probe's overhead); a bad port is named")


def profile(tmp):
    # 5. The profile stage, rehearsed.
    out = tmp / "profile"
    p = check(out, timeout=600, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_REHEARSAL="1",
              MRCNN_GPU_STAGES="profile", MRCNN_GPU_CHECK_BUILD=str(env.BUILD_DIR))
    assert p.returncode == 0, p.stderr[-3000:]
    prof = out / "profile"
    files = {f.name: f.stat().st_size for f in prof.iterdir()}
    assert set(files) == {"summary.txt", "ours_trace.json.gz", "tv_trace.json.gz", "ours_kernels.json",
                          "tv_kernels.json", "ab.json", "memory.json"}, files
    assert max(files.values()) <= 16 * 2**20, files
    sys.path.insert(0, str(env.SOURCE_DIR / "benchmark" / "perf"))
    import trace_summary
    text = (prof / "summary.txt").read_text()
    ops = {}
    for side, short in (("ours", "ours"), ("torchvision", "tv")):
        s = trace_summary.summarize(prof / f"{short}_trace.json.gz", side)
        assert s["steps"] == 3 and s["gpu"] is False, (side, s["steps"])
        ops[side] = [r["aten_ops"] for r in s["per_step"]]
        assert min(ops[side]) > 0 and all(r["aten_ops_top_level"] > 0 for r in s["per_step"]), (side, ops)
        assert s["median"]["gpu_busy_us"] is None and s["scopes"]["mrcnn::forward"]["host_us_per_step"] > 0
        tables = json.loads((prof / f"{short}_kernels.json").read_text())
        assert tables["per_step"] == json.loads(json.dumps(s["per_step"])), side
        assert f"PROFILE label={side} steps=3 " in text and f"aten_ops={s['median']['aten_ops']:.0f} " in text, text
    assert "no GPU activity in this trace" in text and "PROFILE images_per_second ours=" in text, text
    summary = (out / "summary.txt").read_text()
    assert any(l.startswith("[gpu_check] profile ") and " passed " in l for l in summary.splitlines()), summary
    assert "PROFILE label=ours steps=3" in summary and "PROFILE label=torchvision steps=3" in summary, summary
    ab = json.loads((prof / "ab.json").read_text())
    assert {v["name"] for v in ab["variants"]} == {"batch8", "batch2", "mask_padding", "mlperf_options", "full_randperm",
                                                  "mask_roi_bucket", "systems_mlperf_batch8",
                                                  "systems_mlperf_batch12"}, ab
    assert all(len(v["step_seconds"]) == 2 and v["images_per_second"] > 0 for v in ab["variants"]), ab
    assert all(v["slowest_step_s"] == max(v["step_seconds"]) >= v["median_step_s"] for v in ab["variants"]), ab
    assert all(" slowest_ms=" in l for l in text.splitlines() if l.startswith("PROFILE ab ")), text
    # Ours is traced as the p5 system trains, its model section read through `config` (on the
    # CPU without the fused bottlenecks, CUDA's): the reference's arithmetic (no padding masks,
    # every cell proposing, the straddle filter at 0, proposals per batch: 1000 per image of the
    # batch), the mask head's bucket; the case's own network size. The A/B base row is then a
    # process of its own.
    traced = ab["traced_options"]
    assert ab["system"] == "aws-p5.48xlarge" and traced["mask_padding"] is False, ab
    assert traced["rpn"]["proposals_inside_image"] is False and traced["rpn"]["straddle_threshold"] == 0, traced
    assert traced["rpn"]["post_nms_per_batch_train"] is True and traced["rpn"]["post_nms_top_n_train"] == 8000, traced
    assert traced["mask_head"] == {"pooler_resolution": 14, "sampling_ratio": 2, "aligned": False,
                                   "mask_threshold": 0.5, "roi_bucket": 64}, traced
    assert "fused_conv_relu" not in traced["backbone"] and "depth" not in traced["backbone"], traced
    assert "num_classes" not in traced and "precision" not in traced, traced
    row12 = next(v for v in ab["variants"] if v["name"] == "systems_mlperf_batch12")
    assert row12["batch"] == 12 and row12["options"]["rpn"]["post_nms_top_n_train"] == 12000, row12
    assert "ours traced with --traced systems (--system aws-p5.48xlarge): {" in text, text
    assert "source" not in next(v for v in ab["variants"] if v["name"] == "batch8"), ab
    assert {v["name"] for v in ab["skipped"]} == {"cuda_graphs", "cudnn_benchmark",
                                                 "roi_align_spatial_threads", "fused_conv_relu", "head_streams",
                                                 "combined", "combined_cudnn_benchmark", "systems_batch12",
                                                 "systems_mlperf_batch8_graphs", "systems_mlperf_batch12_graphs",
                                                 "systems_mlperf_batch12_graphs_cudnn_benchmark",
                                                 "systems_mlperf_batch12_rpn_labels_after_front"}, ab
    memory = json.loads((prof / "memory.json").read_text())["devices"]
    cpu = memory["cpu:-1"]
    assert cpu["peak_allocated_mb"] > 0 and "mrcnn::backward" in cpu["at_scope_end"], memory
    print(f"profile rehearsal: 3 steps in each trace, ATen ops per step ours {ops['ours']}, "
          f"torchvision {ops['torchvision']}; A/B and memory tables back")


PARTS = {"basics": basics, "rehearsal_steps": rehearsal_steps, "rehearsal_epoch": rehearsal_epoch,
         "rehearsal_nccl": rehearsal_nccl, "profile": profile}


def main(argv):
    names = argv or list(PARTS)
    unknown = [n for n in names if n not in PARTS]
    if unknown:
        sys.exit(f"unknown part(s) {unknown}; the parts are {list(PARTS)}")
    for name in names:
        with env.scratch_dir(f"gpu-check-{name}") as tmp:
            PARTS[name](pathlib.Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
