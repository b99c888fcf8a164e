// Head layers: the mask predictor's per-label logits equal the full convolution's, gradients
// included; the folded frozen-norm convolution's own backward equals autograd's.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/backbone/conv_norm.h"
#include "model/mask_head.h"

namespace mrcnn::model {
namespace {

TEST(MaskPredictor, PerLabelLogitsEqualTheFullConvolution) {
  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last);
    MaskPredictor a(6, 5), b(6, 5);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
    a->init_weights(gen);
    {
      torch::NoGradGuard g;
      a->mask_fcn_logits->bias.normal_();
      for (auto& p : b->named_parameters()) p.value().copy_(a->named_parameters()[p.key()]);
    }
    at::Tensor x = at::randn({7, 6, 4, 4});
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor labels = at::tensor({0, 4, 2, 2, 1, 3, 4}, at::kLong);
    const at::Tensor got = a->forward(x, labels);
    const at::Tensor all = b->forward_all(x);
    const at::Tensor expected = all.index({at::arange(7), labels});
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{7, 8, 8}));
    EXPECT_TRUE(at::allclose(got, expected, 1e-5, 1e-5));
    (got * got).sum().backward();
    (expected * expected).sum().backward();
    for (const auto& p : a->named_parameters())
      EXPECT_TRUE(at::allclose(p.value().grad(), b->named_parameters()[p.key()].grad(), 1e-4, 1e-5))
          << p.key();
    // Classes no RoI has get zero gradients, as with the full convolution.
  }
}

TEST(FoldedConvolution, BackwardEqualsAutogradThroughTheFold) {
  at::manual_seed(3);
  ConvNorm conv(4, 6, 3, 2, NormKind::kFrozenBatchNorm, 0);
  {
    torch::NoGradGuard g;
    conv->weight.normal_();
    conv->frozen_norm->scale.uniform_(0.5, 2.0);
    conv->frozen_norm->bias.normal_();
  }
  const at::Tensor x = at::randn({2, 4, 9, 10}).requires_grad_();
  const at::Tensor upstream = at::randn({2, 6, 5, 5});
  const at::Tensor y = conv->forward(x);
  (y * upstream).sum().backward();
  const at::Tensor gx = x.grad().clone(), gw = conv->weight.grad().clone();

  // The same function through plain autograd.
  const at::Tensor x2 = x.detach().clone().requires_grad_();
  const at::Tensor w2 = conv->weight.detach().clone().requires_grad_();
  const at::Tensor y2 = at::conv2d(x2, w2 * conv->frozen_norm->scale.view({-1, 1, 1, 1}),
                                   conv->frozen_norm->bias, {2, 2}, {1, 1});
  (y2 * upstream).sum().backward();
  EXPECT_TRUE(at::allclose(y, y2, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(gx, x2.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(gw, w2.grad(), 1e-4, 1e-5));
  EXPECT_FALSE(conv->frozen_norm->scale.requires_grad());
}

}  // namespace
}  // namespace mrcnn::model
