#include "benchmark/comm/rank_environment.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace mrcnn::comm {
namespace {

// A whole decimal number in [lo, hi], or an error naming the variable.
long long number(const EnvLookup& env, const char* name, long long lo, long long hi) {
  const char* text = env(name);
  if (text == nullptr || *text == '\0') throw CommunicatorConfigError(std::string(name) + " is not set");
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text || v < lo || v > hi)
    throw CommunicatorConfigError(std::string(name) + "=" + text + ": expected a whole number from " +
                             std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

bool set(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v != nullptr && *v != '\0';
}

void read_store_address(const EnvLookup& env, RankEnvironment& r, int fallback_port) {
  if (!set(env, "MASTER_ADDR"))
    throw CommunicatorConfigError(
        "MASTER_ADDR is not set (the host of rank 0, where the ranks meet" +
        std::string(r.launcher == "srun" ? "; in a Slurm job: export MASTER_ADDR=\"$(scontrol show hostnames "
                                           "\"$SLURM_JOB_NODELIST\" | head -n 1)\")"
                                         : ")"));
  r.master_addr = env("MASTER_ADDR");
  if (set(env, "MASTER_PORT") || fallback_port == 0)
    r.master_port = static_cast<uint16_t>(number(env, "MASTER_PORT", 1, 65535));
  else
    r.master_port = static_cast<uint16_t>(fallback_port);
}

}  // namespace

const char* process_env(const char* name) { return std::getenv(name); }

bool started_by_mpi(const EnvLookup& env) {
  return set(env, "OMPI_COMM_WORLD_SIZE") || set(env, "PMI_SIZE") || set(env, "PMIX_RANK");
}

std::optional<RankEnvironment> read_rank_environment(const EnvLookup& env) {
  RankEnvironment r;
  constexpr long long kMaxRanks = 1 << 20;
  if (set(env, "RANK") || set(env, "WORLD_SIZE")) {
    r.launcher = set(env, "TORCHELASTIC_RUN_ID") ? "torchrun" : "environment";
    r.world_size = static_cast<int>(number(env, "WORLD_SIZE", 1, kMaxRanks));
    r.rank = static_cast<int>(number(env, "RANK", 0, r.world_size - 1));
    if (set(env, "LOCAL_RANK")) r.local_rank = static_cast<int>(number(env, "LOCAL_RANK", 0, r.world_size - 1));
    read_store_address(env, r, 0);
    const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
    r.agent_store = agent != nullptr && std::string(agent) == "True";
    if (set(env, "TORCHELASTIC_RESTART_COUNT"))
      r.attempt = static_cast<int>(number(env, "TORCHELASTIC_RESTART_COUNT", 0, kMaxRanks));
    return r;
  }
  if (set(env, "SLURM_STEP_NUM_TASKS") && set(env, "SLURM_PROCID")) {
    r.launcher = "srun";
    r.world_size = static_cast<int>(number(env, "SLURM_STEP_NUM_TASKS", 1, kMaxRanks));
    r.rank = static_cast<int>(number(env, "SLURM_PROCID", 0, r.world_size - 1));
    if (set(env, "SLURM_LOCALID"))
      r.local_rank = static_cast<int>(number(env, "SLURM_LOCALID", 0, r.world_size - 1));
    // Two jobs sharing a node must not meet at one port: without MASTER_PORT the job id picks it.
    const int port = set(env, "SLURM_JOB_ID")
                         ? 20000 + static_cast<int>(number(env, "SLURM_JOB_ID", 0, (1LL << 62)) % 20000)
                         : 29500;
    read_store_address(env, r, port);
    return r;
  }
  return std::nullopt;
}

}  // namespace mrcnn::comm
