// JSON text exactly as Python's json.dumps() writes it with its default arguments, which is how
// the reference MLPerf emitter (mllog) encodes every log line:
//   separators ", " and ": ", ensure_ascii (non-ASCII as \uXXXX, surrogate pairs above U+FFFF),
//   floats as repr() (shortest round-trip digits; 1e-05, 0.0001, 1e+16, 2.0), NaN/Infinity,
//   object keys in insertion order (ordered_json).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mrcnn::logging {

using Json = nlohmann::ordered_json;

// Appends the Python json.dumps() text of `value` to `out`. Strings that are not valid UTF-8 are
// encoded with U+FFFD for each bad byte (nlohmann would throw; a log line must never fail).
void py_json_dump(const Json& value, std::string& out);
std::string py_json_dumps(const Json& value);

// Parses text the way Python's json.loads() does (the official MLPerf checker's parser): NaN,
// Infinity and -Infinity literals, integers kept apart from floats, control characters refused
// inside strings, the last of duplicate object keys wins. `text` is taken as Latin-1 (the checker
// reads logs as Latin-1): bytes >= 0x80 become U+0080..U+00FF, stored as UTF-8.
// Throws PyJsonError with the 0-based character offset and Python's wording of the problem.
struct PyJsonError : std::runtime_error {
  PyJsonError(const std::string& what, size_t offset) : std::runtime_error(what), offset(offset) {}
  size_t offset;
};
Json py_json_loads(std::string_view text);

// Python's float(str) for the strings it accepts (whitespace, sign, underscores between digits,
// nan/inf/infinity in any case); std::nullopt where Python raises ValueError.
std::optional<double> py_float_from_string(std::string_view s);

// Number of code points in a UTF-8 string (Python's len() of the decoded str).
size_t py_len(std::string_view utf8);

// Python's repr() of a double: "0.1", "1e-05", "1e+16", "2.0", "nan" -> "NaN" (json spelling).
std::string py_float_repr(double v);

}  // namespace mrcnn::logging
