"""Parity of the network with torchvision's maskrcnn_resnet50_fpn.

torchvision's model is built as maskrcnn_resnet50_fpn builds it with a pretrained backbone
(ResNet-50 with FrozenBatchNorm2d, stem and layer1 frozen), randomly initialised from a seed, with
random batch-norm statistics (so that the conversion's folding is exercised) and its class and
objectness predictors scaled up (so that random weights give well separated scores). Its state
dict goes through model/tools/convert_weights.py; the C++ network (tests/model/model_runner.cpp)
runs with model::torchvision_options and those weights on the same inputs.

  inference: two images of different sizes through torchvision's own transform (resize,
      normalize, pad) and postprocess: same labels, boxes within 1e-3 px in the original images'
      coordinates, same scores, same masks (pasted, thresholded at 0.5);
  training:  the same padded batch of two images; samplers drawing from generators seeded alike
      (torchvision's draws from the default generator in the same order), torchvision's mask
      targets computed from the polygons the reference's way (it would otherwise resample
      full-image bitmaps): the five losses agree.
"""
# Both networks run on 2 intra-op threads:
# ctest processors: 2
import json
import sys

import numpy as np
import pycocotools.mask as mask_utils
import torch
import torchvision
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection import roi_heads as tv_roi_heads
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import misc as misc_ops

import mrcnn_testenv as env

sys.path.insert(0, str(env.SOURCE_DIR / "model" / "tools"))
import safetensors_io  # noqa: E402

NUM_CLASSES = 91
SEED = 2024
THREADS = 2
CLS_SCALE = 8.0
OBJECTNESS_SCALE = 30.0
torch.set_num_threads(THREADS)


def torchvision_model(calibration_images):
    """Random torchvision model whose frozen batch norms hold statistics measured on
    `calibration_images` (with random affines and jitter), so that activations stay of order one
    through the 50 layers, as in a trained network."""
    torch.manual_seed(SEED)
    body = torchvision.models.resnet50(weights=None, norm_layer=misc_ops.FrozenBatchNorm2d)
    model = MaskRCNN(_resnet_fpn_extractor(body, 3), num_classes=NUM_CLASSES, min_size=160,
                     max_size=256)
    g = torch.Generator().manual_seed(SEED + 1)

    def calibrate(module, inputs):
        x = inputs[0].detach()
        c = x.shape[1]
        module.running_mean.copy_(x.mean((0, 2, 3)) + 0.1 * torch.randn(c, generator=g))
        module.running_var.copy_(x.var((0, 2, 3)) * (0.8 + 0.4 * torch.rand(c, generator=g)) + 1e-3)
        module.weight.copy_(0.5 + torch.rand(c, generator=g))
        module.bias.copy_(0.2 * torch.randn(c, generator=g))

    hooks = [m.register_forward_pre_hook(calibrate) for m in model.modules()
             if isinstance(m, misc_ops.FrozenBatchNorm2d)]
    model.eval()
    with torch.no_grad():
        model.backbone.body(model.transform(calibration_images)[0].tensors)
        for h in hooks:
            h.remove()
        # Random predictors score everything alike; spread the scores so that the order of
        # detections is not decided by rounding.
        model.roi_heads.box_predictor.cls_score.weight.mul_(CLS_SCALE)
        model.rpn.head.cls_logits.weight.mul_(OBJECTNESS_SCALE)
    return model


def shapes_image(h, w, objects, gen):
    """Image in [0, 1] with rectangles/triangles; ground truth boxes, labels, polygons."""
    img = 0.5 + 0.05 * torch.randn(3, h, w, generator=gen)
    boxes, labels, polys = [], [], []
    ys = torch.arange(h, dtype=torch.float64)[:, None] + 0.5
    xs = torch.arange(w, dtype=torch.float64)[None, :] + 0.5
    for _ in range(objects):
        u = torch.rand(7, generator=gen, dtype=torch.float64).tolist()
        bw, bh = 12 + u[0] * w / 2, 12 + u[1] * h / 2
        x1, y1 = u[2] * (w - bw - 1), u[3] * (h - bh - 1)
        x2, y2 = x1 + bw, y1 + bh
        inside = (xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2)
        if u[4] > 0.5:
            inside &= (xs - x1) / bw + (ys - y1) / bh <= 1
            poly = [x1, y1, x2, y1, x1, y2]
        else:
            poly = [x1, y1, x2, y1, x2, y2, x1, y2]
        color = torch.tensor([u[5], u[6], 1 - u[5]])
        img = torch.where(inside[None], color[:, None, None], img)
        boxes.append([x1, y1, x2, y2])
        labels.append(1 + int(u[5] * 80))
        polys.append([poly])
    return (img.clamp(0, 1).float(), torch.tensor(boxes, dtype=torch.float32),
            torch.tensor(labels, dtype=torch.int64), polys)


def run_ours(workdir, batch, train, dtype, seed=0):
    options = workdir / "options.json"
    out = workdir / ("train.safetensors" if train else "infer.safetensors")
    batch_file = workdir / "batch.safetensors"
    safetensors_io.save(batch_file, batch)
    cmd = [env.binary("mrcnn_model_runner"), "--options", options, "--weights",
           workdir / "weights.safetensors", "--batch", batch_file, "--out", out,
           "--threads", THREADS, "--dtype", "float64" if dtype == torch.float64 else "float32"]
    cmd += ["--train", "--seed", seed] if train else ["--infer"]
    r = env.run(cmd)
    if r.returncode != 0:
        raise AssertionError(f"model runner failed: {r.stderr}")
    return safetensors_io.load(out)[0]


def convert_weights(model, workdir):
    torch.save(model.state_dict(), workdir / "tv.pth")
    r = env.run([env.PYTHON, env.SOURCE_DIR / "model" / "tools" / "convert_weights.py",
                 workdir / "tv.pth", workdir / "weights.safetensors", "--float64"])
    assert r.returncode == 0, r.stderr
    options = {"num_classes": NUM_CLASSES, "backbone": {"stride_in_1x1": False},
               "rpn": {"anchor_strides": [], "straddle_threshold": -1.0,
                       "proposals_inside_image": False, "post_nms_per_batch_train": False,
                       "min_size": 1e-3},
               "box_head": {"box_loss_beta": 1.0 / 9, "min_size": 1e-2},
               "sampling_streams": "shared", "mask_padding": False}
    (workdir / "options.json").write_text(json.dumps(options))


def inference_images():
    gen = torch.Generator().manual_seed(SEED + 2)
    return [shapes_image(120, 170, 4, gen)[0], shapes_image(100, 150, 3, gen)[0]]


def match(boxes, labels, scores, ref):
    """Indices into (boxes, labels) of the detections matching ref's, in ref's order: same label,
    closest box (within 0.01 px); -1 where none. Detections whose scores are within rounding of
    each other may trade places between two float32 computations, and one within rounding of the
    100th score may fall out of the best 100: matching instead of comparing in order."""
    n = ref["boxes"].shape[0]
    order = torch.full((n,), -1, dtype=torch.int64)
    taken = torch.zeros(boxes.shape[0], dtype=torch.bool)
    for k in range(n):
        err = (boxes - ref["boxes"][k].float()).abs().amax(1)
        err[(labels != ref["labels"][k]) | taken] = float("inf")
        j = int(err.argmin()) if len(err) else -1
        if j >= 0 and err[j] <= 1e-2:
            order[k], taken[j] = j, True
    return order


def errors(boxes, scores, masks, order, ref):
    """Largest box and score differences and differing mask pixels of matched detections."""
    keep = order >= 0
    o = order[keep]
    ref_masks = (ref["masks"][keep][:, 0] > 0.5).to(torch.uint8)
    return ((boxes[o] - ref["boxes"][keep].float()).abs().max().item(),
            (scores[o] - ref["scores"][keep].float()).abs().max().item(),
            (masks[o] != ref_masks).sum().item())


def check_inference(model, images, workdir, dtype, reference=None):
    """float64: the same detections in the same order, to the bit. float32: matched against the
    float64 result, ours must be about as close to it as torchvision's own float32 result is over the
    batch (both round at about 1e-5 relative through 50 random layers), and the top detections must
    match."""
    model.to(dtype).eval()
    images = [img.to(dtype) for img in images]
    with torch.no_grad():
        expected = model(images)
        image_list, _ = model.transform(images)
    batch = {
        "images": image_list.tensors,  # the runner casts to the model's dtype
        "image_sizes": torch.tensor(image_list.image_sizes, dtype=torch.int64),
        "original_sizes": torch.tensor([img.shape[-2:] for img in images], dtype=torch.int64),
        "image_ids": torch.tensor([1, 2]),
    }
    ours = run_ours(workdir, batch, train=False, dtype=dtype)
    worst = []  # float32: per image, ours' and torchvision's errors (boxes, scores, mask fraction)
    for i, exp in enumerate(expected):
        boxes, scores = ours[f"det.{i}.boxes"], ours[f"det.{i}.scores"]
        labels, masks = ours[f"det.{i}.labels"], ours[f"det.{i}.masks"]
        n = exp["boxes"].shape[0]
        assert n >= 50, f"image {i}: too few detections ({n}) for a meaningful comparison"
        assert boxes.shape[0] == n, f"image {i}: {boxes.shape[0]} detections, torchvision {n}"
        assert masks.shape[1:] == exp["masks"].shape[2:], f"image {i}: masks {masks.shape}"
        if dtype == torch.float64:
            assert torch.equal(labels, exp["labels"]), f"image {i}: labels differ"
            box_err, score_err, wrong = errors(boxes, scores, masks, torch.arange(n), exp)
            print(f"float64 image {i}: {n} detections, in order: boxes within {box_err:.1e} px, "
                  f"scores within {score_err:.1e}, {wrong} of {masks.numel()} mask pixels differ")
            assert box_err <= 1e-3, f"image {i}: boxes differ by {box_err} px"
            assert score_err <= 1e-6, f"image {i}: scores differ by {score_err}"
            assert wrong <= masks.numel() * 1e-5, f"image {i}: {wrong} mask pixels differ"
            continue
        ref = reference[i]
        stable = ref["scores"] > ref["scores"][-1] + 1e-3  # clear of the 100th score
        ours_order = match(boxes, labels, scores, ref)
        tv_order = match(exp["boxes"], exp["labels"], exp["scores"], ref)
        assert bool((ours_order[stable] >= 0).all()), f"image {i}: a top detection is missing"
        ob, os_, om = errors(boxes, scores, masks, ours_order, ref)
        tb, ts, tm = errors(exp["boxes"], exp["scores"], (exp["masks"][:, 0] > 0.5).to(torch.uint8),
                            tv_order, ref)
        print(f"float32 image {i}: vs float64, ours: {int((ours_order >= 0).sum())} of {n} matched, "
              f"boxes within {ob:.1e} px, scores {os_:.1e}, {om} mask pixels; torchvision: "
              f"{int((tv_order >= 0).sum())} matched, boxes {tb:.1e} px, scores {ts:.1e}, {tm} pixels")
        worst.append((ob, os_, om / masks.numel(), tb, ts, tm / masks.numel()))
    if worst:
        # Float32 rounding through the whole network: ours must be as close to the float64 result
        # as torchvision's float32 is, over the images of the batch (one image's error alone says
        # little: its size varies by CPU model, from image to image, for both implementations).
        ob, os_, om, tb, ts, tm = (max(w[k] for w in worst) for k in range(6))
        assert ob <= max(1e-3, 3 * tb), f"boxes {ob} px from exact, torchvision {tb}"
        assert os_ <= max(1e-5, 3 * ts), f"scores {os_} from exact, torchvision {ts}"
        assert om <= max(1e-4, 3 * tm), f"{om:.2e} of the mask pixels differ, torchvision {tm:.2e}"
    return expected


def reference_mask_target(polygons, box, m):
    """The MLPerf reference's mask target of one RoI: float32 polygons cropped to the box and
    scaled to m x m, rasterized with pycocotools."""
    box = box.to(torch.float32)
    w = max(box[2] - box[0], 1)
    h = max(box[3] - box[1], 1)
    ratio_w, ratio_h = float(m) / float(w), float(m) / float(h)
    scaled = []
    for p in polygons:
        p = torch.as_tensor(p, dtype=torch.float32).clone()
        p[0::2] = p[0::2] - box[0]
        p[1::2] = p[1::2] - box[1]
        p[0::2] *= ratio_w
        p[1::2] *= ratio_h
        scaled.append(p.numpy().astype(np.float64))
    rles = mask_utils.frPyObjects(scaled, m, m)
    return torch.from_numpy(mask_utils.decode(mask_utils.merge(rles))).float()


def check_training(model, workdir):
    """In float64: with float32 rounding the proposals' order near ties, and so the samples,
    could differ; the comparison is about the algorithm."""
    model.double()
    gen = torch.Generator().manual_seed(SEED + 3)
    sizes = [(96, 128), (80, 110)]
    samples = [shapes_image(h, w, k, gen) for (h, w), k in zip(sizes, (4, 3))]
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    pad_h, pad_w = 96, 128
    g = max(s[1].shape[0] for s in samples)
    images = torch.zeros(2, 3, pad_h, pad_w)
    gt_boxes, gt_labels = torch.zeros(2, g, 4), torch.zeros(2, g, dtype=torch.int64)
    batch = {"image_sizes": torch.tensor(sizes), "gt_counts": torch.tensor([s[1].shape[0] for s in samples]),
             "image_ids": torch.tensor([1, 2])}
    polygons = []
    for i, (img, boxes, labels, polys) in enumerate(samples):
        h, w = sizes[i]
        images[i, :, :h, :w] = (img - mean[:, None, None]) / std[:, None, None]
        gt_boxes[i, :len(boxes)] = boxes
        gt_labels[i, :len(labels)] = labels
        coords = torch.tensor([c for inst in polys for p in inst for c in p], dtype=torch.float64)
        lengths = [len(p) for inst in polys for p in inst]
        batch[f"gt_polygons.{i}.coords"] = coords
        batch[f"gt_polygons.{i}.poly_offsets"] = torch.tensor([0] + np.cumsum(lengths).tolist())
        batch[f"gt_polygons.{i}.instance_offsets"] = torch.tensor(
            [0] + np.cumsum([len(inst) for inst in polys]).tolist())
        polygons.append(polys)
    batch.update(images=images, gt_boxes=gt_boxes, gt_labels=gt_labels)

    def mask_targets(gt_masks, boxes, matched_idxs, m):
        image = int(gt_masks.flatten()[0])
        if len(boxes) == 0:
            return torch.zeros(0, m, m, dtype=boxes.dtype)
        return torch.stack([reference_mask_target(polygons[image][int(j)], b, m)
                            for b, j in zip(boxes, matched_idxs)]).to(boxes.dtype)

    targets = [{"boxes": s[1].double(), "labels": s[2],
                "masks": torch.full((s[1].shape[0], 1, 1), float(i))} for i, s in enumerate(samples)]
    original = tv_roi_heads.project_masks_on_boxes
    tv_roi_heads.project_masks_on_boxes = mask_targets
    try:
        model.train()
        torch.manual_seed(SEED + 4)
        il = ImageList(images.double(), sizes)
        features = model.backbone(il.tensors)
        proposals, losses = model.rpn(il, features, targets)
        _, roi_losses = model.roi_heads(features, proposals, il.image_sizes, targets)
        losses.update(roi_losses)
    finally:
        tv_roi_heads.project_masks_on_boxes = original
    ours = run_ours(workdir, batch, train=True, dtype=torch.float64, seed=SEED + 4)
    for name, value in losses.items():
        got = ours[f"loss.{name}"].item()
        exp = value.item()
        print(f"{name:18s} torchvision {exp:.9f}  ours {got:.9f}  difference {got - exp:.1e}")
        # float64 on both sides, except where torchvision computes a loss against float32 labels.
        assert abs(got - exp) <= 1e-6 * max(1.0, abs(exp)), f"{name}: {got} vs torchvision {exp}"
    assert ours["count.rpn_sampled"].item() == 2 * 256
    assert ours["count.roi_sampled"].item() > 2 * 100


def main():
    with env.scratch_dir("parity") as d:
        import pathlib
        workdir = pathlib.Path(d)
        images = inference_images()
        model = torchvision_model(images)
        convert_weights(model, workdir)
        exact = check_inference(model, images, workdir, torch.float64)
        check_inference(model, images, workdir, torch.float32, reference=exact)
        check_training(model, workdir)
    print("torchvision parity: ok")


if __name__ == "__main__":
    main()
