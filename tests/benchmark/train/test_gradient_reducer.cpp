#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdlib>
#include <vector>

#include <torch/csrc/autograd/autograd.h>

#include "benchmark/train/gradient_reducer.h"
#include "tests/benchmark/twin_ranks.h"

namespace mrcnn::train {
namespace {

using mrcnn::testing::TwinRanks;

// A small network of three layers, the middle one unused by the loss (its gradient never
// arrives); one parameter channels-last, as the convolutions of the real model.
struct Net {
  at::Tensor w1 = at::randn({64, 32}).set_requires_grad(true);
  at::Tensor unused = at::randn({16}).set_requires_grad(true);
  at::Tensor conv = at::randn({8, 4, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast).set_requires_grad(true);
  at::Tensor w2 = at::randn({32, 8}).set_requires_grad(true);
  std::vector<at::Tensor> params() const { return {w1, unused, conv, w2}; }
  at::Tensor loss(const at::Tensor& x) const {
    return (x.mm(w1).mm(w2)).pow(2).mean() + conv.pow(3).sum();
  }
};

std::vector<at::Tensor> plain_gradients(const Net& net, const at::Tensor& x) {
  for (auto p : net.params()) p.mutable_grad() = at::Tensor();
  net.loss(x).backward();
  std::vector<at::Tensor> g;
  for (const auto& p : net.params()) g.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  return g;
}

void run_reducer(bool overlap) {
  at::manual_seed(3);
  Net net;
  const at::Tensor x = at::randn({5, 64});
  const auto expected = plain_gradients(net, x);
  TwinRanks comm;
  comm.overlap = overlap;
  // Buckets of 8 KiB, in reverse order: w2 (1 KiB), conv (1.1 KiB) and unused share the first,
  // w1 (8 KiB) has its own.
  GradientReducer reducer(net.params(), comm, /*overlap=*/true, 8 << 10);
  EXPECT_EQ(reducer.bucket_count(), 2);
  for (int step = 0; step < 2; ++step) {  // twice: the reducer starts each step afresh
    for (auto p : net.params()) p.mutable_grad() = at::Tensor();
    comm.starts.clear();
    reducer.prepare();
    comm.in_backward = true;
    net.loss(x).backward();
    comm.in_backward = false;
    reducer.finish();
    // The mean over two identical ranks is this rank's gradient, bit for bit; the unused
    // parameter gets zeros; the channels-last gradient keeps its layout.
    const auto params = net.params();
    for (size_t k = 0; k < params.size(); ++k) {
      ASSERT_TRUE(params[k].grad().defined()) << k;
      EXPECT_TRUE(at::equal(params[k].grad(), expected[k])) << "parameter " << k << " step " << step;
    }
    EXPECT_TRUE(at::equal(net.unused.grad(), at::zeros_like(net.unused)));
    EXPECT_TRUE(net.conv.grad().is_contiguous(at::MemoryFormat::ChannelsLast));
    // Buckets start in order, last layers first; with overlap the first starts inside backward.
    ASSERT_EQ(comm.starts.size(), 2u);
    EXPECT_EQ(comm.starts[0].numel, 32 * 8 + 8 * 4 * 3 * 3 + 16);
    EXPECT_EQ(comm.starts[1].numel, 64 * 32);
    EXPECT_EQ(comm.starts[0].during_backward, false);  // it holds the unused parameter: finish() starts it
    EXPECT_EQ(comm.starts[1].during_backward, false);  // and w1's waits for it, in order
  }
}

TEST(GradientReducer, OverlappedMeanEqualsTheGradientsAndStartsInOrder) { run_reducer(true); }
TEST(GradientReducer, AfterBackwardGivesTheSameGradients) { run_reducer(false); }

TEST(GradientReducer, ABucketCompleteDuringBackwardStartsThere) {
  at::manual_seed(4);
  Net net;
  const at::Tensor x = at::randn({5, 64});
  const auto expected = plain_gradients(net, x);
  TwinRanks comm;
  // Tiny buckets: one per parameter, in reverse order: w2, conv, unused, w1.
  GradientReducer reducer(net.params(), comm, /*overlap=*/true, 1);
  EXPECT_EQ(reducer.bucket_count(), 4);
  for (auto p : net.params()) p.mutable_grad() = at::Tensor();
  // Gradients computed outside the step's backward pass (as CUDA graphs' warm-ups and captures
  // do with autograd::grad, during the forward pass) reach the hooks but are not the step's: they
  // start no sum, and the step's own gradients arrive once each.
  auto outside = [&] { torch::autograd::grad({net.loss(x)}, {net.w1, net.conv, net.w2}); };
  outside();
  reducer.prepare();
  comm.in_backward = true;
  net.loss(x).backward();
  comm.in_backward = false;
  reducer.finish();
  outside();
  ASSERT_EQ(comm.starts.size(), 4u);
  EXPECT_TRUE(comm.starts[0].during_backward);   // w2
  EXPECT_TRUE(comm.starts[1].during_backward);   // conv
  EXPECT_FALSE(comm.starts[2].during_backward);  // unused: only finish() knows it gets nothing
  EXPECT_FALSE(comm.starts[3].during_backward);  // w1 waits for it
  EXPECT_GT(comm.progress_calls, 0);
  const auto params = net.params();
  for (size_t k = 0; k < params.size(); ++k) EXPECT_TRUE(at::equal(params[k].grad(), expected[k])) << k;
}

}  // namespace
}  // namespace mrcnn::train
