// randperm_prefix against LibTorch's at::randperm: the same first k entries and the generator left
// in the same state, so that every later draw is unchanged. The sizes are the sampler's: a full
// 800x1344 image's 268,569 anchors among them.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/ops/box/randperm_prefix.h"

namespace {

using mrcnn::ops::randperm_prefix;

at::CPUGeneratorImpl& impl(at::Generator& g) { return *at::check_generator<at::CPUGeneratorImpl>(g); }

std::vector<int64_t> prefix_of(int64_t n, int64_t k, at::Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return randperm_prefix(n, k, impl(g));
}

TEST(RandpermPrefix, IsAtenRandpermsPrefixAndLeavesTheGeneratorWhereItDoes) {
  for (const int64_t n : {0, 1, 2, 17, 623, 624, 625, 1249, 100000, 268569}) {
    for (const int64_t k : {int64_t{0}, int64_t{1}, int64_t{128}, int64_t{256}, n - 1, n, n + 3}) {
      if (k < 0) continue;
      SCOPED_TRACE("n " + std::to_string(n) + ", k " + std::to_string(k));
      at::Generator mine = at::make_generator<at::CPUGeneratorImpl>(uint64_t{42} + static_cast<uint64_t>(n));
      at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(uint64_t{42} + static_cast<uint64_t>(n));
      // Start mid-block: a shuffle need not begin where the words were regenerated.
      for (int i = 0; i < 301; ++i) {
        impl(mine).random();
        impl(theirs).random();
      }
      const std::vector<int64_t> prefix = prefix_of(n, k, mine);
      const at::Tensor full = at::randperm(n, theirs, at::TensorOptions().dtype(at::kLong));
      ASSERT_EQ(static_cast<int64_t>(prefix.size()), std::min(k, n));
      const at::Tensor expected = full.slice(0, 0, std::min(k, n));
      EXPECT_TRUE(at::equal(at::tensor(c10::ArrayRef<int64_t>(prefix), at::kLong), expected));
      // The next draws of both generators agree: word for word, and through another randperm.
      for (int i = 0; i < 700; ++i) ASSERT_EQ(impl(mine).random(), impl(theirs).random()) << "word " << i;
      EXPECT_TRUE(at::equal(at::randperm(1000, mine, at::kLong), at::randperm(1000, theirs, at::kLong)));
    }
  }
}

// Two images drawn one after the other on one generator, as the sampler draws a shared stream.
TEST(RandpermPrefix, ConsecutiveDrawsOnOneGeneratorMatchConsecutiveRandperms) {
  at::Generator mine = at::make_generator<at::CPUGeneratorImpl>(7);
  at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(7);
  const std::vector<std::pair<int64_t, int64_t>> draws = {{12, 12}, {268000, 244}, {3, 0}, {0, 0}, {5000, 256}};
  for (const auto& [n, k] : draws) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<int64_t> prefix = prefix_of(n, k, mine);
    const at::Tensor full = at::randperm(n, theirs, at::TensorOptions().dtype(at::kLong));
    EXPECT_TRUE(at::equal(at::tensor(c10::ArrayRef<int64_t>(prefix), at::kLong), full.slice(0, 0, k)));
  }
  EXPECT_EQ(impl(mine).random(), impl(theirs).random());
}

TEST(RandpermPrefix, TheProbeAgreesWithThisLibTorchAndBadSizesAreRefused) {
  // The sampler falls back to at::randperm where the probe disagrees; with the pinned LibTorch it
  // must agree, or the speed-up is silently lost.
  EXPECT_TRUE(mrcnn::ops::randperm_prefix_matches_aten());
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_THROW(prefix_of(-1, 0, g), std::invalid_argument);
  EXPECT_THROW(prefix_of(5, -1, g), std::invalid_argument);
  EXPECT_THROW(prefix_of(mrcnn::ops::kRandpermPrefixMaxN + 1, 1, g), std::invalid_argument);
}

}  // namespace
