// The JPEG and PNG decode wrappers. Invariants: a decoded image has the header's size (or the DCT
// scaled size, never larger) and width * height * 3 bytes; an input the header reader refuses
// is refused by the decoder too.
#include <vector>

#include "benchmark/data/image_codec.h"
#include "tests/fuzz/fuzz_common.h"

using namespace mrcnn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  int64_t height = -1, width = -1;
  const bool header_ok = fuzz::accepts([&] {
    const data::ImageHeader header = data::read_image_header(bytes, "fuzz-image");
    height = header.height, width = header.width;
  });
  data::Image image;
  const bool decoded = fuzz::accepts([&] { image = data::decode_image(bytes, "fuzz-image"); });
  if (decoded) {
    fuzz::check(header_ok, "what decodes has a readable header");
    fuzz::check(image.height == height && image.width == width, "a full decode has the header's size");
    fuzz::check(image.rgb.size() == size_t(image.height * image.width * 3), "3 bytes per pixel");
  }
  if (header_ok && height >= 8 && width >= 8) {  // the scaled IDCT path
    fuzz::accepts([&] {
      const data::Image small = data::decode_image(bytes, "fuzz-image", {.target_height = 2, .target_width = 2});
      fuzz::check(small.height <= height && small.width <= width, "a scaled decode is not larger");
      fuzz::check(small.rgb.size() == size_t(small.height * small.width * 3), "3 bytes per pixel (scaled)");
    });
  }
  return 0;
}
