// Where a system's ranks run and how they are started, computed from its system file alone:
//
//   node topology    from the MLPerf system description: host_processors_per_node sockets,
//                    host_processor_core_count physical cores per socket,
//                    host_processor_vcpu_count logical CPUs per node (so the hyper-threads per
//                    core), accelerators_per_node spread evenly over the sockets; one NUMA node
//                    per socket.
//   rank placement   launch.ranks_per_node ranks per node, spread evenly over the sockets; each
//                    rank owns an equal share of its socket's physical cores (with their
//                    hyper-thread siblings, for the loader and scoring threads), the socket's
//                    memory and, on an accelerator system, the accelerator local_rank x
//                    (accelerators / ranks) -- which sits on that same socket.
//   mpirun           -np / --map-by ppr:<ranks per socket>:socket:PE=<cores per rank> (or
//                    ppr:<ranks>:node:PE=... with fewer ranks than sockets) --bind-to core,
//                    memory kept local, the network environment.
//   Slurm            a batch script: #SBATCH nodes, tasks per node, exclusive nodes and (CUDA)
//                    --gpus-per-node, srun with --mpi=pmix (or --mpi=none: the ranks meet
//                    at the allocation's first host, MASTER_ADDR),
//                    --cpu-bind=mask_cpu (one mask per local rank), --mem-bind=local,
//                    --kill-on-bad-exit; several runs one after another in one allocation.
//   torchrun         --nnodes, --nproc-per-node, --standalone on one node or a c10d rendezvous at
//                    the first node, --no-python; on GPUs --numa-binding=node (each rank on its
//                    GPU's socket); CPU ranks are not bound (torchrun binds no cores).
//
// Linux numbers the logical CPUs of these Xeon hosts socket by socket, the first hyper-thread of
// every core before any second one (`lscpu -e` shows it):
//   cpu = thread * (sockets * cores_per_socket) + socket * cores_per_socket + core
//
// Impossible layouts are refused with a ConfigError naming the keys: ranks that do not divide
// the accelerators or spread evenly over the sockets, more intra-op threads per rank than the
// physical cores it owns (hyper-threads do not count: two busy threads on one core run at the
// speed of about one), more ranks than cores, or several ranks on the one-process communicator.
// The Slurm masks rely on the numbering above; mpirun asks hwloc for the real topology.
#pragma once

#include <string>
#include <vector>

#include "benchmark/config/system_config.h"

namespace mrcnn::run {

struct NodeTopology {
  int sockets = 1;
  int cores_per_socket = 1;   // physical
  int threads_per_core = 1;   // hyper-threads
  int accelerators = 0;       // per node
  int logical_cpus() const { return sockets * cores_per_socket * threads_per_core; }
};

struct RankPlacement {
  int local_rank = 0;
  int socket = 0;            // also its NUMA node
  int accelerator = -1;      // -1: a CPU rank
  std::vector<int> cores;    // physical core numbers (socket * cores_per_socket + core)
  std::vector<int> cpus;     // logical CPUs: the cores and their hyper-thread siblings
};

struct LaunchPlan {
  NodeTopology node;
  int ranks_per_socket = 1;
  int cores_per_rank = 1;
  std::vector<RankPlacement> ranks;  // one per local rank (the same on every node)
};

// The node's topology from the system description; throws ConfigError naming the field when one
// is not a positive integer or they disagree (logical CPUs not a multiple of the cores).
NodeTopology node_topology(const config::SystemConfig& config);

// Every local rank's placement; throws ConfigError for an impossible layout.
LaunchPlan plan_launch(const config::SystemConfig& config);

// The accelerator index a local rank uses: local_rank x (accelerators / ranks per node) when the
// system description declares accelerators, else the local rank.
int accelerator_of(const config::SystemConfig& config, int local_rank);

// What to start on every rank, and how.
struct LaunchRequest {
  std::vector<std::string> rank_command;  // the training command line of one rank
  std::string hostfile;                   // mpirun: the nodes (empty: this node, or the scheduler's)
  std::string time_limit;                 // slurm: #SBATCH --time (empty: the partition's)
  std::string container_image;            // slurm: srun --container-image (pyxis; empty: none)
  std::string container_mounts;           // slurm: srun --container-mounts (pyxis)
  std::string srun_mpi = "pmix";          // slurm: srun --mpi (pmix, or none: ranks from SLURM_*)
  int runs = 1;                           // slurm: runs in the one allocation (seed + i, out/run_<i>)
  std::string rendezvous;                 // torchrun: HOST:PORT of the first node (several nodes)
};

// "mpirun -np N [--hostfile F] <mapping and binding> [-x K=V ...] <mpirun_args> <rank command>",
// as a list of arguments; the rank command alone for a single-rank system on this node.
std::vector<std::string> mpirun_command(const config::SystemConfig& config, const LaunchPlan& plan,
                                        const LaunchRequest& request);

// "torchrun --nnodes N --nproc-per-node R <rendezvous> [--numa-binding=node] --no-python <rank
// command>"; the rank environment is set by the caller (torchrun hands it to the ranks).
std::vector<std::string> torchrun_command(const config::SystemConfig& config, const LaunchRequest& request);

// A Slurm batch script (for sbatch) that starts the ranks with srun. With request.runs > 1 the
// rank command's `--seed S` becomes S + i and its `--out DIR` DIR/run_<i> for run i.
std::string slurm_script(const config::SystemConfig& config, const LaunchPlan& plan, const LaunchRequest& request);

// The environment every rank gets: launch.env, OMP_NUM_THREADS, and the NCCL network plugin's
// folder ahead of LD_LIBRARY_PATH (`inherited_library_path`, the launcher's own).
std::vector<std::pair<std::string, std::string>> rank_environment(const config::SystemConfig& config,
                                                                  const std::string& inherited_library_path);

// One argument quoted for a POSIX shell (unquoted when it needs no quoting).
std::string shell_quoted(const std::string& s);

}  // namespace mrcnn::run
