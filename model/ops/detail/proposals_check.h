// Internal helper of the proposal-generation kernels (CPU and CUDA): argument checks shared by
// both, so that a malformed call fails with the same message on every device.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <vector>

namespace mrcnn::ops::detail {

struct ProposalLevel {
  int64_t anchors_per_location = 0;  // A
  int64_t height = 0;
  int64_t width = 0;
  int64_t num_anchors() const { return height * width * anchors_per_location; }
};

inline std::vector<ProposalLevel> check_proposal_inputs(
    at::TensorList objectness, at::TensorList box_deltas, at::TensorList anchors,
    const at::Tensor& image_sizes, int64_t pre_nms_top_n, int64_t post_nms_top_n,
    double min_size) {
  constexpr const char* kOp = "mrcnn::generate_proposals";
  const size_t num_levels = objectness.size();
  TORCH_CHECK(num_levels >= 1, kOp, ": expected at least one level of objectness");
  TORCH_CHECK(box_deltas.size() == num_levels && anchors.size() == num_levels, kOp,
              ": expected as many levels of box_deltas and anchors as of objectness (",
              num_levels, "), got ", box_deltas.size(), " and ", anchors.size());
  TORCH_CHECK(pre_nms_top_n > 0, kOp, ": pre_nms_top_n must be > 0, got ", pre_nms_top_n);
  TORCH_CHECK(post_nms_top_n >= 0, kOp, ": post_nms_top_n must be >= 0, got ", post_nms_top_n);
  TORCH_CHECK(min_size >= 0, kOp, ": min_size must be >= 0, got ", min_size);
  const at::Tensor& o0 = objectness[0];
  TORCH_CHECK(o0.dim() == 4, kOp, ": objectness[0] must be [N, A, H, W], got ", o0.sizes());
  const int64_t batch = o0.size(0);
  TORCH_CHECK(at::isFloatingType(o0.scalar_type()), kOp,
              ": objectness must be floating point, got ", o0.scalar_type());
  TORCH_CHECK(image_sizes.dim() == 2 && image_sizes.size(0) == batch && image_sizes.size(1) == 2 &&
                  !at::isFloatingType(image_sizes.scalar_type()),
              kOp, ": image_sizes must be an integer tensor [N, 2] = [", batch,
              ", 2] of (height, width), got ", image_sizes.scalar_type(), " ", image_sizes.sizes());
  std::vector<ProposalLevel> levels;
  for (size_t l = 0; l < num_levels; ++l) {
    const at::Tensor& o = objectness[l];
    const at::Tensor& d = box_deltas[l];
    const at::Tensor& a = anchors[l];
    TORCH_CHECK(o.dim() == 4 && o.size(0) == batch, kOp, ": objectness[", l, "] must be [", batch,
                ", A, H, W], got ", o.sizes());
    TORCH_CHECK(o.scalar_type() == o0.scalar_type() && o.device() == o0.device(), kOp,
                ": objectness[", l, "] must have the dtype and device of objectness[0]");
    ProposalLevel lv{o.size(1), o.size(2), o.size(3)};
    TORCH_CHECK(d.dim() == 4 && d.size(0) == batch && d.size(1) == 4 * lv.anchors_per_location &&
                    d.size(2) == lv.height && d.size(3) == lv.width,
                kOp, ": box_deltas[", l, "] must be [", batch, ", ", 4 * lv.anchors_per_location,
                ", ", lv.height, ", ", lv.width, "], got ", d.sizes());
    TORCH_CHECK(d.scalar_type() == o0.scalar_type() && d.device() == o0.device(), kOp,
                ": box_deltas[", l, "] must have the dtype and device of objectness[0]");
    TORCH_CHECK(a.dim() == 2 && a.size(0) == lv.num_anchors() && a.size(1) == 4, kOp,
                ": anchors[", l, "] must be [H*W*A, 4] = [", lv.num_anchors(), ", 4], got ",
                a.sizes());
    TORCH_CHECK(at::isFloatingType(a.scalar_type()) && a.device() == o0.device(), kOp,
                ": anchors[", l, "] must be floating point on ", o0.device());
    TORCH_CHECK(lv.num_anchors() < (int64_t{1} << 31), kOp, ": level ", l, " has ",
                lv.num_anchors(), " anchors; at most 2^31 - 1 are supported");
    levels.push_back(lv);
  }
  return levels;
}

}  // namespace mrcnn::ops::detail
