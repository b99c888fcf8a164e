// ResNet body, frozen batch norm folding, FPN: shapes, names, freezing, equivalences.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/backbone/conv_norm.h"
#include "model/backbone/fpn.h"
#include "model/backbone/padding_masks.h"
#include "model/autocast.h"
#include "model/backbone/resnet.h"

namespace mrcnn::model {
namespace {

// Image i's valid region in a map of size H x W of a batch padded to Hp x Wp is
// ceil(h_i * H / Hp) x ceil(w_i * W / Wp); the mask is 1 there and 0 elsewhere, written out here
// pixel by pixel.
at::Tensor expected_padding_mask(const std::vector<std::array<int64_t, 2>>& sizes, int64_t hp, int64_t wp,
                                 int64_t h, int64_t w) {
  at::Tensor m = at::zeros({static_cast<int64_t>(sizes.size()), 1, h, w});
  auto a = m.accessor<float, 4>();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double rows = std::ceil(static_cast<double>(sizes[i][0]) * h / hp);
    const double cols = std::ceil(static_cast<double>(sizes[i][1]) * w / wp);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) a[static_cast<int64_t>(i)][0][y][x] = y < rows && x < cols ? 1.f : 0.f;
  }
  return m;
}

TEST(PaddingMasks, ValidRegionPerImageAndLevelOnTheDeviceOfUse) {
  const std::vector<std::array<int64_t, 2>> sizes{{100, 110}, {64, 37}};
  const at::Tensor t = at::tensor({100, 110, 64, 37}, at::kLong).view({2, 2});
  std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
  if (torch::cuda::is_available()) devices.emplace_back(c10::kCUDA, 0);
  for (const c10::Device& dev : devices) {
    SCOPED_TRACE(dev.str());
    PaddingMasks masks(t, 128, 128, dev);
    for (const auto& [h, w] : {std::pair<int64_t, int64_t>{128, 128}, {32, 32}, {16, 16}, {4, 4}}) {
      SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w));
      const at::Tensor m = masks.mask(h, w);
      ASSERT_TRUE(m.defined());
      EXPECT_EQ(m.device(), dev);
      EXPECT_EQ(m.scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(m.cpu(), expected_padding_mask(sizes, 128, 128, h, w)));
      const at::Tensor& p = masks.padding(h, w);
      EXPECT_EQ(p.scalar_type(), at::kBool);
      EXPECT_EQ(masks.padding(h, w).data_ptr(), p.data_ptr());  // built once per size
    }
    // The padding zeroed in place, the valid region untouched to the bit: a negative value in the
    // padding becomes +0 (a multiply by 0 would give -0), in the map's own dtype and layout.
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor x0 = -at::rand({2, 3, 16, 16}, at::TensorOptions().device(dev)).add(0.5).to(dtype)
                                 .contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor x = x0.clone();
      masks.apply_(x);
      EXPECT_EQ(x.scalar_type(), dtype);
      EXPECT_TRUE(x.is_contiguous(at::MemoryFormat::ChannelsLast));
      const at::Tensor valid = expected_padding_mask(sizes, 128, 128, 16, 16).expand({2, 3, 16, 16}).to(at::kBool);
      EXPECT_TRUE(at::equal(x.cpu().masked_select(valid), x0.cpu().masked_select(valid)));
      const at::Tensor pad = x.cpu().masked_select(valid.logical_not()).to(at::kFloat);
      EXPECT_TRUE(at::equal(pad, at::zeros_like(pad)));
      EXPECT_FALSE(pad.signbit().any().item<bool>());
      const at::Tensor y = masks.applied(x0);  // out of place: the same values, layout and dtype
      EXPECT_TRUE(at::equal(y, x));
      EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
      // The gradient: zero on the padding, the incoming one elsewhere, in the incoming layout (the
      // layers before run their backward in the layout they would without masks), in place or not.
      for (const bool in_place : {true, false}) {
        const at::Tensor leaf = x0.clone().requires_grad_();
        at::Tensor z = leaf * 1;
        if (in_place)
          masks.apply_(z);
        else
          z = masks.applied(z);
        const at::Tensor g = at::randn({2, 3, 16, 16}, at::TensorOptions().device(dev)).to(dtype).contiguous(
            at::MemoryFormat::ChannelsLast);
        z.backward(g);
        EXPECT_TRUE(leaf.grad().is_contiguous(at::MemoryFormat::ChannelsLast)) << in_place;
        EXPECT_TRUE(at::equal(leaf.grad().cpu().masked_select(valid), g.cpu().masked_select(valid))) << in_place;
        EXPECT_EQ(leaf.grad().cpu().masked_select(valid.logical_not()).abs().max().item<float>(), 0) << in_place;
      }
    }
    EXPECT_THROW(masks.mask(24, 32), std::invalid_argument);  // 24 does not divide 128
  }
  // Padded by less than one cell at a coarse level: nothing to mask there, x left as is.
  PaddingMasks tight(at::tensor({120, 128}, at::kLong).view({1, 2}), 128, 128, c10::Device(c10::kCPU));
  EXPECT_TRUE(tight.padding(128, 128).defined());
  EXPECT_FALSE(tight.padding(4, 4).defined());  // ceil(120 * 4 / 128) = 4
  const at::Tensor x = at::full({1, 2, 4, 4}, 3.0);
  tight.apply_(x);
  EXPECT_TRUE(at::equal(x, at::full({1, 2, 4, 4}, 3.0)));
}

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

// The aten::mul and aten::_to_copy calls `f` makes on this thread.
std::pair<int64_t, int64_t> count_folds_and_casts(const std::function<void()>& f) {
  static int64_t muls, casts;  // a callback is a plain function: it counts here
  muls = casts = 0;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(+[](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::string_view name = fn.name();
        muls += name == "aten::mul";
        casts += name == "aten::_to_copy";
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(handle);
  return {muls, casts};
}

// A frozen layer folds (and, under autocast, casts) its weight once: the same bits as folding at
// every call, no fold or weight cast on later calls, and a weight changed in place (a checkpoint
// loaded) or given new storage is followed.
TEST(FrozenBatchNorm, AFrozenLayerFoldsItsWeightOnceAndFollowsChanges) {
  at::manual_seed(3);
  for (const Precision precision : {Precision::kFloat32, Precision::kBFloat16}) {
    SCOPED_TRACE(to_string(precision));
    ConvNorm conv(5, 7, 3, 1, NormKind::kFrozenBatchNorm, 0);
    {
      torch::NoGradGuard g;
      conv->weight.normal_();
      conv->frozen_norm->scale.uniform_(0.5, 2.0);
      conv->frozen_norm->bias.normal_();
    }
    conv->weight.set_requires_grad(false);
    const at::Tensor x = at::randn({2, 5, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast);
    const auto plain = [&] {
      AutocastGuard autocast(precision, c10::kCPU);
      return at::conv2d(x, conv->weight * conv->frozen_norm->scale.view({-1, 1, 1, 1}), conv->frozen_norm->bias,
                        {1, 1}, {1, 1});
    };
    const auto ours = [&] {
      AutocastGuard autocast(precision, c10::kCPU);
      return conv->forward(x);
    };
    EXPECT_TRUE(at::equal(ours(), plain()));
    // A second call: no fold (aten::mul) and no cast of the weight or the bias (at most x's).
    const auto [muls, casts] = count_folds_and_casts([&] { EXPECT_TRUE(at::equal(ours(), plain())); });
    EXPECT_EQ(muls, 1);  // plain()'s own fold: ours made none
    EXPECT_LE(casts, precision == Precision::kFloat32 ? 0 : 4);  // plain()'s weight, bias and x, ours' x
    // The plain path alone, counted the same way, does fold and cast: the count can fail.
    const auto [plain_muls, plain_casts] = count_folds_and_casts([&] { plain(); });
    EXPECT_EQ(plain_muls, 1);
    EXPECT_EQ(plain_casts, precision == Precision::kFloat32 ? 0 : 3);
    // Changed in place, then given new storage: followed both times.
    {
      torch::NoGradGuard g;
      conv->weight.mul_(-0.5);
    }
    EXPECT_TRUE(at::equal(ours(), plain()));
    {
      torch::NoGradGuard g;
      conv->frozen_norm->bias.add_(1.0);
    }
    EXPECT_TRUE(at::equal(ours(), plain()));
    conv->weight.set_data(conv->weight.detach().clone().mul_(3.0));
    EXPECT_TRUE(at::equal(ours(), plain()));
  }
}

// The same for the fused bottleneck convolutions (rehearsed on the CPU): a frozen layer whose input
// needs no gradient makes the fused call with its fold made once, the values of the fused node.
TEST(FrozenBatchNorm, AFrozenFusedLayerFoldsOnceAndGivesTheFusedNodesValues) {
  at::manual_seed(4);
  const auto make = [](bool frozen) {
    ConvNorm conv(6, 6, 3, 1, NormKind::kFrozenBatchNorm, 0);
    {
      torch::NoGradGuard g;
      at::manual_seed(5);
      conv->weight.normal_();
      conv->frozen_norm->scale.uniform_(0.5, 2.0);
      conv->frozen_norm->bias.normal_();
    }
    conv->fused_relu = true;
    conv->fused_relu_on_cpu = true;
    conv->weight.set_requires_grad(!frozen);
    return conv;
  };
  ConvNorm frozen = make(true), node = make(false);
  const at::Tensor x = at::randn({2, 6, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor z = at::randn({2, 6, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast);
  for (int call = 0; call < 2; ++call) {
    const at::Tensor a = frozen->forward_relu(x), b = node->forward_relu(x);
    const at::Tensor c = frozen->forward_add_relu(x, z), d = node->forward_add_relu(x, z);
    EXPECT_TRUE(at::equal(a, b)) << call;
    EXPECT_TRUE(at::equal(c, d)) << call;
    EXPECT_FALSE(c.requires_grad());
    EXPECT_TRUE(d.requires_grad());  // the trainable twin makes the node
  }
  const auto [muls, casts] = count_folds_and_casts([&] { frozen->forward_add_relu(x, z); });
  EXPECT_EQ(muls, 0);
  const auto [node_muls, node_casts] = count_folds_and_casts([&] { node->forward_add_relu(x, z); });
  EXPECT_EQ(node_muls, 1);  // the node folds at every call
  // An input that needs a gradient takes the node (its backward is the node's).
  const at::Tensor xg = x.clone().requires_grad_();
  EXPECT_TRUE(frozen->forward_relu(xg).requires_grad());
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

// BackboneOptions::fused_conv_relu: on CUDA each bottleneck's convolutions, frozen norms' biases,
// shortcut sum and ReLUs run as cuDNN's fused calls with the project's own backward. In float32
// (TF32 off) the outputs and gradients are the unfused blocks' up to rounding. Under float16
// autocast the two round at different places (the fused epilogue adds the bias and the shortcut
// in float32, the unfused blocks in float16), and through a deep random network the difference
// grows past any fixed bound (on an H200 the weight gradients differed by up to 27 % of their
// largest value): there both are set against the unfused network in float64 on the CPU, and the
// fused blocks must be no further from it than twice the unfused blocks are. With padding masks.
// On the CPU the same node runs its forward by LibTorch's ops (ConvNormImpl::fused_relu_on_cpu),
// which checks its backward there.
TEST(ResNet, FusedConvReLUOnCudaComputesTheUnfusedBlocks) {
  const bool cuda = torch::cuda::is_available();
  const at::Device device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  if (cuda) {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  BackboneOptions o;
  o.base_channels = 8;
  o.freeze_at = 2;  // res2 frozen (the weight gradient skipped), res3-res5 trained
  BackboneOptions f = o;
  f.fused_conv_relu = true;
  ResNet plain(o), fused(f), reference(o);
  for (const auto& m : fused->modules(/*include_self=*/false))
    if (auto* conv = m->as<ConvNormImpl>()) conv->fused_relu_on_cpu = true;
  for (ResNet* r : {&plain, &fused, &reference}) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(71);
    (*r)->init_weights(gen);
    c10::NoGradGuard no_grad;
    for (auto& b : (*r)->named_buffers()) {  // frozen norms that are not the identity
      if (b.key().ends_with(".scale")) b.value().uniform_(0.5, 1.5, gen);
      if (b.key().ends_with(".bias")) b.value().normal_(0.0, 0.1, gen);
    }
    for (auto& p : (*r)->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
  plain->to(device);
  fused->to(device);
  reference->to(at::kDouble);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(72);
  const at::Tensor x = at::randn({2, 3, 96, 128}, gen).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor sizes = at::tensor({96, 128, 70, 100}, at::kLong).view({2, 2});
  // One forward and backward: the outputs (float32, on the CPU) and the parameters' gradients.
  auto run = [&](ResNet& r, at::Device on, Precision precision) {
    r->zero_grad();
    PaddingMasks masks(sizes, 96, 128, on);
    const at::Tensor input = r->parameters().front().scalar_type() == at::kDouble ? x.to(at::kDouble) : x.to(on);
    std::vector<at::Tensor> outs;
    {
      const AutocastGuard autocast(precision, on.type());
      outs = r->forward(input, &masks);
    }
    at::Tensor loss = at::zeros({}, input.options());
    at::Generator w = at::make_generator<at::CPUGeneratorImpl>(73);
    for (const at::Tensor& out : outs)
      loss = loss + (out.to(input.scalar_type()) * at::randn(out.sizes(), w).to(input.options())).sum();
    loss.backward();
    std::map<std::string, at::Tensor> grads;
    for (const auto& p : r->named_parameters())
      if (p.value().grad().defined()) grads[p.key()] = p.value().grad().to(at::kDouble).cpu();
    for (at::Tensor& out : outs) out = out.to(at::kDouble).cpu();
    return std::pair{outs, grads};
  };
  const auto [o64, g64] = run(reference, at::Device(at::kCPU), Precision::kFloat32);
  for (const Precision precision : {Precision::kFloat32, Precision::kFloat16}) {
    if (precision == Precision::kFloat16 && !cuda) continue;
    SCOPED_TRACE(to_string(precision));
    const auto [oa, ga] = run(plain, device, precision);
    const auto [of, gf] = run(fused, device, precision);
    ASSERT_EQ(oa.size(), of.size());
    ASSERT_EQ(ga.size(), gf.size());
    ASSERT_EQ(ga.size(), g64.size());
    EXPECT_GT(ga.size(), 0u);
    // Every compared tensor: name, unfused, fused, the float64 unfused network's.
    std::vector<std::tuple<std::string, at::Tensor, at::Tensor, at::Tensor>> tensors;
    for (size_t i = 0; i < oa.size(); ++i) tensors.emplace_back("res" + std::to_string(i + 2), oa[i], of[i], o64[i]);
    for (const auto& [name, g] : ga) tensors.emplace_back(name, g, gf.at(name), g64.at(name));
    int64_t differing = 0;
    double worst_ratio = 0, worst_unfused = 0, worst_fused = 0;
    std::string worst;
    for (const auto& [name, a, b, ref] : tensors) {
      differing += !at::equal(a, b);
      const double scale = std::max(1e-6, ref.abs().max().item<double>());
      const bool is_output = name.starts_with("res") && name.find('.') == std::string::npos;
      if (precision == Precision::kFloat32) {
        // Rounding alone: outputs within 1e-4 of their scale, gradients within 1e-3.
        EXPECT_LE((a - b).abs().max().item<double>(), (is_output ? 1e-4 : 1e-3) * scale) << name;
        continue;
      }
      const double unfused = (a - ref).abs().max().item<double>() / scale;
      const double fused_error = (b - ref).abs().max().item<double>() / scale;
      EXPECT_LE(fused_error, std::max(2 * unfused, 1e-3)) << name << ": unfused float16 " << unfused
                                                         << " of the float64 scale, fused " << fused_error;
      worst_unfused = std::max(worst_unfused, unfused);
      worst_fused = std::max(worst_fused, fused_error);
      if (fused_error / std::max(unfused, 1e-3) > worst_ratio) {
        worst_ratio = fused_error / std::max(unfused, 1e-3);
        worst = name;
      }
    }
    std::cout << "[ fused conv ] " << to_string(precision) << (cuda ? " on CUDA: " : " on the CPU: ") << differing
              << " of " << tensors.size() << " compared tensors not bit-equal to the unfused blocks'";
    // The CPU rehearsal runs the unfused blocks' own ops: there the node must change no bit.
    if (!cuda) {
      EXPECT_EQ(differing, 0);
    }
    if (precision == Precision::kFloat16)
      std::cout << "; largest error against float64 (of its scale): unfused " << worst_unfused << ", fused "
                << worst_fused << "; largest fused/unfused ratio " << worst_ratio << " (" << worst << ")";
    std::cout << "\n";
  }
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

// Under autocast the top-down path upsamples in the maps' own precision (nearest upsampling is a
// copy), where autocast's policy would run it in float32: the same bits, forward and backward. The
// reference below is that float32 path written out: each level's float16/bfloat16 lateral plus the
// float32 upsample of the level above, in place.
TEST(FPN, TheTopDownPathInReducedPrecisionIsTheFloat32PathBitForBit) {
  for (const Precision precision : {Precision::kBFloat16, Precision::kFloat16}) {
    SCOPED_TRACE(to_string(precision));
    FPN fpn(std::vector<int64_t>{8, 16, 32, 64}, 12);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(6);
    fpn->init_weights(gen);
    {
      const c10::NoGradGuard no_grad;
      for (auto& conv : fpn->inner) conv->bias.normal_(0, 0.5, gen);  // non-zero biases: no trivial sums
    }
    std::vector<at::Tensor> c;
    for (int s = 0; s < 4; ++s)
      c.push_back(at::randn({2, 8 << s, 128 / (4 << s), 192 / (4 << s)}, gen)
                      .contiguous(at::MemoryFormat::ChannelsLast)
                      .requires_grad_());
    const auto run = [&](bool reference) {
      for (auto& t : c) t.mutable_grad() = at::Tensor();
      fpn->zero_grad();
      std::vector<at::Tensor> p(5);
      {
        AutocastGuard autocast(precision, c10::kCPU);
        if (!reference) {
          p = fpn->forward(c);
        } else {
          at::Tensor last = fpn->inner[3]->forward(c[3]);
          p[3] = conv2d_train(last, fpn->layer[3]->weight, fpn->layer[3]->bias, 1, 1, fpn->own_weight_grad);
          for (int i = 2; i >= 0; --i) {
            at::Tensor lateral = fpn->inner[i]->forward(c[i]);
            at::Tensor up;
            {
              c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
              up = at::upsample_nearest2d(last.to(at::kFloat), {lateral.size(2), lateral.size(3)});
            }
            lateral.add_(up);
            last = lateral;
            p[i] = conv2d_train(last, fpn->layer[i]->weight, fpn->layer[i]->bias, 1, 1, fpn->own_weight_grad);
          }
          p[4] = at::max_pool2d(p[3], {1, 1}, {2, 2});
        }
      }
      at::Generator g = at::make_generator<at::CPUGeneratorImpl>(9);
      at::Tensor loss = at::zeros({});
      for (const auto& level : p) loss = loss + (level.to(at::kFloat) * at::randn(level.sizes(), g)).sum();
      loss.backward();
      std::vector<at::Tensor> out(p.begin(), p.end());
      for (const auto& t : c) out.push_back(t.grad());
      for (const auto& w : fpn->parameters()) out.push_back(w.grad());
      return out;
    };
    const std::vector<at::Tensor> ours = run(false), reference = run(true);
    ASSERT_EQ(ours.size(), reference.size());
    EXPECT_EQ(ours[0].scalar_type(), precision == Precision::kBFloat16 ? at::kBFloat16 : at::kHalf);
    for (size_t k = 0; k < ours.size(); ++k) {
      ASSERT_TRUE(ours[k].defined() && reference[k].defined()) << k;
      EXPECT_TRUE(at::equal(ours[k], reference[k])) << "tensor " << k << ": max difference "
                                                    << (ours[k].to(at::kFloat) - reference[k].to(at::kFloat)).abs().max().item<float>();
    }
  }
}

}  // namespace
}  // namespace mrcnn::model
