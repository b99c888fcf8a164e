#include "benchmark/run/mask_rcnn_model.h"

#include "model/ops/device_faults.h"
#include "model/weights.h"

namespace mrcnn::run {

MaskRcnnModel::MaskRcnnModel(model::MaskRCNN net)
    : net_(std::move(net)), generator_(at::make_generator<at::CPUGeneratorImpl>(0)) {}

std::map<std::string, at::Tensor> MaskRcnnModel::losses(const model::Batch& batch) {
  return net_->forward_train(batch, generator_).losses;
}

std::vector<model::Detections> MaskRcnnModel::detect(const model::Batch& batch) {
  std::vector<model::Detections> out = net_->inference(batch);
  // GPU kernels report invalid inputs through the device's fault word (device_faults.h); the
  // detections are about to be read on the host, so this read costs no extra wait.
  if (!out.empty() && out.front().boxes.defined() && !out.front().boxes.is_cpu())
    ops::check_device_faults(out.front().boxes.device(), "inference");
  return out;
}

std::vector<train::NamedParameter> MaskRcnnModel::trainable_parameters() {
  std::vector<train::NamedParameter> out;
  for (const auto& p : net_->named_parameters(/*recurse=*/true))
    if (p.value().requires_grad()) out.push_back({p.key(), p.value()});
  return out;
}

std::map<std::string, at::Tensor> MaskRcnnModel::state_dict() { return model::named_tensors(*net_); }

void MaskRcnnModel::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  model::load_named_tensors(*net_, state, {}, "checkpoint");
}

void MaskRcnnModel::set_training(bool training) { net_->train(training); }

void MaskRcnnModel::set_step_seed(uint64_t seed) { generator_ = at::make_generator<at::CPUGeneratorImpl>(seed); }

bool MaskRcnnModel::samples_keyed_by_image() const {
  return net_->options().sampling_streams == model::SamplingStreams::kPerImage;
}

}  // namespace mrcnn::run
