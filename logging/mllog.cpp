#include "logging/mllog.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace mrcnn::logging {

std::string_view event_type_name(EventType t) {
  switch (t) {
    case EventType::kIntervalStart: return "INTERVAL_START";
    case EventType::kIntervalEnd: return "INTERVAL_END";
    case EventType::kPointInTime: return "POINT_IN_TIME";
  }
  return "POINT_IN_TIME";
}

EventType event_type_for(std::string_view key) {
  if (key.ends_with("_start")) return EventType::kIntervalStart;
  if (key.ends_with("_stop")) return EventType::kIntervalEnd;
  return EventType::kPointInTime;
}

std::string encode(std::string_view ns, int64_t time_ms, EventType type, std::string_view key,
                   const Json& value, const Json& metadata) {
  std::string out = ":::MLLOG {\"namespace\": ";
  py_json_dump(Json(std::string(ns)), out);
  out += ", \"time_ms\": ";
  out += std::to_string(time_ms);
  out += ", \"event_type\": \"";
  out += event_type_name(type);
  out += "\", \"key\": ";
  py_json_dump(Json(std::string(key)), out);
  out += ", \"value\": ";
  py_json_dump(value, out);
  out += ", \"metadata\": ";
  py_json_dump(metadata, out);
  out += '}';
  return out;
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

MLLogger::MLLogger(MLLoggerOptions options) : options_(std::move(options)) {
  if (!enabled() || options_.file_path.empty()) return;
  file_ = std::fopen(options_.file_path.c_str(), options_.truncate_file ? "w" : "a");
  if (file_ == nullptr)
    throw std::runtime_error("cannot open MLPerf log file '" + options_.file_path +
                             "' for writing: " + std::strerror(errno));
}

MLLogger::~MLLogger() {
  if (file_ != nullptr) std::fclose(file_);
}

int64_t MLLogger::log(std::string_view key, const Json& value, const Json& metadata,
                   std::source_location where) {
  return emit(event_type_for(key), key, value, metadata, where);
}
int64_t MLLogger::start(std::string_view key, const Json& value, const Json& metadata,
                     std::source_location where) {
  return emit(EventType::kIntervalStart, key, value, metadata, where);
}
int64_t MLLogger::end(std::string_view key, const Json& value, const Json& metadata,
                   std::source_location where) {
  return emit(EventType::kIntervalEnd, key, value, metadata, where);
}
int64_t MLLogger::event(std::string_view key, const Json& value, const Json& metadata,
                     std::source_location where) {
  return emit(EventType::kPointInTime, key, value, metadata, where);
}

namespace {
// Source paths are relative to the repository root (-fmacro-prefix-map); when ccache rewrites
// them relative to a build folder inside the repository they start with "../": drop that too.
std::string_view repo_relative(std::string_view file) {
  while (file.starts_with("../") || file.starts_with("./")) file.remove_prefix(file[1] == '.' ? 3 : 2);
  return file;
}
}  // namespace

int64_t MLLogger::emit(EventType type, std::string_view key, const Json& value, const Json& metadata,
                    const std::source_location& where) {
  if (!enabled()) return 0;
  Json meta = Json::object();
  meta["file"] = std::string(repo_relative(where.file_name()));
  meta["lineno"] = where.line();
  if (metadata.is_object()) {
    for (const auto& [k, v] : metadata.items()) meta[k] = v;
  } else if (!metadata.is_null()) {
    std::fprintf(stderr, ":::MLLOG warning: metadata of '%.*s' is not an object; ignored\n",
                 static_cast<int>(key.size()), key.data());
  }
  const int64_t time_ms = options_.clock();
  std::string line = encode(options_.default_namespace, time_ms, type, key, value, meta);
  line += '\n';
  write_line(line);
  return time_ms;
}

void MLLogger::write_line(const std::string& line) {
  std::lock_guard lock(mutex_);
  bool ok = true;
  if (options_.to_stdout) {
    ok &= std::fwrite(line.data(), 1, line.size(), stdout) == line.size();
    ok &= std::fflush(stdout) == 0;
  }
  if (file_ != nullptr) {
    ok &= std::fwrite(line.data(), 1, line.size(), file_) == line.size();
    ok &= std::fflush(file_) == 0;
  }
  if (!ok && !reported_failure_) {
    reported_failure_ = true;
    std::fprintf(stderr, ":::MLLOG error: could not write a log line (%s); the log is incomplete\n",
                 std::strerror(errno));
  }
}

}  // namespace mrcnn::logging
