"""compare_model_train_step.py's inputs: the torchvision model of a configuration (its weights
ours, converted), the batch of images and targets both sides train on, and the working folder
they are written to (a configuration dict in; numpy, torch and the project's weight tools)."""
import json
import pathlib
import sys

import numpy as np
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "model" / "tools"))
import convert_weights  # noqa: E402
import safetensors_io  # noqa: E402

SEED = 1


# ---- the torchvision model of a configuration --------------------------------------------------

def torchvision_model(cfg):
    import torchvision
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import misc

    torch.manual_seed(SEED)
    if cfg["norm"] == "frozen_bn":
        norm = misc.FrozenBatchNorm2d
    else:
        def norm(c):
            return torch.nn.GroupNorm(32, c)
    body = getattr(torchvision.models, f"resnet{cfg['depth']}")(weights=None, norm_layer=norm)
    if cfg["norm"] == "frozen_bn":  # maskrcnn_resnet50_fpn's trainable_layers=3
        for name, p in body.named_parameters():
            if not name.startswith(("layer2", "layer3", "layer4")):
                p.requires_grad_(False)
    c2 = 256 if cfg["depth"] >= 50 else 64
    backbone = BackboneWithFPN(body, {f"layer{k}": str(k - 1) for k in range(1, 5)},
                               [c2, 2 * c2, 4 * c2, 8 * c2], cfg["fpn"])
    r = cfg["representation"]
    model = MaskRCNN(
        backbone, num_classes=None, min_size=cfg["height"], max_size=cfg["width"],
        image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0], _skip_resize=True,
        rpn_pre_nms_top_n_train=cfg["pre_nms"], rpn_post_nms_top_n_train=cfg["post_nms"],
        box_batch_size_per_image=cfg["rois"],
        box_head=TwoMLPHead(cfg["fpn"] * 49, r), box_predictor=FastRCNNPredictor(r, cfg["classes"]),
        mask_head=MaskRCNNHeads(cfg["fpn"], [cfg["mask_channels"]] * cfg["mask_layers"], 1),
        mask_predictor=MaskRCNNPredictor(cfg["mask_channels"], cfg["mask_channels"], cfg["classes"]))
    return model


def calibrate_frozen_bn(model, images):
    """Batch-norm statistics measured on the inputs (random affines): activations of order one
    through the network, as with pretrained weights (random statistics would blow them up)."""
    from torchvision.ops import misc
    g = torch.Generator().manual_seed(SEED + 1)

    def hook(module, inputs):
        x = inputs[0].detach()
        c = x.shape[1]
        module.running_mean.copy_(x.mean((0, 2, 3)))
        module.running_var.copy_(x.var((0, 2, 3)) + 1e-3)
        module.weight.copy_(0.5 + torch.rand(c, generator=g))
        module.bias.copy_(0.2 * torch.randn(c, generator=g))

    hooks = [m.register_forward_pre_hook(hook) for m in model.modules()
             if isinstance(m, misc.FrozenBatchNorm2d)]
    with torch.no_grad():
        model.backbone.body(images)
    for h in hooks:
        h.remove()


def our_options(cfg):
    return {"num_classes": cfg["classes"],
            "backbone": {"depth": cfg["depth"], "norm": cfg["norm"], "stride_in_1x1": False,
                         "freeze_at": 2 if cfg["norm"] == "frozen_bn" else 0},
            "fpn": {"out_channels": cfg["fpn"]},
            "rpn": {"anchor_strides": [], "straddle_threshold": -1.0,
                    "proposals_inside_image": False, "post_nms_per_batch_train": False,
                    "min_size": 1e-3, "pre_nms_top_n_train": cfg["pre_nms"],
                    "post_nms_top_n_train": cfg["post_nms"]},
            "box_head": {"box_loss_beta": 1.0 / 9, "min_size": 1e-2,
                         "representation_size": cfg["representation"],
                         "batch_size_per_image": cfg["rois"]},
            "mask_head": {"conv_channels": cfg["mask_channels"], "num_convs": cfg["mask_layers"]},
            "sampling_streams": "shared", "mask_padding": False, "channels_last": True}


# ---- inputs ------------------------------------------------------------------------------------

def make_inputs(cfg):
    import pycocotools.mask as mask_utils
    g = torch.Generator().manual_seed(SEED + 2)
    n, h, w, k = cfg["images"], cfg["height"], cfg["width"], cfg["objects"]
    hp, wp = -(-h // 32) * 32, -(-w // 32) * 32
    images = torch.zeros(n, 3, hp, wp)
    images[:, :, :h, :w] = 0.3 * torch.randn(n, 3, h, w, generator=g)
    batch = {"image_sizes": torch.tensor([[h, w]] * n), "gt_counts": torch.full((n,), k),
             "gt_boxes": torch.zeros(n, k, 4), "gt_labels": torch.zeros(n, k, dtype=torch.int64)}
    targets = []
    for i in range(n):
        boxes, polys, masks = [], [], []
        for j in range(k):
            u = torch.rand(5, generator=g, dtype=torch.float64).tolist()
            bw, bh = 16 + u[0] * w / 3, 16 + u[1] * h / 3
            x1, y1 = u[2] * (w - bw - 1), u[3] * (h - bh - 1)
            x2, y2 = x1 + bw, y1 + bh
            images[i, :, int(y1):int(y2), int(x1):int(x2)] = 2 * u[4] - 1
            poly = [x1, y1, x2, y1, x1, y2] if j % 2 else [x1, y1, x2, y1, x2, y2, x1, y2]
            boxes.append([x1, y1, x2, y2])
            polys.append(poly)
            masks.append(mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([poly], h, w))))
        labels = torch.tensor([1 + (i + j) % (cfg["classes"] - 1) for j in range(k)])
        batch["gt_boxes"][i] = torch.tensor(boxes)
        batch["gt_labels"][i] = labels
        batch[f"gt_polygons.{i}.coords"] = torch.tensor([c for p in polys for c in p], dtype=torch.float64)
        batch[f"gt_polygons.{i}.poly_offsets"] = torch.tensor([0] + np.cumsum([len(p) for p in polys]).tolist())
        batch[f"gt_polygons.{i}.instance_offsets"] = torch.arange(k + 1)
        targets.append({"boxes": torch.tensor(boxes, dtype=torch.float32), "labels": labels,
                        "masks": torch.from_numpy(np.stack(masks))})
    batch["images"] = images
    return batch, targets


def prepare(cfg, workdir):
    """Writes the case: options.json, weights.safetensors, batch.safetensors (ours) and tv.pt."""
    batch, targets = make_inputs(cfg)
    model = torchvision_model(cfg)
    if cfg["norm"] == "frozen_bn":
        calibrate_frozen_bn(model, batch["images"])
    state = model.state_dict()
    torch.save(state, workdir / "tv_state.pth")
    src = {k: v for k, v in state.items()}
    out = convert_weights.convert(src, "torchvision-maskrcnn", 1e-5, False)
    safetensors_io.save(workdir / "weights.safetensors", out)
    safetensors_io.save(workdir / "batch.safetensors", batch)
    (workdir / "options.json").write_text(json.dumps(our_options(cfg)))
    h, w = cfg["height"], cfg["width"]
    torch.save({"cfg": cfg, "images": [batch["images"][i, :, :h, :w].clone() for i in range(cfg["images"])],
                "targets": targets}, workdir / "tv.pt")
