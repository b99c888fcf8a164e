"""Mask targets against the MLPerf reference's recipe (maskrcnn-benchmark's Polygons.crop,
Polygons.resize and convert("mask"): float32 polygons, pycocotools frPyObjects + merge +
decode), written out here with torch and pycocotools."""
import numpy as np
import pycocotools.mask as mask_utils
import torch

from ops_common import expect_error, ops, run


def reference_target(polygons, box, m):
    """One proposal's target, the reference's way. polygons: list of float64 arrays."""
    polys = [torch.as_tensor(p, dtype=torch.float32) for p in polygons]
    box = box.to(torch.float32)
    w, h = box[2] - box[0], box[3] - box[1]
    w = max(w, 1)
    h = max(h, 1)
    cropped = []
    for p in polys:
        p = p.clone()
        p[0::2] = p[0::2] - box[0]
        p[1::2] = p[1::2] - box[1]
        cropped.append(p)
    ratio_w, ratio_h = float(m) / float(w), float(m) / float(h)
    scaled = []
    for p in cropped:
        p = p.clone()
        p[0::2] *= ratio_w
        p[1::2] *= ratio_h
        scaled.append(p)
    rles = mask_utils.frPyObjects([p.numpy().astype(np.float64) for p in scaled], m, m)
    return torch.from_numpy(mask_utils.decode(mask_utils.merge(rles))).float()


def random_instance(gen, cx, cy, r, parts):
    polys = []
    for _ in range(parts):
        k = int(torch.randint(3, 12, (1,), generator=gen))
        ang = torch.sort(torch.rand(k, generator=gen, dtype=torch.float64) * 2 * np.pi).values
        rad = r * (0.4 + 0.6 * torch.rand(k, generator=gen, dtype=torch.float64))
        ox, oy = (torch.rand(2, generator=gen, dtype=torch.float64) - 0.5) * r
        xy = torch.stack([cx + ox + rad * torch.cos(ang), cy + oy + rad * torch.sin(ang)], 1)
        polys.append(xy.flatten().numpy())
    return polys


def to_polygon_list(instances):
    coords, poly_off, inst_off = [], [0], [0]
    for inst in instances:
        for p in inst:
            coords.extend(p.tolist())
            poly_off.append(len(coords))
        inst_off.append(len(poly_off) - 1)
    return (torch.tensor(coords, dtype=torch.float64), torch.tensor(poly_off),
            torch.tensor(inst_off))


def check_matches_reference():
    gen = torch.Generator().manual_seed(31)
    instances = [random_instance(gen, 60 + 90 * i, 50 + 40 * (i % 3), 20 + 10 * i, 1 + i % 3)
                 for i in range(6)]
    coords, poly_off, inst_off = to_polygon_list(instances)
    k = 120
    matched = torch.randint(0, len(instances), (k,), generator=gen)
    boxes = []
    for j in range(k):
        xs = instances[int(matched[j])][0][0::2]
        ys = instances[int(matched[j])][0][1::2]
        jitter = (torch.rand(4, generator=gen, dtype=torch.float64) - 0.5) * 30
        boxes.append([xs.min() + jitter[0], ys.min() + jitter[1], xs.max() + jitter[2],
                      ys.max() + jitter[3]])
    proposals = torch.tensor(boxes, dtype=torch.float32)
    proposals[0] = torch.tensor([10.0, 10.0, 10.5, 10.2])      # tiny: w, h clamp to 1
    proposals[1] = torch.tensor([500.0, 500.0, 540.0, 530.0])  # far from its polygon: empty
    for m in (28, 14):
        ours = ops.mask_targets(coords, poly_off, inst_off, matched, proposals, m)
        assert ours.shape == (k, m, m) and ours.dtype == torch.float32
        for j in range(k):
            ref = reference_target(instances[int(matched[j])], proposals[j], m)
            if not torch.equal(ours[j], ref):
                diff = int((ours[j] != ref).sum())
                raise AssertionError(f"M={m} proposal {j}: {diff} pixels differ")
        assert ours[2:].sum() > 0 and not ours[1].any()


def check_empty_and_errors():
    coords, poly_off, inst_off = to_polygon_list([[np.array([1.0, 1, 9, 1, 9, 9, 1, 9])]])
    out = ops.mask_targets(coords, poly_off, inst_off, torch.zeros(0, dtype=torch.int64),
                           torch.zeros(0, 4), 28)
    assert out.shape == (0, 28, 28)
    # A square filling its proposal exactly fills the target.
    full = ops.mask_targets(coords, poly_off, inst_off, torch.zeros(1, dtype=torch.int64),
                            torch.tensor([[1.0, 1.0, 9.0, 9.0]]), 8)
    assert torch.equal(full[0], reference_target([np.array([1.0, 1, 9, 1, 9, 9, 1, 9])],
                                                 torch.tensor([1.0, 1.0, 9.0, 9.0]), 8))
    assert full.sum() >= 49
    expect_error(lambda: ops.mask_targets(coords, poly_off, inst_off, torch.tensor([1]),
                                          torch.zeros(1, 4), 28), "is not an instance")
    expect_error(lambda: ops.mask_targets(coords, torch.tensor([0, 3, 8]), torch.tensor([0, 2]),
                                          torch.tensor([0]), torch.zeros(1, 4), 28),
                 "even count")
    expect_error(lambda: ops.mask_targets(coords, poly_off, torch.tensor([0, 2]),
                                          torch.tensor([0]), torch.zeros(1, 4), 28),
                 "instance_offsets must end")


if __name__ == "__main__":
    run([check_matches_reference, check_empty_and_errors])
