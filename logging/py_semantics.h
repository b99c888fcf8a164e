// Python semantics on JSON values, as far as the MLPerf 3.1.0 Mask R-CNN rules and the official
// checker's parser use them: comparisons, `in`, indexing, len(), division, is_integer(), str(),
// with the exception Python would raise (PyException) where Python raises.
// Internal to mrcnn_logging (the compliance check).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "logging/py_json.h"

namespace mrcnn::logging::detail {

// A Python exception the checked expression would raise.
struct PyException {
  std::string what;  // e.g. "TypeError: '>' not supported between 'str' and 'int'"
};

std::string py_type(const Json& v);  // type(v).__name__: "int", "str", "dict", ...
bool is_num(const Json& v);          // int, float or bool
double num(const Json& v, const char* op);  // the number, or TypeError naming `op`
bool py_eq(const Json& a, const Json& b);   // a == b
bool py_in(std::string_view needle, const Json& hay);  // `needle in hay` for a string needle
const Json& py_index(const Json& v, std::string_view k);  // v[k]
size_t py_len_of(const Json& v);                          // len(v)
double py_div(double a, double b);                        // a / b
bool is_integer(double v);  // mlp_compliance.is_integer: abs(round(value) - value) < 0.00001
std::string py_str(const Json& v);  // str(v) for the values a POST formats into a file name

// A value as a message quotes it: its json.dumps text, cut to 120 characters.
std::string short_json(const Json& v);

}  // namespace mrcnn::logging::detail
