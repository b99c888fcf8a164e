#include "eval/results_reader.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>

#include "eval/coco_json.h"
#include "eval/json_cursor.h"
#include "eval/parallel.h"

namespace mrcnn::eval {

namespace {

using detail::read_bbox;
using detail::read_segmentation;
using detail::with_coco_errors;

// One element of a results array: {"image_id", "category_id", "score", "bbox", "segmentation"}.
void read_detection(JsonCursor& c, Detection& d, std::string& scratch) {
  c.begin_object();
  std::string_view key;
  bool img = false, cat = false, score = false;
  while (c.next_key(key)) {
    if (key == "image_id") {
      d.image_id = c.uint64();
      img = true;
    } else if (key == "category_id") {
      d.category_id = c.uint64();
      cat = true;
    } else if (key == "score") {
      d.score = c.number();
      score = true;
    } else if (key == "bbox") {
      read_bbox(c, d.bbox, d.has_bbox);
    } else if (key == "segmentation") {
      read_segmentation(c, d.segmentation, scratch);
    } else {
      c.skip();
    }
  }
  if (!img || !cat || !score) {
    c.fail_value(std::string("detection is missing its ") +
                 (!img ? "\"image_id\"" : !cat ? "\"category_id\"" : "\"score\""));
  }
  if (!d.has_bbox && d.segmentation.empty()) {
    c.fail_value("detection has neither a \"bbox\" nor a \"segmentation\"");
  }
}

// ---- the results reader's fast path -----------------------------------------------------------

// The bytes of a detection the fast path read, as literal text (keys, separators, brackets)
// around its values. A results file comes from one writer, so its elements usually share one
// layout with other values: those are read by comparing the literals and converting only the
// values, and anything different goes through the fast path's own parse.
struct Layout {
  enum Field : uint8_t { kImageId, kCategoryId, kScore, kBbox0, kBbox1, kBbox2, kBbox3, kHeight, kWidth, kCounts };
  struct Step {
    std::string_view literal;  // the text before the value
    Field field;
  };
  std::array<Step, 10> steps{};
  size_t size = 0;
  std::string_view tail;  // the text after the last value, to the element's closing brace
  bool valid = false;
  bool has_bbox = false;
  bool has_counts = false;

  // Learning from an element that starts at `begin`: each value token in order, then its end.
  void start(const char* begin) {
    valid = false;
    size = 0;
    last_ = begin;
  }
  void add(Field f, const char* begin, const char* end) {
    if (size < steps.size()) steps[size] = {std::string_view(last_, static_cast<size_t>(begin - last_)), f};
    ++size;
    last_ = end;
  }
  void finish(const char* end, const Detection& d) {
    tail = std::string_view(last_, static_cast<size_t>(end - last_));
    valid = size <= steps.size();
    has_bbox = d.has_bbox;
    has_counts = d.segmentation.kind == Segmentation::Kind::kCompressedRle;
  }

 private:
  const char* last_ = nullptr;
};

// Reads one detection of the usual shape, or gives up (returns false) on anything else, leaving
// that element to JsonCursor. It accepts nothing the cursor refuses and reads the same values:
// numbers through the cursor's own conversion, strings only without escapes.
class FastDetection {
 public:
  // `owner` (may be null) keeps `text` alive: counts strings then refer to it instead of copies.
  FastDetection(const char* p, std::string_view text, const std::shared_ptr<const void>* owner)
      : text_(text), owner_(owner), p_(p), e_(text.data() + text.size()) {}
  const char* position() const { return p_; }

  // Reads an element of layout `l` (learned from an earlier one); false, with nothing read and
  // `d` reset, when this one differs (or is malformed): then parse() reads it.
  bool parse_as(const Layout& l, Detection& d) {
    const char* begin = p_;
    if (read_as(l, d)) return true;
    p_ = begin;
    d = Detection{};
    return false;
  }

  // The general fast path; learns the element's layout into `learn` (when not null) if it reads it.
  bool parse(Detection& d, Layout* learn) {
    learn_ = learn;
    if (learn_) learn_->start(p_);
    if (!parse_fields(d)) return false;
    if (learn_) learn_->finish(p_, d);
    return true;
  }

 private:
  bool parse_fields(Detection& d) {
    if (!eat('{')) return false;
    ws();
    if (p_ < e_ && *p_ == '}') return false;  // the cursor names what is missing
    unsigned seen = 0;
    for (;;) {
      const Key k = key();
      bool ok = false;
      switch (k) {
        case kImageId: ok = value(Layout::kImageId, [&] { return uint(d.image_id); }); break;
        case kCategoryId: ok = value(Layout::kCategoryId, [&] { return uint(d.category_id); }); break;
        case kScore: ok = value(Layout::kScore, [&] { return number(d.score); }); break;
        case kBbox: ok = bbox(d); break;
        case kSegmentation: ok = segmentation(d.segmentation); break;
        default: break;  // another key, or one of the segmentation's
      }
      const unsigned bit = 1u << k;
      if (!ok || (seen & bit)) return false;  // unknown key, unusual value or a repeated key
      seen |= bit;
      ws();
      if (p_ >= e_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != '}') return false;
      ++p_;
      break;
    }
    return (seen & 7) == 7 && (d.has_bbox || !d.segmentation.empty());
  }

  bool read_as(const Layout& l, Detection& d) {
    Segmentation& s = d.segmentation;
    size_t counts_begin = 0, counts_stop = 0;
    bool escaped = false;
    for (size_t i = 0; i < l.size; ++i) {
      const Layout::Step& step = l.steps[i];
      if (!literal(step.literal)) return false;
      bool ok = false;
      switch (step.field) {
        case Layout::kImageId: ok = uint(d.image_id); break;
        case Layout::kCategoryId: ok = uint(d.category_id); break;
        case Layout::kScore: ok = number(d.score); break;
        case Layout::kBbox0:
        case Layout::kBbox1:
        case Layout::kBbox2:
        case Layout::kBbox3: ok = number(d.bbox[step.field - Layout::kBbox0]); break;
        case Layout::kHeight: ok = dim(s.height); break;
        case Layout::kWidth: ok = dim(s.width); break;
        case Layout::kCounts:
          counts_begin = static_cast<size_t>(p_ - text_.data());
          counts_stop = counts_end(counts_begin, escaped);
          ok = counts_stop != std::string_view::npos;
          if (ok) p_ = text_.data() + counts_stop;  // the closing quote begins the next literal
          break;
      }
      if (!ok) return false;
    }
    if (!literal(l.tail)) return false;
    if (l.has_bbox && (d.bbox[2] < 0 || d.bbox[3] < 0)) return false;
    d.has_bbox = l.has_bbox;
    if (l.has_counts) {
      s.kind = Segmentation::Kind::kCompressedRle;
      s.compressed = counts(text_.substr(counts_begin, counts_stop - counts_begin), escaped);
    }
    return true;
  }

  // The text at p_ is `lit` (then skipped).
  bool literal(std::string_view lit) {
    const size_t n = lit.size();
    if (static_cast<size_t>(e_ - p_) < n) return false;
    const char* a = p_;
    const char* b = lit.data();
    auto word = [](const char* x) {
      uint64_t w;
      std::memcpy(&w, x, 8);
      return w;
    };
    auto half = [](const char* x) {
      uint32_t w;
      std::memcpy(&w, x, 4);
      return w;
    };
    if (n >= 8) {  // whole words, the last one overlapping
      for (size_t k = 0; k + 8 < n; k += 8) {
        if (word(a + k) != word(b + k)) return false;
      }
      if (word(a + n - 8) != word(b + n - 8)) return false;
    } else if (n >= 4) {  // two overlapping halves
      if (half(a) != half(b) || half(a + n - 4) != half(b + n - 4)) return false;
    } else {
      for (size_t k = 0; k < n; ++k) {
        if (a[k] != b[k]) return false;
      }
    }
    p_ += n;
    return true;
  }

  // A value read by `read` (which skips the whitespace before it), its token noted for the
  // layout being learned.
  template <class Read>
  bool value(Layout::Field f, Read&& read) {
    ws();
    const char* begin = p_;
    if (!read()) return false;
    if (learn_) learn_->add(f, begin, p_);
    return true;
  }

  CompressedCounts counts(std::string_view contents, bool escaped) const {
    if (owner_) return CompressedCounts::in_json(*owner_, contents, escaped);
    if (escaped) return CompressedCounts(CompressedCounts::in_json(nullptr, contents, true).str());
    return CompressedCounts(contents);
  }

  enum Key : unsigned { kImageId, kCategoryId, kScore, kBbox, kSegmentation, kSize, kCounts, kOther };

  // The next key and its ':' when it is one of the usual ones, written plainly ("image_id":);
  // kOther for anything else (another key, an escape in it, malformed text).
  Key key() {
    ws();
    if (e_ - p_ < 2 || *p_ != '"') return kOther;  // the quote and at least one byte after it
    const char* k = p_ + 1;
    // The name then its closing quote; a fixed-size comparison the compiler turns into loads.
    auto is = [&]<size_t N>(const char (&name)[N]) {
      constexpr size_t n = N - 1;
      if (static_cast<size_t>(e_ - k) <= n || std::memcmp(k, name, n) != 0 || k[n] != '"') return false;
      p_ = k + n + 1;
      return true;
    };
    Key found = kOther;
    switch (*k) {
      case 'i': found = is("image_id") ? kImageId : kOther; break;
      case 'c': found = is("category_id") ? kCategoryId : is("counts") ? kCounts : kOther; break;
      case 's': found = is("score") ? kScore : is("segmentation") ? kSegmentation : is("size") ? kSize : kOther; break;
      case 'b': found = is("bbox") ? kBbox : kOther; break;
      default: break;
    }
    return found != kOther && eat(':') ? found : kOther;
  }
  static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  void ws() {
    while (p_ < e_ && is_ws(*p_)) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < e_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // The closing quote of a string whose contents start at `pos` and hold no escapes but \\ \"
  // and \/ (`escaped` is set if there are any) and no control character; npos for anything else.
  size_t counts_end(size_t pos, bool& escaped) const {
    for (;;) {
      const size_t hit = detail::find_string_special(text_, pos);
      if (hit + 1 >= text_.size()) return std::string_view::npos;  // a string then at least ']' must follow
      if (text_[hit] == '"') return hit;
      const char c = text_[hit + 1];
      if (text_[hit] != '\\' || (c != '\\' && c != '"' && c != '/')) return std::string_view::npos;
      escaped = true;
      pos = hit + 2;
    }
  }
  // A string whose only escapes are \\ \" and \/ (a compressed RLE holds '\\'): referred to
  // where there is an owner, else copied (decoded).
  bool counts_string(CompressedCounts& out) {
    ws();
    if (p_ >= e_ || *p_ != '"') return false;
    const size_t start = static_cast<size_t>(p_ - text_.data()) + 1;
    bool escaped = false;
    const size_t end = counts_end(start, escaped);
    if (end == std::string_view::npos) return false;
    out = counts(text_.substr(start, end - start), escaped);
    if (learn_) learn_->add(Layout::kCounts, text_.data() + start, text_.data() + end);
    p_ = text_.data() + end + 1;
    return true;
  }
  // The run of ASCII digits at p, up to 8 of them (p + 8 <= e_): how many, and their value in
  // `value`. Eight bytes at once (SWAR): no branch per digit.
  static int digits8(const char* p, uint64_t& value) {
    uint64_t bytes;
    std::memcpy(&bytes, p, 8);
    const uint64_t t = bytes ^ 0x3030303030303030ull;  // '0'..'9' -> 0..9
    // A byte is not a digit when its high nibble is set or its low one is above 9. The addition
    // can carry into the next byte only from a byte that is not a digit: bytes after the first
    // one that is not are never looked at.
    const uint64_t not_digit = (t | (t + 0x0606060606060606ull)) & 0xF0F0F0F0F0F0F0F0ull;
    const int n = not_digit ? std::countr_zero(not_digit) >> 3 : 8;
    if (n == 0) return 0;
    // The digits, most significant first, moved to the high bytes (zeros before them), then
    // combined pairwise: 8 digits in three multiplications.
    uint64_t d = t << (8 * (8 - n));
    d = d * 10 + (d >> 8);
    d = (((d & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((d >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
    value = d;
    return n;
  }
  // A text this far from its end can be read eight bytes at a time without a bounds check.
  static constexpr ptrdiff_t kWordMargin = 48;

  // A non-negative integer of at most 19 digits (no fraction, no exponent, no leading zero).
  // Up to 7 digits (every id and size in practice) in one step, longer ones digit by digit.
  bool uint(uint64_t& v) {
    if constexpr (std::endian::native == std::endian::little) {
      ws();
      if (e_ - p_ >= kWordMargin) {
        uint64_t x = 0;
        const int n = digits8(p_, x);
        if (n == 0 || (*p_ == '0' && n > 1)) return false;
        if (n < 8) {
          const char next = p_[n];
          if (next == '.' || next == 'e' || next == 'E') return false;
          p_ += n;
          v = x;
          return true;
        }
      }
    }
    return uint_bytewise(v);
  }
  bool uint_bytewise(uint64_t& v) {
    ws();
    const char* s = p_;
    uint64_t x = 0;
    while (p_ < e_ && is_digit(*p_)) x = x * 10 + static_cast<uint64_t>(*p_++ - '0');
    const ptrdiff_t n = p_ - s;
    if (n == 0 || n > 19 || (*s == '0' && n > 1)) return false;
    if (p_ < e_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    v = x;
    return true;
  }
  // Powers of ten that are exact doubles.
  static constexpr double kPow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                        1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                        1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  // Plain decimals of up to 7 digits before and 7 after the point (scores, boxes) in one step
  // each, converted as below; anything longer, or with an exponent, digit by digit.
  bool number(double& v) {
    static constexpr uint64_t kPow10Int[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    if constexpr (std::endian::native == std::endian::little) {
      ws();
      if (e_ - p_ >= kWordMargin) {
        const char* p = p_;
        const bool negative = *p == '-';
        p += negative;
        uint64_t m = 0;
        const int n = digits8(p, m);
        if (n == 0 || (*p == '0' && n > 1)) return false;
        if (n < 8) {
          p += n;
          int fraction = 0;
          if (*p == '.') {
            uint64_t f = 0;
            const int k = digits8(p + 1, f);
            if (k == 0) return false;
            if (k == 8) return number_bytewise(v);  // a longer fraction
            if (f != 0) {  // x.000 is x: no division
              m = m * kPow10Int[k] + f;
              fraction = k;
            }
            p += 1 + k;
          }
          if (*p != 'e' && *p != 'E') {
            // m < 10^14 < 2^53 and 10^fraction are exact doubles: one correctly rounded division.
            const double x = fraction ? static_cast<double>(m) / kPow10[fraction] : static_cast<double>(m);
            v = negative ? -x : x;
            p_ = p;
            return true;
          }
        }
      }
    }
    return number_bytewise(v);
  }
  // A JSON number (the grammar checked here), converted as JsonCursor::number() does: plain
  // decimals of at most 19 digits in the same scan (m / 10^f, both exact doubles: one correctly
  // rounded division, as in detail::json_number_to_double), the rest by that function.
  bool number_bytewise(double& v) {
    ws();
    const char* s = p_;
    const bool negative = p_ < e_ && *p_ == '-';
    if (negative) ++p_;
    if (p_ >= e_ || !is_digit(*p_)) return false;
    uint64_t m = 0;
    int digits = 0, fraction = 0;
    if (*p_ == '0') {
      ++p_;
    } else {
      for (; p_ < e_ && is_digit(*p_); ++p_, ++digits) m = m * 10 + static_cast<uint64_t>(*p_ - '0');
    }
    if (p_ < e_ && *p_ == '.') {
      ++p_;
      if (p_ >= e_ || !is_digit(*p_)) return false;
      for (; p_ < e_ && is_digit(*p_); ++p_, ++digits, ++fraction) {
        m = m * 10 + static_cast<uint64_t>(*p_ - '0');
      }
    }
    if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < e_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= e_ || !is_digit(*p_)) return false;
      while (p_ < e_ && is_digit(*p_)) ++p_;
      return detail::json_number_to_double(s, p_, v);
    }
    if (digits <= 19 && m <= (uint64_t{1} << 53) && fraction <= 22) {
      const double x = static_cast<double>(m) / kPow10[fraction];
      v = negative ? -x : x;
      return true;
    }
    return detail::json_number_to_double(s, p_, v);
  }
  // [x, y, w, h] with w, h >= 0, or [] (no bbox).
  bool bbox(Detection& d) {
    if (!eat('[')) return false;
    if (eat(']')) {
      d.has_bbox = false;
      return true;
    }
    for (int i = 0; i < 4; ++i) {
      if (i > 0 && !eat(',')) return false;
      const auto f = static_cast<Layout::Field>(Layout::kBbox0 + i);
      if (!value(f, [&] { return number(d.bbox[static_cast<size_t>(i)]); })) return false;
    }
    if (!eat(']') || d.bbox[2] < 0 || d.bbox[3] < 0) return false;
    d.has_bbox = true;
    return true;
  }
  bool dim(uint32_t& v) {
    uint64_t x = 0;
    if (!uint(x) || x > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return false;
    v = static_cast<uint32_t>(x);
    return true;
  }
  // {"size": [h, w], "counts": "..."} in either order.
  bool segmentation(Segmentation& s) {
    if (!eat('{')) return false;
    unsigned seen = 0;
    for (;;) {
      const Key k = key();
      if (k == kSize && !(seen & 1)) {
        if (!eat('[') || !value(Layout::kHeight, [&] { return dim(s.height); }) || !eat(',') ||
            !value(Layout::kWidth, [&] { return dim(s.width); }) || !eat(']')) {
          return false;
        }
        seen |= 1;
      } else if (k == kCounts && !(seen & 2)) {
        if (!counts_string(s.compressed)) return false;
        seen |= 2;
      } else {
        return false;
      }
      if (eat(',')) continue;
      if (!eat('}')) return false;
      break;
    }
    if (seen != 3) return false;
    s.kind = Segmentation::Kind::kCompressedRle;
    return true;
  }

  std::string_view text_;
  const std::shared_ptr<const void>* owner_;
  Layout* learn_ = nullptr;
  const char* p_;
  const char* e_;
};

// Maps the whole pages in [begin, end) of this process's writable memory in one system call,
// as writing to each would (their contents are kept). Page faults cost microseconds each on
// virtual machines; this is several times cheaper per page. Best effort: kernels before 5.14
// do not know the call, and then the pages fault in when written.
void populate(const void* begin, const void* end) {
#ifdef MADV_POPULATE_WRITE
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + page - 1) & ~(page - 1);
  const uintptr_t e = reinterpret_cast<uintptr_t>(end) & ~(page - 1);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
#else
  (void)begin, (void)end;
#endif
}
// Detections populated at a time (about 640 KB).
constexpr size_t kPopulateBatch = 4096;

// A piece of the results array could not be read on its own: the caller reads the whole text
// again with JsonCursor, which names the problem (or, for a cut that was not an element
// boundary, reads the text as it is).
struct ReadAgain {};

bool is_json_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_json_ws(std::string_view t, size_t p) {
  while (p < t.size() && is_json_ws(t[p])) ++p;
  return p;
}

// The elements from byte `begin` (the start of an element) up to the element that starts at
// `stop` (not read), or to the array's end when stop is npos (then only whitespace may follow).
// Throws ReadAgain when the piece does not end exactly at `stop`, JsonError on malformed input.
// `owner`, when not null, keeps `text` alive (counts strings then refer to it).
void parse_piece(std::string_view text, const std::string& source, size_t begin, size_t stop,
                 bool fast, const std::shared_ptr<const void>* owner, std::vector<Detection>& out) {
  JsonCursor c(text, source);
  std::string scratch;
  size_t pos = begin;
  Layout layout;
  // Elements in a row that did not match the layout learned from the one before; after this
  // many the file's elements differ too much to keep learning.
  int misses = 0;
  constexpr int kMaxMisses = 8;
  for (;;) {
    // Fresh memory a batch at a time: one system call instead of a page fault per page.
    if (out.size() % kPopulateBatch == 0 && out.size() + kPopulateBatch <= out.capacity()) {
      populate(out.data() + out.size(), out.data() + out.size() + kPopulateBatch);
    }
    Detection& d = out.emplace_back();
    bool done = false;
    if (fast) {
      FastDetection f(text.data() + pos, text, owner);
      const bool learning = misses < kMaxMisses;
      if (learning && layout.valid && f.parse_as(layout, d)) {
        misses = 0;
        done = true;
      } else {
        if (layout.valid) ++misses;
        done = f.parse(d, learning ? &layout : nullptr);
        if (!done) d = Detection{};
      }
      if (done) pos = static_cast<size_t>(f.position() - text.data());
    }
    if (!done) {
      c.restart_at(pos);
      read_detection(c, d, scratch);
      pos = c.offset();
    }
    pos = skip_json_ws(text, pos);
    if (pos >= text.size()) throw ReadAgain{};
    if (text[pos] == ',') {
      pos = skip_json_ws(text, pos + 1);
      if (pos == stop) return;
      if (stop != std::string_view::npos && pos > stop) throw ReadAgain{};
      continue;
    }
    if (text[pos] == ']' && stop == std::string_view::npos) {
      if (skip_json_ws(text, pos + 1) != text.size()) throw ReadAgain{};
      return;
    }
    throw ReadAgain{};
  }
}

// The first byte at or after `from` where an element seems to start: '{' after '}' ',' (with
// whitespace between); npos if none. Only a guess: a string can hold the same characters.
size_t next_cut(std::string_view t, size_t from) {
  while (from < t.size()) {
    const void* hit = std::memchr(t.data() + from, '}', t.size() - from);
    if (!hit) return std::string_view::npos;
    const size_t close = static_cast<size_t>(static_cast<const char*>(hit) - t.data());
    size_t p = skip_json_ws(t, close + 1);
    if (p < t.size() && t[p] == ',') {
      p = skip_json_ws(t, p + 1);
      if (p < t.size() && t[p] == '{') return p;
    }
    from = close + 1;
  }
  return std::string_view::npos;
}

// JsonCursor alone, one pass: the reference reader, and the one that words every error.
std::vector<Detection> parse_results_sequential(std::string_view json, const std::string& source) {
  return with_coco_errors([&]() {
    std::vector<Detection> dets;
    JsonCursor c(json, source);
    std::string scratch;
    if (!c.next_is(JsonCursor::Kind::kArray)) {
      c.fail("a results array [{\"image_id\": ..., \"category_id\": ..., \"score\": ...}, ...]");
    }
    dets.reserve(json.size() / 256 + 16);  // a reservation saves regrowth
    c.begin_array();
    while (c.next_element()) read_detection(c, dets.emplace_back(), scratch);
    c.expect_end();
    if (dets.empty()) {
      throw CocoError(source + ": the results array is empty: there is nothing to evaluate");
    }
    return dets;
  });
}

// The pieces, in parallel; false (nothing read) when the text must be read again sequentially.
bool parse_results_in_pieces(std::string_view json, const std::string& source,
                             const ResultsReadOptions& o, const std::shared_ptr<const void>* owner,
                             std::vector<Detection>& dets) {
  size_t first = json.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  first = skip_json_ws(json, first);
  if (first >= json.size() || json[first] != '[') return false;
  first = skip_json_ws(json, first + 1);
  if (first >= json.size() || json[first] != '{') return false;  // empty, or not objects
  const size_t bytes = json.size() - first;
  const size_t min_piece = std::max<size_t>(o.min_piece_bytes, 1);
  const size_t threads = static_cast<size_t>(detail::resolve_threads(o.threads));
  const size_t wanted = std::max<size_t>(1, std::min(threads, bytes / min_piece));
  std::vector<size_t> starts{first};
  for (size_t k = 1; k < wanted; ++k) {
    const size_t cut = next_cut(json, std::max(first + bytes / wanted * k, starts.back() + 1));
    if (cut == std::string_view::npos) break;
    starts.push_back(cut);
  }
  const size_t n = starts.size();
  auto end_of = [&](size_t i) { return i + 1 < n ? starts[i + 1] : json.size(); };
  std::vector<std::vector<Detection>> pieces(n);
  // About 300 bytes a detection with a mask, 80 without. The first piece becomes the result:
  // room for every detection of a file with masks (pages are touched only when used), so the
  // others are moved in without a reallocation; the others get room for their own share. Files
  // of boxes alone regrow them.
  pieces[0].reserve(json.size() / 256 + 16);
  for (size_t i = 1; i < n; ++i) pieces[i].reserve((end_of(i) - starts[i]) / 256 + 16);
  // Each piece refers to the text through its own copy of the owner (its own reference count:
  // the threads do not contend for one).
  std::vector<std::shared_ptr<const void>> owners;
  if (owner) {
    for (size_t i = 0; i < n; ++i) owners.push_back(std::make_shared<std::shared_ptr<const void>>(*owner));
  }
  try {
    detail::parallel_for(n, static_cast<int>(n), [&](size_t i) {
      parse_piece(json, source, starts[i], i + 1 < n ? starts[i + 1] : std::string_view::npos,
                  o.fast_path, owner ? &owners[i] : nullptr, pieces[i]);
    });
  } catch (const ReadAgain&) {
    return false;
  } catch (const JsonError&) {
    return false;
  }
  size_t total = 0;
  for (const auto& p : pieces) total += p.size();
  dets = std::move(pieces[0]);
  dets.reserve(total);
  // The moved detections' memory, populated on all the threads first.
  const size_t have = dets.size();
  detail::parallel_for(n, static_cast<int>(n), [&](size_t i) {
    const size_t lo = have + (total - have) * i / n, hi = have + (total - have) * (i + 1) / n;
    populate(dets.data() + lo, dets.data() + hi);
  });
  for (size_t i = 1; i < n; ++i) {
    std::move(pieces[i].begin(), pieces[i].end(), std::back_inserter(dets));
    std::vector<Detection>().swap(pieces[i]);
  }
  return true;
}

std::vector<Detection> parse_results_shared(std::string_view json, const std::string& source,
                                            const ResultsReadOptions& options,
                                            const std::shared_ptr<const void>* owner) {
  if (options.fast_path || detail::resolve_threads(options.threads) > 1) {
    std::vector<Detection> dets;
    if (parse_results_in_pieces(json, source, options, owner, dets)) return dets;
  }
  return parse_results_sequential(json, source);
}

}  // namespace

std::vector<Detection> parse_results(std::string_view json, const std::string& source,
                                     const ResultsReadOptions& options) {
  return parse_results_shared(json, source, options, nullptr);
}

std::vector<Detection> parse_results(std::string_view json, const std::string& source) {
  return parse_results(json, source, ResultsReadOptions{});
}

std::vector<Detection> load_results(const std::string& path, const ResultsReadOptions& options) {
  const auto file = detail::map_json_file(path);
  const std::shared_ptr<const void> owner = file;
  return parse_results_shared(file->bytes(), path, options, &owner);
}

std::vector<Detection> load_results(const std::string& path) {
  return load_results(path, ResultsReadOptions{});
}

}  // namespace mrcnn::eval
