#!/usr/bin/env python3
"""One Mask R-CNN training step, ours against torchvision's, in one run.

Ours: the C++ network (bench_model_train_step in driver mode). Peer: torchvision's MaskRCNN
training step in Python (model(images, targets), backward, torch.optim.SGD) on the same LibTorch.
Both sides get the same weights (torchvision's random initialization, batch-norm statistics
measured on the inputs, converted by model/tools/convert_weights.py), the same inputs (normalized
images with rectangles, their boxes, labels and polygons; torchvision gets the polygons
rasterized), the same hyperparameters (model::torchvision_options), the same SGD (lr 0.002,
momentum 0.9, weight decay 1e-4), the same intra-op thread count and the same handling of freed
host memory (--host-memory, default retain: the harness's launch.host_memory; torchvision's
process gets the same policy from glibc's tunables, mmap_max=0 and no trimming). Our layout
switch (channels-last) is on: it is part of what is compared.

Each repetition runs torchvision, then ours, each in its own process (so that peak RSS is
comparable), each doing --warmup steps and then --steps timed steps; with --lock the pair holds
/tmp/mrcnn-cpu.lock exclusively. Reported: median step time and images/s per side, the ratio,
peak RSS (and RSS after setup, before the first step), and where the time goes: one more profiled
step per side, broken down by stage (forward scopes) and by autograd node (backward); that step
runs in a process of its own after a warm-up step, or, with --warmup 0, at the end of the last
repetition's process.

Configurations:
  full   ResNet-50-FPN (frozen batch norm, stem and res2 frozen), 2 images of 800x1333
         (padded 800x1344), 8 objects each: MLPerf's training step. Tens of seconds a step on two
         cores: few repetitions.
  small  ResNet-18-FPN with group norm, FPN 128, box head 256, mask head 2 x 128, 4 images of
         128x128, 300 proposals and 32 RoIs per image: the demo's small model.

On a GPU (--device cuda): both sides train there, under autocast when --precision is bf16 or
fp16 (for fp16 with loss scaling: torchvision with torch.autocast and a GradScaler, the usual AMP
recipe; ours with the harness's LossScaler, its step reading nothing back, as the harness's trainer
between its reads of step results: the skip and the scale's update are decided on the device), each step timed between two device synchronizations; reported
besides images/s: the peak GPU memory (the caching allocator's) and the host synchronizations of
one more, untimed step (LibTorch's sync debug mode: torch.cuda.set_sync_debug_mode("warn") for
torchvision, train::SyncCounter for ours; the mode costs host time per sync, so timed steps run
without it).
--batch N sets the images per step; --channels-last 0|1 sets our layout switch and torchvision's
memory format (default: on for both on a GPU; ours only on the CPU, as before).
--ops native|portable|auto|both: which implementation of the custom ops our side runs (the driver's
--mrcnn_ops, model/ops/implementation.h; default auto: native where the device has the kernels).
With both, ours runs twice per repetition, native then portable (each its own process, after
torchvision's), and portable/native is reported besides; --no-peer leaves torchvision's side out
(then only ours is timed, e.g. native against portable).

Usage: compare_model_train_step.py [--config full|small|both] [--reps N] [--steps N] [--warmup N]
           [--threads N] [--host-memory retain|system] [--build DIR] [--lock] [--json OUT]
           [--device cpu|cuda] [--precision fp32|bf16|fp16] [--batch N] [--size HxW] [--channels-last 0|1]
           [--ops native|portable|auto|both] [--no-peer]
"""
import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "model" / "tools"))
import convert_weights  # noqa: E402
import safetensors_io  # noqa: E402

CONFIGS = {
    "full": dict(depth=50, norm="frozen_bn", images=2, height=800, width=1333, objects=8,
                 classes=81, fpn=256, representation=1024, mask_layers=4, mask_channels=256,
                 pre_nms=2000, post_nms=2000, rois=512, reps=3, steps=1, warmup=1),
    "small": dict(depth=18, norm="group_norm", images=4, height=128, width=128, objects=4,
                  classes=11, fpn=128, representation=256, mask_layers=2, mask_channels=128,
                  pre_nms=600, post_nms=300, rois=32, reps=5, steps=5, warmup=2),
}
SEED = 1

from train_step_inputs import (  # noqa: E402,F401  (profile_step.py and flops_roofline.py use them through this module)
    calibrate_frozen_bn, make_inputs, our_options, prepare, torchvision_model)


# ---- the torchvision worker (a separate process) ------------------------------------------------

def current_rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_torchvision_side(args):
    """(model, images, targets): torchvision's model in training mode and the case's inputs, on --device."""
    case = pathlib.Path(args.case)
    data = torch.load(case / "tv.pt", weights_only=False)
    cfg = data["cfg"]
    model = torchvision_model(cfg)
    model.load_state_dict(torch.load(case / "tv_state.pth"))
    model.train()
    device = torch.device(args.device)
    images, targets = data["images"], data["targets"]
    if device.type == "cuda":
        model.to(device)
        images = [i.to(device) for i in images]
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
    if args.channels_last == "1":
        # The weights: a convolution with channels-last weights computes channels-last, from the
        # first one on. The images stay as they are: torchvision takes a list of 3-D tensors
        # (which have no channels-last form) and copies them into a new padded batch.
        model.to(memory_format=torch.channels_last)
    return model, images, targets


def add_profiler_scopes(model):
    """Wraps torchvision's stages in the C++ network's RECORD_FUNCTION scopes; returns nothing."""
    from torch.profiler import record_function

    def scoped(module, name):
        forward = module.forward

        def wrapped(*a, **kw):
            with record_function(name):
                return forward(*a, **kw)
        module.forward = wrapped

    # The same scopes as the C++ network's RECORD_FUNCTION names.
    scoped(model.backbone.body, "mrcnn::backbone")
    scoped(model.backbone.fpn, "mrcnn::fpn")
    scoped(model.rpn, "mrcnn::rpn")
    rh = model.roi_heads
    for m in (rh.box_roi_pool, rh.box_head, rh.box_predictor):
        scoped(m, "mrcnn::roi_box")
    for m in (rh.mask_roi_pool, rh.mask_head, rh.mask_predictor):
        scoped(m, "mrcnn::roi_mask")
    select = rh.select_training_samples

    def select_scoped(*a, **kw):
        with record_function("mrcnn::roi_sampling"):
            return select(*a, **kw)
    rh.select_training_samples = select_scoped
    from torchvision.models.detection import roi_heads as tv_roi_heads
    project = tv_roi_heads.project_masks_on_boxes

    def project_scoped(*a, **kw):
        with record_function("mrcnn::mask_targets"):
            return project(*a, **kw)
    tv_roi_heads.project_masks_on_boxes = project_scoped


def make_train_step(model, images, targets, device, precision):
    """(step, syncs): a function running one SGD step, and the list its counted steps append to."""
    from torch.profiler import record_function
    cuda = device.type == "cuda"
    params = [p for p in model.parameters() if p.requires_grad]
    sgd = torch.optim.SGD(params, lr=0.002, momentum=0.9, weight_decay=1e-4)
    amp_dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    syncs = []

    def step(count_syncs=False, scope=False):
        """One step; with count_syncs, the sync debug mode counts its host synchronizations
        (timed steps leave it off: each sync's warning costs host time, more on the side that
        syncs more). With scope, the step is one "mrcnn::train_step" scope in a trace, from
        after the synchronize that opens it to after the one that ends it (as ours)."""
        import warnings
        if cuda:
            torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught, \
                (record_function("mrcnn::train_step") if scope else contextlib.nullcontext()):
            warnings.simplefilter("always")
            if cuda and count_syncs:
                torch.cuda.set_sync_debug_mode("warn")
            t0 = time.perf_counter()
            sgd.zero_grad()
            with record_function("mrcnn::forward"), torch.autocast(
                    device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                loss = sum(model(images, targets).values())
            with record_function("mrcnn::backward"):
                (scaler.scale(loss) if scaler else loss).backward()
            with record_function("mrcnn::optimizer"):
                if scaler:
                    scaler.step(sgd)
                    scaler.update()
                else:
                    sgd.step()
            if cuda and count_syncs:
                torch.cuda.set_sync_debug_mode("default")
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
        if count_syncs:
            syncs.append(sum("synchronizing CUDA operation" in str(w.message) for w in caught))
        return seconds

    return step, syncs


def write_step_trace(step, args, cuda):
    """Profiles --trace-steps more steps into the Chrome trace --trace; returns nothing."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:  # the kernels too: the host's activity alone would show launch times
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    # --trace-steps consecutive steps, each one "mrcnn::train_step" scope, with the operators'
    # input shapes (benchmark/perf/trace_summary.py cuts the trace at the scopes).
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for _ in range(args.trace_steps):
            step(scope=True)
    prof.export_chrome_trace(args.trace)


def torchvision_worker(args):
    """Runs torchvision's side and writes its report (--report); returns nothing."""
    torch.set_num_threads(args.threads)
    model, images, targets = load_torchvision_side(args)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    step, syncs = make_train_step(model, images, targets, device, args.precision)
    add_profiler_scopes(model)

    setup_rss = current_rss_mb()
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = [step() for _ in range(args.steps)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if cuda:
        step(count_syncs=True)  # one more step, untimed, its syncs counted
    else:
        # The sync debug mode is CUDA's: on the CPU a step has none to count (0, as ours reports),
        # and running one more step for it cost a CPU rehearsal a float16 step (~7 s).
        syncs.append(0)
    if args.trace:
        write_step_trace(step, args, cuda)
    report = {"step_seconds": times, "setup_rss_mb": setup_rss, "peak_rss_mb": peak,
              "threads": torch.get_num_threads(), "images": len(images), "syncs_per_step": syncs}
    if cuda:
        report["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    pathlib.Path(args.report).write_text(json.dumps(report))


# ---- the driver --------------------------------------------------------------------------------

# launch.host_memory "retain" for a process that cannot call mallopt itself: glibc's tunables (no
# block mapped on its own, the heap never trimmed), read when the process starts.
RETAIN_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=18446744073709551615"


def side_env(host_memory):
    env = dict(os.environ)
    if host_memory == "retain":
        env["GLIBC_TUNABLES"] = RETAIN_TUNABLES
    return env


def tv_channels_last(args):
    """torchvision's memory format: --channels-last when given, else channels-last on a GPU only
    (on the CPU the comparison has always run torchvision in its default format)."""
    if args.channels_last is not None:
        return args.channels_last
    return "1" if args.device == "cuda" else "0"


def memory_mb(report):
    """Peak GPU memory on a GPU, peak RSS on the CPU."""
    return report.get("peak_gpu_mb", report["peak_rss_mb"])


def our_sides(args):
    """Our sides: "ours" (--ops; native with both) and, with --ops both, "ours_portable"."""
    return ["ours", "ours_portable"] if getattr(args, "ops", "auto") == "both" else ["ours"]


def our_ops(side, args):
    """The driver's --mrcnn_ops for one of our sides."""
    ops = getattr(args, "ops", "auto")
    if side == "ours_portable":
        return "portable"
    return "native" if ops == "both" else ops


def run_side(side, case, args, steps, warmup, trace=None, trace_steps=1, extra=()):
    """Runs one side in its own process and returns its report. With trace, `trace_steps` more
    steps are profiled into that Chrome trace; `extra` are more arguments for the process."""
    report = case / f"report_{side}.json"
    host_memory = getattr(args, "host_memory", "retain")
    env = os.environ
    if side == "torchvision":
        env = side_env(host_memory)
        cmd = [sys.executable, __file__, "--worker", "torchvision", "--case", str(case),
               "--steps", str(steps), "--warmup", str(warmup), "--threads", str(args.threads),
               "--report", str(report), "--device", args.device, "--precision", args.precision,
               "--channels-last", tv_channels_last(args)]
        if trace:
            cmd += ["--trace", str(trace), "--trace-steps", str(trace_steps)]
    else:
        cmd = [str(args.bench), f"--mrcnn_case={case}", f"--mrcnn_steps={steps}",
               f"--mrcnn_warmup={warmup}", f"--mrcnn_threads={args.threads}",
               f"--mrcnn_report={report}", f"--mrcnn_host_memory={host_memory}",
               f"--mrcnn_device={args.device}", f"--mrcnn_precision={args.precision}",
               f"--mrcnn_ops={our_ops(side, args)}"]
        if args.channels_last is not None:
            cmd.append(f"--mrcnn_channels_last={args.channels_last}")
        if args.cuda_graphs:
            cmd.append(f"--mrcnn_cuda_graph_shapes={args.cuda_graphs}")
        if trace:
            cmd += [f"--mrcnn_trace={trace}", f"--mrcnn_trace_steps={trace_steps}"]
    cmd += list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{side} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(report.read_text())


@contextlib.contextmanager
def cpu_lock(enabled):
    if not enabled:
        yield
        return
    with open("/tmp/mrcnn-cpu.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def breakdown(trace_path):
    """Seconds per forward scope (mrcnn::*) and per autograd node in a Chrome trace."""
    events = json.loads(pathlib.Path(trace_path).read_text())["traceEvents"]
    scopes, nodes = {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        name, dur = e.get("name", ""), e.get("dur", 0) / 1e6
        if name.startswith("mrcnn::"):
            scopes[name] = scopes.get(name, 0.0) + dur
        elif name.startswith("autograd::engine::evaluate_function: "):
            node = name.split(": ", 1)[1]
            nodes[node] = nodes.get(node, 0.0) + dur
    return scopes, nodes


MEMORY_LABEL = {"cpu": "RSS", "cuda": "GPU memory"}


def train_step_bench(build):
    """The C++ side's driver in the build folder `build`; exits naming it when it is not built."""
    bench = pathlib.Path(build) / "benchmark" / "perf" / "bench_model_train_step"
    if not bench.exists():
        raise SystemExit(f"{bench} not found: build bench_model_train_step first")
    return bench


def environment(args):
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    import torchvision
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": args.threads,
            "host_memory": getattr(args, "host_memory", "retain"),
            "torch": torch.__version__, "torchvision": torchvision.__version__,
            "python": platform.python_version(), "bench": str(args.bench),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def image_size(text):
    """argparse type of --size: 'HxW', each side at least 64 pixels (the FPN's coarsest level)."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW (e.g. 64x64), got '{text}'") from None
    if min(h, w) < 64:
        raise argparse.ArgumentTypeError(f"{text}: each side at least 64 pixels")
    return h, w


def compare(name, cfg, args, workdir):
    if args.batch:
        cfg = dict(cfg, images=args.batch)
    if args.size:
        cfg = dict(cfg, height=args.size[0], width=args.size[1])
    case = workdir / name
    case.mkdir()
    prepare(cfg, case)
    reps = args.reps or cfg["reps"]
    steps = args.steps or cfg["steps"]
    warmup = args.warmup if args.warmup is not None else cfg["warmup"]
    sides = ([] if args.no_peer else ["torchvision"]) + our_sides(args)
    runs = {side: [] for side in sides}
    traces = {side: case / f"trace_{side}.json" for side in sides}
    # With no warm-up asked for (--warmup 0: a rehearsal on the CPU, where each float16 step takes
    # seconds), the last repetition's process traces its one more step itself, after its timed
    # steps and the syncs' step (its timings and peak memory are taken before): a separate traced
    # run would repeat a warm-up and a step that nothing reads. Otherwise the traced run is a
    # process of its own, after one warm-up step, as always.
    traced_in_last_rep = warmup == 0
    for rep in range(reps):
        with cpu_lock(args.lock):
            for side in sides:
                trace = traces[side] if traced_in_last_rep and rep == reps - 1 else None
                runs[side].append(run_side(side, case, args, steps, warmup, trace=trace))
                r = runs[side][-1]
                print(f"  [{name} rep {rep + 1}/{reps}] {side:11s} step "
                      f"{statistics.median(r['step_seconds']):8.3f} s  peak {MEMORY_LABEL[args.device]} "
                      f"{memory_mb(r):7.0f} MB  syncs/step {r.get('syncs_per_step', [])}", flush=True)
    if not traced_in_last_rep:
        with cpu_lock(args.lock):
            for side in sides:
                run_side(side, case, args, 1, 1, trace=traces[side])
    result = {"config": cfg, "reps": reps, "steps_per_rep": steps, "warmup": warmup,
              "device": args.device, "precision": args.precision,
              "channels_last": {"ours": args.channels_last or "options", "torchvision": tv_channels_last(args)},
              "cuda_graph_shapes": {"ours": args.cuda_graphs, "torchvision": 0},
              "ops": {side: our_ops(side, args) for side in our_sides(args)}}
    for side, rs in runs.items():
        step = statistics.median([statistics.median(r["step_seconds"]) for r in rs])
        result[side] = {"step_seconds": step, "images_per_second": cfg["images"] / step,
                        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
                        "setup_rss_mb": statistics.median(r["setup_rss_mb"] for r in rs),
                        "peak_memory_mb": statistics.median(memory_mb(r) for r in rs),
                        "syncs_per_step": statistics.median(s for r in rs for s in r.get("syncs_per_step", [0])),
                        "all_step_seconds": [r["step_seconds"] for r in rs]}
        result[side]["scopes"], result[side]["autograd"] = breakdown(traces[side])
    o = result["ours"]
    if "torchvision" in result:
        t = result["torchvision"]
        result["speedup"] = o["images_per_second"] / t["images_per_second"]
        result["peak_rss_ratio"] = o["peak_rss_mb"] / t["peak_rss_mb"]
        result["peak_memory_ratio"] = o["peak_memory_mb"] / t["peak_memory_mb"]
    if "ours_portable" in result:  # step time portable / native
        result["portable_over_native"] = result["ours_portable"]["step_seconds"] / o["step_seconds"]
    return result


def print_result(name, r):
    # Columns: torchvision (unless --no-peer), ours, ours with the portable ops (--ops both);
    # ratios of each row: ours/tv and portable/native.
    labels = {"torchvision": "torchvision", "ours": "ours" if "ours_portable" not in r else "ours native",
              "ours_portable": "ours portable"}
    sides = [s for s in labels if s in r]
    ratios = ([("ours/tv", "ours", "torchvision")] if "torchvision" in r else []) + \
             ([("port/nat", "ours_portable", "ours")] if "ours_portable" in r else [])
    o = r["ours"]
    print(f"\n== {name}: {r['config']['images']} images of {r['config']['height']}x{r['config']['width']}, "
          f"ResNet-{r['config']['depth']} ({r['config']['norm']}), medians of {r['reps']} runs x "
          f"{r['steps_per_rep']} steps after {r['warmup']} warm-up")
    print(f"{'':24s}" + "".join(f"{labels[s]:>14s}" for s in sides) + "".join(f"{n:>10s}" for n, _, _ in ratios))

    def row(title, key, fmt, with_ratios=True):
        line = f"{title:24s}" + "".join(f"{r[s][key]:14{fmt}}" for s in sides)
        if with_ratios:
            line += "".join(f"{r[a][key] / r[b][key]:10.2f}" for _, a, b in ratios)
        print(line)

    row("step (s)", "step_seconds", ".3f")
    row("images/s", "images_per_second", ".3f")
    row("peak RSS (MB)", "peak_rss_mb", ".0f")
    row("RSS after setup (MB)", "setup_rss_mb", ".0f", False)
    if r.get("device") == "cuda":
        row("peak GPU memory (MB)", "peak_memory_mb", ".0f")
    row("host syncs per step", "syncs_per_step", ".0f", False)
    fields = [f"config={r['config']['depth']}", f"device={r.get('device')}", f"precision={r.get('precision')}",
              f"batch={r['config']['images']}", f"ours_ips={o['images_per_second']:.3f}"]
    if "torchvision" in r:
        t = r["torchvision"]
        fields += [f"tv_ips={t['images_per_second']:.3f}", f"speedup={r['speedup']:.2f}",
                   f"ours_mem_mb={o['peak_memory_mb']:.0f}", f"tv_mem_mb={t['peak_memory_mb']:.0f}",
                   f"ours_syncs={o['syncs_per_step']:.0f}", f"tv_syncs={t['syncs_per_step']:.0f}"]
    else:
        fields += [f"ours_mem_mb={o['peak_memory_mb']:.0f}", f"ours_syncs={o['syncs_per_step']:.0f}"]
    fields.append(f"ours_ops={r['ops']['ours']}")
    if "ours_portable" in r:
        q = r["ours_portable"]
        fields += [f"portable_ips={q['images_per_second']:.3f}",
                   f"portable_over_native={r['portable_over_native']:.2f}",
                   f"portable_mem_mb={q['peak_memory_mb']:.0f}"]
    print("RESULT " + " ".join(fields))
    print("where the time goes (one profiled step, seconds, inclusive):")
    print(f"  {'':38s}" + "".join(f"{labels[s]:>14s}" for s in sides))
    names = sorted(set().union(*(r[s]["scopes"] for s in sides)))
    for n in names:
        print(f"  {n:38s}" + "".join(f"{r[s]['scopes'].get(n, 0):14.3f}" for s in sides))
    top = sorted(set().union(*(r[s]["autograd"] for s in sides)),
                 key=lambda n: -max(r[s]["autograd"].get(n, 0) for s in sides))[:12]
    print("  backward, by autograd node:")
    for n in top:
        short = n.replace("torch::autograd::CppNode<", "").rstrip(">").split("::")[-1]
        print(f"    {short[:36]:36s}" + "".join(f"{r[s]['autograd'].get(n, 0):14.3f}" for s in sides))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=["full", "small", "both"], default="both")
    p.add_argument("--reps", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--build", default=str(REPO / "build"))
    p.add_argument("--host-memory", choices=["retain", "system"], default="retain",
                   help="what both processes do with freed host memory (launch.host_memory)")
    p.add_argument("--lock", action="store_true", help="hold /tmp/mrcnn-cpu.lock per pair of runs")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--plot", help="write a PNG of images/s, peak memory and the per-stage breakdown here")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="autocast precision of both sides' forward")
    p.add_argument("--batch", type=int, help="images per step (default: the configuration's)")
    p.add_argument("--size", type=image_size, metavar="HxW",
                   help="the images' height and width (default: the configuration's); e.g. 64x64 for a "
                        "rehearsal on the CPU: the same step, fewer pixels")
    p.add_argument("--ops", choices=["native", "portable", "auto", "both"], default="auto",
                   help="our custom ops' implementation (--mrcnn_ops); both: native and portable, interleaved")
    p.add_argument("--no-peer", action="store_true", help="leave torchvision's side out")
    p.add_argument("--channels-last", choices=["0", "1"],
                   help="both sides' layout (default: ours from its options, torchvision's on a GPU)")
    # worker mode
    p.add_argument("--cuda-graphs", type=int, default=0,
                   help="ours: CUDA graphs for the backbone, FPN and RPN head (shapes to capture; 0: none); "
                        "torchvision's side runs without")
    p.add_argument("--worker", choices=["torchvision"])
    p.add_argument("--case")
    p.add_argument("--report")
    p.add_argument("--trace")
    p.add_argument("--trace-steps", type=int, default=1,
                   help="worker: consecutive profiled steps in the trace, each a mrcnn::train_step scope")
    args = p.parse_args()
    if args.trace_steps < 1:
        p.error("--trace-steps must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    if args.cuda_graphs and args.device != "cuda":
        raise SystemExit("--cuda-graphs needs --device cuda")
    if args.worker:
        return torchvision_worker(args)
    args.bench = train_step_bench(args.build)
    env = environment(args)
    print("environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    results = {"environment": env}
    names = ["small", "full"] if args.config == "both" else [args.config]
    with tempfile.TemporaryDirectory(prefix="mrcnn-train-step-") as d:
        for name in names:
            results[name] = compare(name, CONFIGS[name], args, pathlib.Path(d))
            print_result(name, results[name])
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    if args.plot:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
        from plot_compare import plot_comparison
        panels = []
        for name in names:
            r = results[name]
            bars = {"mlperf-maskrcnn": "ours", "mlperf-maskrcnn portable": "ours_portable",
                    "torchvision": "torchvision"}
            bars = {label: r[side] for label, side in bars.items() if side in r}
            panels.append((f"{name}: training step", "images/s",
                           {k: v["images_per_second"] for k, v in bars.items()}, "higher"))
            panels.append((f"{name}: peak {MEMORY_LABEL[args.device]}", "MB",
                           {k: v["peak_memory_mb"] for k, v in bars.items()}, "lower"))
        plot_comparison(args.plot, f"Mask R-CNN training step against torchvision, {args.threads} threads", panels)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
