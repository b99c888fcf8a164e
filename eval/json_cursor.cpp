#include "eval/json_cursor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrcnn::eval {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

// Index of the first '"', '\\' or control character at or after `pos`, or text.size().
size_t detail::find_string_special(std::string_view text, size_t pos) {
  const char* p = text.data();
  const size_t n = text.size();
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i slash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (pos + 16 <= n) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + pos));
    // control characters: unsigned v < 0x20  <=>  max(v, 0x20) != v  (bytes >= 0x80 are fine)
    const __m128i ctrl = _mm_cmpeq_epi8(_mm_max_epu8(v, space), space);
    const __m128i ctrl_not_space = _mm_andnot_si128(_mm_cmpeq_epi8(v, space), ctrl);
    const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                     ctrl_not_space);
    const int mask = _mm_movemask_epi8(hit);
    if (mask != 0) return pos + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    pos += 16;
  }
#endif
  for (; pos < n; ++pos) {
    const unsigned char c = static_cast<unsigned char>(p[pos]);
    if (c == '"' || c == '\\' || c < 0x20) return pos;
  }
  return n;
}

namespace {

using detail::find_string_special;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

namespace detail {

bool json_number_to_double(const char* first, const char* last, double& out) {
  // Powers of ten that are exact doubles (10^22 < 2^53 * 2^22): one correctly rounded operation
  // on two exact operands gives the correctly rounded value of m * 10^e (Clinger's fast path).
  static constexpr double kPow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                        1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                        1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const char* p = first;
  const bool negative = p < last && *p == '-';
  if (negative) ++p;
  uint64_t m = 0;
  int significant = 0;  // digits in m, leading zeros not counted
  int exp10 = 0;
  bool slow = false;
  auto digit = [&](char c) {
    const unsigned d = static_cast<unsigned>(c - '0');
    if (m == 0 && d == 0) return;
    if (++significant > 19) {
      slow = true;
      return;
    }
    m = m * 10 + d;
  };
  for (; p < last && is_digit(*p); ++p) digit(*p);
  if (p < last && *p == '.') {
    for (++p; p < last && is_digit(*p); ++p) {
      digit(*p);
      --exp10;
    }
  }
  if (p < last && (*p == 'e' || *p == 'E')) {
    ++p;
    const bool eneg = p < last && *p == '-';
    if (p < last && (*p == '-' || *p == '+')) ++p;
    int e = 0, edigits = 0;
    for (; p < last && is_digit(*p); ++p) {
      if (e == 0 && *p == '0') continue;
      if (++edigits > 5) slow = true;
      e = e * 10 + (*p - '0');
    }
    if (!slow) exp10 += eneg ? -e : e;
  }
  if (!slow && m == 0) {
    out = negative ? -0.0 : 0.0;
    return true;
  }
  if (!slow && m <= (uint64_t{1} << 53) && exp10 >= -22 && exp10 <= 22) {
    double v = static_cast<double>(m);
    v = exp10 < 0 ? v / kPow10[-exp10] : v * kPow10[exp10];
    out = negative ? -v : v;
    return true;
  }
  double v = 0;
  const auto r = std::from_chars(first, last, v);
  if (r.ec != std::errc()) return false;
  out = v;
  return true;
}

}  // namespace detail

JsonCursor::JsonCursor(std::string_view text, std::string source)
    : text_(text), source_(std::move(source)) {
  // A UTF-8 byte order mark is tolerated, as Python's json.load does not but editors write it.
  if (text_.size() >= 3 && text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
}

void JsonCursor::skip_ws() {
  while (pos_ < text_.size() && is_ws(text_[pos_])) ++pos_;
}

std::string JsonCursor::path() const {
  std::string out;
  for (const Frame& f : stack_) {
    if (f.first) break;
    if (f.is_array) {
      out += '[';
      out += std::to_string(f.index);
      out += ']';
    } else {
      if (!out.empty()) out += '.';
      out.append(f.key.data(), f.key.size());
    }
  }
  return out;
}

std::string JsonCursor::describe_here() {
  if (pos_ >= text_.size()) return "the end of the file (truncated?)";
  const char c = text_[pos_];
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02X", static_cast<unsigned char>(c));
    return buf;
  }
  return std::string("'") + c + "'";
}

void JsonCursor::fail_at(size_t pos, std::string_view message) {
  size_t line = 1, line_start = 0;
  const size_t end = std::min(pos, text_.size());
  for (size_t i = 0; i < end; ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  std::string msg = source_ + ": byte " + std::to_string(pos) + " (line " + std::to_string(line) +
                    ", column " + std::to_string(pos - line_start + 1) + ")";
  const std::string p = path();
  if (!p.empty()) msg += " at " + p;
  msg += ": ";
  msg.append(message.data(), message.size());
  throw JsonError(msg);
}

void JsonCursor::fail(std::string_view expected) {
  skip_ws();
  std::string message = "expected ";
  message.append(expected.data(), expected.size());
  message += ", found " + describe_here();
  fail_at(pos_, message);
}

void JsonCursor::fail_value(std::string_view message) { fail_at(value_start_, message); }

JsonCursor::Kind JsonCursor::peek() {
  skip_ws();
  if (pos_ >= text_.size()) fail("a value");
  switch (text_[pos_]) {
    case '{': return Kind::kObject;
    case '[': return Kind::kArray;
    case '"': return Kind::kString;
    case 't': return Kind::kTrue;
    case 'f': return Kind::kFalse;
    case 'n': return Kind::kNull;
    default:
      if (text_[pos_] == '-' || is_digit(text_[pos_])) return Kind::kNumber;
      fail("a value");
  }
}

bool JsonCursor::next_is(Kind k) {
  skip_ws();
  if (pos_ >= text_.size()) return false;
  const char c = text_[pos_];
  const bool number = c == '-' || is_digit(c);
  return (k == Kind::kObject && c == '{') || (k == Kind::kArray && c == '[') ||
         (k == Kind::kString && c == '"') || (k == Kind::kTrue && c == 't') ||
         (k == Kind::kFalse && c == 'f') || (k == Kind::kNull && c == 'n') ||
         (k == Kind::kNumber && number);
}

void JsonCursor::begin_object() {
  skip_ws();
  if (pos_ >= text_.size() || text_[pos_] != '{') fail("an object");
  ++pos_;
  stack_.push_back(Frame{{}, 0, false, true});
}

bool JsonCursor::next_key(std::string_view& key) {
  Frame& f = stack_.back();
  skip_ws();
  if (pos_ < text_.size() && text_[pos_] == '}') {
    ++pos_;
    stack_.pop_back();
    return false;
  }
  if (!f.first) {
    if (pos_ >= text_.size() || text_[pos_] != ',') fail("',' or '}'");
    ++pos_;
    skip_ws();
  }
  if (pos_ >= text_.size() || text_[pos_] != '"') fail("a key string");
  // Keys in COCO files never need escapes; a key with escapes is decoded into a per-frame buffer
  // would cost an allocation per key, so such keys are compared undecoded (they match nothing).
  const size_t start = pos_ + 1;
  size_t end = find_string_special(text_, start);
  while (end < text_.size() && text_[end] == '\\') end = find_string_special(text_, end + 2);
  if (end >= text_.size() || text_[end] != '"') {
    pos_ = std::min(end, text_.size());
    fail("the end of the key string");
  }
  key = text_.substr(start, end - start);
  pos_ = end + 1;
  skip_ws();
  if (pos_ >= text_.size() || text_[pos_] != ':') fail("':' after the key");
  ++pos_;
  f.key = key;
  f.first = false;
  return true;
}

void JsonCursor::begin_array() {
  skip_ws();
  if (pos_ >= text_.size() || text_[pos_] != '[') fail("an array");
  ++pos_;
  stack_.push_back(Frame{{}, 0, true, true});
}

bool JsonCursor::next_element() {
  Frame& f = stack_.back();
  skip_ws();
  if (pos_ < text_.size() && text_[pos_] == ']') {
    ++pos_;
    stack_.pop_back();
    return false;
  }
  if (!f.first) {
    if (pos_ >= text_.size() || text_[pos_] != ',') fail("',' or ']'");
    ++pos_;
    ++f.index;
  }
  f.first = false;
  return true;
}

std::string_view JsonCursor::string(std::string& scratch) {
  skip_ws();
  value_start_ = pos_;
  if (pos_ >= text_.size() || text_[pos_] != '"') fail("a string");
  const size_t start = pos_ + 1;
  const size_t end = find_string_special(text_, start);
  if (end < text_.size() && text_[end] == '"') {
    pos_ = end + 1;
    return text_.substr(start, end - start);
  }
  return decode_string(start, scratch);
}

std::string_view JsonCursor::decode_string(size_t start, std::string& scratch) {
  scratch.clear();
  size_t p = start;
  for (;;) {
    const size_t end = find_string_special(text_, p);
    scratch.append(text_.data() + p, end - p);
    if (end >= text_.size()) {
      pos_ = end;
      fail("the closing '\"' of a string");
    }
    const char c = text_[end];
    if (c == '"') {
      pos_ = end + 1;
      return scratch;
    }
    if (c != '\\') {
      pos_ = end;
      fail("a string character (control characters must be escaped)");
    }
    if (end + 1 >= text_.size()) {
      pos_ = end + 1;
      fail("an escape character");
    }
    const char e = text_[end + 1];
    p = end + 2;
    switch (e) {
      case '"': scratch.push_back('"'); break;
      case '\\': scratch.push_back('\\'); break;
      case '/': scratch.push_back('/'); break;
      case 'b': scratch.push_back('\b'); break;
      case 'f': scratch.push_back('\f'); break;
      case 'n': scratch.push_back('\n'); break;
      case 'r': scratch.push_back('\r'); break;
      case 't': scratch.push_back('\t'); break;
      case 'u': {
        auto hex4 = [&](size_t at, uint32_t& v) {
          if (at + 4 > text_.size()) return false;
          v = 0;
          for (size_t i = 0; i < 4; ++i) {
            const char h = text_[at + i];
            v <<= 4;
            if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
            else return false;
          }
          return true;
        };
        uint32_t cp = 0;
        if (!hex4(p, cp)) {
          pos_ = p;
          fail("four hex digits after \\u");
        }
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && p + 6 <= text_.size() && text_[p] == '\\' &&
            text_[p + 1] == 'u') {
          uint32_t lo = 0;
          if (hex4(p + 2, lo) && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          }
        }
        append_utf8(scratch, cp);
        break;
      }
      default:
        pos_ = end + 1;
        fail("a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
    }
  }
}

void JsonCursor::scan_number(size_t& end, bool& integral) {
  size_t p = pos_;
  const size_t n = text_.size();
  integral = true;
  if (p < n && text_[p] == '-') ++p;
  if (p >= n || !is_digit(text_[p])) fail("a number");
  if (text_[p] == '0') {
    ++p;
  } else {
    while (p < n && is_digit(text_[p])) ++p;
  }
  if (p < n && text_[p] == '.') {
    integral = false;
    ++p;
    if (p >= n || !is_digit(text_[p])) {
      pos_ = p;
      fail("a digit after the decimal point");
    }
    while (p < n && is_digit(text_[p])) ++p;
  }
  if (p < n && (text_[p] == 'e' || text_[p] == 'E')) {
    integral = false;
    ++p;
    if (p < n && (text_[p] == '+' || text_[p] == '-')) ++p;
    if (p >= n || !is_digit(text_[p])) {
      pos_ = p;
      fail("a digit in the exponent");
    }
    while (p < n && is_digit(text_[p])) ++p;
  }
  end = p;
}

double JsonCursor::number() {
  skip_ws();
  value_start_ = pos_;
  if (pos_ >= text_.size() || (text_[pos_] != '-' && !is_digit(text_[pos_]))) {
    // Python's json writes NaN / Infinity; name them, they are not numbers for COCO.
    if (text_.substr(pos_, 3) == "NaN" || text_.substr(pos_, 8) == "Infinity" ||
        text_.substr(pos_, 9) == "-Infinity") {
      fail("a finite number (NaN and Infinity are not valid here)");
    }
    fail("a number");
  }
  if (text_[pos_] == '-' && text_.substr(pos_, 9) == "-Infinity") {
    fail("a finite number (NaN and Infinity are not valid here)");
  }
  size_t end = 0;
  bool integral = false;
  scan_number(end, integral);
  double v = 0;
  const char* first = text_.data() + pos_;
  if (detail::json_number_to_double(first, text_.data() + end, v)) {
    pos_ = end;
    return v;
  }
  const auto r = std::from_chars(first, text_.data() + end, v);
  if (r.ec == std::errc::result_out_of_range) {
    // Overflow to infinity is refused; underflow to zero is what Python does too.
    if (std::abs(v) == std::numeric_limits<double>::infinity() || v == 0.0) {
      // from_chars leaves v unchanged on range errors: decide by the exponent's sign.
      const std::string_view tok(first, static_cast<size_t>(text_.data() + end - first));
      const size_t e = tok.find_first_of("eE");
      if (e != std::string_view::npos && e + 1 < tok.size() && tok[e + 1] == '-') {
        v = 0.0;
      } else {
        fail_value("number out of the range of a double");
      }
    } else {
      fail_value("number out of the range of a double");
    }
  } else if (r.ec != std::errc() || r.ptr != text_.data() + end) {
    fail("a number");
  }
  pos_ = end;
  return v;
}

uint64_t JsonCursor::uint64() {
  skip_ws();
  value_start_ = pos_;
  size_t end = 0;
  bool integral = false;
  if (pos_ >= text_.size() || (text_[pos_] != '-' && !is_digit(text_[pos_]))) fail("an integer");
  scan_number(end, integral);
  if (!integral) fail_value("expected an integer, found a number with a fraction or exponent");
  if (text_[pos_] == '-') fail_value("expected a non-negative integer, found a negative number");
  uint64_t v = 0;
  const auto r = std::from_chars(text_.data() + pos_, text_.data() + end, v);
  if (r.ec != std::errc()) fail_value("integer does not fit in 64 bits");
  pos_ = end;
  return v;
}

int64_t JsonCursor::int64() {
  skip_ws();
  value_start_ = pos_;
  size_t end = 0;
  bool integral = false;
  if (pos_ >= text_.size() || (text_[pos_] != '-' && !is_digit(text_[pos_]))) fail("an integer");
  scan_number(end, integral);
  if (!integral) fail_value("expected an integer, found a number with a fraction or exponent");
  int64_t v = 0;
  const auto r = std::from_chars(text_.data() + pos_, text_.data() + end, v);
  if (r.ec != std::errc()) fail_value("integer does not fit in 64 bits");
  pos_ = end;
  return v;
}

void JsonCursor::expect_literal(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail(std::string("'") + std::string(word) + "'");
  pos_ += word.size();
}

bool JsonCursor::boolean() {
  skip_ws();
  value_start_ = pos_;
  if (pos_ < text_.size() && text_[pos_] == 't') {
    expect_literal("true");
    return true;
  }
  if (pos_ < text_.size() && text_[pos_] == 'f') {
    expect_literal("false");
    return false;
  }
  fail("true or false");
}

bool JsonCursor::null() {
  skip_ws();
  value_start_ = pos_;
  if (pos_ < text_.size() && text_[pos_] == 'n') {
    expect_literal("null");
    return true;
  }
  return false;
}

void JsonCursor::skip() {
  // Iterative, so that deeply nested input cannot overflow the stack.
  std::string scratch;
  std::vector<char> closers;
  for (;;) {
    skip_ws();
    switch (peek()) {
      case Kind::kObject: {
        ++pos_;
        skip_ws();
        if (pos_ < text_.size() && text_[pos_] == '}') {
          ++pos_;
          break;
        }
        closers.push_back('}');
        string(scratch);
        skip_ws();
        if (pos_ >= text_.size() || text_[pos_] != ':') fail("':' after the key");
        ++pos_;
        continue;
      }
      case Kind::kArray: {
        ++pos_;
        skip_ws();
        if (pos_ < text_.size() && text_[pos_] == ']') {
          ++pos_;
          break;
        }
        closers.push_back(']');
        continue;
      }
      case Kind::kString: string(scratch); break;
      case Kind::kNumber: number(); break;
      case Kind::kTrue: expect_literal("true"); break;
      case Kind::kFalse: expect_literal("false"); break;
      case Kind::kNull: expect_literal("null"); break;
    }
    // A value is complete: close containers or move to the next member.
    for (;;) {
      if (closers.empty()) return;
      skip_ws();
      if (pos_ < text_.size() && text_[pos_] == closers.back()) {
        ++pos_;
        closers.pop_back();
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        if (closers.back() == '}') {
          string(scratch);
          skip_ws();
          if (pos_ >= text_.size() || text_[pos_] != ':') fail("':' after the key");
          ++pos_;
        }
        break;
      }
      fail(closers.back() == '}' ? "',' or '}'" : "',' or ']'");
    }
  }
}

void JsonCursor::expect_end() {
  skip_ws();
  if (pos_ != text_.size()) fail("the end of the file after the top-level value");
}

}  // namespace mrcnn::eval
