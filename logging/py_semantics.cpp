#include "logging/py_semantics.h"

#include <cmath>

namespace mrcnn::logging::detail {
namespace {

__int128 as_int(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_unsigned()) return static_cast<__int128>(v.get<uint64_t>());
  return static_cast<__int128>(v.get<int64_t>());
}

}  // namespace

std::string py_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "object";
  }
}

bool is_num(const Json& v) { return v.is_number() || v.is_boolean(); }

double num(const Json& v, const char* op) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  throw PyException{std::string("TypeError: '") + op + "' not supported for '" + py_type(v) + "'"};
}

bool py_eq(const Json& a, const Json& b) {
  if (is_num(a) && is_num(b)) {
    if (a.is_number_float() || b.is_number_float()) return num(a, "==") == num(b, "==");
    return as_int(a) == as_int(b);  // int/bool compare exactly, as Python ints do
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!py_eq(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !py_eq(v, *it)) return false;
    }
    return true;
  }
  return a == b;
}

bool py_in(std::string_view needle, const Json& hay) {
  if (hay.is_object()) return hay.contains(std::string(needle));
  if (hay.is_array()) {
    for (const auto& e : hay)
      if (e.is_string() && e.get_ref<const std::string&>() == needle) return true;
    return false;
  }
  if (hay.is_string()) return hay.get_ref<const std::string&>().find(needle) != std::string::npos;
  throw PyException{"TypeError: argument of type '" + py_type(hay) + "' is not iterable"};
}

const Json& py_index(const Json& v, std::string_view k) {
  if (v.is_object()) {
    auto it = v.find(std::string(k));
    if (it == v.end()) throw PyException{"KeyError: '" + std::string(k) + "'"};
    return *it;
  }
  if (v.is_string() || v.is_array())
    throw PyException{"TypeError: " + py_type(v) + " indices must be integers"};
  throw PyException{"TypeError: '" + py_type(v) + "' object is not subscriptable"};
}

size_t py_len_of(const Json& v) {
  if (v.is_string()) return py_len(v.get_ref<const std::string&>());
  if (v.is_array() || v.is_object()) return v.size();
  throw PyException{"TypeError: object of type '" + py_type(v) + "' has no len()"};
}

double py_div(double a, double b) {
  if (b == 0) throw PyException{"ZeroDivisionError: float division by zero"};
  return a / b;
}

bool is_integer(double v) {
  if (std::isnan(v)) throw PyException{"ValueError: cannot convert float NaN to integer"};
  if (std::isinf(v)) throw PyException{"OverflowError: cannot convert float infinity to integer"};
  return std::abs(std::nearbyint(v) - v) < 0.00001;
}

std::string py_str(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return py_json_dumps(v);
}

std::string short_json(const Json& v) {
  std::string s = py_json_dumps(v);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

}  // namespace mrcnn::logging::detail
