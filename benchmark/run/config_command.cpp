#include <cstdio>

#include "benchmark/run/command_line.h"
#include "benchmark/run/commands.h"

namespace mrcnn::run {
namespace {

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn config [--system FILE] [--set K=V ...] [--print KEY ...]

The resolved configuration of a system file: its values after the --set overrides, with every
default filled in, validated as `train` validates it. Without --print, the whole configuration
as JSON (what a run writes as config.json); with --print, each KEY's value on its own line
(strings bare, everything else as JSON). Besides the file's keys: "name" (the system's name)
and "launch.world_size" (nodes x ranks per node). Scripts ask here instead of reading the JSON.

exit status: 0, or 2 for a bad configuration or an unknown key

examples:
  mlperf-maskrcnn config --system systems/aws-p5.48xlarge.json
  mlperf-maskrcnn config --system systems/aws-p5.48xlarge-4n.json --print launch.world_size \
      --print hyperparameters.global_batch_size
  mlperf-maskrcnn config --system systems/cpu-dev.json --set run.data_dir=/data/coco2017 --print run.data_dir
)";

}  // namespace

int config_main(int argc, char** argv) {
  if (wants_help(argc, argv)) return std::fputs(kUsage, stdout), 0;
  try {
    const CommandLine cl(argc, argv, {"--print"}, {});
    const std::vector<std::string> keys = cl.values("--print");
    if (!cl.positional().empty()) throw config::ConfigError("unexpected argument '" + cl.positional()[0] + "'");
    const config::SystemConfig cfg = cl.system_config();
    if (keys.empty()) std::printf("%s\n", cfg.resolved.dump(2).c_str());
    for (const auto& key : keys) {
      const config::Json v = config::resolved_value(cfg, key);
      std::printf("%s\n", v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    return report_error("config", e, 2);
  }
}

}  // namespace mrcnn::run
