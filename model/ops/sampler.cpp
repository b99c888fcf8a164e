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
  return indices(std::vector<at::Tensor>{labels}, std::vector<at::Generator*>{&generator}).front();
}

std::vector<std::pair<at::Tensor, at::Tensor>> BalancedPositiveNegativeSampler::indices(
    const std::vector<at::Tensor>& labels, const std::vector<at::Generator*>& generators) const {
  TORCH_CHECK(labels.size() == generators.size(), "BalancedPositiveNegativeSampler: ",
              labels.size(), " label sets but ", generators.size(), " generators");
  std::vector<at::Tensor> positive_masks, negative_masks, counts;
  for (size_t i = 0; i < labels.size(); ++i) {
    const at::Tensor& l = labels[i];
    TORCH_CHECK(l.dim() == 1, "BalancedPositiveNegativeSampler: labels must be [P], got ",
                l.sizes());
    TORCH_CHECK(!at::isFloatingType(l.scalar_type()) && l.scalar_type() != at::kBool,
                "BalancedPositiveNegativeSampler: labels must be an integer tensor, got ",
                l.scalar_type());
    TORCH_CHECK(generators[i] != nullptr && generators[i]->defined(),
                "BalancedPositiveNegativeSampler: generator is undefined");
    TORCH_CHECK(l.device() == labels.front().device(),
                "BalancedPositiveNegativeSampler: label sets on different devices");
    positive_masks.push_back(l.ge(1));
    negative_masks.push_back(l.eq(0));
    counts.push_back(positive_masks.back().sum());
    counts.push_back(negative_masks.back().sum());
  }
  if (labels.empty()) return {};
  // The one read: every image's (#positive, #negative).
  const at::Tensor host_counts = at::stack(counts).cpu();
  const int64_t* count = host_counts.const_data_ptr<int64_t>();
  // int(batch_size_per_image * positive_fraction), as Python truncates.
  const int64_t max_pos =
      static_cast<int64_t>(static_cast<double>(batch_size_per_image_) * positive_fraction_);
  std::vector<std::pair<at::Tensor, at::Tensor>> result;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t num_positive = count[2 * i], num_negative = count[2 * i + 1];
    // nonzero with its size known: the same increasing indices, without reading the device.
    const at::Tensor positive = at::nonzero_static(positive_masks[i], num_positive).view(-1);
    const at::Tensor negative = at::nonzero_static(negative_masks[i], num_negative).view(-1);
    const int64_t num_pos = std::min(num_positive, max_pos);
    const int64_t num_neg = std::min(num_negative, batch_size_per_image_ - num_pos);
    at::Generator& generator = *generators[i];
    const auto perm_opts = at::TensorOptions().dtype(at::kLong).device(generator.device());
    // randperm takes the generator's mutex itself, one draw at a time.
    const at::Tensor perm_pos = at::randperm(num_positive, generator, perm_opts);
    const at::Tensor perm_neg = at::randperm(num_negative, generator, perm_opts);
    // A host generator's draws go to a GPU through pinned memory: a plain copy would wait for it.
    auto to_labels = [&](const at::Tensor& perm) {
      return perm.is_cpu() ? copy_to_device_async(perm, labels[i].device()) : perm.to(labels[i].device());
    };
    const at::Tensor pos_idx = positive.index_select(0, to_labels(perm_pos.slice(0, 0, num_pos)));
    const at::Tensor neg_idx = negative.index_select(0, to_labels(perm_neg.slice(0, 0, num_neg)));
    // Distinct indices (a permutation's prefix of distinct positions): sorted, they are nonzero()
    // of the masks operator() returns.
    result.emplace_back(std::get<0>(pos_idx.sort()), std::get<0>(neg_idx.sort()));
  }
  return result;
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
