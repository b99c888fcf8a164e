#include "benchmark/data/sampler.h"

#include <numeric>
#include <stdexcept>
#include <string>

#include "benchmark/data/rng.h"

namespace mrcnn::data {

namespace {
constexpr int kNumGroups = 2;
}

int aspect_group(ImageSize size) {
  // The reference quantizes h / w with bins [1] by bisect_right: h / w >= 1 -> group 1.
  return size.height >= size.width ? 1 : 0;
}

BatchSampler::BatchSampler(std::vector<int> groups, SamplerOptions options, int rank, int world_size)
    : groups_(std::move(groups)), options_(options), rank_(rank), world_size_(world_size) {
  if (options_.batch_size < 1)
    throw std::invalid_argument("BatchSampler: batch_size must be >= 1, got " +
                                std::to_string(options_.batch_size));
  if (world_size_ < 1)
    throw std::invalid_argument("BatchSampler: world_size must be >= 1, got " + std::to_string(world_size_));
  if (rank_ < 0 || rank_ >= world_size_)
    throw std::invalid_argument("BatchSampler: rank " + std::to_string(rank_) +
                                " outside [0, " + std::to_string(world_size_) + ")");
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i] < 0 || groups_[i] >= kNumGroups)
      throw std::invalid_argument("BatchSampler: aspect group of sample " + std::to_string(i) +
                                  " must be 0 or 1, got " + std::to_string(groups_[i]));
    if (!options_.group_by_aspect_ratio) groups_[i] = 0;
  }
}

std::vector<std::vector<int64_t>> BatchSampler::epoch(uint64_t seed, int64_t epoch) const {
  const int64_t n = dataset_size();
  const int64_t global = options_.batch_size * world_size_;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) {
    Rng rng(seeding::epoch_order_seed(seed, epoch));
    rng.shuffle(order.begin(), order.end());
  }

  std::vector<std::vector<int64_t>> globals;
  std::vector<int64_t> open[kNumGroups];
  for (int64_t idx : order) {
    std::vector<int64_t>& g = open[groups_[static_cast<size_t>(idx)]];
    g.push_back(idx);
    if (static_cast<int64_t>(g.size()) == global) {
      globals.push_back(std::move(g));
      g.clear();
    }
  }
  for (int gi = 0; gi < kNumGroups; ++gi) {
    std::vector<int64_t>& g = open[gi];
    if (g.empty() || options_.last_batch == LastBatch::kDrop) continue;
    if (options_.last_batch == LastBatch::kPad) {
      // Fill with the group's first indices of this epoch's order, cyclically.
      std::vector<int64_t> members;
      for (int64_t idx : order)
        if (groups_[static_cast<size_t>(idx)] == gi) members.push_back(idx);
      for (size_t k = 0; static_cast<int64_t>(g.size()) < global; ++k)
        g.push_back(members[k % members.size()]);
    }
    globals.push_back(std::move(g));
  }

  std::vector<std::vector<int64_t>> mine;
  mine.reserve(globals.size());
  for (const auto& gb : globals) {
    std::vector<int64_t> b;
    for (size_t p = static_cast<size_t>(rank_); p < gb.size(); p += static_cast<size_t>(world_size_))
      b.push_back(gb[p]);
    if (!b.empty()) mine.push_back(std::move(b));
  }
  return mine;
}

int64_t BatchSampler::batches_per_epoch() const {
  const int64_t global = options_.batch_size * world_size_;
  int64_t count[kNumGroups] = {0, 0};
  for (int g : groups_) ++count[g];
  int64_t batches = 0;
  for (int64_t c : count) {
    batches += c / global;
    const int64_t rest = c % global;
    if (rest == 0) continue;
    if (options_.last_batch == LastBatch::kPad) ++batches;
    if (options_.last_batch == LastBatch::kKeep && rest > rank_) ++batches;
  }
  return batches;
}

}  // namespace mrcnn::data
