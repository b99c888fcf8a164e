"""model/tools/convert_weights.py: every source format lands on the C++ model's own names.

The names are the model's (written by mrcnn_model_runner --save-weights), the folded batch norms
are checked numerically, a Detectron pickle is synthesized from a torchvision ResNet-50 in its
own naming, and the backbone-only files load into the model with missing names allowed.
"""
# Its networks run on 2 intra-op threads:
# ctest processors: 2
import json
import pathlib
import pickle
import re
import sys

import torch
import torchvision
from torchvision.models.detection import maskrcnn_resnet50_fpn

import mrcnn_testenv as env

sys.path.insert(0, str(env.SOURCE_DIR / "model" / "tools"))
import convert_weights  # noqa: E402
import safetensors_io  # noqa: E402

torch.set_num_threads(2)
TOOL = env.SOURCE_DIR / "model" / "tools" / "convert_weights.py"


def run_tool(*args):
    return env.run([env.PYTHON, TOOL, *args])


def model_names(workdir, options):
    """{name: shape} of the C++ model's weights for these options."""
    (workdir / "options.json").write_text(json.dumps(options))
    r = env.run([env.binary("mrcnn_model_runner"), "--options", workdir / "options.json",
                 "--save-weights", workdir / "init.safetensors"])
    assert r.returncode == 0, r.stderr
    tensors, _ = safetensors_io.load(workdir / "init.safetensors")
    return {k: tuple(v.shape) for k, v in tensors.items()}


def load_into_model(workdir, weights, options):
    """The model's weights after loading `weights` with missing names allowed."""
    (workdir / "options.json").write_text(json.dumps(options))
    r = env.run([env.binary("mrcnn_model_runner"), "--options", workdir / "options.json",
                 "--weights", weights, "--allow-missing", "--save-weights", workdir / "loaded.safetensors"])
    assert r.returncode == 0, r.stderr
    return safetensors_io.load(workdir / "loaded.safetensors")[0]


def randomize_bn(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torchvision.ops.misc.FrozenBatchNorm2d)):
                c = m.weight.numel()
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(torch.randn(c, generator=g))
                m.running_mean.copy_(torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))


def check_torchvision_maskrcnn(workdir):
    torch.manual_seed(1)
    tv = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91)
    randomize_bn(tv, 2)
    sd = tv.state_dict()
    torch.save(sd, workdir / "maskrcnn.pth")
    r = run_tool(workdir / "maskrcnn.pth", workdir / "maskrcnn.safetensors", "--bn-eps", "1e-5")
    assert r.returncode == 0, r.stderr
    out, meta = safetensors_io.load(workdir / "maskrcnn.safetensors")
    assert meta["source"] == "torchvision-maskrcnn" and meta["stride_in_1x1"] == "false", meta
    names = model_names(workdir, {"num_classes": 91})
    assert set(out) == set(names), (sorted(set(out) ^ set(names)))[:10]
    for k, v in out.items():
        assert tuple(v.shape) == names[k], (k, v.shape, names[k])
        assert v.dtype == torch.float32, (k, v.dtype)
    # Folding, checked on one batch norm of each kind.
    for tv_prefix, ours in (("backbone.body.bn1", "backbone.stem.conv1"),
                            ("backbone.body.layer3.2.bn2", "backbone.res4.2.conv2"),
                            ("backbone.body.layer2.0.downsample.1", "backbone.res3.0.shortcut")):
        w, b = sd[tv_prefix + ".weight"].double(), sd[tv_prefix + ".bias"].double()
        rm, rv = sd[tv_prefix + ".running_mean"].double(), sd[tv_prefix + ".running_var"].double()
        scale = w / torch.sqrt(rv + 1e-5)
        assert torch.allclose(out[ours + ".norm.scale"].double(), scale, rtol=1e-6)
        assert torch.allclose(out[ours + ".norm.bias"].double(), b - rm * scale, rtol=1e-6, atol=1e-6)
    assert torch.equal(out["roi_heads.mask_head.fcn3.weight"], sd["roi_heads.mask_head.2.0.weight"])
    assert torch.equal(out["fpn.inner.1.bias"], sd["backbone.fpn.inner_blocks.1.0.bias"])
    assert torch.equal(out["rpn.head.conv.weight"], sd["rpn.head.conv.0.0.weight"])

    # The layouts of older torchvision releases convert alike.
    old = {}
    for k, v in sd.items():
        k = re.sub(r"^(backbone\.fpn\.(?:inner|layer)_blocks\.\d+)\.0\.", r"\1.", k)
        k = k.replace("rpn.head.conv.0.0.", "rpn.head.conv.")
        k = re.sub(r"^roi_heads\.mask_head\.(\d+)\.0\.",
                   lambda m: f"roi_heads.mask_head.mask_fcn{int(m.group(1)) + 1}.", k)
        old[k] = v
    torch.save(old, workdir / "old.pth")
    r = run_tool(workdir / "old.pth", workdir / "old.safetensors", "--bn-eps", "1e-5")
    assert r.returncode == 0, r.stderr
    out_old, _ = safetensors_io.load(workdir / "old.safetensors")
    assert set(out_old) == set(out) and all(torch.equal(out_old[k], out[k]) for k in out)

    # 91 torchvision classes onto the 81 contiguous ones.
    r = run_tool(workdir / "maskrcnn.pth", workdir / "c81.safetensors", "--coco-contiguous")
    assert r.returncode == 0, r.stderr
    c81, _ = safetensors_io.load(workdir / "c81.safetensors")
    assert c81["roi_heads.box_predictor.cls_score.weight"].shape[0] == 81
    assert c81["roi_heads.box_predictor.bbox_pred.weight"].shape[0] == 324
    assert c81["roi_heads.mask_predictor.mask_fcn_logits.weight"].shape[0] == 81
    cat = 90  # the last COCO category (toothbrush), contiguous label 80
    assert torch.equal(c81["roi_heads.box_predictor.cls_score.weight"][80],
                       sd["roi_heads.box_predictor.cls_score.weight"][cat])
    assert torch.equal(c81["roi_heads.box_predictor.bbox_pred.bias"][320:324],
                       sd["roi_heads.box_predictor.bbox_pred.bias"][4 * cat:4 * cat + 4])
    assert set(model_names(workdir, {}).keys()) == set(c81)
    print("torchvision maskrcnn: ok")


def check_backbones(workdir):
    torch.manual_seed(3)
    resnet = torchvision.models.resnet50()
    randomize_bn(resnet, 4)
    sd = resnet.state_dict()
    torch.save(sd, workdir / "resnet50.pth")
    r = run_tool(workdir / "resnet50.pth", workdir / "r50_tv.safetensors")
    assert r.returncode == 0, r.stderr
    tv_out, meta = safetensors_io.load(workdir / "r50_tv.safetensors")
    assert meta["source"] == "torchvision-resnet", meta
    names = model_names(workdir, {})
    backbone = {k for k in names if k.startswith("backbone.")}
    assert set(tv_out) == backbone, sorted(set(tv_out) ^ backbone)[:10]

    # The same network in Detectron's naming, batch norms already folded (eps 1e-5).
    c2 = {}

    def put(prefix, tv_conv, tv_bn):
        c2[prefix + "_w"] = sd[tv_conv + ".weight"].numpy()
        scale = sd[tv_bn + ".weight"] / torch.sqrt(sd[tv_bn + ".running_var"] + 1e-5)
        c2[prefix + "_bn_s"] = scale.numpy()
        c2[prefix + "_bn_b"] = (sd[tv_bn + ".bias"] - sd[tv_bn + ".running_mean"] * scale).numpy()

    put("conv1", "conv1", "bn1")
    c2["res_conv1_bn_s"], c2["res_conv1_bn_b"] = c2.pop("conv1_bn_s"), c2.pop("conv1_bn_b")
    for s, blocks in zip(range(2, 6), (3, 4, 6, 3)):
        for b in range(blocks):
            tvp = f"layer{s - 1}.{b}"
            for branch, k in (("branch2a", 1), ("branch2b", 2), ("branch2c", 3)):
                put(f"res{s}_{b}_{branch}", f"{tvp}.conv{k}", f"{tvp}.bn{k}")
            if b == 0:
                put(f"res{s}_{b}_branch1", f"{tvp}.downsample.0", f"{tvp}.downsample.1")
    c2["fc1000_w"] = sd["fc.weight"].numpy()
    c2["fc1000_b"] = sd["fc.bias"].numpy()
    with open(workdir / "R-50.pkl", "wb") as f:
        pickle.dump({"blobs": c2}, f)
    r = run_tool(workdir / "R-50.pkl", workdir / "r50_c2.safetensors")
    assert r.returncode == 0, r.stderr
    c2_out, meta = safetensors_io.load(workdir / "r50_c2.safetensors")
    assert meta["source"] == "detectron-resnet" and meta["stride_in_1x1"] == "true", meta
    assert set(c2_out) == backbone
    for k in backbone:
        assert torch.allclose(c2_out[k], tv_out[k], rtol=1e-5, atol=1e-6), k

    # A backbone-only file loads with missing names allowed; the rest keeps its initialization.
    loaded = load_into_model(workdir, workdir / "r50_c2.safetensors", {})
    init, _ = safetensors_io.load(workdir / "init.safetensors")
    for k in names:
        expected = c2_out[k] if k in backbone else init[k]
        assert torch.equal(loaded[k], expected), k
    print("torchvision and Detectron ResNet-50: ok")


def check_errors(workdir):
    torch.save({"foo.weight": torch.zeros(3)}, workdir / "unknown.pth")
    r = run_tool(workdir / "unknown.pth", workdir / "x.safetensors")
    assert r.returncode == 1 and "cannot tell the source" in r.stderr, r.stderr
    sd = torchvision.models.resnet18().state_dict()
    sd["layer1.0.extra.weight"] = torch.zeros(1)
    torch.save(sd, workdir / "extra.pth")
    r = run_tool(workdir / "extra.pth", workdir / "x.safetensors")
    assert r.returncode == 1 and "layer1.0.extra.weight" in r.stderr, r.stderr
    del sd["layer1.0.extra.weight"]
    del sd["layer2.0.bn1.running_var"]
    torch.save(sd, workdir / "nobn.pth")
    r = run_tool(workdir / "nobn.pth", workdir / "x.safetensors")
    assert r.returncode == 1 and "layer2.0.bn1" in r.stderr and "running_var" in r.stderr, r.stderr
    (workdir / "garbage.pth").write_bytes(b"not a checkpoint")
    r = run_tool(workdir / "garbage.pth", workdir / "x.safetensors")
    assert r.returncode == 1 and "convert_weights: error:" in r.stderr, r.stderr
    # A ResNet-18 converts and matches the depth-18 model.
    sd = torchvision.models.resnet18().state_dict()
    torch.save(sd, workdir / "r18.pth")
    r = run_tool(workdir / "r18.pth", workdir / "r18.safetensors")
    assert r.returncode == 0, r.stderr
    out, _ = safetensors_io.load(workdir / "r18.safetensors")
    names = model_names(workdir, {"backbone": {"depth": 18}})
    assert set(out) == {k for k in names if k.startswith("backbone.")}
    assert all(tuple(v.shape) == names[k] for k, v in out.items())
    print("errors and ResNet-18: ok")


def main():
    assert convert_weights.COCO_CATEGORY_IDS[-1] == 90 and len(convert_weights.COCO_CATEGORY_IDS) == 80
    with env.scratch_dir("convert") as d:
        workdir = pathlib.Path(d)
        check_torchvision_maskrcnn(workdir)
        check_backbones(workdir)
        check_errors(workdir)
    print("convert_weights: ok")


if __name__ == "__main__":
    main()
