// ResNet body, frozen batch norm folding, FPN: shapes, names, freezing, equivalences.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/backbone/conv_norm.h"
#include "model/backbone/fpn.h"
#include "model/backbone/resnet.h"

namespace mrcnn::model {
namespace {

TEST(FrozenBatchNorm, FoldedConvolutionEqualsConvolutionThenAffine) {
  at::manual_seed(1);
  ConvNorm conv(5, 7, 3, 2, NormKind::kFrozenBatchNorm, 0);
  {
    torch::NoGradGuard g;
    conv->weight.normal_();
    conv->frozen_norm->scale.uniform_(0.5, 2.0);
    conv->frozen_norm->bias.normal_();
  }
  const at::Tensor x = at::randn({2, 5, 9, 11});
  const at::Tensor expected =
      conv->frozen_norm->forward(at::conv2d(x, conv->weight, {}, {2, 2}, {1, 1}));
  const at::Tensor got = conv->forward(x);
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_TRUE(at::allclose(got, expected, 1e-5, 1e-5));

  // Scale and bias are buffers (saved, never trained); the weight is a parameter.
  EXPECT_EQ(conv->named_buffers().size(), 2u);
  EXPECT_TRUE(conv->named_buffers().contains("norm.scale"));
  EXPECT_TRUE(conv->named_parameters().contains("weight"));
  EXPECT_EQ(conv->named_parameters().size(), 1u);
}

TEST(FrozenBatchNorm, GradientReachesATrainableWeightThroughTheFold) {
  at::manual_seed(2);
  ConvNorm conv(3, 4, 1, 1, NormKind::kFrozenBatchNorm, 0);
  {
    torch::NoGradGuard g;
    conv->weight.normal_();
    conv->frozen_norm->scale.fill_(2.0);
  }
  conv->forward(at::ones({1, 3, 2, 2})).sum().backward();
  ASSERT_TRUE(conv->weight.grad().defined());
  // d/dw of sum(conv(1, 2w)) = 2 * (number of output pixels) for every weight.
  EXPECT_TRUE(at::allclose(conv->weight.grad(), at::full({4, 3, 1, 1}, 8.0)));
}

TEST(GroupNormConv, TrainableAndChecked) {
  ConvNorm conv(4, 8, 3, 1, NormKind::kGroupNorm, 4);
  EXPECT_TRUE(conv->named_parameters().contains("norm.weight"));
  EXPECT_TRUE(conv->named_parameters().contains("norm.bias"));
  EXPECT_THROW(ConvNorm(4, 6, 3, 1, NormKind::kGroupNorm, 4), std::invalid_argument);
}

TEST(ResNet, StageShapesChannelsAndNames) {
  for (int depth : {18, 34, 50, 101}) {
    SCOPED_TRACE(depth);
    BackboneOptions o;
    o.depth = depth;
    o.base_channels = 8;
    ResNet net(o);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
    net->init_weights(gen);
    const auto outs = net->forward(at::randn({2, 3, 64, 96}));
    ASSERT_EQ(outs.size(), 4u);
    const int64_t mult = depth >= 50 ? 4 : 1;
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(outs[s].size(0), 2);
      EXPECT_EQ(outs[s].size(1), 8 * mult << s);
      EXPECT_EQ(outs[s].size(2), 64 / (4 << s));
      EXPECT_EQ(outs[s].size(3), 96 / (4 << s));
      EXPECT_EQ(net->out_channels()[s], 8 * mult << s);
    }
    const auto params = net->named_parameters();
    EXPECT_TRUE(params.contains("stem.conv1.weight"));
    EXPECT_TRUE(params.contains("res2.0.conv1.weight"));
    EXPECT_TRUE(params.contains("res5.0.shortcut.weight"));
    EXPECT_EQ(params.contains("res2.0.conv3.weight"), depth >= 50);
    EXPECT_TRUE(net->named_buffers().contains("res3.0.conv2.norm.scale"));
  }
}

TEST(ResNet, Resnet50HasTheReferenceParameterCount) {
  ResNet net(BackboneOptions{});
  int64_t weights = 0;
  for (const auto& p : net->parameters()) weights += p.numel();
  // torchvision's resnet50 without fc (25,557,032 - 2,049,000) minus the batch norms' 53,120
  // affine parameters, which are buffers here.
  EXPECT_EQ(weights, 25557032 - 2049000 - 53120);
}

TEST(ResNet, FreezesStemAndFirstStages) {
  for (int freeze_at : {0, 1, 2, 5}) {
    SCOPED_TRACE(freeze_at);
    BackboneOptions o;
    o.depth = 18;
    o.base_channels = 8;
    o.freeze_at = freeze_at;
    ResNet net(o);
    for (const auto& p : net->named_parameters()) {
      const std::string& n = p.key();
      int stage = n.rfind("stem.", 0) == 0 ? 1 : (n[3] - '0');  // resK -> K
      EXPECT_EQ(p.value().requires_grad(), stage > freeze_at) << n;
    }
  }
}

TEST(ResNet, StrideInOneByOneMovesTheStride) {
  BackboneOptions a;
  a.base_channels = 8;
  a.stride_in_1x1 = true;
  BackboneOptions b = a;
  b.stride_in_1x1 = false;
  ResNet ra(a), rb(b);
  // Same parameter shapes either way: weights convert between the two conventions.
  const auto pa = ra->named_parameters(), pb = rb->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) EXPECT_EQ(p.value().sizes(), pb[p.key()].sizes()) << p.key();
  // ...but not the same function.
  at::Generator g1 = at::make_generator<at::CPUGeneratorImpl>(4), g2 = at::make_generator<at::CPUGeneratorImpl>(4);
  ra->init_weights(g1);
  rb->init_weights(g2);
  const at::Tensor x = at::randn({1, 3, 64, 64});
  EXPECT_FALSE(at::allclose(ra->forward(x)[1], rb->forward(x)[1]));
}

TEST(FPN, FiveLevelsWithStridesFourToSixtyFour) {
  FPN fpn(std::vector<int64_t>{8, 16, 32, 64}, 12);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  fpn->init_weights(gen);
  std::vector<at::Tensor> c;
  for (int s = 0; s < 4; ++s) c.push_back(at::randn({2, 8 << s, 96 / (4 << s), 160 / (4 << s)}));
  const auto p = fpn->forward(c);
  ASSERT_EQ(p.size(), 5u);
  const int64_t sizes[5][2] = {{24, 40}, {12, 20}, {6, 10}, {3, 5}, {2, 3}};
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(p[l].size(1), 12);
    EXPECT_EQ(p[l].size(2), sizes[l][0]);
    EXPECT_EQ(p[l].size(3), sizes[l][1]);
  }
  // P6 is P5 subsampled with stride 2.
  EXPECT_TRUE(at::equal(p[4], p[3].slice(2, 0, 3, 2).slice(3, 0, 5, 2)));
  // P5 = layer(inner(C5)); P4 = layer(inner(C4) + upsample(inner(C5))).
  const at::Tensor inner5 = fpn->inner[3]->forward(c[3]);
  EXPECT_TRUE(at::allclose(p[3], fpn->layer[3]->forward(inner5), 1e-5, 1e-6));
  const at::Tensor top = fpn->inner[2]->forward(c[2]) + at::upsample_nearest2d(inner5, {6, 10});
  EXPECT_TRUE(at::allclose(p[2], fpn->layer[2]->forward(top), 1e-5, 1e-6));
  const auto names = fpn->named_parameters();
  EXPECT_TRUE(names.contains("inner.0.weight"));
  EXPECT_TRUE(names.contains("layer.3.bias"));
}

}  // namespace
}  // namespace mrcnn::model
