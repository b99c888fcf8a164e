#include "eval/detection_bytes.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace mrcnn::eval {
namespace {

template <typename T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <typename T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string bytes(size_t n) {
    need(n);
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count of elements of `size` bytes each that must still fit in the buffer.
  uint64_t count(size_t size) {
    const auto n = get<uint64_t>();
    if (size > 0 && n > (b_.size() - pos_) / size) fail();
    return n;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  void need(size_t n) {
    if (n > b_.size() - pos_) fail();
  }
  [[noreturn]] void fail() const {
    throw std::runtime_error("gathered detections: truncated record at byte " + std::to_string(pos_) + " of " +
                             std::to_string(b_.size()));
  }
  std::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

std::string encode_detections(const std::vector<Detection>& dets) {
  using Kind = Segmentation::Kind;
  std::string out;
  put<uint64_t>(out, dets.size());
  for (const auto& d : dets) {
    put(out, d.image_id);
    put(out, d.category_id);
    put(out, d.score);
    put<uint8_t>(out, d.has_bbox ? 1 : 0);
    for (double v : d.bbox) put(out, v);
    const auto& s = d.segmentation;
    put<uint8_t>(out, static_cast<uint8_t>(s.kind));
    switch (s.kind) {
      case Kind::kNone: break;
      case Kind::kPolygons:
        put<uint64_t>(out, s.polygons.size());
        for (const auto& poly : s.polygons) {
          put<uint64_t>(out, poly.size());
          out.append(reinterpret_cast<const char*>(poly.data()), poly.size() * sizeof(double));
        }
        break;
      case Kind::kRle:
        put(out, s.height);
        put(out, s.width);
        put<uint64_t>(out, s.counts.size());
        out.append(reinterpret_cast<const char*>(s.counts.data()), s.counts.size() * sizeof(uint32_t));
        break;
      case Kind::kCompressedRle: {
        put(out, s.height);
        put(out, s.width);
        const std::string counts = s.compressed.str();
        put<uint64_t>(out, counts.size());
        out.append(counts);
        break;
      }
    }
  }
  return out;
}

void decode_detections(std::string_view bytes, std::vector<Detection>& out) {
  using Kind = Segmentation::Kind;
  Reader r(bytes);
  const uint64_t n = r.count(8 + 8 + 8 + 1 + 32 + 1);
  out.reserve(out.size() + n);
  for (uint64_t i = 0; i < n; ++i) {
    Detection d;
    d.image_id = r.get<uint64_t>();
    d.category_id = r.get<uint64_t>();
    d.score = r.get<double>();
    d.has_bbox = r.get<uint8_t>() != 0;
    for (double& v : d.bbox) v = r.get<double>();
    auto& s = d.segmentation;
    const auto kind = r.get<uint8_t>();
    if (kind > static_cast<uint8_t>(Kind::kCompressedRle))
      throw std::runtime_error("gathered detections: unknown segmentation kind " + std::to_string(kind));
    s.kind = static_cast<Kind>(kind);
    switch (s.kind) {
      case Kind::kNone: break;
      case Kind::kPolygons: {
        s.polygons.resize(r.count(8));
        for (auto& poly : s.polygons) {
          poly.resize(r.count(sizeof(double)));
          for (double& v : poly) v = r.get<double>();
        }
        break;
      }
      case Kind::kRle: {
        s.height = r.get<uint32_t>();
        s.width = r.get<uint32_t>();
        s.counts.resize(r.count(sizeof(uint32_t)));
        for (uint32_t& c : s.counts) c = r.get<uint32_t>();
        break;
      }
      case Kind::kCompressedRle: {
        s.height = r.get<uint32_t>();
        s.width = r.get<uint32_t>();
        s.compressed = r.bytes(r.count(1));
        break;
      }
    }
    out.push_back(std::move(d));
  }
  if (!r.done()) throw std::runtime_error("gathered detections: trailing bytes after the last record");
}

}  // namespace mrcnn::eval
