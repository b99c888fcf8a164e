#include "benchmark/data/synth_command.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmark/data/synth.h"
#include "logging/arguments.h"

namespace mrcnn::data {
namespace {

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn synth --out DIR [options]

Writes a synthetic COCO-format instance segmentation dataset, the project's default dataset:
  DIR/annotations/instances_{train,val}2017.json  (polygon masks)
  DIR/{train,val}2017/000000000001.jpg ...
Shapes of four classes (disc, square, triangle, cross) with class colours on a textured
background, 1-3 per image, large and never touching. The same arguments give byte-identical files.

options:
  --out DIR            output folder (created; existing files are overwritten)   [required]
  --train N            training images                                            [320]
  --val M              validation images                                          [64]
  --size S | WxH       image size in pixels                                       [128]
  --sizes-from FILE    the sizes of a COCO annotation file's images instead, taken in turn
                       (image i of a split: the file's image i mod its count), e.g.
                       benchmark/perf/coco_train2017_sizes.json: genuine COCO train2017 sizes
  --seed K             generator seed                                             [1]
  --objects MIN-MAX    objects per image, 1 <= MIN <= MAX <= 8                     [1-3]
  --scale MIN-MAX      object extent as a fraction of the short side (<= 0.9)     [0.25-0.6]
  --quality Q          JPEG quality 1..100                                        [92]
  --threads T          worker threads, 0 = one per core                           [0]
  --quiet              no progress line

exit status: 0 written, 1 an error while writing, 2 bad arguments

examples:
  mlperf-maskrcnn synth --out data/synthetic
  mlperf-maskrcnn synth --out /tmp/coco-sized --train 720 --val 64 \
      --sizes-from benchmark/perf/coco_train2017_sizes.json
)";

int64_t parse_int(std::string_view flag, std::string_view v) {
  int64_t out = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size())
    throw std::invalid_argument(std::string(flag) + ": expected an integer, got '" + std::string(v) + "'");
  return out;
}

double parse_double(std::string_view flag, std::string_view v) {
  double out = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size())
    throw std::invalid_argument(std::string(flag) + ": expected a number, got '" + std::string(v) + "'");
  return out;
}

// "A-B" -> {A, B} split at the dash (values themselves are non-negative).
std::pair<std::string_view, std::string_view> split_range(std::string_view flag, std::string_view v) {
  const size_t dash = v.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == v.size())
    throw std::invalid_argument(std::string(flag) + ": expected MIN-MAX, got '" + std::string(v) + "'");
  return {v.substr(0, dash), v.substr(dash + 1)};
}

// The (width, height) of every image record of a COCO annotation file, in its order; throws
// std::invalid_argument naming the file when it cannot be read or holds no such record.
std::vector<std::array<int64_t, 2>> coco_image_sizes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--sizes-from " + path + ": cannot be read");
  std::vector<std::array<int64_t, 2>> sizes;
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& image : doc.at("images"))
      sizes.push_back({image.at("width").get<int64_t>(), image.at("height").get<int64_t>()});
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("--sizes-from " + path + ": not a COCO annotation file with image sizes (" +
                                e.what() + ")");
  }
  if (sizes.empty()) throw std::invalid_argument("--sizes-from " + path + ": no image records");
  return sizes;
}

// The options, validated (SynthOptions::validate names the option and the value it refuses);
// throws cli::UsageError (or std::invalid_argument from a malformed or out-of-range value).
SynthOptions read_options(const cli::Arguments& args) {
  SynthOptions o;
  o.out_dir = args.value("--out");
  if (o.out_dir.empty()) throw cli::UsageError("--out DIR is required");
  if (args.has("--train")) o.train_images = parse_int("--train", args.value("--train"));
  if (args.has("--val")) o.val_images = parse_int("--val", args.value("--val"));
  if (args.has("--size")) {
    const std::string v = args.value("--size");
    const size_t x = v.find('x');
    if (x == std::string::npos) {
      o.width = o.height = parse_int("--size", v);
    } else {
      o.width = parse_int("--size", std::string_view(v).substr(0, x));
      o.height = parse_int("--size", std::string_view(v).substr(x + 1));
    }
  }
  if (args.has("--sizes-from")) {
    if (args.has("--size")) throw cli::UsageError("--size and --sizes-from exclude each other");
    o.sizes = coco_image_sizes(args.value("--sizes-from"));
  }
  o.seed = static_cast<uint64_t>(args.integer("--seed", static_cast<long long>(o.seed), {0, 9.2e18}));
  if (args.has("--objects")) {
    const std::string v = args.value("--objects");
    const auto [lo, hi] = split_range("--objects", v);
    o.min_objects = parse_int("--objects", lo);
    o.max_objects = parse_int("--objects", hi);
  }
  if (args.has("--scale")) {
    const std::string v = args.value("--scale");
    const auto [lo, hi] = split_range("--scale", v);
    o.min_object_scale = parse_double("--scale", lo);
    o.max_object_scale = parse_double("--scale", hi);
  }
  if (args.has("--quality")) {
    const int64_t q = parse_int("--quality", args.value("--quality"));
    o.jpeg_quality = static_cast<int>(std::clamp<int64_t>(q, -1, 101));  // out of range stays out (validate)
  }
  if (args.has("--threads")) {
    const int64_t t = parse_int("--threads", args.value("--threads"));
    o.threads = static_cast<int>(std::clamp<int64_t>(t, -1, 4097));
  }
  o.progress = !args.flag("--quiet");
  o.validate();
  return o;
}

}  // namespace

int synth_main(int argc, char** argv) {
  const cli::Arguments args(argc, argv, {.with_value = {"--out", "--train", "--val", "--size", "--sizes-from", "--seed", "--objects",
                                                        "--scale", "--quality", "--threads"},
                                         .switches = {"--quiet"},
                                         .positional = {0, 0, "no positional arguments"}});
  if (args.help()) return std::fputs(kUsage, stdout), 0;
  SynthOptions o;
  try {
    o = read_options(args);
  } catch (const std::invalid_argument& e) {
    throw cli::UsageError(e.what());
  }
  const SynthSummary s = write_synthetic_dataset(o);
  std::fprintf(stderr,
               "synth: wrote %lld training images (%lld objects) and %lld validation images "
               "(%lld objects) of %s to %s in %.2f s\n",
               static_cast<long long>(s.train_images), static_cast<long long>(s.train_objects),
               static_cast<long long>(s.val_images), static_cast<long long>(s.val_objects),
               o.sizes.empty() ? (std::to_string(o.width) + "x" + std::to_string(o.height)).c_str()
                               : (std::to_string(o.sizes.size()) + " sizes").c_str(),
               o.out_dir.c_str(), s.seconds);
  return 0;
}

}  // namespace mrcnn::data
