#include "logging/py_json.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace mrcnn::logging {

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits, in scientific form: [-]d[.ddd]e[+-]xx
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  (void)ec;
  std::string_view s(buf, end - buf);
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  int exp10 = 0;
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+'), s.data() + s.size(), exp10);
  // repr() switches to scientific notation outside 1e-4 <= |v| < 1e16 (float_repr_style 'short').
  if (exp10 < -4 || exp10 >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += ebuf;
  } else if (exp10 < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp10 - 1), '0');
    out += digits;
  } else {
    const size_t int_len = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_len) {
      out += digits;
      out.append(int_len - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, int_len);
      out += '.';
      out.append(digits, int_len);
    }
  }
  return out;
}

namespace {

void put_u16(uint32_t u, std::string& out) {
  char b[8];
  std::snprintf(b, sizeof b, "\\u%04x", u);
  out += b;
}

// Decodes one UTF-8 sequence at s[i]; returns the code point and advances i, or U+FFFD for a bad
// byte (advancing by one).
uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

void dump_string(std::string_view s, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = next_code_point(s, i);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp > 0xFFFF) {  // ensure_ascii: astral characters as a surrogate pair
          const uint32_t v = cp - 0x10000;
          put_u16(0xD800 | (v >> 10), out);
          put_u16(0xDC00 | (v & 0x3FF), out);
        } else if (cp < 0x20 || cp >= 0x7F) {  // anything outside ' '..'~'
          put_u16(cp, out);
        } else {
          out += static_cast<char>(cp);
        }
    }
  }
  out += '"';
}

}  // namespace

void py_json_dump(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::value_t::null: out += "null"; break;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case Json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case Json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case Json::value_t::number_float: out += py_float_repr(v.get<double>()); break;
    case Json::value_t::string: dump_string(v.get_ref<const std::string&>(), out); break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        py_json_dump(e, out);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        dump_string(k, out);
        out += ": ";
        py_json_dump(e, out);
      }
      out += '}';
      break;
    }
    case Json::value_t::binary:
    case Json::value_t::discarded: out += "null"; break;
  }
}

std::string py_json_dumps(const Json& value) {
  std::string out;
  py_json_dump(value, out);
  return out;
}

}  // namespace mrcnn::logging

// ---- json.loads ---------------------------------------------------------------------------------
namespace mrcnn::logging {
namespace {

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value();
    skip_ws();
    if (i_ != t_.size()) fail("Extra data");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw PyJsonError(what, i_); }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r'))
      ++i_;
  }
  bool starts(std::string_view lit) const { return t_.substr(i_).starts_with(lit); }

  Json parse_value() {
    if (++depth_ > 512) fail("maximum nesting depth exceeded");
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{depth_};
    if (i_ >= t_.size()) fail("Expecting value");
    const char c = t_[i_];
    if (c == '{') return parse_object();
    if (c == '[') return parse_array();
    if (c == '"') return Json(parse_string());
    if (starts("null")) return i_ += 4, Json(nullptr);
    if (starts("true")) return i_ += 4, Json(true);
    if (starts("false")) return i_ += 5, Json(false);
    if (starts("NaN")) return i_ += 3, Json(std::nan(""));
    if (starts("Infinity")) return i_ += 8, Json(HUGE_VAL);
    if (starts("-Infinity")) return i_ += 9, Json(-HUGE_VAL);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail("Expecting value");
  }

  Json parse_number() {
    const size_t start = i_;
    if (t_[i_] == '-') ++i_;
    if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') {
      i_ = start;
      fail("Expecting value");
    }
    if (t_[i_] == '0') {
      ++i_;
    } else {
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    }
    bool is_float = false;
    if (i_ + 1 < t_.size() && t_[i_] == '.' && t_[i_ + 1] >= '0' && t_[i_ + 1] <= '9') {
      is_float = true;
      i_ += 1;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      size_t j = i_ + 1;
      if (j < t_.size() && (t_[j] == '+' || t_[j] == '-')) ++j;
      if (j < t_.size() && t_[j] >= '0' && t_[j] <= '9') {
        is_float = true;
        while (j < t_.size() && t_[j] >= '0' && t_[j] <= '9') ++j;
        i_ = j;
      }
    }
    const std::string num(t_.substr(start, i_ - start));
    if (!is_float) {
      int64_t v = 0;
      auto r = std::from_chars(num.data(), num.data() + num.size(), v);
      if (r.ec == std::errc() && r.ptr == num.data() + num.size()) return Json(v);
      uint64_t u = 0;
      r = std::from_chars(num.data(), num.data() + num.size(), u);
      if (r.ec == std::errc() && r.ptr == num.data() + num.size()) return Json(u);
      // Python keeps arbitrarily large integers; a double is the closest we hold.
    }
    return Json(std::strtod(num.c_str(), nullptr));
  }

  std::string parse_string() {
    const size_t open = i_;
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= t_.size()) {
        i_ = open;
        fail("Unterminated string starting at");
      }
      const auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("Invalid control character at");
      if (c != '\\') {
        append_utf8(c, out);  // Latin-1 byte -> code point
        ++i_;
        continue;
      }
      if (++i_ >= t_.size()) {
        i_ = open;
        fail("Unterminated string starting at");
      }
      const char e = t_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && starts("\\u")) {
            const size_t save = i_;
            i_ += 2;
            const uint32_t lo = parse_hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF)
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else
              i_ = save;
          }
          // A lone surrogate is legal in a Python str; store U+FFFD to keep the text valid UTF-8.
          append_utf8(cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp, out);
          break;
        }
        default: --i_; fail("Invalid \\escape");
      }
    }
  }

  uint32_t parse_hex4() {
    if (i_ + 4 > t_.size()) fail("Invalid \\uXXXX escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = t_[i_ + k];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else fail("Invalid \\uXXXX escape");
    }
    i_ += 4;
    return v;
  }

  Json parse_array() {
    ++i_;
    Json arr = Json::array();
    skip_ws();
    if (i_ < t_.size() && t_[i_] == ']') return ++i_, arr;
    while (true) {
      skip_ws();
      arr.push_back(parse_value());
      skip_ws();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == ']') return ++i_, arr;
      fail("Expecting ',' delimiter");
    }
  }

  Json parse_object() {
    ++i_;
    Json obj = Json::object();
    skip_ws();
    if (i_ < t_.size() && t_[i_] == '}') return ++i_, obj;
    while (true) {
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != '"')
        fail("Expecting property name enclosed in double quotes");
      std::string k = parse_string();
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != ':') fail("Expecting ':' delimiter");
      ++i_;
      skip_ws();
      obj[k] = parse_value();
      skip_ws();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == '}') return ++i_, obj;
      fail("Expecting ',' delimiter");
    }
  }

  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Json py_json_loads(std::string_view text) { return Parser(text).parse_document(); }

std::optional<double> py_float_from_string(std::string_view s) {
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view body = lower;
  double sign = 1.0;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1.0 : 1.0;
    body.remove_prefix(1);
  }
  if (body == "nan") return std::nan("");
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  // digits with single underscores between digits, optional fraction, optional exponent
  std::string clean;
  bool digits_before = false, digits_after = false, seen_dot = false, seen_exp = false;
  char prev = 0;
  for (size_t k = 0; k < body.size(); ++k) {
    const char c = body[k];
    if (c >= '0' && c <= '9') {
      (seen_dot && !seen_exp ? digits_after : digits_before) = true;
      clean += c;
    } else if (c == '_') {
      if (!(prev >= '0' && prev <= '9') || k + 1 >= body.size() || body[k + 1] < '0' || body[k + 1] > '9')
        return std::nullopt;
    } else if (c == '.' && !seen_dot && !seen_exp) {
      seen_dot = true;
      clean += c;
    } else if (c == 'e' && !seen_exp && (digits_before || digits_after)) {
      seen_exp = true;
      clean += c;
      if (k + 1 < body.size() && (body[k + 1] == '+' || body[k + 1] == '-')) clean += body[++k];
      if (k + 1 >= body.size() || body[k + 1] < '0' || body[k + 1] > '9') return std::nullopt;
    } else {
      return std::nullopt;
    }
    prev = c;
  }
  if (!digits_before && !digits_after) return std::nullopt;
  return sign * std::strtod(clean.c_str(), nullptr);
}

size_t py_len(std::string_view utf8) {
  size_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace mrcnn::logging
