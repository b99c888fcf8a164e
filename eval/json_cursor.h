// JsonCursor: a pull (SAX-style) reader over one JSON text held in memory.
//
// The COCO files are large (hundreds of MB of detections) and have a fixed shape, so the readers
// walk them with this cursor instead of building a document tree: each value is read once, in
// place, into its final C++ type. Errors throw JsonError whose message names the source (file
// name), the byte offset with line and column, the element's path ("annotations[17].bbox[2]")
// and what was expected, e.g.
//   instances_val2017.json: byte 1234 (line 3, column 17) at annotations[17].bbox[2]:
//   expected a number, found '"'
//
// Ownership and lifetime: the cursor keeps a view of `text`; the caller keeps the text alive while
// the cursor and any string_view it returned are in use. Not thread-safe: one cursor, one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::eval {

// Malformed or mistyped JSON input. what() is one self-contained line.
class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class JsonCursor {
 public:
  // `source` names the text in error messages (normally the file path).
  JsonCursor(std::string_view text, std::string source);

  JsonCursor(const JsonCursor&) = delete;
  JsonCursor& operator=(const JsonCursor&) = delete;

  // The kind of the next value, after skipping whitespace. Throws at the end of the text.
  enum class Kind { kObject, kArray, kString, kNumber, kTrue, kFalse, kNull };
  Kind peek();
  // Whether the next value is of kind `k`; false (no throw) at the end or on a stray character.
  bool next_is(Kind k);

  // Objects:  begin_object(); while (next_key(key)) { ... read the value ... }
  // next_key() consumes the separators, returns false after the closing '}'.
  void begin_object();
  bool next_key(std::string_view& key);

  // Arrays:  begin_array(); while (next_element()) { ... read the value ... }
  void begin_array();
  bool next_element();

  // Scalars. Each throws a JsonError naming what was expected when the value has another type.
  // string(): a view of the text when the string has no escapes, else of `scratch` (decoded).
  std::string_view string(std::string& scratch);
  double number();              // any JSON number (finite by grammar)
  uint64_t uint64();            // a non-negative integer (1.0 or 1e3 are refused) < 2^64
  int64_t int64();              // a signed integer
  bool boolean();
  bool null();                  // consumes `null` and returns true if the next value is null
  void skip();                  // skips one value of any kind

  // Throws JsonError at the current position: "...: expected <expected>, found <what is there>".
  [[noreturn]] void fail(std::string_view expected);
  // Throws JsonError at the start of the value just read: "...: <message>".
  [[noreturn]] void fail_value(std::string_view message);
  // Throws unless only whitespace remains.
  void expect_end();

  // Restarts at byte `pos` of the text at the top level (no enclosing object or array: paths in
  // later errors are relative to there). For readers that parse pieces of a text on their own.
  void restart_at(size_t pos) {
    pos_ = pos;
    value_start_ = pos;
    stack_.clear();
  }

  // Path of the current element, e.g. "annotations[17].bbox"; empty at the top level.
  std::string path() const;
  size_t offset() const { return pos_; }
  const std::string& source() const { return source_; }

 private:
  struct Frame {
    std::string_view key;  // current key (objects)
    size_t index = 0;      // current element index (arrays)
    bool is_array = false;
    bool first = true;     // no element read yet
  };

  void skip_ws();
  [[noreturn]] void fail_at(size_t pos, std::string_view message);
  std::string describe_here();
  void scan_number(size_t& end, bool& integral);
  std::string_view decode_string(size_t start, std::string& scratch);
  void expect_literal(std::string_view word);

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  size_t value_start_ = 0;  // where the last scalar began, for fail_value
  std::vector<Frame> stack_;
};

namespace detail {
// Index of the first '"', '\\' or control character (< 0x20) at or after `pos`, or text.size():
// where a string starting before `pos` ends, or needs decoding.
size_t find_string_special(std::string_view text, size_t pos);

// The double a JSON number token [first, last) denotes (correctly rounded, as std::from_chars):
// short decimals (at most 19 significant digits, decimal exponent within +-22) exactly by one
// IEEE multiplication or division of two exact doubles, the rest by std::from_chars. The token
// must match JSON's number grammar. False when the value is out of the range of a double (the
// caller decides; from_chars' errc::result_out_of_range).
bool json_number_to_double(const char* first, const char* last, double& out);
}  // namespace detail

}  // namespace mrcnn::eval
