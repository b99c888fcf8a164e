// BalancedPositiveNegativeSampler: torchvision's draw (two randperm calls on the caller's
// generator), written with ATen operators.
#include "model/ops/box/sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "model/ops/host_copy.h"
#include "model/ops/box/randperm_prefix.h"

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
  const Pending pending = prepare(labels);
  return draw(pending, read_counts({&pending}).front(), generators);
}

BalancedPositiveNegativeSampler::Pending BalancedPositiveNegativeSampler::prepare(
    const std::vector<at::Tensor>& labels) const {
  Pending p;
  std::vector<at::Tensor> counts;
  for (const at::Tensor& l : labels) {
    TORCH_CHECK(l.dim() == 1, "BalancedPositiveNegativeSampler: labels must be [P], got ",
                l.sizes());
    TORCH_CHECK(!at::isFloatingType(l.scalar_type()) && l.scalar_type() != at::kBool,
                "BalancedPositiveNegativeSampler: labels must be an integer tensor, got ",
                l.scalar_type());
    TORCH_CHECK(l.device() == labels.front().device(),
                "BalancedPositiveNegativeSampler: label sets on different devices");
    p.positive.push_back(l.ge(1));
    p.negative.push_back(l.eq(0));
    counts.push_back(p.positive.back().sum());
    counts.push_back(p.negative.back().sum());
  }
  if (!counts.empty()) p.counts = at::stack(counts);
  return p;
}

BalancedPositiveNegativeSampler::Pending BalancedPositiveNegativeSampler::prepare_batch(const at::Tensor& labels) const {
  TORCH_CHECK(labels.dim() == 2, "BalancedPositiveNegativeSampler: a batch's labels must be [N, P], got ",
              labels.sizes());
  TORCH_CHECK(!at::isFloatingType(labels.scalar_type()) && labels.scalar_type() != at::kBool,
              "BalancedPositiveNegativeSampler: labels must be an integer tensor, got ", labels.scalar_type());
  Pending p;
  if (labels.size(0) == 0) return p;
  const at::Tensor positive = labels.ge(1), negative = labels.eq(0);
  p.positive = positive.unbind(0);
  p.negative = negative.unbind(0);
  p.positive_batch = positive;
  p.negative_batch = negative;
  // (#positive, #negative) of each image in turn, as the per-image prepare stacks them.
  p.counts = at::stack({positive.sum(1), negative.sum(1)}, 1).view(-1);
  return p;
}

std::vector<at::Tensor> BalancedPositiveNegativeSampler::read_counts(
    const std::vector<const Pending*>& pending) {
  return CountsRead(pending).wait();
}

BalancedPositiveNegativeSampler::CountsRead::CountsRead(const std::vector<const Pending*>& pending) {
  std::vector<at::Tensor> parts;
  for (const Pending* p : pending) {
    TORCH_CHECK(p != nullptr, "BalancedPositiveNegativeSampler: no pending draw to read");
    sizes_.push_back(p->counts.defined() ? p->counts.numel() : 0);
    if (p->counts.defined()) parts.push_back(p->counts);
  }
  // The one read (none for batches of no image).
  if (!parts.empty()) read_ = HostRead(at::cat(parts));
}

std::vector<at::Tensor> BalancedPositiveNegativeSampler::CountsRead::wait() {
  const at::Tensor host = read_.wait();
  std::vector<at::Tensor> out;
  int64_t first = 0;
  for (const int64_t size : sizes_) {
    out.push_back(size > 0 ? host.slice(0, first, first + size)
                           : at::empty({0}, at::TensorOptions().dtype(at::kLong)));
    first += size;
  }
  return out;
}

namespace {

// One image's sizes: its candidates and how many of each the draw keeps.
struct Counts {
  int64_t positive = 0, negative = 0, take_positive = 0, take_negative = 0;
};
// One image's permutations, at least their kept prefixes (int64, on the generator's device).
struct Permutations {
  at::Tensor positive, negative;
};

at::Tensor host_tensor(const std::vector<int64_t>& values) {
  return at::tensor(c10::ArrayRef<int64_t>(values), at::TensorOptions().dtype(at::kLong));
}

// Whether the kept prefixes can be drawn on the host (randperm_prefix): CPU generators, sizes
// it covers, a LibTorch whose randperm it reproduces, and no MRCNN_SAMPLER_FULL_RANDPERM=1 (the
// full permutations, for A/B timings and audits of the two).
bool host_prefixes_apply(const std::vector<Counts>& sizes, const std::vector<at::Generator*>& generators) {
  static const bool full_randperm = [] {
    const char* v = std::getenv("MRCNN_SAMPLER_FULL_RANDPERM");
    return v != nullptr && std::string(v) == "1";
  }();
  return !full_randperm && randperm_prefix_matches_aten() &&
         std::all_of(generators.begin(), generators.end(),
                     [](const at::Generator* g) { return g->device().is_cpu(); }) &&
         std::all_of(sizes.begin(), sizes.end(), [](const Counts& c) {
           return std::max(c.positive, c.negative) <= kRandpermPrefixMaxN;
         });
}

// The kept prefixes of every image's permutations, randperm(#positive) then randperm(#negative)
// on the image's generator, images sharing a generator in image order: the same entries as
// randperm's, the generator left where randperm leaves it (randperm_prefix). Images of distinct
// generators are drawn in parallel: generators are independent, so the draws are the same for
// any thread count.
void host_prefixes(const std::vector<Counts>& sizes, const std::vector<at::Generator*>& generators,
                   std::vector<std::vector<int64_t>>& pos, std::vector<std::vector<int64_t>>& neg) {
  const size_t images = sizes.size();
  pos.assign(images, {});
  neg.assign(images, {});
  // Images grouped by generator, each group in image order.
  std::vector<std::vector<size_t>> groups;
  std::vector<const c10::GeneratorImpl*> owners;
  for (size_t i = 0; i < images; ++i) {
    const c10::GeneratorImpl* owner = generators[i]->unsafeGetGeneratorImpl();
    const auto it = std::find(owners.begin(), owners.end(), owner);
    if (it == owners.end()) {
      owners.push_back(owner);
      groups.push_back({i});
    } else {
      groups[static_cast<size_t>(it - owners.begin())].push_back(i);
    }
  }
  at::parallel_for(0, static_cast<int64_t>(groups.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const std::vector<size_t>& group = groups[static_cast<size_t>(g)];
      at::Generator& generator = *generators[group.front()];
      std::lock_guard<std::mutex> lock(generator.mutex());
      auto& impl = *at::check_generator<at::CPUGeneratorImpl>(generator);
      for (const size_t i : group) {
        pos[i] = randperm_prefix(sizes[i].positive, sizes[i].take_positive, impl);
        neg[i] = randperm_prefix(sizes[i].negative, sizes[i].take_negative, impl);
      }
    }
  });
}

// The permutations of every image (at least their kept prefixes), as tensors on the generators'
// devices: the host prefixes where they apply, else at::randperm.
std::vector<Permutations> draw_permutations(const std::vector<Counts>& sizes,
                                            const std::vector<at::Generator*>& generators) {
  const size_t images = sizes.size();
  std::vector<Permutations> out(images);
  if (!host_prefixes_apply(sizes, generators)) {
    for (size_t i = 0; i < images; ++i) {
      const auto opts = at::TensorOptions().dtype(at::kLong).device(generators[i]->device());
      // randperm takes the generator's mutex itself, one draw at a time.
      out[i].positive = at::randperm(sizes[i].positive, *generators[i], opts);
      out[i].negative = at::randperm(sizes[i].negative, *generators[i], opts);
    }
    return out;
  }
  std::vector<std::vector<int64_t>> pos, neg;
  host_prefixes(sizes, generators, pos, neg);
  for (size_t i = 0; i < images; ++i) out[i] = {host_tensor(pos[i]), host_tensor(neg[i])};
  return out;
}

// Each image's candidates and how many of each it keeps, from the pending draw's counts on the host.
std::vector<Counts> counts_of(const at::Tensor& host_counts, size_t images, int64_t batch_size_per_image,
                              double positive_fraction) {
  TORCH_CHECK(host_counts.is_cpu() && host_counts.scalar_type() == at::kLong &&
                  host_counts.dim() == 1 && host_counts.size(0) == static_cast<int64_t>(2 * images),
              "BalancedPositiveNegativeSampler: expected the ", 2 * images,
              " counts of the pending draw on the host, got ", host_counts.sizes(), " ",
              host_counts.scalar_type(), " on ", host_counts.device());
  const at::Tensor counts_contiguous = host_counts.contiguous();
  const int64_t* count = counts_contiguous.const_data_ptr<int64_t>();
  // int(batch_size_per_image * positive_fraction), as Python truncates.
  const int64_t max_pos = static_cast<int64_t>(static_cast<double>(batch_size_per_image) * positive_fraction);
  std::vector<Counts> sizes(images);
  for (size_t i = 0; i < images; ++i) {
    sizes[i].positive = count[2 * i];
    sizes[i].negative = count[2 * i + 1];
    sizes[i].take_positive = std::min(sizes[i].positive, max_pos);
    sizes[i].take_negative = std::min(sizes[i].negative, batch_size_per_image - sizes[i].take_positive);
  }
  return sizes;
}

void check_draw_arguments(size_t images, const std::vector<at::Generator*>& generators) {
  TORCH_CHECK(images == generators.size(), "BalancedPositiveNegativeSampler: ", images,
              " label sets but ", generators.size(), " generators");
  for (const at::Generator* g : generators)
    TORCH_CHECK(g != nullptr && g->defined(), "BalancedPositiveNegativeSampler: generator is undefined");
}

}  // namespace

BalancedPositiveNegativeSampler::BatchDraw BalancedPositiveNegativeSampler::draw_batch(
    const Pending& pending, const at::Tensor& host_counts, const std::vector<at::Generator*>& generators) const {
  const size_t images = pending.positive.size();
  check_draw_arguments(images, generators);
  BatchDraw out;
  if (images == 0) return out;
  const std::vector<Counts> sizes = counts_of(host_counts, images, batch_size_per_image_, positive_fraction_);
  if (!pending.positive_batch.defined() || !host_prefixes_apply(sizes, generators)) {
    // Image by image (a per-image pending draw, device generators, or the full permutations),
    // each image's indices past the label sets before it.
    const auto draws = draw(pending, host_counts, generators);
    std::vector<at::Tensor> pos, neg;
    int64_t offset = 0;
    for (size_t i = 0; i < images; ++i) {
      pos.push_back(draws[i].first + offset);
      neg.push_back(draws[i].second + offset);
      out.num_positive.push_back(draws[i].first.size(0));
      out.num_negative.push_back(draws[i].second.size(0));
      offset += pending.positive[i].size(0);
    }
    out.positive = at::cat(pos);
    out.negative = at::cat(neg);
    return out;
  }
  std::vector<std::vector<int64_t>> pos, neg;
  host_prefixes(sizes, generators, pos, neg);
  // Rows of the batch's candidates, image after image (nonzero of the flattened masks), and the
  // drawn ones among them: each image's permutation entries past its first candidate's row.
  auto pick = [&](const at::Tensor& mask, const std::vector<std::vector<int64_t>>& perm, bool positive,
                  std::vector<int64_t>& drawn) {
    int64_t total = 0;
    std::vector<int64_t> chosen;
    for (size_t i = 0; i < images; ++i) {
      for (const int64_t v : perm[i]) chosen.push_back(total + v);
      drawn.push_back(static_cast<int64_t>(perm[i].size()));
      total += positive ? sizes[i].positive : sizes[i].negative;
    }
    const at::Tensor rows = at::nonzero_static(mask.reshape(-1), total).view(-1);
    const at::Tensor picked = rows.index_select(0, copy_to_device_async(host_tensor(chosen), mask.device()));
    // Distinct rows, each image's above the previous image's: sorted, each image's draw in order.
    return std::get<0>(picked.sort());
  };
  out.positive = pick(pending.positive_batch, pos, true, out.num_positive);
  out.negative = pick(pending.negative_batch, neg, false, out.num_negative);
  return out;
}

std::vector<std::pair<at::Tensor, at::Tensor>> BalancedPositiveNegativeSampler::draw(
    const Pending& pending, const at::Tensor& host_counts,
    const std::vector<at::Generator*>& generators) const {
  const size_t images = pending.positive.size();
  check_draw_arguments(images, generators);
  if (images == 0) return {};
  const std::vector<Counts> sizes = counts_of(host_counts, images, batch_size_per_image_, positive_fraction_);
  const std::vector<Permutations> perms = draw_permutations(sizes, generators);
  std::vector<std::pair<at::Tensor, at::Tensor>> result;
  for (size_t i = 0; i < images; ++i) {
    const Counts& c = sizes[i];
    // nonzero with its size known: the same increasing indices, without reading the device.
    const at::Tensor positive = at::nonzero_static(pending.positive[i], c.positive).view(-1);
    const at::Tensor negative = at::nonzero_static(pending.negative[i], c.negative).view(-1);
    // A host generator's draws go to a GPU through pinned memory: a plain copy would wait for it.
    const c10::Device device = pending.positive[i].device();
    auto to_labels = [&](const at::Tensor& perm) {
      return perm.is_cpu() ? copy_to_device_async(perm, device) : perm.to(device);
    };
    const at::Tensor pos_idx = positive.index_select(0, to_labels(perms[i].positive.slice(0, 0, c.take_positive)));
    const at::Tensor neg_idx = negative.index_select(0, to_labels(perms[i].negative.slice(0, 0, c.take_negative)));
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
