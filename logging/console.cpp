#include "logging/console.h"

#include <stdexcept>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace mrcnn::logging {

void setup_console(const ConsoleOptions& options) {
  auto logger = spdlog::stderr_color_mt("mrcnn-console-" + std::to_string(options.rank) + "-" +
                                        std::to_string(reinterpret_cast<uintptr_t>(&options)));
  std::string pattern = "[%H:%M:%S.%e] ";
  if (options.world_size > 1) pattern += "[rank " + std::to_string(options.rank) + "] ";
  pattern += "[%^%l%$] %v";
  logger->set_pattern(pattern);
  const bool quiet_rank = options.rank != 0 && !options.all_ranks;
  logger->set_level(quiet_rank ? std::max(options.level, spdlog::level::warn) : options.level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  spdlog::drop(logger->name());  // keep only the default reference; re-setup replaces it
}

spdlog::level::level_enum parse_level(std::string_view name) {
  const auto lvl = spdlog::level::from_str(std::string(name));
  if (lvl == spdlog::level::off && name != "off")
    throw std::invalid_argument("unknown log level '" + std::string(name) +
                                "' (expected trace, debug, info, warn, error or off)");
  return lvl;
}

}  // namespace mrcnn::logging
