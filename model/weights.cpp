#include "model/weights.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <set>
#include <sstream>

#include "model/safetensors.h"

namespace mrcnn::model {
namespace {

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::string list(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 5);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace

std::map<std::string, at::Tensor> named_tensors(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out[p.key()] = p.value();
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out[b.key()] = b.value();
  return out;
}

void save_weights(const torch::nn::Module& module, const std::string& path,
                  const std::map<std::string, std::string>& metadata) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, t] : named_tensors(module))
    tensors[name] = t.detach().to(at::kCPU).contiguous();  // NCHW whatever the memory format
  write_safetensors(path, tensors, metadata);
}

LoadReport load_named_tensors(torch::nn::Module& module,
                              const std::map<std::string, at::Tensor>& tensors,
                              const LoadOptions& options, const std::string& source) {
  LoadReport report;
  const std::map<std::string, at::Tensor> own = named_tensors(module);
  // Check everything first, so that a failure leaves the module untouched.
  for (const auto& [name, dst] : own) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      report.missing.push_back(name);
      continue;
    }
    const at::Tensor& src = it->second;
    if (src.sizes() != dst.sizes())
      throw SafetensorsError(source + ": tensor '" + name + "' has shape " +
                             shape_str(src.sizes()) + ", the model expects " +
                             shape_str(dst.sizes()));
    if (at::isFloatingType(src.scalar_type()) != at::isFloatingType(dst.scalar_type()))
      throw SafetensorsError(source + ": tensor '" + name + "' is " +
                             std::string(c10::toString(src.scalar_type())) + ", the model holds " +
                             std::string(c10::toString(dst.scalar_type())));
    report.loaded.push_back(name);
  }
  for (const auto& [name, t] : tensors)
    if (!own.count(name)) report.unexpected.push_back(name);
  if (!report.missing.empty() && !options.allow_missing)
    throw SafetensorsError(source + ": " + std::to_string(report.missing.size()) +
                           " weights of the model are missing: " + list(report.missing));
  if (!report.unexpected.empty() && !options.allow_unexpected)
    throw SafetensorsError(source + ": " + std::to_string(report.unexpected.size()) +
                           " tensors are not weights of this model: " + list(report.unexpected));
  c10::NoGradGuard no_grad;
  for (const std::string& name : report.loaded) own.at(name).copy_(tensors.at(name));
  return report;
}

LoadReport load_weights(torch::nn::Module& module, const std::string& path,
                        const LoadOptions& options) {
  TensorFile file = read_safetensors(path);
  LoadReport report = load_named_tensors(module, file.tensors, options, path);
  report.metadata = std::move(file.metadata);
  return report;
}

std::vector<InitializedTensor> mlperf_initialized_tensors(const ModelOptions& options) {
  std::vector<InitializedTensor> out;
  auto add = [&](std::string mlperf, const std::string& prefix) {
    out.push_back({std::move(mlperf), {prefix + ".weight", prefix + ".bias"}});
  };
  for (int i = 0; i < 4; ++i) add("FPN_inner_block" + std::to_string(i + 1), "fpn.inner." + std::to_string(i));
  for (int i = 0; i < 4; ++i) add("FPN_layer_block" + std::to_string(i + 1), "fpn.layer." + std::to_string(i));
  add("RPNHead_conv", "rpn.head.conv");
  add("RPNHead_cls", "rpn.head.cls_logits");
  add("RPNHead_bbox", "rpn.head.bbox_pred");
  add("ROI_BOX_FEATURE_EXTRACTOR_fc6", "roi_heads.box_head.fc6");
  add("ROI_BOX_FEATURE_EXTRACTOR_fc7", "roi_heads.box_head.fc7");
  add("ROI_BOX_PREDICTOR_cls", "roi_heads.box_predictor.cls_score");
  add("ROI_BOX_PREDICTOR_bbox", "roi_heads.box_predictor.bbox_pred");
  for (int i = 1; i <= options.mask_head.num_convs; ++i)
    add("ROI_MASK_FEATURE_EXTRACTOR_fcn" + std::to_string(i),
        "roi_heads.mask_head.fcn" + std::to_string(i));
  add("ROI_MASK_PREDICTOR_fcn5", "roi_heads.mask_predictor.conv5_mask");
  add("ROI_MASK_PREDICTOR_fcn_logits", "roi_heads.mask_predictor.mask_fcn_logits");
  return out;
}

}  // namespace mrcnn::model
