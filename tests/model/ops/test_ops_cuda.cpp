// The CUDA kernels against the CPU kernels (themselves checked against torchvision by the
// test_*.py checks), autograd on CUDA, the deterministic backward, and the fault word that
// replaces device-side asserts. Every CUDA test skips, saying why, on a machine without a GPU or
// in a build without the project's CUDA kernels; the fault-word tests on the CPU always run.
//
// Tolerances: the CUDA kernels follow the CPU kernels expression for expression. The proposal
// decode and mask paste use explicitly rounded arithmetic and exp as the host rounds it (equal
// results expected); RoIAlign computes its RoI geometry, adaptive grids and sampling points with
// explicitly rounded arithmetic too (the same points as the CPU), but lets nvcc fuse the
// interpolation's multiply-adds, as torchvision's CUDA kernel does: float32 within 1e-5 forward
// and 1e-4 backward (torchvision's own tolerances), float64 within 1e-10. Index outputs (NMS
// keeps, proposal counts) must be equal.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#ifdef MRCNN_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <string>
#include <vector>

#include "model/ops/device_faults.h"
#include "model/ops/ops.h"

namespace mrcnn::ops {
namespace {

// ---- the fault word (CPU: always runs) -----------------------------------------------------

TEST(DeviceFaults, DescribesEveryBitAndUnknownOnes) {
  EXPECT_EQ(describe_device_faults(0), "");
  EXPECT_NE(describe_device_faults(kFaultRoiBatchIndex).find("batch indices"), std::string::npos);
  const std::string two = describe_device_faults(kFaultObjectnessNaN | kFaultPasteBox);
  EXPECT_NE(two.find("objectness contains NaN"), std::string::npos) << two;
  EXPECT_NE(two.find("boxes must be finite"), std::string::npos) << two;
  EXPECT_NE(describe_device_faults(1 << 30).find("unknown fault bits 1073741824"), std::string::npos);
  for (const int32_t bit : {kFaultRoiBatchIndex, kFaultObjectnessNaN, kFaultDecodeNaN, kFaultImageSize,
                            kFaultPasteBox, kFaultRoiLevel, kFaultRoiBox, kFaultMaskTarget,
                            kFaultBatchTargets}) {
    const std::string d = describe_device_faults(bit);
    EXPECT_FALSE(d.empty()) << bit;
    EXPECT_EQ(d.find("unknown"), std::string::npos) << d;
  }
}

TEST(DeviceFaults, TakeReadsAndClearsAndCheckThrowsWithTheContext) {
  const c10::Device cpu(c10::kCPU);
  EXPECT_EQ(take_device_faults(cpu), 0);
  at::Tensor word = device_fault_word(cpu);
  ASSERT_EQ(word.scalar_type(), at::kInt);
  ASSERT_EQ(word.numel(), 1);
  EXPECT_TRUE(device_fault_word(cpu).is_same(word)) << "one word per device";
  word.fill_(kFaultDecodeNaN | kFaultImageSize);
  try {
    check_device_faults(cpu, "step 7, forward");
    ADD_FAILURE() << "a set fault bit must throw";
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("step 7, forward: generate_proposals: box_deltas decode to NaN"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("image_sizes must be >= 0"), std::string::npos) << msg;
  }
  EXPECT_EQ(word.item<int32_t>(), 0) << "the check clears what it reported";
  EXPECT_NO_THROW(check_device_faults(cpu, "again"));
}

// ---- CUDA ------------------------------------------------------------------------------------

class OpsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef MRCNN_HAVE_CUDA
    GTEST_SKIP() << "built without the project's CUDA kernels (nvcc or a CUDA LibTorch missing)";
#else
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: CUDA op tests skipped";
    at::manual_seed(11);
    previous_deterministic_ = at::globalContext().deterministicAlgorithms();
#endif
  }
  void TearDown() override {
#ifdef MRCNN_HAVE_CUDA
    if (torch::cuda::is_available()) {
      at::globalContext().setDeterministicAlgorithms(previous_deterministic_, false);
      // A test that fails midway must not leave a fault for the next one.
      take_device_faults(c10::Device(c10::kCUDA, 0));
    }
#endif
  }
  const at::Device gpu{c10::kCUDA, 0};
  bool previous_deterministic_ = false;
};

void expect_close(const at::Tensor& cuda, const at::Tensor& cpu, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(cuda.sizes(), cpu.sizes()) << what;
  const at::Tensor c = cuda.cpu();
  EXPECT_TRUE(at::allclose(c, cpu, rtol, atol))
      << what << ": max |difference| " << (c - cpu).abs().max().item<double>();
}

at::Tensor random_rois(int64_t k, int64_t batch, double extent, at::ScalarType dtype) {
  at::Tensor boxes = at::rand({k, 4}, at::kDouble) * extent;
  boxes.slice(1, 2, 4) += boxes.slice(1, 0, 2) + 1;
  return at::cat({at::randint(0, batch, {k, 1}).to(at::kDouble), boxes}, 1).to(dtype);
}

// A read queued without blocking gives the values the tensor had when it was queued, though the
// stream changes them right after; a blocking read then sees the change.
TEST_F(OpsCuda, HostReadGivesTheValuesWhenQueued) {
  at::Tensor t = at::arange(1 << 20, at::TensorOptions().dtype(at::kLong).device(gpu));
  const at::Tensor before = t.cpu();
  HostRead read(t);
  t.mul_(3);
  const at::Tensor got = read.wait();
  EXPECT_TRUE(got.is_cpu() && got.is_pinned());
  EXPECT_TRUE(at::equal(got, before));
  EXPECT_TRUE(at::equal(t.cpu(), before * 3));
  EXPECT_TRUE(read.wait().is_same(got)) << "a second wait gives the same tensor";
}

TEST_F(OpsCuda, RoIAlignForwardAndBackwardMatchTheCpu) {
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    for (const bool aligned : {false, true}) {
      for (const bool channels_last : {false, true}) {
        const std::string what = std::string(c10::toString(dtype)) + (aligned ? " aligned" : "") +
                                 (channels_last ? " channels-last" : "");
        at::Tensor x = at::randn({2, 8, 40, 48}, dtype);
        if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor rois = random_rois(64, 2, 150, dtype);
        const at::Tensor xc = x.detach().requires_grad_(true);
        const at::Tensor xg = x.to(gpu).detach().requires_grad_(true);
        const at::Tensor yc = roi_align(xc, rois, 0.25, 7, 7, 2, aligned);
        const at::Tensor yg = roi_align(xg, rois.to(gpu), 0.25, 7, 7, 2, aligned);
        const bool f64 = dtype == at::kDouble;
        expect_close(yg, yc, f64 ? 1e-10 : 1e-5, f64 ? 1e-10 : 1e-5, what + " forward");
        EXPECT_EQ(yg.is_contiguous(at::MemoryFormat::ChannelsLast), channels_last) << what;
        const at::Tensor w = at::randn(yc.sizes(), dtype);
        (yc * w).sum().backward();
        (yg * w.to(gpu)).sum().backward();
        expect_close(xg.grad(), xc.grad(), f64 ? 1e-10 : 1e-4, f64 ? 1e-10 : 1e-4, what + " backward");
      }
    }
  }
  check_device_faults(gpu, "valid RoIs");
}

// The 7x7 multilevel op on `device`: its output and every level's gradient of the output's sum
// weighted by (element index mod weight_period), as CPU tensors.
std::vector<at::Tensor> multilevel_output_and_grads(const std::vector<at::Tensor>& feats, const at::Tensor& rois,
                                                    const std::vector<double>& scales, at::Device device,
                                                    int64_t sampling_ratio, bool aligned, int64_t weight_period) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& f : feats) leaves.push_back(f.to(device).detach().requires_grad_(true));
  const at::Tensor out = multilevel_roi_align(leaves, rois.to(device), 7, sampling_ratio, aligned, scales);
  // The weights in float32 first: an arange in float16 would round its larger values.
  const at::Tensor weight = at::arange(out.numel(), out.options().dtype(at::kFloat))
                                .view(out.sizes()).remainder(weight_period).to(out.scalar_type());
  out.mul(weight).sum().backward();
  std::vector<at::Tensor> r{out.detach().cpu()};
  for (const at::Tensor& l : leaves) r.push_back(l.grad().cpu());
  return r;
}

TEST_F(OpsCuda, DeterministicBackwardIsBitwiseRepeatableAndMatchesTheCpu) {
  at::globalContext().setDeterministicAlgorithms(true, false);
  std::vector<at::Tensor> feats;
  for (int64_t s : {4, 8, 16, 32}) feats.push_back(at::randn({2, 16, 512 / s, 640 / s}));
  const std::vector<double> scales = infer_spatial_scales(feats, 512, 640);
  const at::Tensor rois = random_rois(300, 2, 400, at::kFloat);
  auto run = [&](at::Device device) {
    return multilevel_output_and_grads(feats, rois, scales, device, /*sampling_ratio=*/2, /*aligned=*/false, 13);
  };
  const auto a = run(gpu), b = run(gpu), cpu = run(at::kCPU);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i], b[i])) << "output " << i << " differs between two CUDA runs";
    expect_close(a[i], cpu[i], 1e-4, 1e-4, "output " + std::to_string(i) + " vs CPU");
  }
}

// The multilevel op with the atomic backward (deterministic mode off) and the adaptive sampling
// grid (sampling_ratio 0: ceil(RoI size / bins) points per bin), aligned, on contiguous and
// channels-last maps: the same grids as the CPU, values within the float32 tolerances.
TEST_F(OpsCuda, MultilevelAdaptiveGridAndAtomicBackwardMatchTheCpu) {
  at::globalContext().setDeterministicAlgorithms(false, false);
  for (const bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels-last" : "contiguous");
    std::vector<at::Tensor> feats;
    for (int64_t s : {4, 8, 16, 32}) {
      at::Tensor f = at::randn({2, 8, 512 / s, 640 / s});
      feats.push_back(channels_last ? f.contiguous(at::MemoryFormat::ChannelsLast) : f);
    }
    const std::vector<double> scales = infer_spatial_scales(feats, 512, 640);
    const at::Tensor rois = random_rois(200, 2, 400, at::kFloat);
    auto run = [&](at::Device device) {
      return multilevel_output_and_grads(feats, rois, scales, device, /*sampling_ratio=*/0, /*aligned=*/true, 7);
    };
    const auto g = run(gpu), c = run(at::kCPU);
    expect_close(g[0], c[0], 1e-5, 1e-5, "output");
    for (size_t i = 1; i < g.size(); ++i)
      expect_close(g[i], c[i], 1e-4, 1e-4, "gradient of level " + std::to_string(i - 1));
  }
  check_device_faults(gpu, "valid RoIs");
}

// float16/bfloat16 maps read as they are (no float32 copy): the values of the float32 kernels on
// the widened maps, the island the kernels replaced. Forward and the deterministic backward bit
// for bit; the atomic backward (float32 atomics either way, in a varying order) within 1e-4 of
// the island's, before the one rounding to the features' dtype. And the CPU's reduced-precision
// result within float32 tolerance (test_roi_align_reduced.cpp holds the CPU to its own island).
TEST_F(OpsCuda, ReducedPrecisionMapsPoolAsTheirFloat32Island) {
  for (const auto dtype : {at::kHalf, at::kBFloat16}) {
    for (const bool deterministic : {true, false}) {
      at::globalContext().setDeterministicAlgorithms(deterministic, false);
      const std::string what = std::string(c10::toString(dtype)) +
                               (deterministic ? " deterministic" : " atomic");
      std::vector<at::Tensor> feats, wide;
      for (int64_t s : {4, 8, 16, 32}) {
        feats.push_back(at::randn({2, 16, 512 / s, 640 / s}).to(dtype).contiguous(at::MemoryFormat::ChannelsLast));
        wide.push_back(feats.back().to(at::kFloat));
      }
      const std::vector<double> scales = infer_spatial_scales(feats, 512, 640);
      const at::Tensor rois = random_rois(300, 2, 400, at::kFloat);
      const auto direct = multilevel_output_and_grads(feats, rois, scales, gpu, 2, false, 13);
      const auto island = multilevel_output_and_grads(wide, rois, scales, gpu, 2, false, 13);
      const auto cpu = multilevel_output_and_grads(feats, rois, scales, at::kCPU, 2, false, 13);
      ASSERT_EQ(direct[0].scalar_type(), dtype) << what;
      EXPECT_TRUE(at::equal(direct[0], island[0].to(dtype))) << what << ": forward";
      expect_close(direct[0].to(at::kFloat), cpu[0].to(at::kFloat), 1e-2, 1e-2, what + " forward vs CPU");
      for (size_t i = 1; i < direct.size(); ++i) {
        const std::string level = what + " gradient of level " + std::to_string(i - 1);
        ASSERT_EQ(direct[i].scalar_type(), dtype) << level;
        EXPECT_TRUE(direct[i].is_contiguous(at::MemoryFormat::ChannelsLast)) << level;
        if (deterministic) {
          EXPECT_TRUE(at::equal(direct[i], island[i].to(dtype))) << level;
        } else {
          expect_close(direct[i].to(at::kFloat), island[i].to(dtype).to(at::kFloat), 1e-2, 1e-2, level);
        }
      }
      // The single-level op, forward, on the first map.
      const at::Tensor one = roi_align(feats[0].to(gpu), rois.to(gpu), 0.25, 7, 7, 2, false);
      const at::Tensor one_wide = roi_align(wide[0].to(gpu), rois.to(gpu), 0.25, 7, 7, 2, false);
      EXPECT_TRUE(at::equal(one, one_wide.to(dtype))) << what << ": roi_align forward";
    }
  }
  check_device_faults(gpu, "valid RoIs");
}

TEST_F(OpsCuda, NmsKeepsWhatTheCpuKeeps) {
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor boxes = random_rois(2000, 1, 300, dtype).slice(1, 1, 5).contiguous();
    const at::Tensor scores = at::rand({2000}, dtype);
    const at::Tensor idxs = at::randint(0, 5, {2000}, at::kLong);
    EXPECT_TRUE(at::equal(nms(boxes.to(gpu), scores.to(gpu), 0.5).cpu(), nms(boxes, scores, 0.5)))
        << c10::toString(dtype);
    EXPECT_TRUE(at::equal(batched_nms(boxes.to(gpu), scores.to(gpu), idxs.to(gpu), 0.6).cpu(),
                          batched_nms(boxes, scores, idxs, 0.6)))
        << c10::toString(dtype);
  }
}

struct ProposalInputs {
  std::vector<at::Tensor> objectness, deltas, anchors;
  at::Tensor sizes;
  ProposalInputs to(at::Device d) const {
    ProposalInputs o;
    for (const auto& t : objectness) o.objectness.push_back(t.to(d));
    for (const auto& t : deltas) o.deltas.push_back(t.to(d));
    for (const auto& t : anchors) o.anchors.push_back(t.to(d));
    o.sizes = sizes;  // host sizes, as the network passes them
    return o;
  }
};

ProposalInputs proposal_inputs() {
  const AnchorGenerator gen = AnchorGenerator::fpn_default();
  ProposalInputs in;
  std::vector<at::Tensor> feats;
  for (int64_t s : {4, 8, 16, 32, 64}) {
    const int64_t h = (256 + s - 1) / s, w = (320 + s - 1) / s;
    in.objectness.push_back(at::randn({2, 3, h, w}));
    in.deltas.push_back(at::randn({2, 12, h, w}) * 0.2);
    feats.push_back(at::zeros({2, 1, h, w}));
  }
  in.anchors = gen(feats, {256, 320});
  in.sizes = torch::tensor({{256, 320}, {200, 240}}, at::kLong);
  return in;
}

// Anchors for GPU features are built on the GPU (aranges and the cell anchors): the same floats
// as the CPU's, for every level, with no sync.
TEST_F(OpsCuda, AnchorsBuiltOnTheGpuEqualTheCpusWithoutASync) {
  const AnchorGenerator gen = AnchorGenerator::fpn_default();
  std::vector<at::Tensor> cpu_feats, gpu_feats;
  for (int64_t s : {4, 8, 16, 32, 64}) {
    cpu_feats.push_back(at::zeros({1, 1, (800 + s - 1) / s, (1344 + s - 1) / s}));
    gpu_feats.push_back(cpu_feats.back().to(gpu));
  }
  const auto cpu = gen(cpu_feats, {800, 1344});
  std::vector<at::Tensor> on_gpu;
#ifdef MRCNN_HAVE_CUDA
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
  EXPECT_NO_THROW(on_gpu = gen(gpu_feats, {800, 1344})) << "building anchors synchronized";
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
#endif
  ASSERT_EQ(on_gpu.size(), cpu.size());
  for (size_t l = 0; l < cpu.size(); ++l) {
    EXPECT_TRUE(on_gpu[l].is_cuda()) << "level " << l;
    EXPECT_TRUE(at::equal(on_gpu[l].cpu(), cpu[l])) << "level " << l;
  }
}

TEST_F(OpsCuda, ProposalsMatchTheCpu) {
  const ProposalInputs in = proposal_inputs();
  const ProposalInputs g = in.to(gpu);
  for (const bool per_batch : {false, true}) {
    ProposalOptions opts;
    opts.pre_nms_top_n = 500;
    opts.post_nms_top_n = 300;
    opts.min_size = 1e-3;
    opts.per_batch_post_nms = per_batch;
    const Proposals c = generate_proposals(in.objectness, in.deltas, in.anchors, in.sizes, opts);
    const Proposals d = generate_proposals(g.objectness, g.deltas, g.anchors, g.sizes, opts);
    EXPECT_TRUE(at::equal(d.counts.cpu(), c.counts)) << "per_batch " << per_batch;
    expect_close(d.boxes, c.boxes, 1e-6, 1e-4, "boxes");
    expect_close(d.scores, c.scores, 1e-6, 1e-7, "scores");
  }
  check_device_faults(gpu, "valid proposals");
}

TEST_F(OpsCuda, PasteMatchesTheCpu) {
  const at::Tensor masks = at::rand({6, 28, 28});
  const at::Tensor boxes = torch::tensor({{1.f, 2.f, 30.f, 40.f}, {-5.f, -5.f, 10.f, 10.f},
                                          {20.f, 20.f, 63.f, 47.f}, {0.f, 0.f, 64.f, 48.f},
                                          {10.5f, 3.25f, 11.f, 4.f}, {70.f, 50.f, 90.f, 60.f}});
  EXPECT_TRUE(at::equal(paste_masks_in_image(masks.to(gpu), boxes.to(gpu), 48, 64).cpu(),
                        paste_masks_in_image(masks, boxes, 48, 64)));
  EXPECT_TRUE(at::equal(paste_masks_in_image_binary(masks.to(gpu), boxes.to(gpu), 48, 64).cpu(),
                        paste_masks_in_image_binary(masks, boxes, 48, 64)));
  check_device_faults(gpu, "valid boxes");
}

// Random instances of several polygons each, proposals around, inside and beyond them: the CUDA
// rasterizer gives the CPU's masks bit for bit, at 28 x 28 and at an odd size.
TEST_F(OpsCuda, MaskTargetsEqualTheCpuBitForBit) {
  std::vector<double> coords;
  std::vector<int64_t> poly_off{0}, inst_off{0};
  const at::Tensor r = at::rand({2000}, at::kDouble);
  int64_t used = 0;
  for (int inst = 0; inst < 12; ++inst) {
    const int polys = 1 + inst % 3;
    for (int p = 0; p < polys; ++p) {
      const int verts = 3 + (inst * 7 + p) % 10;
      for (int v = 0; v < verts; ++v) {
        coords.push_back(200 * r[used++].item<double>());
        coords.push_back(150 * r[used++].item<double>());
      }
      poly_off.push_back(static_cast<int64_t>(coords.size()));
    }
    inst_off.push_back(static_cast<int64_t>(poly_off.size()) - 1);
  }
  const PolygonList polys{torch::tensor(coords, at::kDouble), torch::tensor(poly_off, at::kLong),
                          torch::tensor(inst_off, at::kLong)};
  at::Tensor boxes = at::rand({300, 4}) * 180;
  boxes.slice(1, 2, 4) += boxes.slice(1, 0, 2) * 0.2 + at::rand({300, 2}) * 60;
  boxes[7] = torch::tensor({3.f, 4.f, 3.5f, 4.25f});  // thinner than one pixel: w = max(w, 1)
  const at::Tensor matched = at::randint(0, 12, {300}, at::kLong);
  for (const int64_t m : {28, 17}) {
    SCOPED_TRACE(m);
    const at::Tensor cpu = mask_targets(polys, matched, boxes, m);
    const at::Tensor gpu_out = mask_targets(polys, matched.to(gpu), boxes.to(gpu), m);
    ASSERT_EQ(gpu_out.device(), gpu);
    EXPECT_TRUE(at::equal(gpu_out.cpu(), cpu)) << (gpu_out.cpu() != cpu).sum().item<int64_t>() << " pixels differ";
    EXPECT_GT(cpu.sum().item<float>(), 0.f);
  }
  EXPECT_EQ(mask_targets(polys, matched.slice(0, 0, 0).to(gpu), boxes.slice(0, 0, 0).to(gpu), 28).size(0), 0);
  // Indices given on the host; an instance without polygons and one with an empty polygon.
  const PolygonList sparse{torch::tensor({2.0, 2.0, 6.0, 2.0, 6.0, 6.0}, at::kDouble),
                           torch::tensor({0, 0, 6}, at::kLong), torch::tensor({0, 0, 2}, at::kLong)};
  const at::Tensor idx = torch::tensor({0, 1, 1}, at::kLong);
  const at::Tensor some = torch::tensor({{0.f, 0.f, 8.f, 8.f}, {0.f, 0.f, 8.f, 8.f}, {1.f, 1.f, 7.f, 5.f}});
  EXPECT_TRUE(at::equal(mask_targets(sparse, idx, some.to(gpu), 8).cpu(), mask_targets(sparse, idx, some, 8)));
  check_device_faults(gpu, "valid mask targets");
}

// Invalid values do not stop the device: the op finishes, the element it could not compute is 0,
// the fault word names the problem, and the context stays usable.
TEST_F(OpsCuda, InvalidValuesAreReportedOnTheHostAndLeaveTheDeviceUsable) {
  const at::Tensor x = at::randn({2, 4, 16, 16}).to(gpu);
  const at::Tensor bad = torch::tensor({{0.f, 1.f, 1.f, 9.f, 9.f}, {5.f, 1.f, 1.f, 9.f, 9.f},
                                        {NAN, 1.f, 1.f, 9.f, 9.f}, {0.5f, 1.f, 1.f, 9.f, 9.f}})
                             .to(gpu);
  const at::Tensor huge = torch::tensor({{0.f, 1.f, 1.f, 1e30f, 9.f}, {1.f, 1.f, INFINITY, 9.f, 9.f}}).to(gpu);
  EXPECT_EQ(roi_align(x, huge, 1.0, 3, 3, 0, false).abs().sum().item<float>(), 0.f);
  EXPECT_EQ(take_device_faults(gpu), kFaultRoiBox) << "a box too large to sample, and an infinite one";
  const at::Tensor y = roi_align(x, bad, 1.0, 3, 3, 2, false).cpu();
  EXPECT_TRUE(at::equal(y.slice(0, 1), at::zeros({3, 4, 3, 3}))) << "RoIs 1-3 name no image";
  EXPECT_GT(y[0].abs().sum().item<float>(), 0.f);
  EXPECT_THROW(
      {
        try {
          check_device_faults(gpu, "roi_align test");
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what_without_backtrace()).find("roi_align test: rois[:, 0]"),
                    std::string::npos);
          throw;
        }
      },
      c10::Error);

  ProposalInputs in = proposal_inputs();
  in.objectness[2][1][0][3][4] = NAN;
  const ProposalInputs g = in.to(gpu);
  ProposalOptions opts;
  opts.pre_nms_top_n = 100;
  opts.post_nms_top_n = 50;
  generate_proposals(g.objectness, g.deltas, g.anchors, g.sizes, opts);
  EXPECT_EQ(take_device_faults(gpu), kFaultObjectnessNaN);
  // The CPU refuses the same input outright.
  EXPECT_THROW(generate_proposals(in.objectness, in.deltas, in.anchors, in.sizes, opts), c10::Error);

  const at::Tensor boxes = torch::tensor({{1.f, 2.f, 30.f, 40.f}, {NAN, 0.f, 5.f, 5.f}}).to(gpu);
  const at::Tensor pasted = paste_masks_in_image(at::rand({2, 28, 28}).to(gpu), boxes, 48, 64).cpu();
  EXPECT_EQ(take_device_faults(gpu), kFaultPasteBox);
  EXPECT_EQ(pasted[1].abs().sum().item<float>(), 0.f);

  const PolygonList square{torch::tensor({2.0, 2.0, 6.0, 2.0, 6.0, 6.0, 2.0, 6.0}, at::kDouble),
                           torch::tensor({0, 8}, at::kLong), torch::tensor({0, 1}, at::kLong)};
  const at::Tensor targets =
      mask_targets(square, torch::tensor({0, 1, 0}, at::kLong).to(gpu),
                   torch::tensor({{2.f, 2.f, 6.f, 6.f}, {2.f, 2.f, 6.f, 6.f}, {NAN, 2.f, 6.f, 6.f}}).to(gpu), 8)
          .cpu();
  EXPECT_EQ(take_device_faults(gpu), kFaultMaskTarget) << "instance 1 does not exist; a NaN proposal";
  EXPECT_EQ(targets[0].sum().item<float>(), 64.f);
  EXPECT_EQ(targets.slice(0, 1).abs().sum().item<float>(), 0.f);
  const PolygonList far{torch::tensor({2.0, 2.0, 6e9, 2.0, 6.0, 6.0}, at::kDouble), torch::tensor({0, 6}, at::kLong),
                        torch::tensor({0, 1}, at::kLong)};
  EXPECT_EQ(mask_targets(far, torch::tensor({0}, at::kLong).to(gpu), torch::tensor({{0.f, 0.f, 8.f, 8.f}}).to(gpu), 8)
                .abs().sum().item<float>(), 0.f);
  EXPECT_EQ(take_device_faults(gpu), kFaultMaskTarget) << "a vertex beyond 1e8 in the proposal's frame";
  EXPECT_THROW(mask_targets(far, torch::tensor({0}, at::kLong), torch::tensor({{0.f, 0.f, 8.f, 8.f}}), 8),
               std::exception);  // the CPU refuses it outright

  // Still usable: a valid call gives the CPU's answer and no fault.
  const at::Tensor good = bad.slice(0, 0, 1);
  expect_close(roi_align(x, good, 1.0, 3, 3, 2, false), roi_align(x.cpu(), good.cpu(), 1.0, 3, 3, 2, false),
               1e-5, 1e-5, "after the faults");
  EXPECT_EQ(take_device_faults(gpu), 0);
}

// The batch draw on GPU labels (nonzero_static of the counts read once, host randperm) selects
// what it selects on the CPU from the same generators' states.
TEST_F(OpsCuda, SamplerBatchDrawEqualsTheCpu) {
  const BalancedPositiveNegativeSampler sampler(256, 0.5);
  std::vector<at::Tensor> cpu_labels = {at::randint(-1, 3, {5000}, at::kLong), at::empty({0}, at::kLong),
                                        at::randint(-1, 1, {300}, at::kLong), at::ones({20}, at::kLong)};
  std::vector<at::Tensor> gpu_labels;
  for (const at::Tensor& l : cpu_labels) gpu_labels.push_back(l.to(gpu));
  std::vector<at::Generator> gc, gg;
  std::vector<at::Generator*> pc, pg;
  for (size_t i = 0; i < cpu_labels.size(); ++i) {
    gc.push_back(at::make_generator<at::CPUGeneratorImpl>(40 + i));
    gg.push_back(at::make_generator<at::CPUGeneratorImpl>(40 + i));
  }
  for (size_t i = 0; i < cpu_labels.size(); ++i) {
    pc.push_back(&gc[i]);
    pg.push_back(&gg[i]);
  }
  const auto on_cpu = sampler.indices(cpu_labels, pc);
  const auto on_gpu = sampler.indices(gpu_labels, pg);
  ASSERT_EQ(on_gpu.size(), on_cpu.size());
  for (size_t i = 0; i < on_cpu.size(); ++i) {
    SCOPED_TRACE("image " + std::to_string(i));
    EXPECT_TRUE(on_gpu[i].first.is_cuda());
    EXPECT_TRUE(at::equal(on_gpu[i].first.cpu(), on_cpu[i].first));
    EXPECT_TRUE(at::equal(on_gpu[i].second.cpu(), on_cpu[i].second));
  }
  EXPECT_EQ(on_cpu[0].first.numel() + on_cpu[0].second.numel(), 256);
}

}  // namespace
}  // namespace mrcnn::ops
