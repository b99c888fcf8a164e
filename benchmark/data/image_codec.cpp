#include "benchmark/data/image_codec.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace mrcnn::data {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw std::runtime_error(name + ": " + what);
}

bool is_jpeg(const std::vector<uint8_t>& b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

bool is_png(const std::vector<uint8_t>& b) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), kSig, 8) == 0;
}

// ---- JPEG --------------------------------------------------------------------------------------

struct TjHandle {
  explicit TjHandle(tjhandle h) : h(h) {}
  ~TjHandle() {
    if (h != nullptr) tjDestroy(h);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  tjhandle h;
};

// True when an Adobe APP14 segment precedes the scan: its CMYK samples are stored inverted
// (Photoshop's convention, which PIL honours too).
bool has_adobe_marker(const std::vector<uint8_t>& b) {
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) return false;
    const uint8_t marker = b[i + 1];
    if (marker == 0xDA || marker == 0xD9) return false;  // start of scan / end of image
    const size_t len = (static_cast<size_t>(b[i + 2]) << 8) | b[i + 3];
    if (marker == 0xEE && len >= 7 && i + 9 <= b.size() && std::memcmp(&b[i + 4], "Adobe", 5) == 0)
      return true;
    i += 2 + len;
  }
  return false;
}

// PIL's CMYK -> RGB conversion: each channel is (255 - K) * (255 - C) / 255 with its rounding.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, size_t pixels, bool inverted) {
  for (size_t p = 0; p < pixels; ++p) {
    const uint8_t* in = cmyk + p * 4;
    const int k = inverted ? 255 - in[3] : in[3];
    const int nk = 255 - k;
    for (int c = 0; c < 3; ++c) {
      const int v = inverted ? 255 - in[c] : in[c];
      const int t = v * nk + 128;
      const int prod = ((t >> 8) + t) >> 8;
      rgb[p * 3 + c] = static_cast<uint8_t>(std::clamp(nk - prod, 0, 255));
    }
  }
}

// Refuses an empty image and one beyond kMaxImageSide, from its header: before any allocation.
void check_size(ImageFormat format, int64_t width, int64_t height, const std::string& name) {
  const char* f = format == ImageFormat::kJpeg ? "JPEG" : "PNG";
  if (width <= 0 || height <= 0)
    fail(name, std::string(f) + " header gives an empty image (" + std::to_string(width) + "x" +
                   std::to_string(height) + ")");
  if (width > kMaxImageSide || height > kMaxImageSide)
    fail(name, std::string(f) + " image is " + std::to_string(width) + "x" + std::to_string(height) +
                   " pixels, more than " + std::to_string(kMaxImageSide) + " a side");
}

Image decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name,
                  const DecodeOptions& options) {
  TjHandle tj(tjInitDecompress());
  if (tj.h == nullptr) fail(name, "cannot create a JPEG decoder");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, bytes.data(), static_cast<unsigned long>(bytes.size()), &width,
                          &height, &subsamp, &colorspace) != 0)
    fail(name, std::string("corrupt or truncated JPEG header (") + tjGetErrorStr2(tj.h) + ")");
  check_size(ImageFormat::kJpeg, width, height, name);

  // Scaled decode: the smallest of 1/8, 1/4, 3/8, 1/2 that still covers the target.
  int out_w = width, out_h = height;
  if (options.dct_downscale && options.target_width > 0 && options.target_height > 0 &&
      2 * options.target_width <= width && 2 * options.target_height <= height) {
    static const tjscalingfactor kFactors[] = {{1, 8}, {1, 4}, {3, 8}, {1, 2}};
    for (const tjscalingfactor& f : kFactors) {
      const int sw = TJSCALED(width, f), sh = TJSCALED(height, f);
      if (sw >= options.target_width && sh >= options.target_height) {
        out_w = sw;
        out_h = sh;
        break;
      }
    }
  }

  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  Image img(out_h, out_w);
  std::vector<uint8_t> cmyk_buf;
  uint8_t* dst = img.rgb.data();
  int pixel_format = TJPF_RGB;
  if (cmyk) {
    cmyk_buf.resize(static_cast<size_t>(out_w) * out_h * 4);
    dst = cmyk_buf.data();
    pixel_format = TJPF_CMYK;
  }
  // Accurate (islow) IDCT and fancy upsampling: the decoder settings PIL uses, so the pixels
  // match the reference pipeline's.
  const int rc = tjDecompress2(tj.h, bytes.data(), static_cast<unsigned long>(bytes.size()), dst,
                               out_w, 0, out_h, pixel_format, TJFLAG_ACCURATEDCT);
  if (rc != 0) {
    const std::string msg = tjGetErrorStr2(tj.h);
    // Bytes after the end of the image are harmless (PIL ignores them too); every other warning
    // (premature end of data, corrupt entropy data) means pixels were invented: an error.
    const bool harmless = tjGetErrorCode(tj.h) == TJERR_WARNING &&
                          msg.find("extraneous bytes") != std::string::npos;
    if (!harmless) fail(name, "corrupt or truncated JPEG (" + msg + ")");
  }
  if (cmyk) cmyk_to_rgb(cmyk_buf.data(), img.rgb.data(), img.rgb.size() / 3, has_adobe_marker(bytes));
  return img;
}

// ---- PNG ---------------------------------------------------------------------------------------
// libpng reports errors by longjmp. Everything that lives across the setjmp below is plain data
// owned by PngRead (freed by its destructor after the jump), so no C++ destructor is skipped.

struct PngRead {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  char error[256] = {0};
  png_structp png = nullptr;
  png_infop info = nullptr;
  uint8_t* pixels = nullptr;  // malloc'd, width * height * 3
  png_bytep* rows = nullptr;  // malloc'd
  png_uint_32 width = 0, height = 0;

  ~PngRead() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
    std::free(rows);
    std::free(pixels);
  }
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngRead*>(png_get_error_ptr(png));
  std::snprintf(st->error, sizeof st->error, "%s", msg);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // ancillary trouble: ignored, like PIL

void png_on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* st = static_cast<PngRead*>(png_get_io_ptr(png));
  if (st->size - st->pos < n) png_error(png, "unexpected end of file (truncated PNG)");
  std::memcpy(out, st->data + st->pos, n);
  st->pos += n;
}

// Returns false with st->error set on failure. Only touches plain data.
bool png_decode_raw(PngRead* st) {
  st->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, png_on_error, png_on_warning);
  if (st->png == nullptr) {
    std::snprintf(st->error, sizeof st->error, "cannot create a PNG decoder");
    return false;
  }
  st->info = png_create_info_struct(st->png);
  if (st->info == nullptr) {
    std::snprintf(st->error, sizeof st->error, "cannot create a PNG decoder");
    return false;
  }
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_read_fn(st->png, st, png_on_read);
  // A bad CRC in any chunk, critical or ancillary, is corruption.
  png_set_crc_action(st->png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
  png_read_info(st->png, st->info);
  st->width = png_get_image_width(st->png, st->info);
  st->height = png_get_image_height(st->png, st->info);
  const int color = png_get_color_type(st->png, st->info);
  // To 8-bit RGB without alpha, the way PIL's convert("RGB") sees it: palette expanded,
  // low-depth gray scaled up, 16-bit truncated to its high byte, alpha dropped, no gamma.
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(st->png, st->info) < 8)
    png_set_expand_gray_1_2_4_to_8(st->png);
  if (png_get_bit_depth(st->png, st->info) == 16) png_set_strip_16(st->png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
    png_set_gray_to_rgb(st->png);
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(st->png);
  const int passes = png_set_interlace_handling(st->png);
  (void)passes;
  png_read_update_info(st->png, st->info);
  if (png_get_rowbytes(st->png, st->info) != static_cast<size_t>(st->width) * 3)
    png_error(st->png, "unsupported PNG pixel layout");
  st->pixels = static_cast<uint8_t*>(std::malloc(static_cast<size_t>(st->width) * st->height * 3));
  st->rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * st->height));
  if (st->pixels == nullptr || st->rows == nullptr) png_error(st->png, "out of memory");
  for (png_uint_32 y = 0; y < st->height; ++y)
    st->rows[y] = st->pixels + static_cast<size_t>(y) * st->width * 3;
  png_read_image(st->png, st->rows);
  png_read_end(st->png, nullptr);
  return true;
}

Image decode_png(const std::vector<uint8_t>& bytes, const std::string& name) {
  PngRead st;
  st.data = bytes.data();
  st.size = bytes.size();
  if (!png_decode_raw(&st)) fail(name, std::string("corrupt or truncated PNG (") + st.error + ")");
  Image img(st.height, st.width);
  std::memcpy(img.rgb.data(), st.pixels, img.rgb.size());
  return img;
}

struct PngWrite {
  std::vector<uint8_t>* out = nullptr;
  char error[256] = {0};
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_bytep* rows = nullptr;
  ~PngWrite() {
    if (png != nullptr) png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
    std::free(rows);
  }
};

void png_on_write_error(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngWrite*>(png_get_error_ptr(png));
  std::snprintf(st->error, sizeof st->error, "%s", msg);
  png_longjmp(png, 1);
}

void png_on_write(png_structp png, png_bytep data, png_size_t n) {
  auto* st = static_cast<PngWrite*>(png_get_io_ptr(png));
  st->out->insert(st->out->end(), data, data + n);
}

void png_on_flush(png_structp) {}

bool png_encode_raw(PngWrite* st, const uint8_t* pixels, png_uint_32 w, png_uint_32 h) {
  st->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, st, png_on_write_error, png_on_warning);
  if (st->png == nullptr) return false;
  st->info = png_create_info_struct(st->png);
  if (st->info == nullptr) return false;
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_write_fn(st->png, st, png_on_write, png_on_flush);
  png_set_IHDR(st->png, st->info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(st->png, st->info);
  st->rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * h));
  if (st->rows == nullptr) png_error(st->png, "out of memory");
  for (png_uint_32 y = 0; y < h; ++y)
    st->rows[y] = const_cast<png_bytep>(pixels + static_cast<size_t>(y) * w * 3);
  png_write_image(st->png, st->rows);
  png_write_end(st->png, nullptr);
  return true;
}

}  // namespace

std::vector<uint8_t> read_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail(path, "is a directory, not a file");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) fail(path, "cannot open file (missing or unreadable)");
  const std::streamsize n = f.tellg();
  if (n <= 0) fail(path, "file is empty");
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), n)) fail(path, "read error");
  return bytes;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, "cannot create file");
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) fail(path, "write error");
}

namespace {

ImageHeader read_header(const std::vector<uint8_t>& bytes, const std::string& name) {
  ImageHeader h;
  if (is_jpeg(bytes)) {
    TjHandle tj(tjInitDecompress());
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tj.h == nullptr ||
        tjDecompressHeader3(tj.h, bytes.data(), static_cast<unsigned long>(bytes.size()), &width,
                            &height, &subsamp, &colorspace) != 0)
      fail(name, std::string("corrupt or truncated JPEG header (") + (tj.h ? tjGetErrorStr2(tj.h) : "") + ")");
    h.format = ImageFormat::kJpeg;
    h.width = width;
    h.height = height;
    return h;
  }
  if (is_png(bytes)) {
    // IHDR is the first chunk: 8-byte signature, 4 length, 4 "IHDR", 4 width, 4 height.
    if (bytes.size() < 24 || std::memcmp(&bytes[12], "IHDR", 4) != 0)
      fail(name, "corrupt PNG header (IHDR missing)");
    auto be32 = [&](size_t o) {
      return (int64_t{bytes[o]} << 24) | (int64_t{bytes[o + 1]} << 16) | (int64_t{bytes[o + 2]} << 8) |
             int64_t{bytes[o + 3]};
    };
    h.format = ImageFormat::kPng;
    h.width = be32(16);
    h.height = be32(20);
    return h;
  }
  fail(name, "not a JPEG or PNG file (unrecognised magic bytes)");
}

}  // namespace

ImageHeader read_image_header(const std::vector<uint8_t>& bytes, const std::string& name) {
  const ImageHeader h = read_header(bytes, name);
  check_size(h.format, h.width, h.height, name);
  return h;
}

Image decode_image(const std::vector<uint8_t>& bytes, const std::string& name,
                   const DecodeOptions& options) {
  if (is_jpeg(bytes)) return decode_jpeg(bytes, name, options);
  if (is_png(bytes)) {
    (void)read_image_header(bytes, name);  // the IHDR size, checked before libpng allocates
    return decode_png(bytes, name);
  }
  fail(name, "not a JPEG or PNG file (unrecognised magic bytes)");
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality, bool subsample_chroma) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width * image.height * 3))
    throw std::invalid_argument("encode_jpeg: image size and pixel buffer disagree");
  if (quality < 1 || quality > 100)
    throw std::invalid_argument("encode_jpeg: quality must be in 1..100, got " + std::to_string(quality));
  TjHandle tj(tjInitCompress());
  if (tj.h == nullptr) throw std::runtime_error("encode_jpeg: cannot create a JPEG encoder");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj.h, image.rgb.data(), static_cast<int>(image.width), 0,
                             static_cast<int>(image.height), TJPF_RGB, &buf, &size,
                             subsample_chroma ? TJSAMP_420 : TJSAMP_444, quality, TJFLAG_ACCURATEDCT);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(buf, [](unsigned char* p) {
    if (p != nullptr) tjFree(p);
  });
  if (rc != 0) throw std::runtime_error(std::string("encode_jpeg: ") + tjGetErrorStr2(tj.h));
  return std::vector<uint8_t>(buf, buf + size);
}

std::vector<uint8_t> encode_png(const Image& image) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width * image.height * 3))
    throw std::invalid_argument("encode_png: image size and pixel buffer disagree");
  std::vector<uint8_t> out;
  PngWrite st;
  st.out = &out;
  if (!png_encode_raw(&st, image.rgb.data(), static_cast<png_uint_32>(image.width),
                      static_cast<png_uint_32>(image.height)))
    throw std::runtime_error(std::string("encode_png: ") + st.error);
  return out;
}

}  // namespace mrcnn::data
