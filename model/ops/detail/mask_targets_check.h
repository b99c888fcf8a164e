// Internal helper of mask_targets (the native op in mask_targets.cpp and the portable one in
// portable/mask_targets.cpp): the argument checks and the value-error messages, written once so
// that both implementations refuse the same inputs with the same words.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

#include "model/ops/polygon_list.h"

namespace mrcnn::ops::detail {

// Throws std::invalid_argument (PolygonList::check) or c10::Error on a bad argument.
inline void check_mask_targets_inputs(const PolygonList& gt_polygons,
                                      const at::Tensor& matched_gt_index,
                                      const at::Tensor& proposals, int64_t resolution) {
  constexpr const char* kOp = "mask_targets";
  gt_polygons.check();
  TORCH_CHECK(resolution > 0 && resolution <= 4096, kOp, ": resolution must be in [1, 4096], got ",
              resolution);
  TORCH_CHECK(matched_gt_index.dim() == 1 && !at::isFloatingType(matched_gt_index.scalar_type()),
              kOp, ": matched_gt_index must be an integer tensor [K], got ",
              matched_gt_index.scalar_type(), " ", matched_gt_index.sizes());
  TORCH_CHECK(proposals.dim() == 2 && proposals.size(1) == 4 &&
                  proposals.size(0) == matched_gt_index.size(0),
              kOp, ": proposals must be [K, 4] with K = ", matched_gt_index.size(0), ", got ",
              proposals.sizes());
}

// The CPU's value errors (a GPU sets kFaultMaskTarget instead).
inline std::string mask_targets_bad_instance(int64_t k, int64_t index, int64_t num_instances) {
  return "mask_targets: matched_gt_index[" + std::to_string(k) + "] = " + std::to_string(index) +
         " is not an instance of the image (it has " + std::to_string(num_instances) + ")";
}

inline std::string mask_targets_non_finite(int64_t k) {
  return "mask_targets: proposals[" + std::to_string(k) + "] is not finite";
}

// The refusal of vertex j of a polygon, not finite or beyond +-1e8 in the proposal's frame
// (std::invalid_argument on the CPU), written once for the native and the portable op.
inline std::string mask_targets_bad_vertex(int64_t j) {
  return "RLE: polygon vertex " + std::to_string(j) + " is not finite or beyond +-1e8";
}

}  // namespace mrcnn::ops::detail
