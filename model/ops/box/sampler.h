// Balanced positive/negative sampling of the training examples of one image (torchvision's
// BalancedPositiveNegativeSampler), driven by a caller-owned seeded generator.
//
// The draw, so that a test can reproduce torchvision's selection exactly:
//   positive = indices with labels >= 1 (increasing), negative = indices with labels == 0;
//   num_pos = min(#positive, int(batch_size_per_image * positive_fraction));
//   num_neg = min(#negative, batch_size_per_image - num_pos);
//   perm_pos = randperm(#positive, generator)[:num_pos]; then
//   perm_neg = randperm(#negative, generator)[:num_neg]   (in that order, always both, even
//   when a count is 0), each drawn on the generator's device;
//   the masks mark positive[perm_pos] and negative[perm_neg].
// With a CPU generator and CPU labels this is torchvision's sampler with torch.randperm drawing
// from that generator (torchvision draws from the default generator of the labels' device).
// On CPU generators only the used prefix of each permutation is generated (randperm_prefix.h: the
// same entries, the generator left as randperm leaves it), and images with distinct generators
// are drawn in parallel on the intra-op threads: at 800x1344 the RPN's draw of 8 images takes a
// fraction of a millisecond where 8 full permutations of ~260,000 negatives took tens.
// MRCNN_SAMPLER_FULL_RANDPERM=1 in the environment draws the full permutations instead (read
// once per process): the same samples, for A/B timings and audits.
//
// Thread-safety: the sampler is immutable, but the generator is mutated. Each draw takes the
// generator's mutex, so sharing one is memory-safe, but concurrent callers interleave their
// draws: give each thread its own generator for reproducible selections.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "model/ops/host_copy.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace mrcnn::ops {

class BalancedPositiveNegativeSampler {
 public:
  // Throws std::invalid_argument unless batch_size_per_image >= 0 and 0 <= fraction <= 1.
  BalancedPositiveNegativeSampler(int64_t batch_size_per_image, double positive_fraction);

  // labels: integer [P]: >= 1 positive (a class label or 1), 0 negative, < 0 ignored.
  // Returns (positive mask, negative mask), bool [P] on the labels' device.
  std::pair<at::Tensor, at::Tensor> operator()(const at::Tensor& labels,
                                               at::Generator& generator) const;

  // The same draw as indices: (positive, negative) int64, each in increasing order, on the
  // labels' device -- exactly masks.nonzero() of operator()'s masks, without the read of their
  // count that nonzero makes on a GPU.
  std::pair<at::Tensor, at::Tensor> indices(const at::Tensor& labels, at::Generator& generator) const;

  // The draws of a batch of images, image after image, each on its generator (one generator may
  // serve several images: it then draws for them in image order). result[i] equals
  // indices(labels[i], *generators[i]) for each i in turn. The host draw needs each image's
  // positive and negative counts: on a GPU they are read in one copy for the whole batch, where
  // a nonzero per set would read the device twice per image.
  std::vector<std::pair<at::Tensor, at::Tensor>> indices(
      const std::vector<at::Tensor>& labels, const std::vector<at::Generator*>& generators) const;

  // That batch draw in two halves, so that the counts of several samplers (the RPN's and the RoI
  // head's) are read in one copy: prepare() marks and counts on the labels' device without
  // reading it; draw() draws from the counts once they are on the host. indices(labels, g) is
  // draw(prepare(labels), read_counts({&p}).front(), g).
  struct Pending {
    std::vector<at::Tensor> positive, negative;  // bool masks [P_i], one per image
    at::Tensor counts;  // int64 [2 * images] on the labels' device: (#positive, #negative) each
    at::Tensor positive_batch, negative_batch;  // prepare_batch's masks [N, P] (their rows above)
  };
  Pending prepare(const std::vector<at::Tensor>& labels) const;
  // The same for a batch whose label sets are the rows of one int64 [N, P] tensor (each image's
  // padding labelled -1): the counts in one reduction per set instead of two per image.
  Pending prepare_batch(const at::Tensor& labels) const;
  // host_counts: `pending.counts` on the CPU.
  std::vector<std::pair<at::Tensor, at::Tensor>> draw(
      const Pending& pending, const at::Tensor& host_counts,
      const std::vector<at::Generator*>& generators) const;
  // The draw of a batch as rows of the batch: image * P + candidate, every image's draw in one
  // tensor, image after image, increasing within each image -- draw()'s indices with the image's
  // offset added, concatenated, in the same draws from the same generators. With prepare_batch's
  // pending draw on CPU generators (the harness's), the batch's candidates are found, picked and
  // sorted in one operator each instead of one per image.
  struct BatchDraw {
    at::Tensor positive, negative;  // int64, on the labels' device
    std::vector<int64_t> num_positive, num_negative;  // drawn per image
  };
  BatchDraw draw_batch(const Pending& pending, const at::Tensor& host_counts,
                       const std::vector<at::Generator*>& generators) const;
  // The counts of each pending draw on the host, read in one copy (one blocking read on a GPU).
  static std::vector<at::Tensor> read_counts(const std::vector<const Pending*>& pending);
  // That read in two halves: queued now (on a GPU without blocking), waited for when the draw
  // needs it, so that the host queues other work meanwhile. wait() gives read_counts' result.
  class CountsRead {
   public:
    explicit CountsRead(const std::vector<const Pending*>& pending);
    std::vector<at::Tensor> wait();

   private:
    HostRead read_;
    std::vector<int64_t> sizes_;
  };

  int64_t batch_size_per_image() const { return batch_size_per_image_; }
  double positive_fraction() const { return positive_fraction_; }

 private:
  int64_t batch_size_per_image_;
  double positive_fraction_;
};

}  // namespace mrcnn::ops
