// What a trainer carries from step to step besides the network (Trainer::state, load_state), and
// what a checkpoint keeps of it.
//
// Thread-safety: a value.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

namespace mrcnn::train {

struct TrainerState {
  int64_t step = 0;  // optimizer steps taken
  std::map<std::string, at::Tensor> optimizer;  // momentum buffers by parameter name
  double loss_scale = 1.0;
  int64_t scaler_good_steps = 0;
};

}  // namespace mrcnn::train
