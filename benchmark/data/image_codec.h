// Image files to pixels and back: JPEG through libjpeg-turbo (TurboJPEG API), PNG through
// libpng's simplified API. Decoded images are 8-bit RGB, interleaved (HWC), like PIL's
// Image.open(path).convert("RGB"), which is what the reference pipeline feeds its transforms:
// grayscale is expanded to RGB, alpha is dropped (not composited), EXIF orientation is ignored.
//
// Errors: every failure throws std::runtime_error naming the file and what was wrong (missing,
// empty, truncated, corrupt, unsupported). Corrupt data never yields a partially gray image:
// libjpeg's "recoverable" warnings (premature end of data, bad Huffman code) count as errors.
//
// Thread-safety: all functions are reentrant; each call uses its own decoder state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::data {

enum class ImageFormat { kJpeg, kPng };

// The largest width or height accepted (COCO's largest side is 640): 16384^2 RGB is 768 MiB.
// Larger images are refused from their header, before any pixel memory is allocated.
inline constexpr int64_t kMaxImageSide = 16384;

// An 8-bit RGB image, rows top to bottom, pixels R,G,B interleaved. Owns its pixels.
struct Image {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb;  // height * width * 3

  Image() = default;
  Image(int64_t h, int64_t w) : height(h), width(w), rgb(static_cast<size_t>(h * w * 3)) {}
  uint8_t* row(int64_t y) { return rgb.data() + y * width * 3; }
  const uint8_t* row(int64_t y) const { return rgb.data() + y * width * 3; }
};

// Header facts, read without decoding the pixels.
struct ImageHeader {
  ImageFormat format = ImageFormat::kJpeg;
  int64_t height = 0;
  int64_t width = 0;
};

struct DecodeOptions {
  // The size the caller will resize to, or 0 when unknown. With `dct_downscale`, a JPEG whose
  // target is at most half its size in both dimensions is decoded at a reduced scale (1/2, 3/8,
  // 1/4 or 1/8, the smallest that still covers the target) by libjpeg-turbo's scaled IDCT: far
  // less work, and a low-pass filter as good as the resampler's. Pixels then differ slightly
  // from a full decode followed by a resize. Upscaling (COCO at 800 px) never triggers it.
  int64_t target_height = 0;
  int64_t target_width = 0;
  bool dct_downscale = true;
};

// Reads a whole file. Throws naming the file when it is missing, unreadable or empty.
std::vector<uint8_t> read_file(const std::string& path);

// Format from the magic bytes and size from the header; an empty image or one beyond kMaxImageSide
// is refused. `name` is used in error messages only.
ImageHeader read_image_header(const std::vector<uint8_t>& bytes, const std::string& name);

// Decodes a JPEG or PNG (chosen by magic bytes, not by extension). The result may be smaller
// than the header's size when DCT downscaling applies; see DecodeOptions.
Image decode_image(const std::vector<uint8_t>& bytes, const std::string& name,
                   const DecodeOptions& options = {});

// Deterministic encoders (same pixels and settings -> same bytes with the same library build).
// JPEG: baseline, accurate DCT, 4:4:4 chroma when `subsample_chroma` is false, else 4:2:0.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality, bool subsample_chroma = false);
std::vector<uint8_t> encode_png(const Image& image);

// Writes bytes to a file; throws naming the file on failure.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace mrcnn::data
