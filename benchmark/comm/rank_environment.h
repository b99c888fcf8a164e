// Where this process sits in a job whose ranks were started without MPI, read from the
// environment the launcher gives every rank:
//   torchrun, or by hand  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK and
//                         LOCAL_WORLD_SIZE where given); torchrun's own store when
//                         TORCHELASTIC_USE_AGENT_STORE=True, its restart count in
//                         TORCHELASTIC_RESTART_COUNT
//   srun --mpi=none       SLURM_PROCID and SLURM_STEP_NUM_TASKS (set inside an srun step only, so
//                         a batch script's own shell is never taken for rank 0 of many); the
//                         store at MASTER_ADDR (the first host of the step: `launch`'s batch
//                         script exports it) and MASTER_PORT (else a port from the job id)
// The ranks meet through a key-value store (c10d's TCPStore) at MASTER_ADDR:MASTER_PORT, hosted
// by rank 0 (or by torchrun's agent).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace mrcnn::comm {

struct RankEnvironment {
  std::string launcher;     // "torchrun", "srun" or "environment" (RANK/WORLD_SIZE set by hand)
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;  // as the launcher numbers it (checked against the host names)
  std::string master_addr;
  uint16_t master_port = 0;
  bool agent_store = false;  // torchrun's agent hosts the store: every rank is a client
  int attempt = 0;           // torchrun's restart count: keys of earlier attempts are not read
};

// A rank environment or communicator choice that cannot work as given (bad input, exit 2), as
// opposed to a network that fails (std::runtime_error, exit 1).
class CommunicatorConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A variable's value, or nullptr (std::getenv, or a map in tests).
using EnvLookup = std::function<const char*(const char*)>;

// The rank environment, or nullopt when neither torchrun's nor srun's variables are set. Throws
// CommunicatorConfigError naming the variable when one is malformed (not a number, a rank outside
// the world, a port outside 1..65535) or MASTER_ADDR is missing.
std::optional<RankEnvironment> read_rank_environment(const EnvLookup& env);

// Whether MPI started this process (OpenMPI's mpirun, or srun with --mpi=pmi2/pmix).
bool started_by_mpi(const EnvLookup& env);

// std::getenv as an EnvLookup.
const char* process_env(const char* name);

}  // namespace mrcnn::comm
