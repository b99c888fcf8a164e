#include "logging/console.h"

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace mrcnn::logging {
namespace {

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void setup_console(const ConsoleOptions& options) {
  static int generation = 0;
  auto logger = spdlog::stderr_color_mt("mrcnn-console-" + std::to_string(++generation));
  std::string pattern = "[%H:%M:%S.%e] ";
  if (options.world_size > 1) pattern += "[rank " + std::to_string(options.rank) + "] ";
  pattern += "[%^%l%$] %v";
  logger->set_pattern(pattern);
  const bool quiet_rank = options.rank != 0 && !options.all_ranks;
  const Level level = quiet_rank && options.level < Level::kWarn ? Level::kWarn : options.level;
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::info);
  // Replaces the previous default logger (whose registry entry is dropped first: spdlog resets
  // the default when a logger of the default's name is dropped).
  if (auto previous = spdlog::default_logger(); previous && previous->name() != logger->name())
    spdlog::drop(previous->name());
  spdlog::set_default_logger(logger);
}

Level parse_level(std::string_view name) {
  if (name == "trace") return Level::kTrace;
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn" || name == "warning") return Level::kWarn;
  if (name == "error") return Level::kError;
  if (name == "off") return Level::kOff;
  throw std::invalid_argument("unknown log level '" + std::string(name) +
                              "' (expected trace, debug, info, warn, error or off)");
}

void log(Level level, std::string_view message) {
  spdlog::default_logger_raw()->log(to_spdlog(level), "{}", message);
}

std::string error_text(const std::exception& e) {
  std::string s = e.what();
  // c10::Error: "<message>\nException raised from <function> at <file>:<line> (most recent call
  // first):\nframe #0: ..." -- keep the message.
  const auto cut = s.find("\nException raised from ");
  if (cut != std::string::npos) s.erase(cut);
  return s;
}

std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

}  // namespace mrcnn::logging
