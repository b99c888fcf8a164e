// mask_targets: the op's schema and its public entry point. Kernels: cpu/mask_targets_kernel.cpp
// and cuda/mask_targets_kernel.cu (the same masks bit for bit); under run.ops = portable
// (implementation.h): portable/mask_targets.cpp.
#include "model/ops/mask_targets.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "model/ops/implementation.h"
#include "model/ops/portable/portable.h"

namespace mrcnn::ops {

at::Tensor mask_targets(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                        const at::Tensor& proposals, int64_t resolution) {
  if (use_portable(proposals.device().type())) {
    return portable::mask_targets(gt_polygons, matched_gt_index, proposals, resolution);
  }
  // The polygons stay on the host (their offsets are read there); the proposals' device picks the
  // kernel.
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::mask_targets", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const at::Tensor&, int64_t)>();
  return op.call(gt_polygons.coords, gt_polygons.poly_offsets, gt_polygons.instance_offsets, matched_gt_index, proposals,
                 resolution);
}

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  // A PolygonList spelled out as its three tensors.
  m.def(
      "mask_targets(Tensor coords, Tensor poly_offsets, Tensor instance_offsets, "
      "Tensor matched_gt_index, Tensor proposals, int resolution=28) -> Tensor");
}

}  // namespace mrcnn::ops
