#include "benchmark/config/config_reader.h"
#include "logging/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mrcnn::config {
namespace {

std::string type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "a list";
    case Json::value_t::object: return "an object";
    default: return "an unknown value";
  }
}

std::string show(const Json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string range_text(Range r, bool integral) {
  std::ostringstream o;
  auto num = [&](double x) {
    if (integral)
      o << static_cast<int64_t>(x);
    else
      o << x;
  };
  const bool lo = std::isfinite(r.min), hi = std::isfinite(r.max);
  if (lo && hi) {
    o << "in " << (r.min_exclusive ? "(" : "[");
    num(r.min);
    o << ", ";
    num(r.max);
    o << "]";
  } else if (lo) {
    o << (r.min_exclusive ? "> " : ">= ");
    num(r.min);
  } else if (hi) {
    o << "<= ";
    num(r.max);
  }
  return o.str();
}

}  // namespace

ConfigReader::ConfigReader(const Json& node, std::string file, std::string path, const Origins* origins)
    : node_(&node), file_(std::move(file)), path_(std::move(path)), origins_(origins) {
  if (!node.is_object())
    throw ConfigError(source("") + ": " + (path_.empty() ? "top level" : path_) + ": expected an object, got " +
                      type_name(node));
}

std::string ConfigReader::where(const std::string& key) const {
  return path_.empty() ? key : key.empty() ? path_ : path_ + "." + key;
}

std::string source_of(const Origins* origins, const std::string& file, const std::string& path) {
  if (origins == nullptr) return file;
  for (std::string p = path;;) {
    if (const auto it = origins->find(p); it != origins->end()) return it->second;
    const auto dot = p.rfind('.');
    if (dot == std::string::npos) return file;
    p.resize(dot);
  }
}

std::string ConfigReader::source(const std::string& key) const { return source_of(origins_, file_, where(key)); }

void ConfigReader::fail(const std::string& key, const std::string& problem) const {
  throw ConfigError(source(key) + ": " + where(key) + ": " + problem);
}

bool ConfigReader::has(const std::string& key) const {
  known_.insert(key);
  return node_->contains(key);
}

const Json& ConfigReader::at(const std::string& key) {
  known_.insert(key);
  auto it = node_->find(key);
  if (it == node_->end()) fail(key, "missing (required)");
  read_.insert(key);
  return *it;
}

ConfigReader ConfigReader::object(const std::string& key) {
  const Json& node = at(key);
  if (!node.is_object()) fail(key, "expected an object, got " + type_name(node));
  return ConfigReader(node, file_, where(key), origins_);
}

std::optional<ConfigReader> ConfigReader::optional_object(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return object(key);
}

double ConfigReader::checked_number(const std::string& key, const Json& v, Range range, bool integral) {
  const bool ok_type = integral ? v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>())
                                : v.is_number();
  if (!ok_type)
    fail(key, std::string("expected ") + (integral ? "an integer" : "a number") + ", got " + type_name(v) + " " + show(v));
  const double x = v.get<double>();
  if (!std::isfinite(x)) fail(key, "expected a finite number, got " + show(v));
  const bool below = range.min_exclusive ? !(x > range.min) : x < range.min;
  if (below || x > range.max) fail(key, "expected a value " + range_text(range, integral) + ", got " + show(v));
  return x;
}

int64_t ConfigReader::integer(const std::string& key, Range range) {
  const Json& v = at(key);
  checked_number(key, v, range, true);
  return v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
}

int64_t ConfigReader::integer_or(const std::string& key, int64_t fallback, Range range) {
  return has(key) ? integer(key, range) : fallback;
}

double ConfigReader::number(const std::string& key, Range range) { return checked_number(key, at(key), range, false); }

double ConfigReader::number_or(const std::string& key, double fallback, Range range) {
  return has(key) ? number(key, range) : fallback;
}

bool ConfigReader::boolean(const std::string& key) {
  const Json& v = at(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + type_name(v) + " " + show(v));
  return v.get<bool>();
}

bool ConfigReader::boolean_or(const std::string& key, bool fallback) { return has(key) ? boolean(key) : fallback; }

std::string ConfigReader::string(const std::string& key, const std::vector<std::string>& allowed) {
  const Json& v = at(key);
  if (!v.is_string()) fail(key, "expected a string, got " + type_name(v) + " " + show(v));
  const std::string s = v.get<std::string>();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
    fail(key, "expected one of " + list + ", got \"" + s + "\"");
  }
  return s;
}

std::string ConfigReader::string_or(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  return has(key) ? string(key, allowed) : fallback;
}

std::vector<int64_t> ConfigReader::integers(const std::string& key, Range range) {
  const Json& v = at(key);
  if (!v.is_array()) fail(key, "expected a list of integers, got " + type_name(v) + " " + show(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    checked_number(key + "[" + std::to_string(i) + "]", v[i], range, true);
    out.push_back(v[i].is_number_float() ? static_cast<int64_t>(v[i].get<double>()) : v[i].get<int64_t>());
  }
  return out;
}

std::vector<double> ConfigReader::numbers(const std::string& key, Range range) {
  const Json& v = at(key);
  if (!v.is_array()) fail(key, "expected a list of numbers, got " + type_name(v) + " " + show(v));
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(checked_number(key + "[" + std::to_string(i) + "]", v[i], range, false));
  return out;
}

const Json& ConfigReader::raw(const std::string& key) { return at(key); }

void ConfigReader::ignore(const std::string& key) {
  known_.insert(key);
  read_.insert(key);
}

std::vector<std::pair<std::string, const Json*>> ConfigReader::raw_keys() const {
  std::vector<std::pair<std::string, const Json*>> out;
  for (const auto& [k, v] : node_->items()) out.emplace_back(k, &v);
  return out;
}

void ConfigReader::finish() const {
  std::string known;
  for (const auto& k : known_)
    if (k != "comment") known += (known.empty() ? "" : ", ") + k;
  const std::string here = path_.empty() ? "top level" : path_;
  std::string unknown;
  for (const auto& [k, v] : node_->items()) {
    if (read_.contains(k)) continue;
    // A key put there by --set is that argument's fault, and says so.
    if (source(k) != file_) throw ConfigError(source(k) + ": unknown key '" + where(k) + "' (known in " + here + ": " + known + ")");
    unknown += (unknown.empty() ? "" : ", ") + ("\"" + k + "\"");
  }
  if (!unknown.empty()) throw ConfigError(file_ + ": " + here + ": unknown key(s) " + unknown + " (known: " + known + ")");
}

void apply_override(Json& config, const std::string& assignment, Origins& origins) {
  const std::string origin = "--set " + assignment;
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw ConfigError(origin + ": expected key.path=value");
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  Json* node = &config;
  std::string done;
  for (size_t start = 0;;) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw ConfigError(origin + ": empty key in '" + path + "'");
    if (!node->is_object())
      throw ConfigError(origin + ": " + done + " holds " + type_name(*node) + ", not a section with keys");
    done = done.empty() ? key : done + "." + key;
    const bool created = !node->contains(key);
    if (created) origins.emplace(done, origin);  // created here: this override's doing
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    if (created) *node = Json::object();  // a section the file lacks
    start = dot + 1;
  }
  try {
    *node = Json::parse(text);
  } catch (const Json::parse_error&) {
    *node = text;
  } catch (const Json::out_of_range&) {
    throw ConfigError(origin + ": " + text + " is beyond the range of a double");
  }
  origins[path] = origin;
}

Json read_json_file(const std::string& path) {
  try {
    return logging::read_json_file(path);
  } catch (const logging::JsonFileError& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace mrcnn::config
