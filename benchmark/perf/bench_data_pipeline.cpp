// The data pipeline's speed, stage by stage and end to end, on COCO-like images (640 x 480 JPEGs
// resized to 800 x 1066 by the MLPerf transform).
//
//   BM_DecodeJpeg         one 640x480 JPEG -> RGB (libjpeg-turbo, accurate IDCT)
//   BM_ResizeNormalize    640x480 RGB -> 800x1066 float32 CHW, flipped, normalized, padded slot
//   BM_LoadSample         read + decode + transform + targets of one image (CocoDataset::load)
//   BM_LoaderEpoch/T      a whole epoch through the Loader with T worker threads, batch 2,
//                         aspect-grouped and shuffled: the number to compare with torchvision
//                         (benchmark/perf/compare_data_torchvision.py runs both in one session)
//   BM_SynthImage/S       render + JPEG-encode one synthetic S x S image
//
// Images: MRCNN_DATA_BENCH_DIR names a COCO-format folder (annotations/instances_train2017.json,
// train2017/); without it a 64-image 640x480 synthetic set is written to a temporary folder.
// Throughput is reported as items_per_second (images/s).
#include <benchmark/benchmark.h>

#include <ATen/Parallel.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/loader.h"
#include "benchmark/data/resample.h"
#include "benchmark/data/sampler.h"
#include "benchmark/data/synth.h"

namespace {

using namespace mrcnn::data;

struct BenchData {
  std::string root;
  bool owned = false;
  std::shared_ptr<const CocoDataset> dataset;

  BenchData() {
    if (const char* dir = std::getenv("MRCNN_DATA_BENCH_DIR"); dir != nullptr && *dir != '\0') {
      root = dir;
    } else {
      root = (std::filesystem::temp_directory_path() / ("mrcnn_bench_data_" + std::to_string(::getpid()))).string();
      owned = true;
      SynthOptions o;
      o.out_dir = root;
      o.train_images = 64;
      o.val_images = 0;
      o.width = 640;
      o.height = 480;
      o.progress = false;
      write_synthetic_dataset(o);
    }
    auto opts = CocoDatasetOptions::coco(root, "train2017", /*train=*/true);
    opts.progress = false;
    dataset = std::make_shared<const CocoDataset>(opts);
  }
  ~BenchData() {
    if (owned) {
      std::error_code ec;
      std::filesystem::remove_all(root, ec);
    }
  }
};

BenchData& data() {
  static BenchData d;
  return d;
}

void BM_DecodeJpeg(benchmark::State& state) {
  const auto& ds = *data().dataset;
  const std::vector<uint8_t> bytes = read_file(ds.image_path(0));
  for (auto _ : state) benchmark::DoNotOptimize(decode_image(bytes, "bench", {0, 0, false}));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeJpeg)->Unit(benchmark::kMillisecond);

void BM_ResizeNormalize(benchmark::State& state) {
  const auto& ds = *data().dataset;
  const Image img = decode_image(read_file(ds.image_path(0)), "bench", {0, 0, false});
  const ImageSize out = ds.resized_size(0);
  const int64_t ph = (out.height + 31) / 32 * 32, pw = (out.width + 31) / 32 * 32;
  const TransformOptions t;
  const PixelTable table(t.to_bgr255, t.pixel_mean, t.pixel_std);
  std::vector<float> slot(static_cast<size_t>(3 * ph * pw));
  for (auto _ : state) {
    resize_normalize_into(img, out.height, out.width, /*flip=*/true, table, slot.data(), ph, pw);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ResizeNormalize)->Unit(benchmark::kMillisecond);

void BM_LoadSample(benchmark::State& state) {
  const auto& ds = *data().dataset;
  std::vector<float> slot(static_cast<size_t>(3 * 1344 * 1344));
  int64_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ds.load(i % ds.size(), {1, 0}, slot.data(), 1344, 1344));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LoadSample)->Unit(benchmark::kMillisecond);

void BM_LoaderEpoch(benchmark::State& state) {
  const auto ds = data().dataset;
  const int threads = static_cast<int>(state.range(0));
  const BatchSampler sampler(ds->aspect_groups(), {.batch_size = 2});
  int64_t images = 0, epoch = 0;
  double wait = 0.0;
  for (auto _ : state) {
    Loader loader(ds, sampler.epoch(1, epoch), {1, epoch}, {.num_threads = threads, .prefetch_batches = 2 * threads});
    while (auto b = loader.next()) images += b->size();
    wait += loader.wait_seconds();
    ++epoch;
  }
  state.SetItemsProcessed(images);
  state.counters["consumer_wait_s"] = benchmark::Counter(wait / static_cast<double>(epoch));
}
// 8 and 16 threads: a GPU node's share of cores per rank (gpu_check.sh's epoch stage runs the largest one
// its machine has cores for).
BENCHMARK(BM_LoaderEpoch)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SynthImage(benchmark::State& state) {
  SynthOptions o;
  o.width = o.height = state.range(0);
  int64_t i = 0;
  for (auto _ : state) {
    const SynthImage img = render_synthetic_image(o, SynthSplit::kTrain, i++);
    benchmark::DoNotOptimize(encode_jpeg(img.image, o.jpeg_quality));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SynthImage)->Arg(128)->Arg(640)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // The pipeline runs no LibTorch kernels on the hot path; one intra-op thread keeps LibTorch's
  // pool from competing with the loader's workers.
  at::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
