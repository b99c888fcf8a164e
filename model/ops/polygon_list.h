// Polygon masks as the ops take them (mask targets), and as the data pipeline and the model carry
// them per image (model/structures.h uses this type).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

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
    // The offsets are host data: read there, without an operator per value (a copy first where
    // a caller moved them).
    const at::Tensor po_host = (poly_offsets.is_cpu() ? poly_offsets : poly_offsets.cpu()).contiguous();
    const at::Tensor io_host = (instance_offsets.is_cpu() ? instance_offsets : instance_offsets.cpu()).contiguous();
    const int64_t* po = po_host.const_data_ptr<int64_t>();
    const int64_t* io = io_host.const_data_ptr<int64_t>();
    const int64_t np = po_host.numel(), ni = io_host.numel();
    if (po[np - 1] != coords.numel()) fail("poly_offsets must end at coords.numel()");
    if (io[ni - 1] != num_polygons()) fail("instance_offsets must end at the number of polygons");
    // Kernels index coords and polygons through these: every offset within range.
    if (po[0] != 0 || io[0] != 0) fail("poly_offsets and instance_offsets must start at 0");
    for (int64_t p = 0; p + 1 < np; ++p)
      if (po[p + 1] < po[p]) fail("poly_offsets must not decrease");
    for (int64_t p = 0; p + 1 < np; ++p)
      if ((po[p + 1] - po[p]) % 2 != 0)
        fail("polygon " + std::to_string(p) + " has " + std::to_string(po[p + 1] - po[p]) +
             " coordinates; expected an even count of x, y values");
    for (int64_t i = 0; i + 1 < ni; ++i)
      if (io[i + 1] < io[i]) fail("instance_offsets must not decrease");
  }
};

// The polygons of several lists (a batch's images) as one list, each list's instances after those
// of the lists before it: `first_instance[i]` is list i's instance 0 in the result. One op call then
// serves a whole batch (one launch, one copy of the polygons to a device, instead of one each per
// image). Host tensors, as the lists' own.
struct ConcatenatedPolygons {
  PolygonList polygons;
  std::vector<int64_t> first_instance;
};

inline ConcatenatedPolygons concatenate(const std::vector<const PolygonList*>& lists) {
  ConcatenatedPolygons out;
  std::vector<at::Tensor> coords, poly_offsets{at::zeros({1}, at::kLong)}, instance_offsets{at::zeros({1}, at::kLong)};
  int64_t num_coords = 0, num_polygons = 0, num_instances = 0;
  for (const PolygonList* l : lists) {
    out.first_instance.push_back(num_instances);
    coords.push_back(l->coords);
    poly_offsets.push_back(l->poly_offsets.slice(0, 1) + num_coords);
    instance_offsets.push_back(l->instance_offsets.slice(0, 1) + num_polygons);
    num_coords += l->coords.numel();
    num_polygons += l->num_polygons();
    num_instances += l->num_instances();
  }
  out.polygons.coords = coords.empty() ? at::empty({0}, at::kDouble) : at::cat(coords);
  out.polygons.poly_offsets = at::cat(poly_offsets);
  out.polygons.instance_offsets = at::cat(instance_offsets);
  return out;
}

}  // namespace mrcnn::ops
