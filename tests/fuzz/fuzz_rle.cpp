// COCO's compressed RLE strings, and the RLE algebra on what they decode to. The first byte picks
// the mask height and the second its width (1..64); the rest is the string. Invariants:
// check_string and from_string agree; a decoded RLE re-encodes to a string that decodes to the
// same mask; area, bbox, merge (of the canonical encoding) and IoU agree with the pixels.
#include <string>
#include <string_view>
#include <vector>

#include "eval/rle.h"
#include "tests/fuzz/fuzz_common.h"

using namespace mrcnn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t h = 1 + data[0] % 64, w = 1 + data[1] % 64;
  const std::string_view s(reinterpret_cast<const char*>(data + 2), size - 2);
  const bool checked = fuzz::accepts([&] { eval::check_string(s, h, w); });
  eval::Rle r;
  const bool decoded = fuzz::accepts([&] { r = eval::from_string(s, h, w); });
  fuzz::check(checked == decoded, "check_string and from_string agree");
  if (!decoded) return 0;

  std::vector<uint8_t> mask(size_t(h) * w), again(size_t(h) * w);
  eval::decode_column_major(r, mask.data());
  uint32_t pixels = 0;
  uint32_t x0 = w, y0 = h, x1 = 0, y1 = 0;
  for (uint32_t x = 0; x < w; ++x)
    for (uint32_t y = 0; y < h; ++y)
      if (mask[size_t(x) * h + y]) {
        ++pixels;
        x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x + 1), y1 = std::max(y1, y + 1);
      }
  fuzz::check(eval::area(r) == pixels, "area counts the decoded pixels");
  const auto box = eval::to_bbox(r);
  if (pixels > 0)
    fuzz::check(box[0] == x0 && box[1] == y0 && box[2] == x1 - x0 && box[3] == y1 - y0, "bbox bounds the pixels");

  const eval::Rle round = eval::from_string(eval::to_string(r), h, w);
  eval::decode_column_major(round, again.data());
  fuzz::check(mask == again, "to_string then from_string gives the same mask");
  const eval::Rle reencoded = eval::encode_column_major(mask.data(), h, w);
  fuzz::check(eval::area(reencoded) == pixels, "encode keeps the area");
  // Merging follows pycocotools' rleMerge, which miscounts runs of length 0 inside the counts
  // (a string may hold them; "3111:OH0..." has area 58 but merges with itself to 44, in both):
  // the merge invariant is checked on the canonical encoding of the pixels.
  fuzz::check(eval::area(eval::merge(reencoded, reencoded)) == pixels &&
                  eval::area(eval::merge(reencoded, reencoded, true)) == pixels,
              "a canonical mask merged with itself is itself");
  if (pixels > 0) fuzz::check(eval::iou(r, reencoded, false) == 1.0, "a mask's IoU with itself is 1");
  return 0;
}
