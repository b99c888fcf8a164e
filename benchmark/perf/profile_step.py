#!/usr/bin/env python3
"""One training-step case profiled for a GPU visit: ours and torchvision's traces of consecutive
steps, the tables trace_summary.py derives from them, A/B timings and the allocator's figures, in
one folder small enough to bring back (at most 8 files of <= 16 MiB; GPU_PLAN.md section 6).

The case is compare_model_train_step.py's (same weights, inputs, options and SGD on both sides),
at --batch images. Each process below is a separate run:
  ours          --warmup steps, --ab-steps timed steps (unprofiled: images/s), one untimed step
                counting host syncs, then --steps consecutive profiled steps (Kineto CPU+CUDA,
                input shapes, no stacks), each one mrcnn::train_step scope; with --traced systems
                (the default) in the model options of the GPU system --system trains (its file read
                through `mlperf-maskrcnn config`: the MLPerf arithmetic, the mask head's RoI bucket,
                the fused bottlenecks; the fused path is CUDA's, so not on the CPU), so that the
                trace shows what that system leaves; with --traced default in the case's own, and
                then its timed steps are the base A/B entry;
  torchvision   the same on its AMP step (the worker's --trace --trace-steps);
  ours, memory  --warmup steps, then one profiled step with profile_memory;
  A/B           one process per variant of ours, --warmup then --ab-steps timed steps: batch sizes
                (--ab-batches), padding masks on (the case runs with them off, as torchvision),
                the MLPerf defaults the harness trains with (padding masks, straddle 0, proposals
                inside the image, per-batch post-NMS, per-image sampling streams), CUDA graphs
                (on a GPU), cuDNN benchmarking (where the driver has a switch for it), the
                sampler's full permutations (MRCNN_SAMPLER_FULL_RANDPERM=1: the draws before
                randperm_prefix, the same samples), the mask head's RoIs padded to a multiple
                of 64 (mask_head.roi_bucket: a few convolution shapes instead of a new one at
                almost every step), RoIAlign's CUDA kernels in torchvision's thread order
                (MRCNN_ROI_ALIGN_SPATIAL_THREADS=1: the order before channels-fastest threads on
                channels-last maps), the bottlenecks' convolutions fused with their bias, sum and
                ReLU (backbone.fused_conv_relu), the loss heads on streams of their own, the
                bucket, the fused bottlenecks and CUDA graphs together, and the bucket with the
                fused bottlenecks at batch 12 (the GPU switches are not run on the CPU); and the
                GPU system's own model options (--system, read through `mlperf-maskrcnn config`,
                not restated here: the MLPerf arithmetic with its speed paths) at batch 8 and 12,
                without and with CUDA graphs, and at 12 with graphs and cuDNN benchmarking (its
                planning in the warm-up steps, as the harness's run.warm_up does before run_start),
                and at 12 with the RPN's labels after the front (MRCNN_RPN_LABELS_AFTER_FRONT=1:
                both heads' counts in one blocking read, the order before).
                Every row gives its slowest step beside its median.
A part that fails is named in summary.txt and the exit status is 1; the other parts still run.

Files in --out:
  summary.txt                        environment (nvidia-smi clocks, power and driver where
                                     present; torch, CUDA, cuDNN), images/s, the two traces'
                                     tables side by side, the A/B table, the memory figures;
                                     its PROFILE lines are the headline figures
  ours_trace.json.gz, tv_trace.json.gz   the traces, --steps steps each
  ours_kernels.json, tv_kernels.json     trace_summary.py's tables of each trace
  ab.json                            the A/B runs: per variant step times, images/s, peak memory
  memory.json                        ours: the allocator at the ends of forward, backward and the
                                     optimizer, peaks, the top allocating ops

Usage: profile_step.py --out DIR [--config full|small] [--device cpu|cuda] [--precision fp16|bf16|fp32]
           [--batch 8] [--warmup 5] [--steps 3] [--ab-batches 2,8,12] [--ab-steps 10]
           [--ab-variants batch,mask_padding,mlperf_options,cuda_graphs,cudnn_benchmark,full_randperm,mask_roi_bucket,
                          roi_align_spatial_threads,fused_conv_relu,head_streams,
                          combined,combined_cudnn_benchmark,systems_batch12,systems_mlperf]
           [--channels-last 0|1] [--traced systems|default] [--system NAME] [--threads N] [--build DIR] [--lock]
A CPU rehearsal: --config small --device cpu --precision fp32 --warmup 1 --steps 3 --ab-batches 2
--ab-steps 2 (run_scripts/gpu_check.sh's profile stage with MRCNN_GPU_REHEARSAL=1).
"""
import argparse
import contextlib
import gzip
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare_model_train_step as cmp  # noqa: E402
import trace_summary as ts  # noqa: E402

import torch  # noqa: E402

MAX_FILE_MB = 16
VARIANTS = ("batch", "mask_padding", "mlperf_options", "cuda_graphs", "cudnn_benchmark", "full_randperm",
            "mask_roi_bucket", "roi_align_spatial_threads", "fused_conv_relu", "head_streams", "combined",
            "combined_cudnn_benchmark", "systems_batch12", "systems_mlperf")
# The mask head's RoIs padded to a multiple of 64 (A/B "mask_roi_bucket"), and the paths written for
# the GPU from its first profile together (A/B "combined").
BUCKET = {"mask_head": {"roi_bucket": 64}}
COMBINED = dict(BUCKET, backbone={"fused_conv_relu": True})
# What ours is traced with (--traced): the model options of the GPU system --system trains
# (system_options), or the case's own options.
TRACED = ("systems", "default")
# A system's model keys that set the network's size (or the run owns): the case keeps its own, as
# its weights and batch have those shapes; every other key comes from the system file.
SIZE_KEYS = {"": {"num_classes", "channels_last", "precision", "cuda_graph_shapes", "cpu_own_weight_grad"},
             "backbone": {"depth", "base_channels", "norm", "group_norm_groups", "freeze_at"},
             "fpn": {"out_channels"},
             "rpn": {"pre_nms_top_n_train", "pre_nms_top_n_test", "post_nms_top_n_test", "batch_size_per_image"},
             "box_head": {"representation_size", "batch_size_per_image"},
             "mask_head": {"conv_channels", "num_convs"}}
# The MLPerf defaults the harness trains with, where the case has torchvision's
# (model::torchvision_options against model::ModelOptions' defaults).
MLPERF_RPN = {"straddle_threshold": 0.0, "proposals_inside_image": True, "post_nms_per_batch_train": True}


def nvidia_smi():
    """The GPU's name, driver, clocks and power now, or None without nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return None
    fields = ("name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,"
              "power.draw,power.limit,temperature.gpu,memory.used,memory.total")
    r = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else f"nvidia-smi failed: {r.stderr.strip()[:300]}"


def environment(ns):
    env = cmp.environment(ns)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    env.update({"cuda": torch.version.cuda, "cudnn": cudnn,
                "libtorch": f"the driver links this torch's LibTorch ({torch.__version__})"})
    smi = nvidia_smi()
    if smi is not None:
        env["nvidia_smi"] = smi
    return env


def driver_has(bench, flag):
    """Whether bench_model_train_step reads --mrcnn_<flag> (its flag names are strings in the binary)."""
    return flag.encode() in pathlib.Path(bench).read_bytes()


def system_options(build, system, device):
    """The model options `system` (systems/<system>.json) trains with, as `mlperf-maskrcnn config`
    resolves them, less the keys that size the network (SIZE_KEYS, the case's own), as a function
    of the batch: its proposal count is the file's candidates per image of a GPU's batch times the
    batch (hyperparameters.num_image_candidates over the images per rank). The fused bottlenecks
    are CUDA's: off on the CPU."""
    exe = pathlib.Path(build) / "benchmark" / "mlperf-maskrcnn"
    keys = ["model", "hyperparameters", "launch.world_size"]
    r = subprocess.run([str(exe), "config", "--system", str(cmp.REPO / "systems" / f"{system}.json")]
                       + [a for k in keys for a in ("--print", k)], capture_output=True, text=True)
    if r.returncode != 0:
        raise ValueError(f"mlperf-maskrcnn config --system {system}: {r.stderr.strip()[-500:]}")
    model, hyper, world = (json.loads(line) for line in r.stdout.splitlines())
    global_batch = hyper["global_batch_size"]
    candidates = hyper["by_global_batch_size"][str(global_batch)]["num_image_candidates"]
    per_image = candidates // (global_batch // world)
    opts = {}
    for k, v in model.items():
        if k == "comment" or k in SIZE_KEYS[""]:
            continue
        opts[k] = {kk: vv for kk, vv in v.items() if kk not in SIZE_KEYS.get(k, set())} if isinstance(v, dict) else v
    if device != "cuda":
        opts["backbone"].pop("fused_conv_relu", None)

    def at_batch(batch):
        return dict(opts, rpn=dict(opts["rpn"], post_nms_top_n_train=per_image * (
            batch if opts["rpn"].get("post_nms_per_batch_train") else 1)))
    return at_batch


def variant_case(base, work, name, options=None, cfg=None):
    """A case folder for a variant: the base case's weights, with its own options.json and, for
    another batch size (cfg), its own batch (the weights stay the base batch's)."""
    case = work / f"case_{name}"
    case.mkdir()
    (case / "weights.safetensors").symlink_to(base / "weights.safetensors")
    opts = json.loads((base / "options.json").read_text())
    if options:
        for k, v in options.items():
            if isinstance(v, dict):
                opts[k] = dict(opts.get(k, {}), **v)
            else:
                opts[k] = v
    (case / "options.json").write_text(json.dumps(opts))
    if cfg is None:
        (case / "batch.safetensors").symlink_to(base / "batch.safetensors")
    else:
        batch, _ = cmp.make_inputs(cfg)
        cmp.safetensors_io.save(case / "batch.safetensors", batch)
    return case


def timing(name, report, batch, extra):
    step = statistics.median(report["step_seconds"])
    return {"name": name, "batch": batch, "extra_args": list(extra), "step_seconds": report["step_seconds"],
            "median_step_s": step, "slowest_step_s": max(report["step_seconds"]), "images_per_second": batch / step,
            "peak_memory_mb": cmp.memory_mb(report), "peak_memory_kind": "GPU" if "peak_gpu_mb" in report else "RSS",
            "syncs_per_step": report.get("syncs_per_step")}


def syncs(report):
    """The host syncs of the report's sync-counting step (0 on the CPU)."""
    counted = report.get("syncs_per_step") or []
    return f"{statistics.median(counted):.0f}" if counted else "-"


def gzip_to(src, dst):
    with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)


class Parts:
    """Runs the parts one by one; a part that fails is recorded in `failures` and the rest goes on."""

    def __init__(self):
        self.failures = []

    def __call__(self, name, fn):
        """fn's result, or None when it failed."""
        t0 = time.time()
        try:
            r = fn()
            print(f"profile_step: {name}: {time.time() - t0:.0f} s", flush=True)
            return r
        except (SystemExit, ts.TraceError, OSError, ValueError, KeyError) as e:
            self.failures.append(f"{name}: {str(e).strip()[-1500:]}")
            print(f"profile_step: {name} FAILED: {e}", file=sys.stderr, flush=True)
            return None


@contextlib.contextmanager
def environ_set(changes):
    """Yields with os.environ updated by `changes`; the variables are as they were afterwards."""
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def profiled_runs(part, case, ns, args, traces, memory_trace, ours_case):
    """Ours (with ours_case's options) and torchvision's reports (by side) of the profiled runs,
    ours' with profile_memory; None: failed."""
    reports = {}
    reports["ours"] = part("ours: warm-up, timed and profiled steps", lambda: cmp.run_side(
        "ours", ours_case, ns, args.ab_steps, args.warmup, trace=traces["ours"], trace_steps=args.steps,
        extra=["--mrcnn_trace_shapes=1"]))
    reports["torchvision"] = part("torchvision: warm-up, timed and profiled steps", lambda: cmp.run_side(
        "torchvision", case, ns, args.ab_steps, args.warmup, trace=traces["torchvision"], trace_steps=args.steps))
    memory_report = part("ours: one step with profile_memory", lambda: cmp.run_side(
        "ours", ours_case, ns, 1, args.warmup, trace=memory_trace, trace_steps=1, extra=["--mrcnn_profile_memory=1"]))
    return reports, memory_report


# The A/B variants after the batch sizes, in their order: (variant, options, extra arguments,
# environment, what it needs: None, "cuda", or "cudnn" for a CUDA driver with the cuDNN switch).
_GPU = "a GPU switch: not on the CPU"
SYSTEM = "the --system file's model options"
AB_VARIANTS = (
    ("mask_padding", {"mask_padding": True}, [], {}, None),
    ("mlperf_options", {"rpn": MLPERF_RPN, "sampling_streams": "per_image", "mask_padding": True}, [], {}, None),
    ("cuda_graphs", None, ["--mrcnn_cuda_graph_shapes=1"], {}, "cuda"),
    ("cudnn_benchmark_on", None, ["--mrcnn_cudnn_benchmark=1"], {}, "cudnn"),
    ("cudnn_benchmark_off", None, ["--mrcnn_cudnn_benchmark=0"], {}, "cudnn"),
    # The sampler's draws as they were: full permutations (the same samples, more host time).
    ("full_randperm", None, [], {"MRCNN_SAMPLER_FULL_RANDPERM": "1"}, None),
    # The mask head's RoIs padded to a multiple of 64: a few shapes for its convolutions.
    ("mask_roi_bucket", BUCKET, [], {}, None),
    # RoIAlign's CUDA kernels in torchvision's thread order on channels-last maps too (the same bits).
    ("roi_align_spatial_threads", None, [], {"MRCNN_ROI_ALIGN_SPATIAL_THREADS": "1"}, "cuda"),
    # The bottlenecks' convolution, bias, shortcut sum and ReLU as cuDNN's fused calls.
    ("fused_conv_relu", {"backbone": {"fused_conv_relu": True}}, [], {}, "cuda"),
    # The RPN loss, box head and mask head on streams of their own (model/head_streams.h).
    ("head_streams", {"head_streams": True}, [], {}, "cuda"),
    # The paths written for the GPU together: the mask head's bucket, the fused bottlenecks and
    # CUDA graphs for the front (whose backward then replays without host work); then the same
    # with cuDNN's benchmarking, which the bucket's few shapes may make worth its first steps
    # (without it: 8.8x slower, a new shape at almost every step).
    ("combined", COMBINED, ["--mrcnn_cuda_graph_shapes=1"], {}, "cuda"),
    ("combined_cudnn_benchmark", COMBINED, ["--mrcnn_cuda_graph_shapes=1", "--mrcnn_cudnn_benchmark=1"], {},
     "cudnn"),
    # The systems' paths (the bucket and the fused bottlenecks, no graphs) at batch 12: NVIDIA's
    # per-GPU batch, where its published harness trains at 195-204 images/s per H100.
    ("systems_batch12", COMBINED, [], {}, "cuda", 12),
    # The GPU system's own model options (--system, through config: the MLPerf arithmetic, its
    # speed paths) at batch 8 and 12, without and with CUDA graphs, and at 12 with graphs and cuDNN
    # benchmarking after the warm-up steps: what that system trains. On the CPU without the GPU
    # switches (graphs, benchmarking, the fused path).
    ("systems_mlperf_batch8", SYSTEM, [], {}, None, 8),
    ("systems_mlperf_batch8_graphs", SYSTEM, ["--mrcnn_cuda_graph_shapes=1"], {}, "cuda", 8),
    ("systems_mlperf_batch12", SYSTEM, [], {}, None, 12),
    ("systems_mlperf_batch12_graphs", SYSTEM, ["--mrcnn_cuda_graph_shapes=1"], {}, "cuda", 12),
    ("systems_mlperf_batch12_graphs_cudnn_benchmark", SYSTEM,
     ["--mrcnn_cuda_graph_shapes=1", "--mrcnn_cudnn_benchmark=1"], {}, "cudnn", 12),
    # The RPN labelling its anchors after the front, both heads' counts in one blocking read (the
    # order before it labelled them first, its draw and loss queued while the front runs): the
    # same draws; on the CPU, where no read blocks, the same step.
    ("systems_mlperf_batch12_rpn_labels_after_front", SYSTEM, [], {"MRCNN_RPN_LABELS_AFTER_FRONT": "1"}, "cuda", 12),
)


def ab_plan(args, cfg, bench, system=None):
    """The A/B variants to run, each (name, batch, cfg, options, extra args, environment), and those
    skipped. `system`: system_options' function of the batch, for the SYSTEM rows."""
    plan, skipped = [], []
    if "batch" in args.ab_variants:
        for b in args.ab_batches:
            if b != args.batch:
                plan.append((f"batch{b}", b, dict(cfg, images=b), None, [], {}))
    for name, options, extra, environ, needs, *batch in AB_VARIANTS:
        variant = ("cudnn_benchmark" if name.startswith("cudnn_benchmark_")
                   else "systems_mlperf" if name.startswith("systems_mlperf") else name)
        if variant not in args.ab_variants:
            continue
        if options is SYSTEM:
            options = system(batch[0]) if system else None
        why = None
        if options is None and variant == "systems_mlperf":
            why = "the --system file's options could not be read"
        elif needs and args.device != "cuda":
            why = _GPU
        elif needs == "cudnn" and not driver_has(bench, "cudnn_benchmark"):
            why = "bench_model_train_step has no --mrcnn_cudnn_benchmark switch"
        if why is None and batch:
            plan.append((name, batch[0], dict(cfg, images=batch[0]), options, extra, environ))
        elif why is None:
            plan.append((name, args.batch, None, options, extra, environ))
        elif variant == "systems_mlperf" and why == _GPU:
            skipped.append({"name": name, "why": why})
        elif variant not in {v["name"] for v in skipped}:
            skipped.append({"name": variant, "why": why})
    return plan, skipped


def ab_runs(part, args, cfg, ns, case, work, base_report, system=None):
    """ab.json's dict: the base case's timed steps (the profiled run's, where it traced the case's
    own options), then one process of ours per planned variant, the skipped."""
    plan, skipped = ab_plan(args, cfg, ns.bench, system)
    if base_report is None and "batch" in args.ab_variants:
        plan.insert(0, (f"batch{args.batch}", args.batch, None, None, [], {}))
    ab = {"device": args.device, "precision": args.precision, "config": args.config, "base_batch": args.batch,
          "warmup": args.warmup, "steps": args.ab_steps, "channels_last": args.channels_last,
          "variants": [], "skipped": skipped}
    if args.device == "cuda" and args.ab_steps < 10:
        ab["note"] = f"medians of {args.ab_steps} steps: fewer than the 10 a GPU comparison wants"
    if base_report:
        ab["variants"].append(dict(timing(f"batch{args.batch}", base_report, args.batch, []),
                                   source="the profiled process's timed steps (before its trace)"))
    for name, batch, vcfg, options, extra, *environ in plan:
        def one(name=name, batch=batch, vcfg=vcfg, options=options, extra=extra,
                environ=environ[0] if environ else {}):
            vcase = variant_case(case, work, name, options, vcfg)
            with environ_set(environ):
                r = cmp.run_side("ours", vcase, ns, args.ab_steps, args.warmup, extra=extra)
            return dict(timing(name, r, batch, extra), options=options, environment=environ)
        v = part(f"A/B {name}", one)
        if v:
            ab["variants"].append(v)
    return ab


def trace_tables(part, traces, out):
    """trace_summary's tables of each side's trace, by side; each written to out beside its gzipped trace."""
    # (Read back from the gzipped copy: the tables name the file that is kept.)
    summaries = {}
    for side, short in (("ours", "ours"), ("torchvision", "tv")):
        if not traces[side].exists():
            continue
        kept = out / f"{short}_trace.json.gz"
        gzip_to(traces[side], kept)
        s = part(f"{side}: trace tables", lambda side=side, kept=kept: ts.summarize(kept, side))
        if s:
            summaries[side] = s
            (out / f"{short}_kernels.json").write_text(json.dumps(s, indent=1))
    return summaries


def memory_tables(part, memory_trace, memory_report, out):
    """memory.json's dict (also written to out) from ours' profile_memory step; None without it or on failure."""
    if memory_report is None or not memory_trace.exists():
        return None

    def mem():
        tr = ts.Trace(memory_trace)
        if not tr.memory:
            raise ValueError(f"{memory_trace.name} holds no [memory] events")
        return {"source": "ours, one step profiled with profile_memory after the warm-up",
                "devices": ts.memory_summary(tr), "peak_memory_mb": cmp.memory_mb(memory_report)}
    memory = part("ours: memory tables", mem)
    if memory:
        (out / "memory.json").write_text(json.dumps(memory, indent=1))
    return memory


def header_lines(args, cfg, env):
    """summary.txt's first lines: the case and the environment."""
    lines = [f"profile_step {time.strftime('%Y-%m-%d %H:%M:%S')}: {args.config} ({cfg['height']}x{cfg['width']}, "
             f"ResNet-{cfg['depth']}), batch {args.batch}, {args.precision}, channels-last {args.channels_last}, "
             f"{args.device}; {args.warmup} warm-up steps, {args.steps} profiled, A/B medians of {args.ab_steps}",
             "environment:"]
    for k, v in env.items():
        for i, line in enumerate(str(v).splitlines()):
            lines.append(f"  {k + ':' if i == 0 else '':12s} {line}")
    return lines


def images_per_second_lines(args, reports):
    """summary.txt's images/s of the sides' timed steps and its PROFILE line (none without a report)."""
    ips = {side: args.batch / statistics.median(r["step_seconds"]) for side, r in reports.items() if r}
    if not ips:
        return []
    fields = [f"{side}={v:.3f}" for side, v in ips.items()]
    if len(ips) == 2:
        fields.append(f"speedup={ips['ours'] / ips['torchvision']:.2f}")
    return [f"images/s (median of {args.ab_steps} timed steps, unprofiled): " + ", ".join(
                f"{side} {v:.3f} (peak {'GPU memory' if 'peak_gpu_mb' in reports[side] else 'RSS'} "
                f"{cmp.memory_mb(reports[side]):.0f} MB, host syncs per step {syncs(reports[side])})"
                for side, v in ips.items()),
            "PROFILE images_per_second " + " ".join(fields)]


def ab_lines(args, ab):
    """summary.txt's A/B table: a PROFILE line per variant, then those skipped."""
    lines = ["", f"A/B, ours (one process per variant, median of {args.ab_steps} steps after {args.warmup} warm-up):"]
    for v in ab["variants"]:
        lines.append(f"PROFILE ab name={v['name']} batch={v['batch']} step_ms={v['median_step_s'] * 1e3:.1f} "
                     f"slowest_ms={v['slowest_step_s'] * 1e3:.1f} ips={v['images_per_second']:.3f} "
                     f"peak_{v['peak_memory_kind'].lower()}_mb={v['peak_memory_mb']:.0f}")
    for v in ab["skipped"]:
        lines.append(f"  skipped {v['name']}: {v['why']}")
    return lines


def memory_lines(memory):
    """summary.txt's memory figures, per device (none without them)."""
    if not memory:
        return []
    lines = ["", "memory, ours (one step with profile_memory):"]
    for dev, m in memory["devices"].items():
        ends = ", ".join(f"{k.split('::')[1]} {x['allocated_mb']:.0f}/{x['reserved_mb']:.0f}"
                         for k, x in m["at_scope_end"].items())
        lines.append(f"  {dev}: peak allocated {m['peak_allocated_mb']:.0f} MB, reserved {m['peak_reserved_mb']:.0f} "
                     f"MB; allocated/reserved MB at the end of {ends or '-'}")
        for o in m["top_allocating_ops"][:8]:
            lines.append(f"    {o['op'][:60]:60s} {o['mb_per_step']:9.1f} MB {o['allocations_per_step']:7.0f} "
                         f"allocations")
    return lines


def write_summary(out, lines):
    """summary.txt's text, written to out with a last line listing out's files (and a warning per file too large)."""
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    files = sorted(p for p in out.iterdir() if p.is_file())
    big = [p for p in files if p.stat().st_size > MAX_FILE_MB * 2**20]
    with open(out / "summary.txt", "a") as f:
        f.write("files: " + ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MB" for p in files) + "\n")
        for p in big:
            f.write(f"WARNING {p.name} is over the {MAX_FILE_MB} MiB a file may bring back\n")
    return (out / "summary.txt").read_text()


def run(args):
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns = argparse.Namespace(threads=args.threads, device=args.device, precision=args.precision,
                            channels_last=args.channels_last, host_memory=args.host_memory,
                            bench=cmp.train_step_bench(args.build), cuda_graphs=0, ops="auto")
    cfg = dict(cmp.CONFIGS[args.config], images=args.batch)
    part = Parts()
    env = environment(ns)
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="mrcnn-profile-") as d, cmp.cpu_lock(args.lock):
        work = pathlib.Path(d)
        case = work / "case"
        case.mkdir()
        cmp.prepare(cfg, case)
        traces = {"ours": work / "ours_trace.json", "torchvision": work / "tv_trace.json"}
        memory_trace = work / "ours_memory.json"
        system = part(f"the {args.system} system's model options (mlperf-maskrcnn config)",
                      lambda: system_options(args.build, args.system, args.device))
        traced = system(args.batch) if system and args.traced == "systems" else None
        reports, memory_report = profiled_runs(part, case, ns, args, traces, memory_trace,
                                               variant_case(case, work, "traced", traced) if traced else case)
        # The profiled run's timed steps are the A/B base only where it traced the base options.
        ab = ab_runs(part, args, cfg, ns, case, work, None if traced else reports["ours"], system)
        ab["system"] = args.system
        ab["traced_options"] = traced
        ab["traced_options"] = traced
        (out / "ab.json").write_text(json.dumps(ab, indent=1))
        # The tables of both traces; the traces themselves, gzipped.
        summaries = trace_tables(part, traces, out)
        memory = memory_tables(part, memory_trace, memory_report, out)

    lines = header_lines(args, cfg, env)
    lines.append(f"ours traced with --traced {args.traced} (--system {args.system}): "
                 + (json.dumps(ab["traced_options"]) if ab.get("traced_options") else "the case's own options")
                 + " (the A/B rows: the case's own options and each variant's)")
    lines += images_per_second_lines(args, reports)
    if summaries:
        lines += ["", ts.text(list(summaries.values())).rstrip()]
    lines += ab_lines(args, ab) + memory_lines(memory)
    lines += [f"FAILED {f}" for f in part.failures]
    lines.append(f"took {time.time() - t_start:.0f} s")
    sys.stdout.write(write_summary(out, lines))
    return 1 if part.failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the folder the files go to")
    p.add_argument("--config", choices=["full", "small"], default="full")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp16")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--warmup", type=int, default=5, help="warm-up steps of every process")
    p.add_argument("--steps", type=int, default=3, help="consecutive profiled steps per trace")
    p.add_argument("--ab-batches", default="2,8,12", help="batch sizes of the A/B runs, comma-separated")
    p.add_argument("--ab-steps", type=int, default=10, help="timed steps per A/B process (and per traced process)")
    p.add_argument("--ab-variants", default=",".join(VARIANTS),
                   help=f"which A/B variants run, comma-separated, of {','.join(VARIANTS)}")
    p.add_argument("--channels-last", choices=["0", "1"], default="1", help="both sides' layout")
    p.add_argument("--traced", choices=TRACED, default="systems",
                   help="ours' traced and memory runs: with --system's model options (default) or the case's own")
    p.add_argument("--system", default="aws-p5.48xlarge",
                   help="the GPU system (systems/NAME.json) whose model options the traced run and the "
                        "systems_mlperf rows take")
    p.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    p.add_argument("--host-memory", choices=["retain", "system"], default="retain")
    p.add_argument("--build", default=str(cmp.REPO / "build"))
    p.add_argument("--lock", action="store_true", help="hold /tmp/mrcnn-cpu.lock throughout")
    args = p.parse_args()
    try:
        args.ab_batches = [int(b) for b in args.ab_batches.split(",") if b.strip()]
    except ValueError:
        p.error(f"--ab-batches: comma-separated integers, got {args.ab_batches!r}")
    args.ab_variants = [v.strip() for v in args.ab_variants.split(",") if v.strip()]
    unknown = set(args.ab_variants) - set(VARIANTS)
    if unknown:
        p.error(f"--ab-variants: unknown {sorted(unknown)} (known: {', '.join(VARIANTS)})")
    if min([args.batch, args.warmup, args.steps, args.ab_steps] + args.ab_batches) < 1:
        p.error("--batch, --warmup, --steps, --ab-steps and --ab-batches must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("profile_step: --device cuda, but torch sees no CUDA device here")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
