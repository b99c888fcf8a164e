// The portable ops on a GPU against the native CPU kernels. Off the CPU the portable ops are what
// an AMD, Intel, Habana or Apple device runs; an NVIDIA GPU is the accelerator this project can
// borrow, so run_scripts/gpu_check.sh runs them there (with run.ops forced to portable): the same
// ATen compositions on a device, with the fault word instead of host-side value checks. Skipped,
// saying why, where no GPU is visible.
//
// Tolerances: RoIAlign 1e-4 forward and backward, float32 (the native CUDA kernels reproduce the
// host's rounding of the sample points and meet 1e-5; ATen's GPU arithmetic may round a sample
// point's coordinate one ulp apart, 7.6e-6 px at 100 px, which moves a bin of unit-variance
// features by up to ~3e-5: 2.9e-5 on an H200); NMS keeps,
// mask targets equal; proposal counts equal and boxes within 1e-3 px (a GPU's exp may round
// differently from the host's); pasted binary masks differ in at most 0.1 % of the pixels.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "model/ops/device_faults.h"
#include "model/ops/implementation.h"
#include "model/ops/ops.h"

namespace mrcnn::ops {
namespace {

class PortableOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device here: the portable ops on a GPU run where gpu_check.sh runs";
    at::manual_seed(23);
  }
  void TearDown() override {
    if (at::hasCUDA()) take_device_faults(gpu);
  }
  const at::Device gpu{c10::kCUDA, 0};
};

at::Tensor random_rois(int64_t k, int64_t batch, double extent) {
  at::Tensor boxes = at::rand({k, 4}) * extent;
  boxes.slice(1, 2, 4) += boxes.slice(1, 0, 2) + 1;
  return at::cat({at::randint(0, batch, {k, 1}).to(at::kFloat), boxes}, 1);
}

TEST_F(PortableOnGpu, MultilevelRoIAlignForwardAndBackwardMatchTheNativeCpu) {
  const std::vector<double> scales{0.25, 0.125, 0.0625, 0.03125};
  std::vector<at::Tensor> cpu_feats, gpu_feats;
  for (double s : scales) {
    const at::Tensor f = at::randn({2, 16, static_cast<int64_t>(320 * s), static_cast<int64_t>(448 * s)});
    cpu_feats.push_back(f.clone().requires_grad_(true));
    gpu_feats.push_back(f.to(gpu).requires_grad_(true));
  }
  const at::Tensor rois = random_rois(200, 2, 400);
  const at::Tensor w = at::randn({200, 16, 7, 7});
  at::Tensor want;
  {
    ImplementationGuard native(Implementation::kNative);
    want = multilevel_roi_align(cpu_feats, rois, 7, 2, false, scales);
    (want * w).sum().backward();
  }
  ImplementationGuard portable(Implementation::kPortable);
  const at::Tensor got = multilevel_roi_align(gpu_feats, rois.to(gpu), 7, 2, false, scales);
  (got * w.to(gpu)).sum().backward();
  const at::Tensor off = (got.cpu() - want).abs();
  std::cout << "[ portable RoIAlign on the GPU ] forward: max difference " << off.max().item<double>() << ", "
            << (off > 1e-5).sum().item<int64_t>() << " of " << off.numel() << " beyond 1e-5\n";
  EXPECT_TRUE(at::allclose(got.cpu(), want, 1e-4, 1e-4)) << off.max();
  for (size_t l = 0; l < scales.size(); ++l)
    EXPECT_TRUE(at::allclose(gpu_feats[l].grad().cpu(), cpu_feats[l].grad(), 1e-4, 1e-4)) << "level " << l;
  check_device_faults(gpu, "valid RoIs");
}

TEST_F(PortableOnGpu, NmsMaskTargetsAndPasteMatchTheNativeCpu) {
  const at::Tensor xy = at::rand({1500, 2}) * 600;
  const at::Tensor boxes = at::cat({xy, xy + at::rand({1500, 2}) * 120 + 2}, 1);
  const at::Tensor scores = at::rand({1500});
  const at::Tensor labels = at::randint(1, 9, {1500});
  const at::Tensor keep = nms(boxes, scores, 0.5), keep_b = batched_nms(boxes, scores, labels, 0.5);
  // Mask targets: two square instances and a triangle, 64 proposals around them.
  PolygonList polys{at::tensor({10.0, 10.0, 90.0, 10.0, 90.0, 90.0, 10.0, 90.0,  //
                                120.0, 40.0, 200.0, 40.0, 160.0, 130.0}),
                    at::tensor({int64_t{0}, int64_t{8}, int64_t{14}}), at::tensor({int64_t{0}, int64_t{1}, int64_t{2}})};
  const at::Tensor proposals = at::rand({64, 2}) * 100;
  const at::Tensor props = at::cat({proposals, proposals + at::rand({64, 2}) * 120 + 1}, 1);
  const at::Tensor matched = at::randint(0, 2, {64});
  const at::Tensor targets = mask_targets(polys, matched, props, 28);
  const at::Tensor probs = at::rand({40, 28, 28});
  const at::Tensor paste_boxes = at::cat({xy.slice(0, 0, 40), xy.slice(0, 0, 40) + 150}, 1);
  const at::Tensor pasted = paste_masks_in_image_binary(probs, paste_boxes, 480, 640);

  ImplementationGuard portable(Implementation::kPortable);
  EXPECT_TRUE(at::equal(nms(boxes.to(gpu), scores.to(gpu), 0.5).cpu(), keep));
  EXPECT_TRUE(at::equal(batched_nms(boxes.to(gpu), scores.to(gpu), labels.to(gpu), 0.5).cpu(), keep_b));
  EXPECT_TRUE(at::equal(mask_targets(polys, matched.to(gpu), props.to(gpu), 28).cpu(), targets));
  const at::Tensor pasted_gpu = paste_masks_in_image_binary(probs.to(gpu), paste_boxes.to(gpu), 480, 640).cpu();
  EXPECT_LE((pasted_gpu != pasted).sum().item<int64_t>(), pasted.numel() / 1000);
  check_device_faults(gpu, "valid inputs");
}

TEST_F(PortableOnGpu, ProposalsMatchTheNativeCpuAndANaNSetsTheFaultWord) {
  std::vector<at::Tensor> obj, deltas, anchors, obj_g, deltas_g, anchors_g;
  for (int64_t size : {40, 20, 10}) {
    obj.push_back(at::randn({2, 3, size, size}));
    deltas.push_back(at::randn({2, 12, size, size}) * 0.1);
    at::Tensor a = at::rand({size * size * 3, 2}) * 320;
    anchors.push_back(at::cat({a, a + 16 + at::rand({size * size * 3, 2}) * 64}, 1));
    obj_g.push_back(obj.back().to(gpu));
    deltas_g.push_back(deltas.back().to(gpu));
    anchors_g.push_back(anchors.back().to(gpu));
  }
  const at::Tensor sizes = at::tensor(std::vector<int64_t>{320, 300, 300, 320}).view({2, 2});
  ProposalOptions o;
  o.pre_nms_top_n = 500;
  o.post_nms_top_n = 300;
  const Proposals want = generate_proposals(obj, deltas, anchors, sizes, o);
  ImplementationGuard portable(Implementation::kPortable);
  const Proposals got = generate_proposals(obj_g, deltas_g, anchors_g, sizes.to(gpu), o);
  EXPECT_TRUE(at::equal(got.counts.cpu(), want.counts));
  EXPECT_TRUE(at::allclose(got.boxes.cpu(), want.boxes, 0, 1e-3)) << (got.boxes.cpu() - want.boxes).abs().max();
  check_device_faults(gpu, "valid proposals");
  // A NaN logit does not stop the device: it sets the fault word, read where the harness reads.
  obj_g[1].view(-1)[5] = NAN;
  generate_proposals(obj_g, deltas_g, anchors_g, sizes.to(gpu), o);
  EXPECT_NE(take_device_faults(gpu) & kFaultObjectnessNaN, 0);
}

}  // namespace
}  // namespace mrcnn::ops
