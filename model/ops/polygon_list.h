// Polygon masks as the ops take them (mask targets), and as the data pipeline and the model carry
// them per image (model/structures.h uses this type).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mrcnn::ops {

// Polygons of many instances, flattened into three CPU tensors:
//   instance i owns polygons instance_offsets[i] .. instance_offsets[i+1]-1,
//   polygon j owns coords[poly_offsets[j] .. poly_offsets[j+1]) = x0, y0, x1, y1, ...
// Coordinates are float64 pixels (COCO polygons are float; float64 keeps rasterization
// identical to pycocotools'). An instance may have several polygons (occluded objects).
struct PolygonList {
  at::Tensor coords;            // float64 [C], C even
  at::Tensor poly_offsets;      // int64 [P+1], poly_offsets[0] == 0, poly_offsets[P] == C
  at::Tensor instance_offsets;  // int64 [I+1], instance_offsets[0] == 0, instance_offsets[I] == P

  static PolygonList empty() {
    auto i64 = at::TensorOptions().dtype(at::kLong);
    return {at::empty({0}, at::TensorOptions().dtype(at::kDouble)), at::zeros({1}, i64),
            at::zeros({1}, i64)};
  }

  int64_t num_instances() const { return instance_offsets.numel() - 1; }
  int64_t num_polygons() const { return poly_offsets.numel() - 1; }

  // Throws std::invalid_argument if the offsets are inconsistent (out of range, decreasing) or a
  // polygon has an odd number of coordinates.
  void check() const {
    auto fail = [](const std::string& what) { throw std::invalid_argument("PolygonList: " + what); };
    if (coords.dim() != 1 || coords.scalar_type() != at::kDouble) fail("coords must be float64 [C]");
    if (poly_offsets.dim() != 1 || poly_offsets.scalar_type() != at::kLong || poly_offsets.numel() < 1)
      fail("poly_offsets must be int64 [P+1]");
    if (instance_offsets.dim() != 1 || instance_offsets.scalar_type() != at::kLong ||
        instance_offsets.numel() < 1)
      fail("instance_offsets must be int64 [I+1]");
    if (coords.numel() % 2 != 0) fail("coords must hold x,y pairs");
    if (poly_offsets[-1].item<int64_t>() != coords.numel()) fail("poly_offsets must end at coords.numel()");
    if (instance_offsets[-1].item<int64_t>() != num_polygons())
      fail("instance_offsets must end at the number of polygons");
    // Kernels index coords and polygons through these: every offset within range.
    if (poly_offsets[0].item<int64_t>() != 0 || instance_offsets[0].item<int64_t>() != 0)
      fail("poly_offsets and instance_offsets must start at 0");
    if (poly_offsets.numel() > 1) {
      const at::Tensor lengths = poly_offsets.diff();
      if ((lengths < 0).any().item<bool>()) fail("poly_offsets must not decrease");
      const at::Tensor odd = lengths.remainder(2).nonzero();
      if (odd.numel() > 0) {
        const int64_t p = odd[0][0].item<int64_t>();
        fail("polygon " + std::to_string(p) + " has " + std::to_string(lengths[p].item<int64_t>()) +
             " coordinates; expected an even count of x, y values");
      }
    }
    if (instance_offsets.numel() > 1 && (instance_offsets.diff() < 0).any().item<bool>())
      fail("instance_offsets must not decrease");
  }
};

}  // namespace mrcnn::ops
