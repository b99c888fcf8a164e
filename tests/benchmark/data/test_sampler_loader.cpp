// Samplers (determinism, aspect groups, sharding), batch assembly (padding and counts), the
// threaded loader (order independent of the thread count, errors, prefetch bound, shutdown) and
// fake-data batches. The dataset here is in memory, so these tests need no files.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

#include "benchmark/data/batch.h"
#include "benchmark/data/batch_copier.h"
#include "benchmark/data/fake_data.h"
#include "benchmark/data/loader.h"
#include "benchmark/data/sampler.h"
#include "tests/benchmark/data/batch_checks.h"

namespace mrcnn::data {
namespace {

using testing::expect_same_batch_padded_further;

// Sample i: an image of sizes[i] (not resized), filled with i + 0.25 in channel 0 and its flip
// flag in channel 1; i % 3 instances whose boxes encode i. Loads of `bad` throw like a corrupt
// file would. Loads take a little, index-dependent time to shuffle the workers' timing.
class MemoryDataset final : public Dataset {
 public:
  explicit MemoryDataset(std::vector<ImageSize> sizes, std::set<int64_t> bad = {}, int sleep_us = 200)
      : sizes_(std::move(sizes)), bad_(std::move(bad)), sleep_us_(sleep_us) {}
  int64_t size() const override { return static_cast<int64_t>(sizes_.size()); }
  ImageSize original_size(int64_t i) const override { return sizes_[static_cast<size_t>(i)]; }
  ImageSize resized_size(int64_t i) const override { return sizes_[static_cast<size_t>(i)]; }
  SampleTargets load(int64_t i, const EpochKey& key, float* slot, int64_t sh, int64_t sw) const override {
    loads_.fetch_add(1);
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_ * ((i * 7) % 5)));
    if (bad_.count(i)) throw std::runtime_error("img_" + std::to_string(i) + ".jpg: corrupt JPEG data");
    const ImageSize s = sizes_[static_cast<size_t>(i)];
    const bool flip = flip_decision(key.seed, key.epoch, i, 0.5);
    for (int c = 0; c < 3; ++c)
      for (int64_t y = 0; y < sh; ++y)
        for (int64_t x = 0; x < sw; ++x) {
          float v = 0.0f;
          if (y < s.height && x < s.width) v = c == 0 ? static_cast<float>(i) + 0.25f : c == 1 ? flip : 1.0f;
          slot[(c * sh + y) * sw + x] = v;
        }
    SampleTargets t;
    t.image_id = 1000 + i;
    t.original = s;
    t.resized = s;
    t.flipped = flip;
    for (int64_t k = 0; k < i % 3; ++k) {
      const auto f = static_cast<float>(i);
      t.targets.boxes.insert(t.targets.boxes.end(), {f, static_cast<float>(k), f + 1, static_cast<float>(k + 1)});
      t.targets.labels.push_back(1 + (i + k) % 4);
      t.targets.coords.insert(t.targets.coords.end(), {0.0, 0.0, 1.0, 0.0, 1.0, static_cast<double>(i)});
      t.targets.poly_offsets.push_back(static_cast<int64_t>(t.targets.coords.size()));
      t.targets.instance_offsets.push_back(static_cast<int64_t>(t.targets.poly_offsets.size()) - 1);
    }
    return t;
  }
  int64_t loads() const { return loads_.load(); }

 private:
  std::vector<ImageSize> sizes_;
  std::set<int64_t> bad_;
  int sleep_us_;
  mutable std::atomic<int64_t> loads_{0};
};

// Landscape and portrait sizes in an irregular pattern.
std::vector<ImageSize> mixed_sizes(int64_t n) {
  std::vector<ImageSize> s;
  for (int64_t i = 0; i < n; ++i)
    s.push_back((i * 5) % 7 < 3 ? ImageSize{20 + i % 9, 40 + i % 11} : ImageSize{45 + i % 5, 30 + i % 13});
  return s;
}

std::vector<int> groups_of(const std::vector<ImageSize>& sizes) {
  std::vector<int> g;
  for (const ImageSize& s : sizes) g.push_back(aspect_group(s));
  return g;
}

TEST(Sampler, AspectGroupFollowsTheReference) {
  EXPECT_EQ(aspect_group({480, 640}), 0);
  EXPECT_EQ(aspect_group({640, 480}), 1);
  EXPECT_EQ(aspect_group({500, 500}), 1);  // h / w == 1 falls in the upper bin
}

TEST(Sampler, EpochIsAPureFunctionOfSeedAndEpoch) {
  const auto groups = groups_of(mixed_sizes(101));
  const BatchSampler a(groups, {.batch_size = 4}), b(groups, {.batch_size = 4});
  EXPECT_EQ(a.epoch(11, 2), b.epoch(11, 2));
  EXPECT_NE(a.epoch(11, 2), a.epoch(11, 3));
  EXPECT_NE(a.epoch(11, 2), a.epoch(12, 2));
}

TEST(Sampler, BatchesNeverMixAspectGroups) {
  const auto sizes = mixed_sizes(200);
  const auto groups = groups_of(sizes);
  for (int world : {1, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      const BatchSampler s(groups, {.batch_size = 3}, rank, world);
      for (const auto& batch : s.epoch(5, 0)) {
        ASSERT_FALSE(batch.empty());
        ASSERT_LE(batch.size(), 3u);
        for (int64_t i : batch) ASSERT_EQ(groups[i], groups[batch[0]]);
      }
    }
  }
}

TEST(Sampler, RanksTogetherCoverTheEpochExactlyOnce) {
  const auto groups = groups_of(mixed_sizes(103));
  for (int world : {1, 2, 3, 8}) {
    std::multiset<int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      const BatchSampler s(groups, {.batch_size = 2, .last_batch = LastBatch::kKeep}, rank, world);
      const auto batches = s.epoch(9, 4);
      EXPECT_EQ(static_cast<int64_t>(batches.size()), s.batches_per_epoch()) << "rank " << rank;
      for (const auto& b : batches) seen.insert(b.begin(), b.end());
    }
    ASSERT_EQ(seen.size(), 103u) << "world " << world;
    for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(seen.count(i), 1u) << "index " << i << " world " << world;
  }
}

TEST(Sampler, EachStepOfEveryRankHoldsDistinctImages) {
  const auto groups = groups_of(mixed_sizes(120));
  const int world = 4;
  std::vector<std::vector<std::vector<int64_t>>> per_rank;
  for (int r = 0; r < world; ++r)
    per_rank.push_back(BatchSampler(groups, {.batch_size = 2, .last_batch = LastBatch::kDrop}, r, world).epoch(1, 1));
  for (size_t step = 0; step < per_rank[0].size(); ++step) {
    std::set<int64_t> step_images;
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(per_rank[r].size(), per_rank[0].size());
      for (int64_t i : per_rank[r][step]) step_images.insert(i);
      ASSERT_EQ(groups[per_rank[r][step][0]], groups[per_rank[0][step][0]]) << "ranks disagree on the group";
    }
    EXPECT_EQ(step_images.size(), 8u);
  }
}

TEST(Sampler, PadAndDropGiveEqualFullBatchesOnEveryRank) {
  const auto groups = groups_of(mixed_sizes(97));
  const int world = 3;
  for (LastBatch mode : {LastBatch::kPad, LastBatch::kDrop}) {
    std::set<int64_t> seen;
    int64_t expected = -1;
    for (int r = 0; r < world; ++r) {
      const BatchSampler s(groups, {.batch_size = 4, .last_batch = mode}, r, world);
      const auto batches = s.epoch(3, 7);
      EXPECT_EQ(static_cast<int64_t>(batches.size()), s.batches_per_epoch());
      if (expected < 0) expected = static_cast<int64_t>(batches.size());
      EXPECT_EQ(static_cast<int64_t>(batches.size()), expected);
      for (const auto& b : batches) {
        EXPECT_EQ(b.size(), 4u);
        seen.insert(b.begin(), b.end());
      }
    }
    if (mode == LastBatch::kPad) {
      EXPECT_EQ(seen.size(), 97u);  // every image at least once
    } else {
      EXPECT_LT(seen.size(), 97u);
    }
  }
}

TEST(Sampler, NoShuffleNoGroupingIsTheDatasetOrder) {
  const BatchSampler s(std::vector<int>(7, 1), {.batch_size = 3, .shuffle = false, .group_by_aspect_ratio = false});
  EXPECT_EQ(s.epoch(1, 0), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
}

TEST(Sampler, RejectsBadArguments) {
  EXPECT_THROW(BatchSampler({0, 1}, {.batch_size = 0}), std::invalid_argument);
  EXPECT_THROW(BatchSampler({0, 1}, {}, 2, 2), std::invalid_argument);
  EXPECT_THROW(BatchSampler({0, 3}, {}), std::invalid_argument);
}

TEST(Batch, PadsImagesToMultiplesOf32AndTargetsToTheLargestCount) {
  const std::vector<ImageSize> sizes = {{20, 45}, {33, 30}, {10, 10}};
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{}, 0);
  const std::vector<int64_t> idx = {2, 1, 0};  // instance counts 2, 1, 0
  const model::Batch b = load_batch(*ds, idx, {1, 0});
  ASSERT_EQ(b.images.sizes(), (at::IntArrayRef{3, 3, 64, 64}));
  EXPECT_TRUE(at::equal(b.image_sizes, at::tensor({10, 10, 33, 30, 20, 45}, at::kLong).view({3, 2})));
  EXPECT_TRUE(at::equal(b.original_sizes, b.image_sizes));
  EXPECT_TRUE(at::equal(b.gt_counts, at::tensor({2, 1, 0}, at::kLong)));
  ASSERT_EQ(b.gt_boxes.sizes(), (at::IntArrayRef{3, 2, 4}));
  ASSERT_EQ(b.gt_labels.sizes(), (at::IntArrayRef{3, 2}));
  EXPECT_EQ(b.gt_boxes[1][0][0].item<float>(), 1.0f);
  EXPECT_TRUE(at::equal(b.gt_boxes[1][1], at::zeros({4})));  // padding rows are 0
  EXPECT_TRUE(at::equal(b.gt_boxes[2], at::zeros({2, 4})));
  EXPECT_EQ(b.gt_labels[1][1].item<int64_t>(), 0);
  EXPECT_EQ(b.image_ids, (std::vector<int64_t>{1002, 1001, 1000}));
  ASSERT_EQ(b.gt_polygons.size(), 3u);
  for (const auto& p : b.gt_polygons) EXPECT_NO_THROW(p.check());
  EXPECT_EQ(b.gt_polygons[0].num_instances(), 2);
  EXPECT_EQ(b.gt_polygons[2].num_instances(), 0);
  // Pixels: each image top-left, zeros elsewhere.
  EXPECT_EQ(b.images[1][0][32][29].item<float>(), 1.25f);
  EXPECT_EQ(b.images[1][0][33][29].item<float>(), 0.0f);
  EXPECT_EQ(b.images[1][0][32][30].item<float>(), 0.0f);
  EXPECT_EQ(b.images[0].slice(1, 10).abs().sum().item<float>(), 0.0f);
}

TEST(Batch, CollateMatchesLoadBatch) {
  const std::vector<ImageSize> sizes = {{20, 45}, {33, 30}};
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{}, 0);
  const model::Batch a = load_batch(*ds, std::vector<int64_t>{0, 1}, {4, 2});
  std::vector<at::Tensor> images;
  std::vector<SampleTargets> samples;
  for (int64_t i = 0; i < 2; ++i) {
    at::Tensor im = at::empty({3, sizes[i].height, sizes[i].width});
    samples.push_back(ds->load(i, {4, 2}, im.data_ptr<float>(), sizes[i].height, sizes[i].width));
    images.push_back(im);
  }
  const model::Batch b = collate(images, samples);
  EXPECT_TRUE(at::equal(a.images, b.images));
  EXPECT_TRUE(at::equal(a.gt_boxes, b.gt_boxes));
  EXPECT_TRUE(at::equal(a.gt_counts, b.gt_counts));
  EXPECT_THROW(collate({images[0]}, samples), std::invalid_argument);
}

// ---- padding to fixed shapes (BatchOptions::shapes) ---------------------------------------------

const std::vector<ImageSize> kNvidiaShapes = {{800, 1344}, {1344, 800}};

TEST(BatchShape, PicksTheSmallestShapeThatHoldsTheBatch) {
  const BatchOptions nv{.shapes = kNvidiaShapes};
  // Landscape: the MLPerf resize's largest landscape batch (800 x 1333 -> 800 x 1344) and a small one.
  EXPECT_EQ(batch_shape({{800, 1333}, {600, 1000}}, nv), (ImageSize{800, 1344}));
  EXPECT_EQ(batch_shape({{480, 640}}, nv), (ImageSize{800, 1344}));
  // Portrait.
  EXPECT_EQ(batch_shape({{1333, 800}, {1066, 800}}, nv), (ImageSize{1344, 800}));
  EXPECT_EQ(batch_shape({{1000, 700}}, nv), (ImageSize{1344, 800}));
  // Square: both hold it with the same area; the first listed wins.
  EXPECT_EQ(batch_shape({{800, 800}}, nv), (ImageSize{800, 1344}));
  EXPECT_EQ(batch_shape({{800, 800}}, {.shapes = {{1344, 800}, {800, 1344}}}), (ImageSize{1344, 800}));
  // Held by neither (too tall for the landscape shape, too wide for the portrait one): its own size.
  EXPECT_EQ(batch_shape({{900, 1000}}, nv), (ImageSize{928, 1024}));
  EXPECT_EQ(batch_shape({{1400, 700}}, nv), (ImageSize{1408, 704}));
  // The smallest area among those that hold it, wherever it is listed.
  const BatchOptions three{.shapes = {{800, 1344}, {1344, 800}, {640, 1088}}};
  EXPECT_EQ(batch_shape({{480, 1000}}, three), (ImageSize{640, 1088}));
  EXPECT_EQ(batch_shape({{700, 1000}}, three), (ImageSize{800, 1344}));
  // A shape equal to the batch's own padded size is taken as it is.
  EXPECT_EQ(batch_shape({{640, 1088}}, three), (ImageSize{640, 1088}));
  // No shapes: the batch's own padded size, as before.
  for (const auto& sizes : std::vector<std::vector<ImageSize>>{{{20, 45}, {33, 30}}, {{800, 1333}}, {{1, 1}}})
    EXPECT_EQ(batch_shape(sizes, {}), padded_batch_size(sizes, 32));
  EXPECT_EQ(batch_shape({{20, 45}}, {.size_divisible = 1}), (ImageSize{20, 45}));
  EXPECT_THROW(batch_shape({}, nv), std::invalid_argument);
}

TEST(BatchShape, ShapesMustBePositiveMultiplesOfSizeDivisible) {
  try {
    batch_shape({{20, 45}}, {.shapes = {{800, 1344}, {800, 1333}}});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("shape 1 (800x1333)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("size_divisible 32"), std::string::npos) << msg;
  }
  EXPECT_THROW(batch_shape({{20, 45}}, {.shapes = {{0, 32}}}), std::invalid_argument);
  EXPECT_THROW(batch_shape({{20, 45}}, {.shapes = {{-32, 32}}}), std::invalid_argument);
  EXPECT_THROW(validate_shapes({{64, 96}}, 0), std::invalid_argument);
  EXPECT_NO_THROW(validate_shapes({{64, 96}, {96, 64}}, 32));
  EXPECT_NO_THROW(validate_shapes({{65, 97}}, 1));
  EXPECT_NO_THROW(validate_shapes({}, 32));
  // The Loader refuses them when it is built, not in a worker.
  auto ds = std::make_shared<MemoryDataset>(mixed_sizes(2), std::set<int64_t>{}, 0);
  try {
    Loader loader(ds, std::vector<std::vector<int64_t>>{{0, 1}}, {1, 0}, {.num_threads = 0, .pad_to_shapes = {{64, 100}}});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Loader: pad shapes: shape 0 (64x100)"), std::string::npos) << e.what();
  }
}


TEST(Batch, PaddedToAShapeIsTheBatchOwnPaddingAndZerosBeyond) {
  const std::vector<ImageSize> sizes = {{20, 45}, {33, 30}, {10, 10}, {70, 20}, {50, 40}};
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{}, 0);
  const BatchOptions shaped_options{.shapes = {{64, 96}, {96, 64}}};
  struct Case {
    std::vector<int64_t> indices;
    ImageSize shape;
  };
  // Own 64 x 64 (both hold it, with equal areas: the first listed), own 96 x 32 (the portrait
  // shape), and own 96 x 64, itself a shape (taken as it is).
  for (const Case& c : {Case{{2, 1, 0}, {64, 96}}, Case{{3, 2}, {96, 64}}, Case{{3, 4}, {96, 64}}}) {
    const model::Batch own = load_batch(*ds, c.indices, {1, 0});
    const model::Batch shaped = load_batch(*ds, c.indices, {1, 0}, shaped_options);
    expect_same_batch_padded_further(own, shaped, c.shape);
    // collate pads to the same shape with the same pixels.
    std::vector<at::Tensor> images;
    std::vector<SampleTargets> samples;
    for (int64_t i : c.indices) {
      const ImageSize s = sizes[static_cast<size_t>(i)];
      at::Tensor im = at::empty({3, s.height, s.width});
      samples.push_back(ds->load(i, {1, 0}, im.data_ptr<float>(), s.height, s.width));
      images.push_back(im);
    }
    const model::Batch collated = collate(images, samples, shaped_options);
    EXPECT_TRUE(at::equal(collated.images, shaped.images));
    EXPECT_TRUE(at::equal(collated.gt_boxes, shaped.gt_boxes));
  }
  // A batch that no shape holds keeps its own padded size, bit for bit.
  const BatchOptions small{.shapes = {{32, 64}, {64, 32}}};
  const std::vector<int64_t> idx = {2, 1, 0};
  EXPECT_TRUE(at::equal(load_batch(*ds, idx, {1, 0}, small).images, load_batch(*ds, idx, {1, 0}).images));
}

std::vector<model::Batch> drain(Loader& loader) {
  std::vector<model::Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

TEST(Loader, PadsEveryBatchToAShapeAndIsOtherwiseTheSame) {
  const auto sizes = mixed_sizes(40);  // landscape up to 28 x 50, portrait up to 49 x 42
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{}, 0);
  const BatchSampler sampler(groups_of(sizes), {.batch_size = 3});
  const auto plan = sampler.epoch(9, 2);
  Loader own_loader(ds, plan, {9, 2}, {.num_threads = 2});
  Loader shaped_loader(ds, plan, {9, 2}, {.num_threads = 2, .pad_to_shapes = {{32, 64}, {64, 64}}});
  const auto own = drain(own_loader);
  const auto shaped = drain(shaped_loader);
  ASSERT_EQ(own.size(), shaped.size());
  std::set<std::pair<int64_t, int64_t>> seen;
  for (size_t k = 0; k < own.size(); ++k) {
    const ImageSize shape{shaped[k].images.size(2), shaped[k].images.size(3)};
    seen.insert({shape.height, shape.width});
    const ImageSize own_size{own[k].images.size(2), own[k].images.size(3)};
    EXPECT_EQ(shape, batch_shape(std::vector<ImageSize>{own_size}, {.shapes = {{32, 64}, {64, 64}}}));
    expect_same_batch_padded_further(own[k], shaped[k], shape);
  }
  EXPECT_EQ(seen, (std::set<std::pair<int64_t, int64_t>>{{32, 64}, {64, 64}}));
}

TEST(Loader, SameBatchesInTheSameOrderForAnyThreadCount) {
  const auto sizes = mixed_sizes(61);
  auto ds = std::make_shared<MemoryDataset>(sizes);
  const BatchSampler sampler(groups_of(sizes), {.batch_size = 3});
  const auto plan = sampler.epoch(21, 5);
  Loader base_loader(ds, plan, {21, 5}, {.num_threads = 0});
  const std::vector<model::Batch> base = drain(base_loader);
  ASSERT_EQ(static_cast<int64_t>(base.size()), sampler.batches_per_epoch());
  for (int threads : {1, 2, 5}) {
    for (int prefetch : {1, 3}) {
      Loader loader(ds, plan, {21, 5}, {.num_threads = threads, .prefetch_batches = prefetch});
      const auto got = drain(loader);
      ASSERT_EQ(got.size(), base.size());
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].image_ids, base[k].image_ids) << "threads " << threads << " batch " << k;
        ASSERT_TRUE(at::equal(got[k].images, base[k].images));
        ASSERT_TRUE(at::equal(got[k].gt_boxes, base[k].gt_boxes));
        ASSERT_TRUE(at::equal(got[k].gt_labels, base[k].gt_labels));
      }
      EXPECT_FALSE(loader.next().has_value());  // stays exhausted
      EXPECT_EQ(loader.delivered(), loader.num_batches());
    }
  }
  // The batches follow the plan, and flips are those of (seed, epoch, index).
  for (size_t k = 0; k < base.size(); ++k)
    for (size_t j = 0; j < plan[k].size(); ++j) {
      EXPECT_EQ(base[k].image_ids[j], 1000 + plan[k][j]);
      EXPECT_EQ(base[k].images[static_cast<int64_t>(j)][1][0][0].item<float>(),
                flip_decision(21, 5, plan[k][j], 0.5) ? 1.0f : 0.0f);
    }
}

TEST(Loader, WorkerErrorReachesTheConsumerWithTheFileName) {
  const auto sizes = mixed_sizes(30);
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{7});
  std::vector<std::vector<int64_t>> plan;
  for (int64_t i = 0; i < 30; i += 2) plan.push_back({i, i + 1});  // index 7 is in batch 3 (0-based)
  for (int threads : {0, 3}) {
    Loader loader(ds, plan, {1, 0}, {.num_threads = threads, .prefetch_batches = 4});
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(loader.next().has_value()) << "batch " << k;
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        loader.next();
        FAIL() << "expected the worker's error";
      } catch (const std::runtime_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("img_7.jpg"), std::string::npos) << msg;
        // Counted from 1, as the MLPerf log counts: the sampler's epoch 0 is the log's epoch 1.
        EXPECT_NE(msg.find("epoch 1, batch 4 of 15"), std::string::npos) << msg;
      }
    }
  }
}

TEST(Loader, PrefetchIsBoundedAndShutdownMidEpochIsClean) {
  const auto sizes = mixed_sizes(200);
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{}, 2000);
  const auto plan = BatchSampler(groups_of(sizes), {.batch_size = 2}).epoch(1, 0);
  {
    Loader loader(ds, plan, {1, 0}, {.num_threads = 4, .prefetch_batches = 2});
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    // Two batches of two images at most, though four workers are idle.
    EXPECT_LE(ds->loads(), 4);
    ASSERT_TRUE(loader.next().has_value());
  }  // destroyed with most of the epoch unread: must join, not hang
  EXPECT_LE(ds->loads(), 4 + 2 * 2 + 4);
  {
    Loader never_read(ds, plan, {1, 0}, {.num_threads = 2});
  }
  EXPECT_THROW(Loader(ds, plan, {1, 0}, {.prefetch_batches = 0}), std::invalid_argument);
  EXPECT_THROW(Loader(ds, std::vector<std::vector<int64_t>>(1), {1, 0}), std::invalid_argument);
}

TEST(Loader, CpuDeviceDeliversHostTensors) {
  const auto sizes = mixed_sizes(4);
  auto ds = std::make_shared<MemoryDataset>(sizes, std::set<int64_t>{}, 0);
  Loader loader(ds, {{0, 1}, {2, 3}}, {1, 0}, {.num_threads = 1, .device = c10::Device(c10::kCPU)});
  const auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->images.device().is_cpu());
  EXPECT_FALSE(b->images.is_pinned());
}

TEST(BatchCopier, OneBatchInFlightHandedOverAsStarted) {
  const auto sizes = mixed_sizes(2);
  const model::Batch host = load_batch(MemoryDataset(sizes), std::vector<int64_t>{0, 1}, {1, 0});
  BatchCopier copier(c10::Device(c10::kCPU));
  EXPECT_FALSE(copier.in_flight());
  EXPECT_THROW(copier.finish(), std::logic_error);
  copier.start(host);
  EXPECT_TRUE(copier.in_flight());
  EXPECT_THROW(copier.start(host), std::logic_error);
  const model::Batch got = copier.finish();
  EXPECT_FALSE(copier.in_flight());
  EXPECT_TRUE(got.images.is_same(host.images));  // on the CPU: the batch itself
  EXPECT_EQ(got.image_ids, host.image_ids);
}

// On a GPU: the same batches as on the host, in order, with the images and boxes on the device
// and the metadata the model reads on the host; every batch's copy overlapping or not.
TEST(Loader, CudaDeviceDeliversTheHostBatchesWithMetadataOnTheHost) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the CUDA loader test is skipped";
  const auto sizes = mixed_sizes(40);
  auto ds = std::make_shared<MemoryDataset>(sizes);
  const auto plan = BatchSampler(groups_of(sizes), {.batch_size = 2}).epoch(3, 0);
  Loader host_loader(ds, plan, {3, 0}, {.num_threads = 0});
  const std::vector<model::Batch> base = drain(host_loader);
  const c10::Device gpu(c10::kCUDA, 0);
  for (int threads : {0, 2}) {
    Loader loader(ds, plan, {3, 0}, {.num_threads = threads, .device = gpu});
    for (size_t k = 0; k < base.size(); ++k) {
      const auto b = loader.next();
      ASSERT_TRUE(b.has_value()) << k;
      EXPECT_EQ(b->images.device(), gpu);
      EXPECT_EQ(b->gt_boxes.device(), gpu);
      EXPECT_TRUE(b->image_sizes.is_cpu());
      EXPECT_TRUE(b->gt_counts.is_cpu());
      ASSERT_TRUE(at::equal(b->images.cpu(), base[k].images)) << "threads " << threads << " batch " << k;
      ASSERT_TRUE(at::equal(b->gt_boxes.cpu(), base[k].gt_boxes));
      ASSERT_TRUE(at::equal(b->gt_labels.cpu(), base[k].gt_labels));
      EXPECT_EQ(b->image_ids, base[k].image_ids);
    }
    EXPECT_FALSE(loader.next().has_value());
  }
}

TEST(FakeData, DeterministicShapesAndValidTargets) {
  const FakeBatchOptions o{.batch_size = 3, .height = 50, .width = 70, .min_objects = 2, .max_objects = 5,
                           .num_classes = 5};
  const model::Batch a = make_fake_batch(o, 3, 1), b = make_fake_batch(o, 3, 1), c = make_fake_batch(o, 3, 2);
  ASSERT_EQ(a.images.sizes(), (at::IntArrayRef{3, 3, 64, 96}));
  EXPECT_TRUE(at::equal(a.images, b.images));
  EXPECT_TRUE(at::equal(a.gt_boxes, b.gt_boxes));
  EXPECT_FALSE(at::equal(a.images, c.images));
  EXPECT_EQ(a.images.slice(2, 50).abs().sum().item<float>(), 0.0f);  // padding
  EXPECT_LE(a.images.abs().max().item<float>(), 128.0f);
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t n = a.gt_counts[i].item<int64_t>();
    EXPECT_GE(n, 2);
    EXPECT_LE(n, 5);
    const at::Tensor boxes = a.gt_boxes[i].slice(0, 0, n);
    EXPECT_TRUE((boxes.select(1, 2) > boxes.select(1, 0)).all().item<bool>());
    EXPECT_TRUE((boxes.select(1, 3) <= 50.0f).all().item<bool>());
    const at::Tensor labels = a.gt_labels[i].slice(0, 0, n);
    EXPECT_TRUE(((labels >= 1) & (labels <= 4)).all().item<bool>());
    a.gt_polygons[static_cast<size_t>(i)].check();
    EXPECT_EQ(a.gt_polygons[static_cast<size_t>(i)].num_instances(), n);
  }
  EXPECT_THROW(make_fake_batch({.num_classes = 1}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace mrcnn::data
