// Google Benchmark suite of the detection ops (mrcnn_ops) at the MLPerf Mask R-CNN shapes:
// batch 2, images padded to 800x1344, FPN P2..P6 with 256 channels. The peer comparison
// (torchvision in the same run) is compare_ops_torchvision.py beside this file.
//
//   RoIAlign/{Box,Mask}/{Forward,Backward}/{nchw,nhwc}
//                         single-level RoIAlign on P2: 1024 RoIs at 7x7 (box head) or 256 at
//                         14x14 (mask head); Backward is the input gradient alone
//   MultilevelRoIAlign/{Box,Mask}/{Forward,Backward}/{nchw,nhwc}
//                         the same RoI counts pooled from P2..P5 by the FPN level rule
//   MultilevelRoIAlign/bfloat16/{direct,island}
//                         the box head's pooling (512 RoIs per image, 7x7) from a bfloat16
//                         channels-last pyramid, forward and backward through autograd: the maps
//                         read as they are (the kernels' reduced-precision path) against the
//                         float32 island it replaced (each level cast to float32, pooled, the
//                         result cast back); the same values, the ratio is the path's cost
//   Proposals/{Train,Test}
//                         fused proposal generation, pre-NMS 2000 (train) or 1000 (test) per
//                         level, NMS 0.7, 1000 per image
//   Nms/{n}               NMS of n random boxes at IoU 0.7 (a pre-NMS level of the RPN)
//   PasteMasks/{Float,Binary}
//                         100 28x28 masks pasted into an 800x1333 image
//   MaskTargets           256 positive proposals, 28x28 targets from polygons
//   SamplerDraw/{per_image,shared,randperm}
//                         the RPN's host draw of a batch of 8 images of 268,569 anchors (an
//                         800x1344 image; ~150 positives, ~8,000 ignored, the rest negative),
//                         256 per image: the sampler's draw with a generator per image or one
//                         shared generator, and the full at::randperm per set that it replaces
//                         (the same draws: the ratio is the draw's speed-up)
//
// Threads: MRCNN_BENCH_THREADS (default 2, the CI machine's cores). Every input is made once
// from a fixed seed, outside the timed loop.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "model/ops/ops.h"
#include "model/ops/box/randperm_prefix.h"

namespace {

using namespace mrcnn::ops;

constexpr int64_t kBatch = 2;
constexpr int64_t kChannels = 256;
constexpr int64_t kPadH = 800;
constexpr int64_t kPadW = 1344;
const std::vector<double> kScales = {0.25, 0.125, 0.0625, 0.03125};

std::vector<std::array<int64_t, 2>> grids() {
  std::vector<std::array<int64_t, 2>> g = {{kPadH / 4, kPadW / 4}};
  for (int i = 0; i < 4; ++i) g.push_back({(g.back()[0] + 1) / 2, (g.back()[1] + 1) / 2});
  return g;
}

// Proposal-like RoIs: log-uniform sizes 16..700 px, aspect 0.5..2, inside the image.
at::Tensor make_rois(int64_t per_image, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> rows;
  for (int64_t n = 0; n < kBatch; ++n) {
    const at::Tensor size = at::exp(at::empty({per_image}).uniform_(2.77, 6.55));
    const at::Tensor aspect = at::exp(at::empty({per_image}).uniform_(-0.69, 0.69));
    const at::Tensor w = (size / aspect.sqrt()).clamp_max(1300);
    const at::Tensor h = (size * aspect.sqrt()).clamp_max(790);
    const at::Tensor x1 = at::rand({per_image}) * (1333 - w);
    const at::Tensor y1 = at::rand({per_image}) * (800 - h);
    rows.push_back(at::stack({at::full({per_image}, static_cast<double>(n)), x1, y1, x1 + w, y1 + h}, 1));
  }
  return at::cat(rows).to(at::kFloat);
}

std::vector<at::Tensor> make_pyramid(bool channels_last, int64_t levels = 4) {
  at::manual_seed(1);
  std::vector<at::Tensor> f;
  const auto g = grids();
  for (int64_t l = 0; l < levels; ++l) {
    at::Tensor t = at::randn({kBatch, kChannels, g[l][0], g[l][1]});
    if (channels_last) t = t.contiguous(at::MemoryFormat::ChannelsLast);
    f.push_back(t);
  }
  return f;
}

// Args: {per-image RoIs, output size, channels_last, backward}
void BM_RoIAlign(benchmark::State& state) {
  const int64_t per_image = state.range(0), size = state.range(1);
  const bool cl = state.range(2) != 0, backward = state.range(3) != 0;
  const at::Tensor x = make_pyramid(cl, 1)[0];
  const at::Tensor rois = make_rois(per_image, 7);
  const at::Tensor grad = at::randn({rois.size(0), kChannels, size, size});
  for (auto _ : state) {
    if (!backward) {
      benchmark::DoNotOptimize(roi_align(x, rois, 0.25, size, size, 2, false));
    } else {
      benchmark::DoNotOptimize(mrcnn::ops::detail::roi_align_backward(grad, rois, 0.25, size, size, kBatch,
                                                          kChannels, x.size(2), x.size(3), 2,
                                                          false, cl));
    }
  }
  state.SetItemsProcessed(state.iterations() * rois.size(0));
}

void BM_MultilevelRoIAlign(benchmark::State& state) {
  const int64_t per_image = state.range(0), size = state.range(1);
  const bool cl = state.range(2) != 0, backward = state.range(3) != 0;
  const std::vector<at::Tensor> feats = make_pyramid(cl);
  const at::Tensor rois = make_rois(per_image, 7);
  const at::Tensor grad = at::randn({rois.size(0), kChannels, size, size});
  std::vector<int64_t> hs, ws, fmt;
  for (const at::Tensor& f : feats) {
    hs.push_back(f.size(2));
    ws.push_back(f.size(3));
    fmt.push_back(cl ? 1 : 0);
  }
  for (auto _ : state) {
    if (!backward) {
      benchmark::DoNotOptimize(multilevel_roi_align(feats, rois, size, 2, false, kScales));
    } else {
      benchmark::DoNotOptimize(mrcnn::ops::detail::multilevel_roi_align_backward(
          grad, rois, kScales, size, 2, false, 224, 4, kBatch, kChannels, hs, ws, fmt));
    }
  }
  state.SetItemsProcessed(state.iterations() * rois.size(0));
}

// The box head's pooling from bfloat16 maps, forward and backward: direct or through the
// float32 island (the values are equal: tests/model/ops/test_roi_align_reduced.cpp).
void BM_MultilevelReduced(benchmark::State& state, bool island) {
  std::vector<at::Tensor> feats;
  for (const at::Tensor& f : make_pyramid(true)) feats.push_back(f.to(at::kBFloat16));
  const at::Tensor rois = make_rois(512, 7);
  const at::Tensor grad = at::randn({rois.size(0), kChannels, 7, 7}).to(at::kBFloat16);
  for (auto _ : state) {
    std::vector<at::Tensor> leaves, inputs;
    for (const at::Tensor& f : feats) {
      leaves.push_back(f.detach().requires_grad_(true));
      inputs.push_back(island ? leaves.back().to(at::kFloat) : leaves.back());
    }
    at::Tensor out = multilevel_roi_align(inputs, rois, 7, 2, false, kScales);
    if (island) out = out.to(at::kBFloat16);
    out.backward(grad);
    benchmark::DoNotOptimize(leaves[0].grad());
  }
  state.SetItemsProcessed(state.iterations() * rois.size(0));
}

void RoIArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rois", "size", "nhwc", "backward"});
  for (int64_t backward : {0, 1}) {
    for (int64_t cl : {0, 1}) {
      b->Args({512, 7, cl, backward});
      b->Args({128, 14, cl, backward});
    }
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
}

struct RpnInputs {
  std::vector<at::Tensor> objectness, deltas, anchors;
  at::Tensor image_sizes;
};

RpnInputs make_rpn_inputs() {
  at::manual_seed(2);
  RpnInputs in;
  for (const auto& g : grids()) {
    in.objectness.push_back(at::randn({kBatch, 3, g[0], g[1]}));
    in.deltas.push_back(at::randn({kBatch, 12, g[0], g[1]}) * 0.2);
  }
  in.anchors = AnchorGenerator::fpn_default()(grids(), {kPadH, kPadW});
  in.image_sizes = torch::tensor({{800, 1333}, {800, 1200}}, at::kLong);
  return in;
}

void BM_Proposals(benchmark::State& state) {
  const RpnInputs in = make_rpn_inputs();
  ProposalOptions opts;
  opts.pre_nms_top_n = state.range(0);
  opts.post_nms_top_n = 1000;
  opts.min_size = 1e-3;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        generate_proposals(in.objectness, in.deltas, in.anchors, in.image_sizes, opts));
  }
}

void BM_Nms(benchmark::State& state) {
  at::manual_seed(3);
  const int64_t n = state.range(0);
  const at::Tensor xy = at::rand({n, 2}) * 1200;
  const at::Tensor boxes = at::cat({xy, xy + at::rand({n, 2}) * 300 + 4}, 1);
  const at::Tensor scores = at::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(nms(boxes, scores, 0.7));
}

void BM_PasteMasks(benchmark::State& state) {
  at::manual_seed(4);
  const at::Tensor masks = at::rand({100, 28, 28});
  const at::Tensor xy = at::rand({100, 2}) * 900;
  const at::Tensor boxes = at::cat({xy, xy + at::rand({100, 2}) * 400 + 8}, 1);
  for (auto _ : state) {
    if (state.range(0) == 0) {
      benchmark::DoNotOptimize(paste_masks_in_image(masks, boxes, 800, 1333));
    } else {
      benchmark::DoNotOptimize(paste_masks_in_image_binary(masks, boxes, 800, 1333));
    }
  }
}

void BM_MaskTargets(benchmark::State& state) {
  // 20 instances of 3 polygons of 16 points; 256 proposals around them.
  at::manual_seed(5);
  std::vector<double> coords;
  std::vector<int64_t> poly_off = {0}, inst_off = {0};
  for (int i = 0; i < 20; ++i) {
    const double cx = 100 + 50 * i, cy = 300, r = 60;
    for (int p = 0; p < 3; ++p) {
      for (int k = 0; k < 16; ++k) {
        const double a = 2 * M_PI * k / 16;
        coords.push_back(cx + (r - 10 * p) * std::cos(a) + 5 * p);
        coords.push_back(cy + (r - 10 * p) * std::sin(a));
      }
      poly_off.push_back(static_cast<int64_t>(coords.size()));
    }
    inst_off.push_back(static_cast<int64_t>(poly_off.size()) - 1);
  }
  const mrcnn::ops::PolygonList polys{torch::tensor(coords, at::kDouble),
                                        torch::tensor(poly_off, at::kLong),
                                        torch::tensor(inst_off, at::kLong)};
  const at::Tensor matched = at::randint(0, 20, {256}, at::kLong);
  const at::Tensor centre = matched.to(at::kFloat) * 50 + 100;
  const at::Tensor jitter = at::randn({256, 4}) * 10;
  const at::Tensor proposals =
      at::stack({centre - 60, at::full({256}, 240.f), centre + 60, at::full({256}, 360.f)}, 1) +
      jitter;
  for (auto _ : state) benchmark::DoNotOptimize(mask_targets(polys, matched, proposals, 28));
}

// The RPN's labels of 8 full-size images and their pending draw, counted on the host.
struct SamplerInputs {
  static constexpr int64_t kImages = 8;
  static constexpr int64_t kAnchors = 268569;
  BalancedPositiveNegativeSampler sampler{256, 0.5};
  BalancedPositiveNegativeSampler::Pending pending;
  at::Tensor counts;
  SamplerInputs() {
    at::manual_seed(11);
    std::vector<at::Tensor> labels;
    for (int64_t i = 0; i < kImages; ++i) {
      at::Tensor l = at::zeros({kAnchors}, at::kLong);
      l.index_fill_(0, at::randint(0, kAnchors, {8000}, at::kLong), -1);
      l.index_fill_(0, at::randint(0, kAnchors, {150}, at::kLong), 1);
      labels.push_back(l);
    }
    pending = sampler.prepare(labels);
    counts = BalancedPositiveNegativeSampler::read_counts({&pending}).front();
  }
};

// mode 0: a generator per image, 1: one shared generator, 2: the full randperm per set.
void BM_SamplerDraw(benchmark::State& state, int mode) {
  static const SamplerInputs in;
  std::vector<at::Generator> owned;
  for (int64_t i = 0; i < (mode == 1 ? 1 : SamplerInputs::kImages); ++i)
    owned.push_back(at::make_generator<at::CPUGeneratorImpl>(100 + static_cast<uint64_t>(i)));
  std::vector<at::Generator*> generators;
  for (int64_t i = 0; i < SamplerInputs::kImages; ++i) generators.push_back(&owned[mode == 1 ? 0 : static_cast<size_t>(i)]);
  const int64_t* count = in.counts.const_data_ptr<int64_t>();
  for (auto _ : state) {
    if (mode < 2) {
      benchmark::DoNotOptimize(in.sampler.draw(in.pending, in.counts, generators));
      continue;
    }
    // The draw as it was: both full permutations of every image, then the same selection.
    for (int64_t i = 0; i < SamplerInputs::kImages; ++i) {
      const int64_t np = count[2 * i], nn = count[2 * i + 1];
      const int64_t take_pos = std::min<int64_t>(np, 128), take_neg = std::min<int64_t>(nn, 256 - take_pos);
      const at::Tensor positive = at::nonzero_static(in.pending.positive[static_cast<size_t>(i)], np).view(-1);
      const at::Tensor negative = at::nonzero_static(in.pending.negative[static_cast<size_t>(i)], nn).view(-1);
      const at::Tensor perm_pos = at::randperm(np, *generators[static_cast<size_t>(i)], at::kLong);
      const at::Tensor perm_neg = at::randperm(nn, *generators[static_cast<size_t>(i)], at::kLong);
      benchmark::DoNotOptimize(std::get<0>(positive.index_select(0, perm_pos.slice(0, 0, take_pos)).sort()));
      benchmark::DoNotOptimize(std::get<0>(negative.index_select(0, perm_neg.slice(0, 0, take_neg)).sort()));
    }
  }
}

// The part of that draw that stays on the host when the labels are on a GPU: the permutations of
// every image's positives and negatives (the counts of SamplerInputs), one generator per image.
// prefix: randperm_prefix of the kept entries; randperm: the full at::randperm.
void BM_SamplerPermutations(benchmark::State& state, bool prefix) {
  static const SamplerInputs in;
  const int64_t* count = in.counts.const_data_ptr<int64_t>();
  std::vector<at::Generator> generators;
  for (int64_t i = 0; i < SamplerInputs::kImages; ++i)
    generators.push_back(at::make_generator<at::CPUGeneratorImpl>(100 + static_cast<uint64_t>(i)));
  for (auto _ : state) {
    for (int64_t i = 0; i < SamplerInputs::kImages; ++i) {
      at::Generator& g = generators[static_cast<size_t>(i)];
      const int64_t np = count[2 * i], nn = count[2 * i + 1];
      const int64_t take_pos = std::min<int64_t>(np, 128), take_neg = std::min<int64_t>(nn, 256 - take_pos);
      if (prefix) {
        std::lock_guard<std::mutex> lock(g.mutex());
        auto& impl = *at::check_generator<at::CPUGeneratorImpl>(g);
        benchmark::DoNotOptimize(randperm_prefix(np, take_pos, impl));
        benchmark::DoNotOptimize(randperm_prefix(nn, take_neg, impl));
      } else {
        benchmark::DoNotOptimize(at::randperm(np, g, at::kLong));
        benchmark::DoNotOptimize(at::randperm(nn, g, at::kLong));
      }
    }
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_SamplerPermutations, prefix, true)->Name("SamplerPermutations/268569x8/prefix")
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SamplerPermutations, randperm, false)->Name("SamplerPermutations/268569x8/randperm")
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SamplerDraw, per_image, 0)->Name("SamplerDraw/268569x8/per_image")
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SamplerDraw, shared, 1)->Name("SamplerDraw/268569x8/shared")
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SamplerDraw, randperm, 2)->Name("SamplerDraw/268569x8/randperm")
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RoIAlign)->Name("RoIAlign")->Apply(RoIArgs);
BENCHMARK(BM_MultilevelRoIAlign)->Name("MultilevelRoIAlign")->Apply(RoIArgs);
BENCHMARK_CAPTURE(BM_MultilevelReduced, direct, false)->Name("MultilevelRoIAlign/bfloat16/direct")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK_CAPTURE(BM_MultilevelReduced, island, true)->Name("MultilevelRoIAlign/bfloat16/island")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Proposals)->Name("Proposals")->ArgName("pre_nms")->Arg(2000)->Arg(1000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Nms)->Name("Nms")->Arg(1000)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PasteMasks)->Name("PasteMasks")->ArgName("binary")->Arg(0)->Arg(1)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MaskTargets)->Name("MaskTargets")->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  const char* env = std::getenv("MRCNN_BENCH_THREADS");
  const int threads = env ? std::atoi(env) : 2;
  at::set_num_threads(threads > 0 ? threads : 2);
  std::printf("mrcnn_ops kernels: LibTorch %s, %d intra-op threads (MRCNN_BENCH_THREADS)\n",
              TORCH_VERSION, at::get_num_threads());
#if !defined(__OPTIMIZE__)
  std::printf("WARNING: compiled without optimization; timings are meaningless\n");
#endif
  if (at::get_num_threads() < 2) {
    std::printf("WARNING: one thread: the parallel kernels are not exercised\n");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
