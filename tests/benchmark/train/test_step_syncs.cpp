// How often the network's training step blocks on a GPU: once (the RoI head's sample counts, which
// torchvision's draw needs on the host), whatever the batch size, also for a batch shape it has
// not seen (anchors built on the device); and the harness's trainer adds nothing to that but its
// read of the step results, every results_every steps. Counted by train::SyncCounter (LibTorch's
// sync debug mode), which does not see the step's other read: the RPN's counts, copied into
// page-locked memory before the front is queued and waited for through an event after it
// (ops::HostRead), a wait for the labels alone that a profile shows as cudaEventSynchronize.
// Skipped without a GPU.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <iostream>
#include <string>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/run/mask_rcnn_model.h"
#include "benchmark/train/sync_counter.h"
#include "benchmark/train/trainer.h"
#include "model/mask_rcnn.h"
#include "tests/model/tiny.h"

namespace mrcnn::train {
namespace {

using model::testing::make_batch;
using model::testing::synthetic_image;

model::Batch on_gpu(model::Batch b) {
  // As the data loader delivers a batch: images and ground truth on the device, sizes, counts and
  // polygons on the host.
  for (at::Tensor* t : {&b.images, &b.gt_boxes, &b.gt_labels}) *t = t->to(at::kCUDA);
  return b;
}

// A counted batch of `images` images, its padded shape one no other counted batch has (96x128,
// 128x128, 160x128 for 1, 2, 4 images), nor the 64x64 warm-up.
model::Batch counted_batch(int images) {
  std::vector<model::testing::SyntheticImage> list;
  std::vector<int64_t> ids;
  for (int i = 0; i < images; ++i) {
    list.push_back(synthetic_image(80 + 16 * images, 112, 2 + i % 2, 40 + i));
    ids.push_back(100 * images + i);
  }
  return on_gpu(make_batch(list, ids));
}

TEST(TrainingStepSyncs, OnCudaTheNetworkReadsTheDeviceOnceAStepAtAnyBatchSize) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the step's sync count is not measured";
  model::MaskRCNN m(model::testing::tiny_options(), at::make_generator<at::CPUGeneratorImpl>(21));
  m->to(at::kCUDA);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
  // A first step warms up the libraries (cuDNN, cuBLAS, the allocator), at a padded shape that no
  // counted batch has (64x64; they pad to 96x128, 128x128 and 160x128).
  model::total_loss(m->forward_train(on_gpu(make_batch({synthetic_image(64, 64, 2, 31)}, {1})), gen).losses).backward();
  for (const int images : {1, 2, 4}) {
    const model::Batch b = counted_batch(images);
    SyncCounter counter;
    ASSERT_TRUE(counter.watching_cuda());
    const model::TrainOutput out = m->forward_train(b, gen);
    model::total_loss(out.losses).backward();
    EXPECT_EQ(counter.count(), 1) << images << " images of a new shape";
  }
}

// With the backbone, FPN and RPN head replayed from CUDA graphs: a replayed step reads the device
// once, as the eager one (the graphs themselves read nothing back). The capturing steps' counts
// are printed, not asserted: warm-ups and capture are once per shape.
TEST(TrainingStepSyncs, OnCudaAStepReplayedFromGraphsReadsTheDeviceOnce) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the graphed step's sync count is not measured";
  model::ModelOptions o = model::testing::tiny_options();
  o.cuda_graph_shapes = 4;
  model::MaskRCNN m(o, at::make_generator<at::CPUGeneratorImpl>(21));
  m->to(at::kCUDA);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
  model::total_loss(m->forward_train(on_gpu(make_batch({synthetic_image(64, 64, 2, 31)}, {1})), gen).losses).backward();
  for (const int images : {1, 2, 4}) {
    const model::Batch b = counted_batch(images);
    for (const char* step : {"capturing", "replayed"}) {
      SyncCounter counter;
      ASSERT_TRUE(counter.watching_cuda());
      model::total_loss(m->forward_train(b, gen).losses).backward();
      if (std::string(step) == "replayed") {
        EXPECT_EQ(counter.count(), 1) << images << " images";
      }
      std::cout << "[ graphs ] " << images << " images, " << step << " step: " << counter.count() << " syncs\n";
    }
  }
  ASSERT_NE(m->feature_graphs(), nullptr);
  EXPECT_EQ(m->feature_graphs()->stats().captured, 4);
  EXPECT_EQ(m->feature_graphs()->stats().replayed, 7);
}

// The whole step as the harness runs it with float16's loss scaling (scale, unscale and check,
// clipping, the scale's update, the fused SGD that skips on the device), reading its results
// every third step: the steps between reads wait for the host once (the counts), the reading
// step twice.
TEST(TrainingStepSyncs, OnCudaTheTrainerAddsOnlyItsResultsReadEveryNSteps) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the trainer's sync count is not measured";
  model::MaskRCNN net(model::testing::tiny_options(), at::make_generator<at::CPUGeneratorImpl>(21));
  net->to(at::kCUDA);
  run::MaskRcnnModel model(net);
  auto comm = comm::make_local_communicator();
  Trainer trainer(model,
                  {.schedule = {.base_lr = 0.01},
                   .precision = model::Precision::kFloat16,
                   .gradient_clip_norm = 100,
                   .seed = 3,
                   .results_every = 3},
                  *comm);
  // Warm-up (libraries, the allocator, the scaler's state moved to the device), read at once.
  trainer.step(on_gpu(make_batch({synthetic_image(64, 64, 2, 31)}, {1})));
  std::vector<int64_t> syncs, read;
  for (const int images : {1, 2, 4}) {
    const model::Batch b = counted_batch(images);
    SyncCounter counter;
    ASSERT_TRUE(counter.watching_cuda());
    trainer.step(b, [&](const StepResult& r) { read.push_back(r.step); });
    syncs.push_back(counter.count());
  }
  EXPECT_EQ(syncs, (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(read, (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace mrcnn::train
