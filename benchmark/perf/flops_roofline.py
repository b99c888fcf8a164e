#!/usr/bin/env python3
"""The training step's arithmetic against this machine's limit: FLOPs per stage, achieved GFLOP/s
and the fraction of the convolution roofline, with torchvision's count of the same step beside it.

Ours (bench_model_train_step --mrcnn_flops, one process): the first step, and after --warmup and
--steps timed steps one more, run under model/flop_count.h's counter, which counts the convolutions and matrix
products from their shapes as they execute (2 FLOPs per multiply-add, torch.utils.flop_counter's
convention) and attributes them, and the exclusive wall time, to the stage and phase (forward,
backward, optimizer) they belong to. The same process then times the step's heaviest shapes
alone: its three heaviest 3x3 convolutions, its heaviest 1x1 convolution and its heaviest matrix
product, forward and (convolutions) backward, on random data of the same shape and layout. The
convolution roofline is the best of the 3x3 forward rates: what this LibTorch reaches on this
machine for the step's own work when nothing else is in the way.

Peer (torchvision's MaskRCNN on the same weights, inputs and hyperparameters, prepared by
compare_model_train_step.py): its first step under torch.utils.flop_counter.FlopCounterMode,
compared with our first step (same weights, same proposals, so the same RoIs): forward FLOPs per
stage (by module) and the backward total. (FlopCounterMode's per-module backward attribution is not reliable -- modules without
arithmetic collect backward FLOPs -- so only the backward total is compared.)

Reported per stage: FLOPs forward and backward (the later counted step), the first steps' forward
difference with torchvision, exclusive seconds, achieved GFLOP/s and the fraction of the roofline; overall: the
step's FLOPs against torchvision's, the median timed step (not the counted one), GFLOP/s and the
fraction of the roofline. --plot draws the per-stage rates against the roofline and the FLOPs.

  flops_roofline.py [--config full|small|both] [--warmup N] [--steps N] [--threads N]
                    [--build DIR] [--host-memory retain|system] [--lock] [--json OUT] [--plot OUT.png]

Run it under `flock -x /tmp/mrcnn-cpu.lock` (or --lock): rates are meaningless on shared cores.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare_model_train_step as cmp  # noqa: E402

STAGES = ["backbone", "fpn", "rpn", "roi_sampling", "roi_box", "roi_mask", "other"]
# torchvision modules -> stage (forward FLOPs by module are exact in FlopCounterMode)
TV_STAGES = {
    "backbone": ["MaskRCNN.backbone.body"],
    "fpn": ["MaskRCNN.backbone.fpn"],
    "rpn": ["MaskRCNN.rpn"],
    "roi_box": ["MaskRCNN.roi_heads.box_roi_pool", "MaskRCNN.roi_heads.box_head",
                "MaskRCNN.roi_heads.box_predictor"],
    "roi_mask": ["MaskRCNN.roi_heads.mask_roi_pool", "MaskRCNN.roi_heads.mask_head",
                 "MaskRCNN.roi_heads.mask_predictor"],
}
DEFAULTS = {"full": dict(warmup=1, steps=1), "small": dict(warmup=2, steps=3)}


# ---- torchvision's count (a worker process) ------------------------------------------------------

def torchvision_worker(args):
    from torch.utils.flop_counter import FlopCounterMode
    torch.set_num_threads(args.threads)
    case = pathlib.Path(args.case)
    data = torch.load(case / "tv.pt", weights_only=False)
    model = cmp.torchvision_model(data["cfg"])
    model.load_state_dict(torch.load(case / "tv_state.pth"))
    model.train()
    sgd = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.002, momentum=0.9,
                          weight_decay=1e-4)
    images, targets = data["images"], data["targets"]
    rois = {}
    model.roi_heads.box_roi_pool.register_forward_hook(lambda m, i, o: rois.__setitem__("roi_sampled", o.shape[0]))
    model.roi_heads.mask_roi_pool.register_forward_hook(lambda m, i, o: rois.__setitem__("roi_positive", o.shape[0]))

    def step(counter=None):
        sgd.zero_grad()
        loss = sum(model(images, targets).values())
        forward = {k: float(sum(v.values())) for k, v in counter.get_flop_counts().items()} if counter else None
        loss.backward()
        sgd.step()
        return forward

    counter = FlopCounterMode(display=False)
    with counter:
        forward = step(counter)
    total = {k: float(sum(v.values())) for k, v in counter.get_flop_counts().items()}
    by_stage = {s: sum(forward.get(m, 0.0) for m in mods) for s, mods in TV_STAGES.items()}
    by_stage["other"] = forward.get("Global", 0.0) - sum(by_stage.values())
    report = {"forward_by_stage": by_stage, "forward_total": forward.get("Global", 0.0),
              "total": total.get("Global", 0.0), "counts": rois}
    pathlib.Path(args.report).write_text(json.dumps(report))


# ---- the driver ----------------------------------------------------------------------------------

def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stderr[-3000:]}")


def measure(name, args, workdir):
    cfg = cmp.CONFIGS[name]
    case = workdir / name
    case.mkdir()
    cmp.prepare(cfg, case)
    warmup = args.warmup if args.warmup is not None else DEFAULTS[name]["warmup"]
    steps = args.steps if args.steps is not None else DEFAULTS[name]["steps"]
    ours_path, tv_path = case / "flops_ours.json", case / "flops_tv.json"
    roofline = [] if args.roofline else ["--mrcnn_roofline=0"]
    with cmp.cpu_lock(args.lock):
        print(f"[{name}] ours: {warmup} warm-up + {steps} timed steps, one counted step, the roofline shapes ...",
              flush=True)
        run([str(args.bench), f"--mrcnn_case={case}", f"--mrcnn_warmup={warmup}", f"--mrcnn_steps={steps}",
             f"--mrcnn_threads={args.threads}", f"--mrcnn_flops={ours_path}",
             f"--mrcnn_host_memory={getattr(args, 'host_memory', 'retain')}"] + roofline)
        print(f"[{name}] torchvision: {warmup + steps} steps, one counted step ...", flush=True)
        run([sys.executable, __file__, "--worker", "--case", str(case), "--warmup", str(warmup), "--steps",
             str(steps), "--threads", str(args.threads), "--report", str(tv_path)])
    ours, tv = json.loads(ours_path.read_text()), json.loads(tv_path.read_text())
    return summarize(name, cfg, ours, tv)


def summarize(name, cfg, ours, tv):
    stages = {s: {"forward_flops": 0.0, "backward_flops": 0.0, "seconds": 0.0} for s in STAGES}
    phases = {}
    first = {}  # the first step, compared with torchvision's first step
    for c in ours["first_step"]["cells"]:
        f = first.setdefault(c["stage"], {"forward": 0.0, "backward": 0.0})
        if c["phase"] in f:
            f[c["phase"]] += c["flops"]
    for c in ours["cells"]:
        st = stages.setdefault(c["stage"], {"forward_flops": 0.0, "backward_flops": 0.0, "seconds": 0.0})
        if c["phase"] in ("forward", "backward"):
            st[f"{c['phase']}_flops"] += c["flops"]
        st["seconds"] += c["seconds"]
        ph = phases.setdefault(c["phase"], {"flops": 0.0, "seconds": 0.0})
        ph["flops"] += c["flops"]
        ph["seconds"] += c["seconds"]
    rates = [r["forward_gflops"] for r in ours["roofline"] if r["role"] == "conv3x3"]
    roofline = max(rates) if rates else float("nan")
    for s, st in stages.items():
        flops = st["forward_flops"] + st["backward_flops"]
        st["gflops_per_s"] = flops / st["seconds"] / 1e9 if st["seconds"] > 0 else 0.0
        st["fraction_of_roofline"] = st["gflops_per_s"] / roofline
        st["first_step_forward_flops"] = first.get(s, {}).get("forward", 0.0)
        st["first_step_backward_flops"] = first.get(s, {}).get("backward", 0.0)
        st["torchvision_forward_flops"] = tv["forward_by_stage"].get(s)
    step = sorted(ours["step_seconds"])[len(ours["step_seconds"]) // 2]
    total = ours["total_flops"]
    fwd = sum(st["forward_flops"] for st in stages.values())
    r = {
        "config": cfg, "stages": stages, "phases": phases, "roofline": ours["roofline"],
        "conv_roofline_gflops": roofline, "shapes": ours["shapes"][:25],
        "total_flops": total, "forward_flops": fwd, "backward_flops": total - fwd,
        "first_step_flops": ours["first_step"]["total_flops"],
        "first_step_forward_flops": sum(f["forward"] for f in first.values()),
        "torchvision_total_flops": tv["total"], "torchvision_forward_flops": tv["forward_total"],
        "torchvision_backward_flops": tv["total"] - tv["forward_total"],
        "step_seconds": step, "counted_step_seconds": ours["counted_step_seconds"],
        "gflops_per_s": total / step / 1e9, "fraction_of_roofline": total / step / 1e9 / roofline,
        "counts": {"ours": ours["first_step"]["counts"], "torchvision": tv["counts"]}, "threads": ours["threads"],
    }
    r["explained"] = explain(r)
    return r


def explain(r):
    """The step's FLOPs against torchvision's, difference by difference. Two designs differ:
    - mask logits: ours computes each positive RoI's logits for its own class only (torchvision's
      1x1 convolution computes all classes): 2 * P * C_mask * (classes - 1) * 28 * 28 fewer, forward,
      and twice that backward;
    - RPN head: ours runs the head over the whole map without gradients (for the proposals) and
      again, with gradients, on the sampled anchors only (a GEMM of S x 9C x C, plus the positive
      anchors' box deltas); torchvision differentiates the whole map: its RPN backward is twice
      its forward, ours is the sampled GEMMs'.
    Every other stage must agree exactly: the residuals are what is left unexplained."""
    cfg, st = r["config"], r["stages"]
    positives = r["counts"]["ours"].get("roi_positive", 0)
    res = 28  # the mask head's output: 14 x 14 RoIAlign, upsampled 2x
    mask_logits_saved = 2.0 * positives * cfg["mask_channels"] * (cfg["classes"] - 1) * res * res
    tv_rpn = st["rpn"]["torchvision_forward_flops"]
    rpn_extra_forward = st["rpn"]["first_step_forward_flops"] - tv_rpn
    sampled_gemm = 2.0 * r["counts"]["ours"].get("rpn_sampled", 0) * 9 * cfg["fpn"] * cfg["fpn"]
    rpn_backward_saved = 2.0 * tv_rpn - st["rpn"]["first_step_backward_flops"]
    fwd_diff = r["first_step_forward_flops"] - r["torchvision_forward_flops"]
    bwd_diff = r["torchvision_backward_flops"] - (r["first_step_flops"] - r["first_step_forward_flops"])
    return {
        "mask_logits_saved_forward": mask_logits_saved,
        "rpn_extra_forward": rpn_extra_forward,
        "rpn_sampled_gemm": sampled_gemm,
        "rpn_backward_saved": rpn_backward_saved,
        "forward_residual": fwd_diff - rpn_extra_forward + mask_logits_saved,
        "backward_residual": bwd_diff - rpn_backward_saved - 2 * mask_logits_saved,
        "same_roi_counts": r["counts"]["ours"].get("roi_positive") == r["counts"]["torchvision"].get("roi_positive")
        and r["counts"]["ours"].get("roi_sampled") == r["counts"]["torchvision"].get("roi_sampled"),
    }


def pct(a, b):
    return f"{100.0 * (a - b) / b:+.2f}%" if b else "n/a"


def print_summary(name, r):
    cfg = r["config"]
    print(f"\n== {name}: {cfg['images']} images of {cfg['height']}x{cfg['width']}, ResNet-{cfg['depth']} "
          f"({cfg['norm']}), {r['threads']} threads")
    print("roofline (each shape alone, GFLOP/s):")
    for e in r["roofline"]:
        bwd = f"  backward {e['backward_gflops']:7.1f}" if "backward_gflops" in e else ""
        print(f"  {e['role']:8s} {e['shape']:58s} forward {e['forward_gflops']:7.1f}{bwd}"
              f"   ({e['step_flops'] / r['total_flops'] * 100:4.1f}% of the step's FLOPs)")
    print(f"convolution roofline: {r['conv_roofline_gflops']:.1f} GFLOP/s (best 3x3 forward)")
    print(f"{'stage':14s}{'fwd GFLOP':>11s}{'bwd GFLOP':>11s}{'tv fwd':>10s}{'fwd diff':>10s}"
          f"{'seconds':>9s}{'GFLOP/s':>9s}{'roofline':>9s}")
    for s, st in r["stages"].items():
        tvf = st["torchvision_forward_flops"]
        print(f"{s:14s}{st['forward_flops'] / 1e9:11.2f}{st['backward_flops'] / 1e9:11.2f}"
              f"{(tvf or 0) / 1e9:10.2f}{pct(st['first_step_forward_flops'], tvf) if tvf else '':>10s}"
              f"{st['seconds']:9.3f}{st['gflops_per_s']:9.1f}{100 * st['fraction_of_roofline']:8.1f}%")
    for ph, p in sorted(r["phases"].items()):
        print(f"  phase {ph:10s} {p['flops'] / 1e9:9.2f} GFLOP in {p['seconds']:.3f} s (counted step)")
    print(f"step FLOPs (the counted step): {r['total_flops'] / 1e9:.2f} G (forward {r['forward_flops'] / 1e9:.2f}, "
          f"backward {r['backward_flops'] / 1e9:.2f})")
    print(f"first steps: ours {r['first_step_flops'] / 1e9:.2f} G (forward {r['first_step_forward_flops'] / 1e9:.2f}); "
          f"torchvision {r['torchvision_total_flops'] / 1e9:.2f} G (forward {r['torchvision_forward_flops'] / 1e9:.2f}, "
          f"backward {r['torchvision_backward_flops'] / 1e9:.2f}): {pct(r['first_step_flops'], r['torchvision_total_flops'])}")
    print(f"RoIs in the first steps: ours {r['counts']['ours']}, torchvision {r['counts']['torchvision']}")
    e = r["explained"]
    print(f"the difference, explained: mask logits for the RoI's own class only: -{e['mask_logits_saved_forward'] / 1e9:.3f} G "
          f"forward, -{2 * e['mask_logits_saved_forward'] / 1e9:.3f} G backward; RPN head with gradients on the sampled "
          f"anchors only: +{e['rpn_extra_forward'] / 1e9:.3f} G forward (the sampled GEMM alone "
          f"{e['rpn_sampled_gemm'] / 1e9:.3f} G), -{e['rpn_backward_saved'] / 1e9:.3f} G backward; unexplained: "
          f"forward {e['forward_residual'] / 1e9:+.6f} G, backward {e['backward_residual'] / 1e9:+.6f} G")
    print(f"step {r['step_seconds']:.3f} s (median timed; the counted step took {r['counted_step_seconds']:.3f} s): "
          f"{r['gflops_per_s']:.1f} GFLOP/s = {100 * r['fraction_of_roofline']:.1f}% of the convolution roofline")


def plot(path, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(results), 2, figsize=(13, 4.2 * len(results)), squeeze=False)
    for row, (name, r) in enumerate(results.items()):
        stages = [s for s, st in r["stages"].items() if st["forward_flops"] + st["backward_flops"] > 0]
        ax = axes[row][0]
        rates = [r["stages"][s]["gflops_per_s"] for s in stages] + [r["gflops_per_s"]]
        labels = stages + ["whole step"]
        bars = ax.bar(labels, rates, color=["#4c72b0"] * len(stages) + ["#dd8452"])
        ax.axhline(r["conv_roofline_gflops"], color="k", ls="--", lw=1,
                   label=f"3x3 conv roofline {r['conv_roofline_gflops']:.0f}")
        for b, v in zip(bars, rates):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{100 * v / r['conv_roofline_gflops']:.0f}%",
                    ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{name}: achieved rate per stage (forward + backward)")
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", labelrotation=20)
        ax = axes[row][1]
        x = range(len(stages))
        fwd = [r["stages"][s]["first_step_forward_flops"] / 1e9 for s in stages]
        bwd = [r["stages"][s]["first_step_backward_flops"] / 1e9 for s in stages]
        tvf = [(r["stages"][s]["torchvision_forward_flops"] or 0) / 1e9 for s in stages]
        ax.bar([i - 0.2 for i in x], fwd, 0.4, label="ours forward")
        ax.bar([i - 0.2 for i in x], bwd, 0.4, bottom=fwd, label="ours backward")
        ax.bar([i + 0.2 for i in x], tvf, 0.4, label="torchvision forward")
        ax.set_xticks(list(x))
        ax.set_xticklabels(stages, rotation=20)
        ax.set_ylabel("GFLOP per step")
        ax.set_title(f"{name}: FLOPs per stage, first step (torchvision's backward: "
                     f"{r['torchvision_backward_flops'] / 1e9:.0f} G in all)", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=["full", "small", "both"], default="both")
    p.add_argument("--warmup", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--build", default=str(cmp.REPO / "build"))
    p.add_argument("--host-memory", choices=["retain", "system"], default="retain",
                   help="what our process does with freed host memory (launch.host_memory)")
    p.add_argument("--lock", action="store_true", help="hold /tmp/mrcnn-cpu.lock per configuration")
    p.add_argument("--no-roofline", dest="roofline", action="store_false",
                   help="count only (no rates against the roofline)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--plot", help="write a PNG of the per-stage rates and FLOPs here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--report", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return torchvision_worker(args)
    args.bench = cmp.train_step_bench(args.build)
    env = cmp.environment(args)
    print("environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    results = {}
    names = ["small", "full"] if args.config == "both" else [args.config]
    with tempfile.TemporaryDirectory(prefix="mrcnn-flops-") as d:
        for name in names:
            results[name] = measure(name, args, pathlib.Path(d))
            print_summary(name, results[name])
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"environment": env, **results}, indent=2))
    if args.plot:
        plot(args.plot, results)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
