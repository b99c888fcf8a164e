// What a training stage of the network returns (the RPN's and the RoI heads' losses(), and their
// forward_train): its named losses and the sample counts that normalize them. And the one sum of
// a step's losses, which backward starts from.
//
// Thread-safety: values; total_loss is a pure function.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace mrcnn::model {

// int64 scalars on the CPU: how many candidates (anchors, RoIs) a stage's losses were taken over.
struct SampleCounts {
  at::Tensor sampled;   // in the classification loss (objectness, classifier): its denominator
  at::Tensor positive;  // in the regression losses (and the mask loss)
};

struct StageLosses {
  std::map<std::string, at::Tensor> losses;  // full-precision scalars, by the stage's fixed names
  SampleCounts counts;
};

// The sum of a step's losses, in name order (the map's), each taken in float32: what a training
// step's backward starts from. The trainer and every test sum through this one function.
at::Tensor total_loss(const std::map<std::string, at::Tensor>& losses);

}  // namespace mrcnn::model
