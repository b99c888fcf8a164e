// Autograd of mrcnn::multilevel_roi_align: one gradient per feature level, computed by the
// mrcnn::_multilevel_roi_align_backward op (device kernels in cpu/ and cuda/).
#include <torch/autograd.h>
#include <torch/library.h>

#include "model/ops/multilevel_roi_align.h"

namespace mrcnn::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Variable;
using torch::autograd::variable_list;

class MultilevelRoIAlignFunction
    : public torch::autograd::Function<MultilevelRoIAlignFunction> {
 public:
  // `features` is a TensorList: autograd sees one differentiable input per level, in order.
  static variable_list forward(AutogradContext* ctx, at::TensorList features,
                               const Variable& rois, int64_t output_size, int64_t sampling_ratio,
                               bool aligned, at::ArrayRef<double> spatial_scales,
                               int64_t canonical_scale, int64_t canonical_level) {
    std::vector<int64_t> heights;
    std::vector<int64_t> widths;
    std::vector<int64_t> channels_last;
    for (const at::Tensor& f : features) {
      TORCH_CHECK(f.dim() == 4, "mrcnn::multilevel_roi_align: features must be [N, C, H, W], got ",
                  f.sizes());
      heights.push_back(f.size(2));
      widths.push_back(f.size(3));
      channels_last.push_back(f.suggest_memory_format() == at::MemoryFormat::ChannelsLast);
    }
    TORCH_CHECK(!features.empty(), "mrcnn::multilevel_roi_align: expected at least one level");
    ctx->saved_data["num_levels"] = static_cast<int64_t>(features.size());
    ctx->saved_data["batch_size"] = features[0].size(0);
    ctx->saved_data["channels"] = features[0].size(1);
    ctx->saved_data["heights"] = heights;
    ctx->saved_data["widths"] = widths;
    ctx->saved_data["channels_last"] = channels_last;
    ctx->saved_data["spatial_scales"] = spatial_scales.vec();
    ctx->saved_data["output_size"] = output_size;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["canonical_scale"] = canonical_scale;
    ctx->saved_data["canonical_level"] = canonical_level;
    ctx->save_for_backward({rois});
    at::AutoDispatchBelowADInplaceOrView guard;
    return {multilevel_roi_align(features, rois, output_size, sampling_ratio, aligned,
                                 spatial_scales, canonical_scale, canonical_level)};
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_output) {
    const auto saved = ctx->get_saved_variables();
    const auto heights = ctx->saved_data["heights"].toIntVector();
    const auto widths = ctx->saved_data["widths"].toIntVector();
    const auto channels_last = ctx->saved_data["channels_last"].toIntVector();
    const auto scales = ctx->saved_data["spatial_scales"].toDoubleVector();
    variable_list grads = detail::multilevel_roi_align_backward(
        grad_output[0], saved[0], scales, ctx->saved_data["output_size"].toInt(),
        ctx->saved_data["sampling_ratio"].toInt(), ctx->saved_data["aligned"].toBool(),
        ctx->saved_data["canonical_scale"].toInt(), ctx->saved_data["canonical_level"].toInt(),
        ctx->saved_data["batch_size"].toInt(), ctx->saved_data["channels"].toInt(), heights,
        widths, channels_last);
    // Then rois and the six non-tensor arguments: no gradient.
    for (int i = 0; i < 7; ++i) grads.emplace_back();
    return grads;
  }
};

class MultilevelRoIAlignBackwardFunction
    : public torch::autograd::Function<MultilevelRoIAlignBackwardFunction> {
 public:
  static variable_list forward(AutogradContext*, const Variable& grad, const Variable& rois,
                               at::ArrayRef<double> spatial_scales, int64_t output_size,
                               int64_t sampling_ratio, bool aligned, int64_t canonical_scale,
                               int64_t canonical_level, int64_t batch_size, int64_t channels,
                               at::IntArrayRef level_heights, at::IntArrayRef level_widths,
                               at::IntArrayRef level_channels_last) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::multilevel_roi_align_backward(
        grad, rois, spatial_scales, output_size, sampling_ratio, aligned, canonical_scale,
        canonical_level, batch_size, channels, level_heights, level_widths, level_channels_last);
  }

  static variable_list backward(AutogradContext*, const variable_list&) {
    TORCH_CHECK(false, "mrcnn::multilevel_roi_align: double backward is not supported");
  }
};

at::Tensor multilevel_autograd(at::TensorList features, const at::Tensor& rois,
                               int64_t output_size, int64_t sampling_ratio, bool aligned,
                               at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                               int64_t canonical_level) {
  return MultilevelRoIAlignFunction::apply(features, rois, output_size, sampling_ratio, aligned,
                                           spatial_scales, canonical_scale, canonical_level)[0];
}

std::vector<at::Tensor> multilevel_backward_autograd(
    const at::Tensor& grad, const at::Tensor& rois, at::ArrayRef<double> spatial_scales,
    int64_t output_size, int64_t sampling_ratio, bool aligned, int64_t canonical_scale,
    int64_t canonical_level, int64_t batch_size, int64_t channels, at::IntArrayRef level_heights,
    at::IntArrayRef level_widths, at::IntArrayRef level_channels_last) {
  return MultilevelRoIAlignBackwardFunction::apply(
      grad, rois, spatial_scales, output_size, sampling_ratio, aligned, canonical_scale,
      canonical_level, batch_size, channels, level_heights, level_widths, level_channels_last);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, Autograd, m) {
  m.impl("multilevel_roi_align", TORCH_FN(multilevel_autograd));
  m.impl("_multilevel_roi_align_backward", TORCH_FN(multilevel_backward_autograd));
}

}  // namespace mrcnn::ops
