#include "benchmark/run/launch_plan.h"

namespace mrcnn::run {

std::vector<std::string> mpirun_prefix(const config::SystemConfig& c) {
  const auto& l = c.launch;
  if (l.world_size() == 1) return {};
  std::vector<std::string> args{"mpirun", "-np", std::to_string(l.world_size()), "--npernode",
                                std::to_string(l.ranks_per_node)};
  const std::string threads = std::to_string(l.threads_per_rank);
  if (l.cpu_binding == "core")
    args.insert(args.end(), {"--map-by", "socket:PE=" + threads, "--bind-to", "core", "--report-bindings"});
  else if (l.cpu_binding == "socket")
    args.insert(args.end(), {"--map-by", "socket", "--bind-to", "socket", "--report-bindings"});
  else
    args.insert(args.end(), {"--map-by", "slot", "--bind-to", "none"});
  for (const auto& [k, v] : l.env) args.insert(args.end(), {"-x", k + "=" + v});
  args.insert(args.end(), {"-x", "OMP_NUM_THREADS=" + threads});
  args.insert(args.end(), l.mpirun_args.begin(), l.mpirun_args.end());
  return args;
}

}  // namespace mrcnn::run
