// How a system's ranks are started, from its launch settings: the mpirun command line that
// starts launch.nodes x launch.ranks_per_node processes of the training command, with core
// binding (launch.cpu_binding), the network environment (launch.env) and the intra-op thread
// count exported to every rank.
#pragma once

#include <string>
#include <vector>

#include "benchmark/config/system_config.h"

namespace mrcnn::run {

// "mpirun -np N --npernode R <binding> [-x K=V ...] -x OMP_NUM_THREADS=T <mpirun_args>", as a
// list of arguments; empty for a single-rank system (started directly).
//   core    each rank pinned to threads_per_rank cores of its own, ranks spread over the sockets
//   socket  each rank confined to one socket
//   none    the OS decides
std::vector<std::string> mpirun_prefix(const config::SystemConfig& config);

}  // namespace mrcnn::run
