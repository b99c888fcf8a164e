// BalancedPositiveNegativeSampler: torchvision's draw (two randperm calls on the caller's
// generator), written with ATen operators.
#include "model/ops/sampler.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/ops/host_copy.h"

namespace mrcnn::ops {

BalancedPositiveNegativeSampler::BalancedPositiveNegativeSampler(int64_t batch_size_per_image,
                                                                 double positive_fraction)
    : batch_size_per_image_(batch_size_per_image), positive_fraction_(positive_fraction) {
  if (batch_size_per_image < 0) {
    throw std::invalid_argument("BalancedPositiveNegativeSampler: batch_size_per_image must be "
                                ">= 0, got " + std::to_string(batch_size_per_image));
  }
  if (!(positive_fraction >= 0.0 && positive_fraction <= 1.0)) {
    throw std::invalid_argument("BalancedPositiveNegativeSampler: positive_fraction must be in "
                                "[0, 1], got " + std::to_string(positive_fraction));
  }
}

std::pair<at::Tensor, at::Tensor> BalancedPositiveNegativeSampler::indices(
    const at::Tensor& labels, at::Generator& generator) const {
  TORCH_CHECK(labels.dim() == 1, "BalancedPositiveNegativeSampler: labels must be [P], got ",
              labels.sizes());
  TORCH_CHECK(!at::isFloatingType(labels.scalar_type()) && labels.scalar_type() != at::kBool,
              "BalancedPositiveNegativeSampler: labels must be an integer tensor, got ",
              labels.scalar_type());
  TORCH_CHECK(generator.defined(), "BalancedPositiveNegativeSampler: generator is undefined");
  const at::Tensor positive = at::where(labels.ge(1))[0];
  const at::Tensor negative = at::where(labels.eq(0))[0];
  // int(batch_size_per_image * positive_fraction), as Python truncates.
  const int64_t max_pos =
      static_cast<int64_t>(static_cast<double>(batch_size_per_image_) * positive_fraction_);
  const int64_t num_pos = std::min(positive.numel(), max_pos);
  const int64_t num_neg = std::min(negative.numel(), batch_size_per_image_ - num_pos);
  const auto perm_opts = at::TensorOptions().dtype(at::kLong).device(generator.device());
  // randperm takes the generator's mutex itself, one draw at a time.
  const at::Tensor perm_pos = at::randperm(positive.numel(), generator, perm_opts);
  const at::Tensor perm_neg = at::randperm(negative.numel(), generator, perm_opts);
  // A host generator's draws go to a GPU through pinned memory: a plain copy would wait for it.
  auto to_labels = [&](const at::Tensor& perm) {
    return perm.is_cpu() ? copy_to_device_async(perm, labels.device()) : perm.to(labels.device());
  };
  const at::Tensor pos_idx = positive.index_select(0, to_labels(perm_pos.slice(0, 0, num_pos)));
  const at::Tensor neg_idx = negative.index_select(0, to_labels(perm_neg.slice(0, 0, num_neg)));
  // Distinct indices (a permutation's prefix of distinct positions): sorted, they are nonzero()
  // of the masks below.
  return {std::get<0>(pos_idx.sort()), std::get<0>(neg_idx.sort())};
}

std::pair<at::Tensor, at::Tensor> BalancedPositiveNegativeSampler::operator()(
    const at::Tensor& labels, at::Generator& generator) const {
  const auto [pos_idx, neg_idx] = indices(labels, generator);
  const auto bool_opts = labels.options().dtype(at::kBool);
  at::Tensor pos_mask = at::zeros({labels.size(0)}, bool_opts);
  at::Tensor neg_mask = at::zeros({labels.size(0)}, bool_opts);
  pos_mask.index_fill_(0, pos_idx, true);
  neg_mask.index_fill_(0, neg_idx, true);
  return {pos_mask, neg_mask};
}

namespace {

std::tuple<at::Tensor, at::Tensor> sample_op(const at::Tensor& labels,
                                             int64_t batch_size_per_image,
                                             double positive_fraction,
                                             std::optional<at::Generator> generator) {
  TORCH_CHECK(generator.has_value() && generator->defined(),
              "mrcnn::sample_positive_negative: a seeded generator is required");
  auto [pos, neg] =
      BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)(labels, *generator);
  return {pos, neg};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def(
      "sample_positive_negative(Tensor labels, int batch_size_per_image, float positive_fraction, "
      "Generator? generator) -> (Tensor, Tensor)",
      TORCH_FN(sample_op));
}

}  // namespace mrcnn::ops
