// Mask R-CNN behind the trainer's and the timed run's TrainableModel interface: the network's
// training forward (losses) and inference, its trainable parameters and state by name, and the
// generator that seeds each step's anchor and RoI sampling.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "benchmark/train/trainer.h"
#include "model/mask_rcnn.h"

namespace mrcnn::run {

class MaskRcnnModel final : public train::TrainableModel {
 public:
  // Shares ownership of the network.
  explicit MaskRcnnModel(model::MaskRCNN net);
  std::map<std::string, at::Tensor> losses(const model::Batch& batch) override;
  std::vector<model::Detections> detect(const model::Batch& batch) override;
  std::vector<train::NamedParameter> trainable_parameters() override;
  std::map<std::string, at::Tensor> state_dict() override;
  void load_state_dict(const std::map<std::string, at::Tensor>& state) override;
  void set_training(bool training) override;
  void set_step_seed(uint64_t seed) override;
  bool samples_keyed_by_image() const override;
  model::MaskRCNN& net() { return net_; }

 private:
  model::MaskRCNN net_;
  at::Generator generator_;
};

}  // namespace mrcnn::run
