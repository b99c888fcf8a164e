// Which samples go into which batch, on which rank, in which epoch.
//
// One epoch, computed identically on every rank from (seed, epoch) and then sliced by rank:
//   1. all dataset indices in a seeded random order (identity order when shuffle is off);
//   2. walking that order, each index joins the open "global batch" of its aspect group
//      (landscape h < w, or not: the reference's aspect-ratio grouping with bins [1]); a global
//      batch of batch_size * world_size indices is emitted as soon as it is full, so the epoch
//      interleaves the groups as the shuffle dictates;
//   3. the groups' last, partial global batches come at the end (group 0 first), and are kept,
//      dropped or padded (LastBatch);
//   4. rank r takes elements r, r + world_size, r + 2 world_size, ... of each global batch: every
//      batch of every rank holds a single aspect group, and each step of data-parallel training
//      sees batch_size * world_size distinct images.
// The epoch's order is therefore a pure function of (seed, epoch, rank, world_size, the aspect
// groups, the options). With LastBatch::kKeep the ranks together cover the epoch exactly once;
// then a rank whose share of a partial global batch is empty has one batch fewer than rank 0.
// kDrop and kPad give every rank the same number of full batches (kPad repeats the first indices
// of the group's order in this epoch to fill the last global batch).
//
// Thread-safety: immutable after construction; epoch() may be called from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "benchmark/data/transforms.h"

namespace mrcnn::data {

enum class LastBatch {
  kKeep,  // partial batches as they are (evaluation: every image exactly once)
  kDrop,  // partial global batches dropped
  kPad,   // partial global batches filled with repeated indices (training: equal, full steps)
};

struct SamplerOptions {
  int64_t batch_size = 2;              // images per rank per step, >= 1
  bool shuffle = true;                 // seeded shuffle per epoch (training); off for evaluation
  bool group_by_aspect_ratio = true;   // landscape and portrait images never share a batch
  LastBatch last_batch = LastBatch::kKeep;
};

// 0 for landscape (h < w), 1 for portrait or square: bisect_right([1], h / w).
int aspect_group(ImageSize size);

class BatchSampler {
 public:
  // `groups[i]` is sample i's aspect group (aspect_group of its source size; ignored when
  // grouping is off). Throws std::invalid_argument on bad options, rank or world size.
  BatchSampler(std::vector<int> groups, SamplerOptions options, int rank = 0, int world_size = 1);

  // The batches of `epoch` for this rank, each a list of dataset indices.
  std::vector<std::vector<int64_t>> epoch(uint64_t seed, int64_t epoch) const;

  // How many batches epoch() returns (the same for every epoch).
  int64_t batches_per_epoch() const;

  int64_t dataset_size() const { return static_cast<int64_t>(groups_.size()); }
  const SamplerOptions& options() const { return options_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  std::vector<int> groups_;  // per sample, 0 or 1 (all 0 without grouping)
  SamplerOptions options_;
  int rank_;
  int world_size_;
};

}  // namespace mrcnn::data
