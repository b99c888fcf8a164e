// mrcnn::generate_proposals: schema and the C++ entry point (or the portable composition,
// implementation.h). Kernels: cpu/, cuda/, portable/.
#include "model/ops/proposals.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "model/ops/implementation.h"
#include "model/ops/portable/portable.h"

namespace mrcnn::ops {

namespace {

using ProposalsOp = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    at::TensorList, at::TensorList, at::TensorList, const at::Tensor&, int64_t, int64_t, double,
    double, bool, double);

}  // namespace

Proposals generate_proposals(const std::vector<at::Tensor>& objectness,
                             const std::vector<at::Tensor>& box_deltas,
                             const std::vector<at::Tensor>& anchors,
                             const at::Tensor& image_sizes, const ProposalOptions& options) {
  // (No level: the portable checks name the problem, the dispatcher could not.)
  if (use_portable(objectness.empty() ? c10::DeviceType::CPU : objectness[0].device().type())) {
    return portable::generate_proposals(objectness, box_deltas, anchors, image_sizes, options);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::generate_proposals", "")
                       .typed<ProposalsOp>();
  auto [boxes, scores, counts] =
      op.call(objectness, box_deltas, anchors, image_sizes, options.pre_nms_top_n,
              options.post_nms_top_n, options.nms_threshold, options.min_size,
              options.per_batch_post_nms, options.score_threshold);
  return {boxes, scores, counts};
}

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def(
      "generate_proposals(Tensor[] objectness, Tensor[] box_deltas, Tensor[] anchors, "
      "Tensor image_sizes, int pre_nms_top_n, int post_nms_top_n, float nms_threshold=0.7, "
      "float min_size=0.0, bool per_batch_post_nms=False, float score_threshold=0.0) "
      "-> (Tensor boxes, Tensor scores, Tensor counts)");
}

}  // namespace mrcnn::ops
