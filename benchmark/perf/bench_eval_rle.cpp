// Google Benchmark suite of the eval library's hot loops (one thread each; the end-to-end
// comparison with pycocotools and faster-coco-eval is coco_eval_peers.py):
//   BM_EncodeRowMajor/<side>   encode a side x side uint8 mask (a disc) given row-major
//   BM_EncodeDetectionMask     a 480 x 640 row-major mask holding a 60-pixel-radius disc: what
//                              the trainer encodes for each detection
//   BM_EncodeColumnMajor/<side>  the same mask given column-major
//   BM_FromString/<side>       decode the compressed counts of that mask
//   BM_PolygonRasterize/<k>    rasterize a k-vertex polygon on a 640 x 480 image
//   BM_MaskIou                 IoU of two overlapping 200-pixel discs on a 640 x 480 image
//   BM_ParseResults            parse 10000 detections with compressed masks from JSON text
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "eval/coco.h"
#include "eval/results_reader.h"
#include "eval/rle.h"

namespace {

using namespace mrcnn::eval;

std::vector<uint8_t> disc(uint32_t h, uint32_t w, double cx, double cy, double r) {
  std::vector<uint8_t> m(static_cast<size_t>(h) * w);
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x)
      m[y * w + x] = (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r ? 1 : 0;
  return m;
}

void BM_EncodeRowMajor(benchmark::State& state) {
  const uint32_t s = static_cast<uint32_t>(state.range(0));
  const auto m = disc(s, s, s / 2.0, s / 2.0, s / 3.0);
  for (auto _ : state) benchmark::DoNotOptimize(encode_row_major(m.data(), s, s));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * s * s);
}
BENCHMARK(BM_EncodeRowMajor)->Arg(128)->Arg(800);

void BM_EncodeDetectionMask(benchmark::State& state) {
  const auto m = disc(480, 640, 400, 300, 60);
  for (auto _ : state) benchmark::DoNotOptimize(encode_row_major(m.data(), 480, 640));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 480 * 640);
}
BENCHMARK(BM_EncodeDetectionMask);

void BM_EncodeColumnMajor(benchmark::State& state) {
  const uint32_t s = static_cast<uint32_t>(state.range(0));
  const auto m = disc(s, s, s / 2.0, s / 2.0, s / 3.0);  // a disc is its own transpose
  for (auto _ : state) benchmark::DoNotOptimize(encode_column_major(m.data(), s, s));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * s * s);
}
BENCHMARK(BM_EncodeColumnMajor)->Arg(128)->Arg(800);

void BM_FromString(benchmark::State& state) {
  const uint32_t s = static_cast<uint32_t>(state.range(0));
  const auto m = disc(s, s, s / 2.0, s / 2.0, s / 3.0);
  const std::string str = to_string(encode_row_major(m.data(), s, s));
  for (auto _ : state) benchmark::DoNotOptimize(from_string(str, s, s));
}
BENCHMARK(BM_FromString)->Arg(128)->Arg(800);

void BM_PolygonRasterize(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  std::vector<double> xy;
  for (int i = 0; i < k; ++i) {
    const double a = 2 * M_PI * i / k;
    xy.push_back(320 + 150 * std::cos(a) * (i % 2 ? 0.7 : 1.0));
    xy.push_back(240 + 150 * std::sin(a) * (i % 2 ? 0.7 : 1.0));
  }
  for (auto _ : state) benchmark::DoNotOptimize(from_polygon(xy.data(), xy.size() / 2, 480, 640));
}
BENCHMARK(BM_PolygonRasterize)->Arg(8)->Arg(64);

void BM_MaskIou(benchmark::State& state) {
  const Rle a = encode_row_major(disc(480, 640, 300, 240, 100).data(), 480, 640);
  const Rle b = encode_row_major(disc(480, 640, 340, 250, 100).data(), 480, 640);
  for (auto _ : state) benchmark::DoNotOptimize(iou(a, b, false));
}
BENCHMARK(BM_MaskIou);

void BM_ParseResults(benchmark::State& state) {
  const Rle r = encode_row_major(disc(480, 640, 300, 240, 60).data(), 480, 640);
  std::string counts;
  for (char c : to_string(r)) {
    if (c == '\\' || c == '"') counts += '\\';
    counts += c;
  }
  std::string json = "[";
  for (int i = 0; i < 10000; ++i) {
    char head[160];
    std::snprintf(head, sizeof head,
                  "%s{\"image_id\": %d, \"category_id\": %d, \"bbox\": [240.12, 180.5, 120.25, 120.0], "
                  "\"score\": 0.%04d, \"segmentation\": {\"size\": [480, 640], \"counts\": \"",
                  i ? ", " : "", i / 100, 1 + i % 80, i);
    json += head;
    json += counts;
    json += "\"}}";
  }
  json += "]";
  for (auto _ : state) benchmark::DoNotOptimize(parse_results(json, "bench.json"));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(json.size()));
}
BENCHMARK(BM_ParseResults);

}  // namespace

BENCHMARK_MAIN();
