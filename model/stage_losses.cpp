#include "model/stage_losses.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace mrcnn::model {

at::Tensor total_loss(const std::map<std::string, at::Tensor>& losses) {
  if (losses.empty()) throw std::invalid_argument("total_loss: no losses to sum");
  at::Tensor total;
  for (const auto& [name, value] : losses) {
    const at::Tensor l = value.to(at::kFloat);
    total = total.defined() ? total + l : l;
  }
  return total;
}

}  // namespace mrcnn::model
