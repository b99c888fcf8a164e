// Training with the backbone, FPN and RPN head replayed from graphs (model/feature_graphs.h)
// against the same model without: on the CPU through Replay::kRerun (the same static buffers,
// in-graph padding masks, autograd node and gradient copies, replayed by running the work again),
// on a GPU through CUDA graphs.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "model/mask_rcnn.h"
#include "tests/model/tiny.h"

namespace mrcnn::model {
namespace {

using testing::make_batch;
using testing::synthetic_image;
using testing::tiny_options;

TrainOutput train(MaskRCNN& m, const Batch& b, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return m->forward_train(b, gen);
}

#ifdef MRCNN_HAVE_CUDA
Batch to_device(const Batch& b, const at::Device& d) {
  Batch out = b;
  for (at::Tensor* t : {&out.images, &out.image_sizes, &out.gt_boxes, &out.gt_labels, &out.gt_counts,
                        &out.original_sizes})
    if (t->defined()) *t = t->to(d);
  return out;
}
#endif

// One training step of both models on `batch`: the losses and counts, then every parameter's
// gradient, compared by `same`; then a plain SGD update in place (the graphs must see the new
// weights) and the gradients dropped, as the trainer's optimizer does.
template <class Same>
void step_both(MaskRCNN& eager, MaskRCNN& graphed, const Batch& batch, uint64_t seed, Same same) {
  const TrainOutput a = train(eager, batch, seed), b = train(graphed, batch, seed);
  for (const char* name : kLossNames) same(a.losses.at(name), b.losses.at(name), name);
  for (const auto& [name, c] : a.counts()) EXPECT_TRUE(at::equal(c.cpu(), b.counts().at(name).cpu())) << name;
  total_loss(a.losses).backward();
  total_loss(b.losses).backward();
  const auto pa = eager->named_parameters(), pb = graphed->named_parameters();
  for (const auto& item : pa) {
    const at::Tensor& ga = item.value().grad();
    const at::Tensor& gb = pb[item.key()].grad();
    ASSERT_EQ(ga.defined(), gb.defined()) << item.key();
    if (ga.defined()) same(ga, gb, item.key());
  }
  const c10::NoGradGuard no_grad;
  for (auto* m : {&eager, &graphed})
    for (auto& p : (*m)->parameters())
      if (p.grad().defined()) {
        p.add_(p.grad(), -0.05);
        p.mutable_grad() = at::Tensor();
      }
}

TEST(FeatureGraphs, ARehearsedGraphedStepIsTheEagerStepBitForBit) {
  at::set_num_threads(2);
  struct Case {
    std::string name;
    ModelOptions options;
  };
  std::vector<Case> cases;
  cases.push_back({"fp32", tiny_options()});
  cases.push_back({"channels_last", tiny_options()});
  cases.back().options.channels_last = true;
  cases.push_back({"bf16", tiny_options()});
  cases.back().options.precision = Precision::kBFloat16;
  cases.push_back({"group_norm_all_trainable", tiny_options()});
  cases.back().options.backbone.norm = NormKind::kGroupNorm;
  cases.back().options.backbone.group_norm_groups = 4;
  cases.back().options.backbone.freeze_at = 0;

  // Three shapes are graphed, a fourth runs eagerly; every sequence runs in both capture orders
  // (the shapes share one pool and one activation region, so the order they are captured in must
  // not matter). The second batch has the first one's shape but other images and true sizes: the
  // static inputs and the in-graph masks must follow them.
  const Batch first = make_batch({synthetic_image(96, 128, 3, 1), synthetic_image(80, 100, 2, 2)}, {1, 2});
  const Batch same_shape = make_batch({synthetic_image(70, 128, 2, 3), synthetic_image(96, 64, 1, 4)}, {3, 4});
  const Batch second = make_batch({synthetic_image(128, 96, 2, 5)}, {5});
  const Batch third = make_batch({synthetic_image(64, 160, 2, 6)}, {6});
  const Batch fourth = make_batch({synthetic_image(96, 96, 1, 7)}, {7});
  ASSERT_EQ(first.images.sizes(), same_shape.images.sizes());
  const std::vector<std::vector<const Batch*>> orders = {
      {&first, &same_shape, &second, &third, &first, &fourth, &third, &second},
      {&third, &second, &first, &same_shape, &fourth, &second, &third, &first},
  };

  auto bitwise = [](const at::Tensor& a, const at::Tensor& b, const std::string& what) {
    EXPECT_TRUE(at::equal(a, b)) << what << ": max difference " << (a - b).abs().max().item<double>();
  };
  for (const Case& c : cases) {
    for (size_t order = 0; order < orders.size(); ++order) {
      SCOPED_TRACE(c.name + (order == 0 ? ", captured first to third" : ", captured third to first"));
      MaskRCNN eager(c.options, at::make_generator<at::CPUGeneratorImpl>(3));
      MaskRCNN graphed(c.options, at::make_generator<at::CPUGeneratorImpl>(3));
      graphed->use_feature_graphs(3, FeatureGraphs::Replay::kRerun);
      uint64_t seed = 10;
      for (const Batch* b : orders[order]) step_both(eager, graphed, *b, seed++, bitwise);
      const FeatureGraphs::Stats& s = graphed->feature_graphs()->stats();
      EXPECT_EQ(s.captured, 3);
      EXPECT_EQ(s.replayed, 7);
      EXPECT_EQ(s.eager, 1);
      EXPECT_EQ(s.invalidated, 0);

      // A parameter given new storage (as model->to() does) drops the graphs: the next batch
      // captures again, from the new storage.
      {
        const c10::NoGradGuard no_grad;
        for (auto* m : {&eager, &graphed}) {
          at::Tensor p = (*m)->fpn->parameters().front();
          p.set_data(p.detach().clone());
        }
      }
      step_both(eager, graphed, first, seed++, bitwise);
      EXPECT_EQ(s.invalidated, 1);
      EXPECT_EQ(s.captured, 4);
    }
  }

  // Inference never uses the graphs.
  MaskRCNN eager(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(4));
  MaskRCNN graphed(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(4));
  graphed->use_feature_graphs(1, FeatureGraphs::Replay::kRerun);
  const auto da = eager->inference(first), db = graphed->inference(first);
  EXPECT_EQ(graphed->feature_graphs()->stats().replayed, 0);
  ASSERT_EQ(da.size(), db.size());
  for (size_t i = 0; i < da.size(); ++i) EXPECT_TRUE(at::equal(da[i].boxes, db[i].boxes));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The graphs keep one step's activations: a backward that does not directly follow its own
// forward (another forward between, a second backward, graphs dropped since) is refused.
TEST(FeatureGraphs, ABackwardThatDoesNotFollowItsForwardIsRefused) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(6));
  m->use_feature_graphs(4, FeatureGraphs::Replay::kRerun);
  const Batch a = make_batch({synthetic_image(96, 128, 3, 1)}, {1});
  const Batch b = make_batch({synthetic_image(128, 96, 2, 2)}, {2});
  const TrainOutput first = train(m, a, 1);
  const TrainOutput second = train(m, b, 2);
  EXPECT_NE(error_of([&] { total_loss(first.losses).backward(); }).find("a backward must follow its own forward"),
            std::string::npos);
  total_loss(second.losses).backward({}, /*retain_graph=*/true);
  EXPECT_NE(error_of([&] { total_loss(second.losses).backward(); }).find("this backward already ran"), std::string::npos);

  const TrainOutput third = train(m, a, 3);
  {
    const c10::NoGradGuard no_grad;
    at::Tensor p = m->fpn->parameters().front();
    p.set_data(p.detach().clone());
  }
  train(m, b, 4);  // drops every graph, then captures b's
  EXPECT_NE(error_of([&] { total_loss(third.losses).backward(); }).find("were dropped"), std::string::npos);
}

TEST(FeatureGraphs, TheShapeCountIsChecked) {
  ModelOptions o = tiny_options();
  o.cuda_graph_shapes = -1;
  EXPECT_THROW(o.validate(), std::invalid_argument);
  o.cuda_graph_shapes = 8;
  EXPECT_NO_THROW(o.validate());
  // A CPU model ignores the option: CUDA graphs are for CUDA models.
  MaskRCNN m(o, at::make_generator<at::CPUGeneratorImpl>(1));
  train(m, make_batch({synthetic_image(64, 64, 1, 1)}, {1}), 1);
  EXPECT_EQ(m->feature_graphs(), nullptr);
}

// On a GPU: CUDA graphs for three shapes, a fourth eager, in both capture orders, against the
// eager model on the same GPU, both under deterministic algorithms (as run.deterministic sets
// them: deterministic cuDNN, no benchmarking, cuBLAS's fixed workspace, RoIAlign's ordered
// backward). A graph replays the kernels its capture launched and the padding masks multiply by
// exactly one where nothing is padded, so every loss, count and gradient must agree to the last
// bit, in float32 and float16: any difference is a graph bug, not a choice of algorithm.
// run.cuda_graph_shapes stays capped at 1 until this has passed on a GPU.
TEST(FeatureGraphs, OnCudaGraphedTrainingIsTheEagerTraining) {
#ifndef MRCNN_HAVE_CUDA
  GTEST_SKIP() << "built without the project's CUDA kernels";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the CUDA graph test is skipped";
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto& ctx = at::globalContext();
  const bool was_deterministic = ctx.deterministicAlgorithms(), was_det_cudnn = ctx.deterministicCuDNN(),
             was_benchmark = ctx.benchmarkCuDNN();
  ctx.setDeterministicAlgorithms(true, /*warn_only=*/false);
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
  // float32 as float32, as the harness runs it (apply_launch_settings).
  ctx.setAllowTF32CuDNN(false);
  ctx.setAllowTF32CuBLAS(false);
  const at::Device gpu(at::kCUDA, 0);
  const Batch first = to_device(
      make_batch({synthetic_image(96, 128, 3, 1), synthetic_image(80, 100, 2, 2)}, {1, 2}), gpu);
  const Batch same_shape = to_device(
      make_batch({synthetic_image(70, 128, 2, 3), synthetic_image(96, 64, 1, 4)}, {3, 4}), gpu);
  const Batch second = to_device(make_batch({synthetic_image(128, 96, 2, 5)}, {5}), gpu);
  const Batch third = to_device(make_batch({synthetic_image(64, 160, 2, 6)}, {6}), gpu);
  const Batch fourth = to_device(make_batch({synthetic_image(96, 96, 1, 7)}, {7}), gpu);
  const std::vector<std::vector<const Batch*>> orders = {
      {&first, &same_shape, &second, &third, &first, &fourth, &third, &second},
      {&third, &second, &first, &same_shape, &fourth, &second, &third, &first},
  };
  for (const Precision precision : {Precision::kFloat32, Precision::kFloat16}) {
    for (size_t order = 0; order < orders.size(); ++order) {
      SCOPED_TRACE(std::string(to_string(precision)) + (order == 0 ? ", first to third" : ", third to first"));
      ModelOptions o = tiny_options();
      o.precision = precision;
      o.channels_last = true;
      MaskRCNN eager(o, at::make_generator<at::CPUGeneratorImpl>(5));
      o.cuda_graph_shapes = 3;
      MaskRCNN graphed(o, at::make_generator<at::CPUGeneratorImpl>(5));
      eager->to(gpu);
      graphed->to(gpu);
      int64_t differing = 0;
      auto bitwise = [&](const at::Tensor& a, const at::Tensor& b, const std::string& what) {
        const bool same = at::equal(a, b);
        differing += !same;
        EXPECT_TRUE(same) << what << ": max difference " << (a - b).abs().max().item<double>();
      };
      uint64_t seed = 20;
      for (const Batch* b : orders[order]) {
        SCOPED_TRACE("step " + std::to_string(seed - 20));
        step_both(eager, graphed, *b, seed++, bitwise);
      }
      ASSERT_NE(graphed->feature_graphs(), nullptr);
      const FeatureGraphs::Stats& s = graphed->feature_graphs()->stats();
      EXPECT_EQ(s.captured, 3);
      EXPECT_EQ(s.replayed, 7);
      EXPECT_EQ(s.eager, 1);
      std::cout << "[ feature graphs ] " << to_string(precision) << (order == 0 ? ", first to third: " : ", third to first: ")
                << differing << " compared tensors not bit-equal to the eager step's\n";
    }
  }
  ctx.setDeterministicAlgorithms(was_deterministic, /*warn_only=*/false);
  ctx.setDeterministicCuDNN(was_det_cudnn);
  ctx.setBenchmarkCuDNN(was_benchmark);
#endif
}

}  // namespace
}  // namespace mrcnn::model
