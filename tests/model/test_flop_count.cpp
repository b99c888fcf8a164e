// FlopCounter: exact counts for known layers (convolution forward and backward with and without
// the input / weight gradient, transposed convolution, linear layers, batched products), the
// attribution of backward work to the stage whose forward made it (custom autograd functions
// included) and the distinct shapes it lists.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <stdexcept>

#include "model/flop_count.h"

namespace mrcnn::model {
namespace {

double cell_flops(const FlopCounter& c, const std::string& stage, const std::string& phase) {
  const auto cells = c.cells();
  const auto it = cells.find({stage, phase});
  return it == cells.end() ? 0.0 : it->second.flops;
}

// conv with weight * 2, the way the backbone's folded convolution computes: a custom function
// whose node is numbered before its forward's operators run.
struct ScaledConv : public torch::autograd::Function<ScaledConv> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    return at::conv2d(x, w * 2, {}, {1, 1}, {1, 1});
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [gx, gw, gb] = at::convolution_backward(grads[0], saved[0], saved[1] * 2, std::nullopt, {1, 1}, {1, 1},
                                                 {1, 1}, false, {0, 0}, 1,
                                                 {ctx->needs_input_grad(0), ctx->needs_input_grad(1), false});
    return {gx, gw.defined() ? gw * 2 : at::Tensor()};
  }
};

TEST(FlopCount, ConvolutionAndLinearForwardAndBackwardByStage) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({2, 3, 10, 12});                        // no gradient: first layer
  const at::Tensor w1 = at::randn({8, 3, 3, 3}).requires_grad_(true);    // 3x3, stride 2, pad 1
  const at::Tensor w2 = at::randn({8, 8, 1, 1}).requires_grad_(false);   // frozen 1x1
  const at::Tensor w3 = at::randn({8, 4, 2, 2}).requires_grad_(true);    // transposed 2x2/2
  const at::Tensor lw = at::randn({5, 4 * 10 * 12}).requires_grad_(true);
  const at::Tensor lb = at::zeros({5}).requires_grad_(true);
  FlopCounter counter;
  counter.start();
  at::Tensor loss;
  {
    RECORD_FUNCTION("mrcnn::forward", std::vector<c10::IValue>());
    at::Tensor y;
    {
      RECORD_FUNCTION("mrcnn::backbone", std::vector<c10::IValue>());
      y = at::conv2d(x, w1, {}, {2, 2}, {1, 1}).relu();  // [2, 8, 5, 6]
      y = at::conv2d(y, w2);                             // [2, 8, 5, 6]
    }
    {
      RECORD_FUNCTION("mrcnn::roi_box", std::vector<c10::IValue>());
      y = at::conv_transpose2d(y, w3, {}, {2, 2});  // [2, 4, 10, 12]
      y = at::linear(y.flatten(1), lw, lb);         // [2, 5]
    }
    loss = y.sum();
  }
  {
    RECORD_FUNCTION("mrcnn::backward", std::vector<c10::IValue>());
    loss.backward();
  }
  counter.stop();

  const double conv1 = 2.0 * 2 * 8 * 3 * 3 * 3 * 5 * 6;   // N Cout Cin kh kw Hout Wout
  const double conv2 = 2.0 * 2 * 8 * 8 * 5 * 6;
  const double deconv = 2.0 * 2 * 8 * 4 * 2 * 2 * 5 * 6;  // over the input's 5 x 6
  const double linear = 2.0 * 2 * 480 * 5;
  EXPECT_DOUBLE_EQ(cell_flops(counter, "backbone", "forward"), conv1 + conv2);
  EXPECT_DOUBLE_EQ(cell_flops(counter, "roi_box", "forward"), deconv + linear);
  // conv1: weight gradient only (x needs none); conv2 frozen: input gradient only.
  EXPECT_DOUBLE_EQ(cell_flops(counter, "backbone", "backward"), conv1 + conv2);
  // deconv: both gradients; linear: input and weight gradients (two mm).
  EXPECT_DOUBLE_EQ(cell_flops(counter, "roi_box", "backward"), 2 * deconv + 2 * linear);
  EXPECT_DOUBLE_EQ(counter.total_flops(), 2 * (conv1 + conv2) + 3 * deconv + 3 * linear);
  const auto cells = counter.cells();
  EXPECT_GT(cells.at({"backbone", "forward"}).seconds, 0.0);
  EXPECT_GT(cells.at({"roi_box", "backward"}).seconds, 0.0);

  // The distinct forward shapes, most FLOPs first; the linear layer as an addmm M x K x N.
  const auto shapes = counter.shapes();
  ASSERT_EQ(shapes.size(), 4u);
  EXPECT_EQ(shapes[0].describe(), "conv 3x3/2 [2,3,10,12] -> 8 (NCHW)");
  EXPECT_DOUBLE_EQ(shapes[0].flops, conv1);
  EXPECT_EQ(shapes[0].stage, "backbone");
  EXPECT_EQ(shapes[1].describe(), "deconv 2x2/2 [2,8,5,6] -> 4 (NCHW)");
  EXPECT_EQ(shapes[2].describe(), "mm 2x480x5 (MxKxN)");
  EXPECT_EQ(shapes[2].stage, "roi_box");
  EXPECT_EQ(shapes[3].describe(), "conv 1x1/1 [2,8,5,6] -> 8 (NCHW)");
}

TEST(FlopCount, CustomFunctionBackwardGoesToItsStage) {
  const at::Tensor x = at::randn({1, 4, 6, 6}).requires_grad_(true);
  const at::Tensor w = at::randn({4, 4, 3, 3}).requires_grad_(true);
  const at::Tensor v = at::randn({4, 4, 3, 3}).requires_grad_(true);
  FlopCounter counter;
  counter.start();
  at::Tensor loss;
  {
    RECORD_FUNCTION("mrcnn::forward", std::vector<c10::IValue>());
    at::Tensor y;
    {
      RECORD_FUNCTION("mrcnn::backbone", std::vector<c10::IValue>());
      y = at::conv2d(x, v, {}, {1, 1}, {1, 1});
    }
    {
      RECORD_FUNCTION("mrcnn::fpn", std::vector<c10::IValue>());
      y = ScaledConv::apply(y, w);
    }
    loss = y.square().sum();
  }
  {
    RECORD_FUNCTION("mrcnn::backward", std::vector<c10::IValue>());
    loss.backward();
  }
  counter.stop();
  const double conv = 2.0 * 1 * 4 * 4 * 3 * 3 * 6 * 6;
  EXPECT_DOUBLE_EQ(cell_flops(counter, "backbone", "forward"), conv);
  EXPECT_DOUBLE_EQ(cell_flops(counter, "fpn", "forward"), conv);
  EXPECT_DOUBLE_EQ(cell_flops(counter, "fpn", "backward"), 2 * conv);
  EXPECT_DOUBLE_EQ(cell_flops(counter, "backbone", "backward"), 2 * conv);
  EXPECT_DOUBLE_EQ(cell_flops(counter, "other", "backward"), 0.0);
}

TEST(FlopCount, BatchedProductsAndNothingOutsideTheCounter) {
  const at::Tensor a = at::randn({3, 4, 5}), b = at::randn({3, 5, 6});
  at::bmm(a, b);  // before start: not counted
  FlopCounter counter;
  counter.start();
  {
    RECORD_FUNCTION("mrcnn::forward", std::vector<c10::IValue>());
    {
      RECORD_FUNCTION("mrcnn::rpn_loss", std::vector<c10::IValue>());
      at::bmm(a, b);
      at::baddbmm(at::zeros({3, 4, 6}), a, b);
      at::add(a, a);  // element-wise: not counted
    }
  }
  counter.stop();
  at::bmm(a, b);  // after stop: not counted
  EXPECT_DOUBLE_EQ(cell_flops(counter, "rpn", "forward"), 2 * (2.0 * 3 * 4 * 5 * 6));
  EXPECT_DOUBLE_EQ(counter.total_flops(), 2 * (2.0 * 3 * 4 * 5 * 6));
  EXPECT_EQ(counter.cells().at({"rpn", "forward"}).ops, 2);
}

TEST(FlopCount, OneCounterAtATime) {
  FlopCounter a, b;
  a.start();
  EXPECT_THROW(b.start(), std::logic_error);
  a.stop();
  b.start();
  b.stop();
}

}  // namespace
}  // namespace mrcnn::model
