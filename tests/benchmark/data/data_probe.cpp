// data_probe: exposes the data pipeline's pure functions to the Python reference checks
// (test_data_reference.py), which compare them with PIL, torchvision and the reference formulas.
// One command per invocation, or many: `data_probe batch` runs one command per stdin line (the
// process starts once; loading LibTorch's libraries costs about a second) and prints one result
// line per command, "error: <message>" for a command that failed.
//   sizes MIN MAX IN OUT              IN: "w h" lines; OUT: "oh ow" lines          -> "ok"
//   decode IMAGE OUT                  OUT: decoded RGB bytes (HWC)                 -> "h w"
//   resize IMAGE H W OUT              OUT: RGB bytes of the bilinear resize        -> "ok"
//   transform IMAGE H W FLIP PRESET OUT
//                                     OUT: float32 [3, H, W] of resize + flip + normalize;
//                                     PRESET is "mlperf" or "torchvision"          -> "ok"
// Exit status (single command): 0 success, 1 error, 2 bad usage.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/data/image_codec.h"
#include "benchmark/data/resample.h"
#include "benchmark/data/transforms.h"

namespace {

using namespace mrcnn::data;

struct Usage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

void write_bytes(const std::string& path, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  write_file(path, std::vector<uint8_t>(p, p + n));
}

std::string run(const std::vector<std::string>& a) {
  const std::string cmd = a.empty() ? "" : a[0];
  if (cmd == "sizes" && a.size() == 5) {
    const int64_t min_size = std::stoll(a[1]), max_size = std::stoll(a[2]);
    std::ifstream in(a[3]);
    if (!in) throw std::runtime_error(a[3] + ": cannot open");
    std::ofstream out(a[4]);
    int64_t w = 0, h = 0;
    while (in >> w >> h) {
      const ImageSize s = reference_resize_size({h, w}, min_size, max_size);
      out << s.height << ' ' << s.width << '\n';
    }
    return "ok";
  }
  if (cmd == "decode" && a.size() == 3) {
    const Image im = decode_image(read_file(a[1]), a[1], {0, 0, false});
    write_bytes(a[2], im.rgb.data(), im.rgb.size());
    return std::to_string(im.height) + " " + std::to_string(im.width);
  }
  if (cmd == "resize" && a.size() == 5) {
    const Image im = decode_image(read_file(a[1]), a[1], {0, 0, false});
    const Image r = resize_bilinear(im, std::stoll(a[2]), std::stoll(a[3]));
    write_bytes(a[4], r.rgb.data(), r.rgb.size());
    return "ok";
  }
  if (cmd == "transform" && a.size() == 7) {
    const int64_t h = std::stoll(a[2]), w = std::stoll(a[3]);
    const bool flip = a[4] == "1";
    if (a[5] != "mlperf" && a[5] != "torchvision") throw std::invalid_argument("unknown preset " + a[5]);
    const TransformOptions o = a[5] == "mlperf" ? TransformOptions::mlperf_train() : TransformOptions::torchvision();
    const PixelTable table(o.to_bgr255, o.pixel_mean, o.pixel_std);
    const Image im = decode_image(read_file(a[1]), a[1], {h, w, false});
    std::vector<float> out(static_cast<size_t>(3 * h * w));
    resize_normalize_into(im, h, w, flip, table, out.data(), h, w);
    write_bytes(a[6], out.data(), out.size() * sizeof(float));
    return "ok";
  }
  throw Usage("usage: data_probe [batch] sizes|decode|resize|transform ... (see the source)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "batch") {
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream ss(line);
      std::vector<std::string> args;
      for (std::string w; ss >> w;) args.push_back(w);
      try {
        std::cout << run(args) << std::endl;
      } catch (const std::exception& e) {
        std::cout << "error: " << e.what() << std::endl;
      }
    }
    return 0;
  }
  try {
    std::cout << run(std::vector<std::string>(argv + 1, argv + argc)) << std::endl;
    return 0;
  } catch (const Usage& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_probe: %s\n", e.what());
    return 1;
  }
}
