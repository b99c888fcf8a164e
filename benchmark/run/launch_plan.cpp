#include "benchmark/run/launch_plan.h"

#include <charconv>
#include <cstdlib>
#include <sstream>

namespace mrcnn::run {
namespace {

using config::ConfigError;

// A positive integer field of the system description ("24").
int description_count(const config::SystemConfig& c, const char* field, int min) {
  const config::Json& sd = c.system_description;
  const std::string where = c.source(std::string("system.") + field) + ": system." + field;
  if (!sd.contains(field)) throw ConfigError(where + ": missing (the launch plan needs the node's topology)");
  const config::Json& v = sd[field];
  int n = -1;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || end != s.data() + s.size()) n = -1;
  } else if (v.is_number_integer()) {
    n = v.get<int>();
  }
  if (n < min)
    throw ConfigError(where + ": expected a whole number of at least " + std::to_string(min) + ", got " + v.dump());
  return n;
}

// A CPU list as Slurm's hexadecimal mask ("0x3f").
std::string hex_mask(const std::vector<int>& cpus) {
  int top = 0;
  for (int c : cpus) top = std::max(top, c);
  std::string digits(static_cast<size_t>(top / 4 + 1), '0');
  for (int c : cpus) {
    char& d = digits[digits.size() - 1 - static_cast<size_t>(c / 4)];
    const int v = (d <= '9' ? d - '0' : d - 'a' + 10) | (1 << (c % 4));
    d = static_cast<char>(v < 10 ? '0' + v : 'a' + v - 10);
  }
  return "0x" + digits;
}

bool on_accelerators(const config::SystemConfig& c) { return c.run.device != "cpu"; }

std::string range_text(const std::vector<int>& v) {
  if (v.empty()) return "-";
  return v.size() == 1 ? std::to_string(v.front()) : std::to_string(v.front()) + "-" + std::to_string(v.back());
}

}  // namespace

std::string shell_quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

NodeTopology node_topology(const config::SystemConfig& c) {
  NodeTopology t;
  t.sockets = description_count(c, "host_processors_per_node", 1);
  t.cores_per_socket = description_count(c, "host_processor_core_count", 1);
  const int vcpus = description_count(c, "host_processor_vcpu_count", 1);
  const int cores = t.sockets * t.cores_per_socket;
  if (vcpus % cores != 0)
    throw ConfigError(c.source("system.host_processor_vcpu_count") + ": system.host_processor_vcpu_count " +
                      std::to_string(vcpus) + " is not a multiple of the node's " + std::to_string(cores) +
                      " physical cores (host_processors_per_node x host_processor_core_count)");
  t.threads_per_core = vcpus / cores;
  t.accelerators = description_count(c, "accelerators_per_node", 0);
  return t;
}

LaunchPlan plan_launch(const config::SystemConfig& c) {
  LaunchPlan p;
  p.node = node_topology(c);
  const NodeTopology& t = p.node;
  const auto& l = c.launch;
  const int ranks = static_cast<int>(l.ranks_per_node);
  if (l.world_size() > 1 && l.communicator == "local")
    throw ConfigError(c.source("launch.communicator") + ": launch.communicator \"local\" is one process, but launch asks for " +
                      std::to_string(l.world_size()) + " ranks (use \"mpi\", \"tcp\", \"nccl\" or \"auto\")");
  const std::string at = c.source("launch.ranks_per_node") + ": launch.ranks_per_node " + std::to_string(ranks);
  if (on_accelerators(c)) {
    if (t.accelerators == 0)
      throw ConfigError(c.source("system.accelerators_per_node") + ": system.accelerators_per_node is 0, but run.device \"" +
                        c.run.device + "\" runs each rank on an accelerator");
    if (t.accelerators % ranks != 0)
      throw ConfigError(at + " does not divide the node's " + std::to_string(t.accelerators) +
                        " accelerators (system.accelerators_per_node): every rank drives one, and they must be shared "
                        "out evenly");
    if (t.accelerators % t.sockets != 0)
      throw ConfigError(c.source("system.accelerators_per_node") + ": system.accelerators_per_node " +
                        std::to_string(t.accelerators) + " cannot be spread evenly over " + std::to_string(t.sockets) +
                        " sockets");
  }
  if (ranks % t.sockets != 0 && ranks > 1)
    throw ConfigError(at + " cannot be spread evenly over the node's " + std::to_string(t.sockets) +
                      " sockets (system.host_processors_per_node): use a multiple of " + std::to_string(t.sockets));
  p.ranks_per_socket = ranks < t.sockets ? 1 : ranks / t.sockets;  // one rank alone: socket 0
  p.cores_per_rank = t.cores_per_socket / p.ranks_per_socket;
  if (p.cores_per_rank == 0)
    throw ConfigError(at + " puts " + std::to_string(p.ranks_per_socket) + " ranks on each socket of " +
                      std::to_string(t.cores_per_socket) + " cores: more ranks than cores");
  if (l.threads_per_rank > p.cores_per_rank)
    throw ConfigError(c.source("launch.threads_per_rank") + ": launch.threads_per_rank " +
                      std::to_string(l.threads_per_rank) + " is more than the " + std::to_string(p.cores_per_rank) +
                      " physical cores each rank owns (" + std::to_string(t.sockets) + " sockets x " +
                      std::to_string(t.cores_per_socket) + " cores, " + std::to_string(ranks) + " ranks per node): " +
                      std::to_string(l.threads_per_rank * ranks) + " intra-op threads on " +
                      std::to_string(t.sockets * t.cores_per_socket) + " cores would oversubscribe them");
  for (int r = 0; r < ranks; ++r) {
    RankPlacement rp;
    rp.local_rank = r;
    rp.socket = r / p.ranks_per_socket;
    const int first = rp.socket * t.cores_per_socket + (r % p.ranks_per_socket) * p.cores_per_rank;
    for (int k = 0; k < p.cores_per_rank; ++k) rp.cores.push_back(first + k);
    for (int h = 0; h < t.threads_per_core; ++h)
      for (int core : rp.cores) rp.cpus.push_back(h * t.sockets * t.cores_per_socket + core);
    if (on_accelerators(c)) rp.accelerator = r * (t.accelerators / ranks);
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

int accelerator_of(const config::SystemConfig& c, int local_rank) {
  int accelerators = 0;
  try {
    accelerators = node_topology(c).accelerators;
  } catch (const ConfigError&) {  // no usable topology: one accelerator per local rank
  }
  const int ranks = static_cast<int>(c.launch.ranks_per_node);
  if (accelerators <= 0 || accelerators % ranks != 0) return local_rank;
  return local_rank * (accelerators / ranks);
}

std::vector<std::pair<std::string, std::string>> rank_environment(const config::SystemConfig& c,
                                                                  const std::string& inherited_library_path) {
  std::vector<std::pair<std::string, std::string>> env(c.launch.env.begin(), c.launch.env.end());
  env.emplace_back("OMP_NUM_THREADS", std::to_string(c.launch.threads_per_rank));
  if (!c.launch.nccl_net_plugin_dir.empty())
    env.emplace_back("LD_LIBRARY_PATH", c.launch.nccl_net_plugin_dir +
                                            (inherited_library_path.empty() ? "" : ":" + inherited_library_path));
  return env;
}

std::vector<std::string> mpirun_command(const config::SystemConfig& c, const LaunchPlan& p, const LaunchRequest& req) {
  const auto& l = c.launch;
  if (l.world_size() == 1 && req.hostfile.empty()) return req.rank_command;
  std::vector<std::string> args{"mpirun", "-np", std::to_string(l.world_size())};
  if (!req.hostfile.empty()) args.insert(args.end(), {"--hostfile", req.hostfile});
  // Ranks per socket; fewer ranks than sockets: ranks per node (each on its own socket's cores).
  const bool per_node = l.ranks_per_node < p.node.sockets;
  const std::string ppr = per_node ? "ppr:" + std::to_string(l.ranks_per_node) + ":node"
                                   : "ppr:" + std::to_string(p.ranks_per_socket) + ":socket";
  if (l.cpu_binding == "core")
    args.insert(args.end(), {"--map-by", ppr + ":PE=" + std::to_string(p.cores_per_rank), "--bind-to", "core",
                             "--report-bindings"});
  else if (l.cpu_binding == "socket")
    args.insert(args.end(), {"--map-by", ppr, "--bind-to", "socket", "--report-bindings"});
  else
    args.insert(args.end(), {"--map-by", "ppr:" + std::to_string(l.ranks_per_node) + ":node", "--bind-to", "none"});
  if (l.cpu_binding != "none")  // each rank's memory on its own socket
    args.insert(args.end(), {"--mca", "hwloc_base_mem_alloc_policy", "local_only"});
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  for (const auto& [k, v] : rank_environment(c, ld ? ld : "")) args.insert(args.end(), {"-x", k + "=" + v});
  args.insert(args.end(), l.mpirun_args.begin(), l.mpirun_args.end());
  args.insert(args.end(), req.rank_command.begin(), req.rank_command.end());
  return args;
}

std::vector<std::string> torchrun_command(const config::SystemConfig& c, const LaunchRequest& req) {
  const auto& l = c.launch;
  std::vector<std::string> args{"torchrun", "--nnodes", std::to_string(l.nodes), "--nproc-per-node",
                                std::to_string(l.ranks_per_node)};
  if (req.rendezvous.empty())
    args.push_back("--standalone");  // one node: a free port on this host
  else
    args.insert(args.end(), {"--rdzv-backend", "c10d", "--rdzv-endpoint", req.rendezvous, "--rdzv-id",
                             "mlperf-maskrcnn-" + c.name});
  if (l.cpu_binding != "none" && on_accelerators(c) && c.run.device.starts_with("cuda"))
    args.push_back("--numa-binding=node");
  args.push_back("--no-python");
  args.insert(args.end(), req.rank_command.begin(), req.rank_command.end());
  return args;
}

namespace {

// srun with the system's binding: a CPU mask per local rank, local memory, the container.
std::string srun_line(const config::SystemConfig& c, const LaunchPlan& p, const LaunchRequest& req) {
  const auto& l = c.launch;
  const NodeTopology& t = p.node;
  std::string srun = "srun --mpi=" + req.srun_mpi + " --kill-on-bad-exit=1";
  // pyxis/enroot: every rank in the container (the rank command's paths are the container's).
  if (!req.container_image.empty()) srun += " " + shell_quoted("--container-image=" + req.container_image);
  if (!req.container_mounts.empty()) srun += " " + shell_quoted("--container-mounts=" + req.container_mounts);
  if (l.cpu_binding == "none") {
    srun += " --cpu-bind=none";
  } else {
    srun += " --cpu-bind=verbose,mask_cpu:";
    for (size_t i = 0; i < p.ranks.size(); ++i) {
      std::vector<int> cpus = p.ranks[i].cpus;
      if (l.cpu_binding == "socket") {  // the whole socket
        cpus.clear();
        for (int h = 0; h < t.threads_per_core; ++h)
          for (int k = 0; k < t.cores_per_socket; ++k)
            cpus.push_back(h * t.sockets * t.cores_per_socket + p.ranks[i].socket * t.cores_per_socket + k);
      }
      srun += (i ? "," : "") + hex_mask(cpus);
    }
    srun += " --mem-bind=local";
  }
  return srun;
}

// req.runs srun steps one after another, each with its own seed (MLPerf) and run folder; the
// script's status is the first failing run's.
void write_runs(std::ostringstream& s, const std::string& srun, const LaunchRequest& req) {
  std::string seed, out;
  for (size_t i = 0; i + 1 < req.rank_command.size(); ++i) {
    if (req.rank_command[i] == "--seed") seed = req.rank_command[i + 1];
    if (req.rank_command[i] == "--out") out = req.rank_command[i + 1];
  }
  s << "# " << req.runs << " runs one after another in this allocation: run i gets seed seed0 + i"
    << (out.empty() ? "" : " and the folder " + out + "/run_<i>") << ".\n"
    << "seed0=" << (seed.empty() ? "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')" : "$((10#" + seed + "))") << "\n"
    << "status=0\n"
    << "for ((i = 0; i < " << req.runs << "; i++)); do\n"
    << "  echo \"run $((i + 1)) of " << req.runs << ": seed $((seed0 + i))\"\n"
    << "  rc=0\n"
    << "  " << srun;
  for (size_t i = 0; i < req.rank_command.size(); ++i) {
    const std::string& a = req.rank_command[i];
    if ((a == "--seed" || a == "--out") && i + 1 < req.rank_command.size()) {
      ++i;
      continue;
    }
    s << " " << shell_quoted(a);
  }
  s << " --seed \"$((seed0 + i))\"";
  if (!out.empty()) s << " --out " << shell_quoted(out) << "\"/run_$i\"";
  s << " || rc=$?\n";
  // Each run's own exit status beside its folder (the job's is the first failing run's).
  if (!out.empty())
    s << "  mkdir -p " << shell_quoted(out) << "\"/run_$i\" && echo \"$rc\" > " << shell_quoted(out)
      << "\"/run_$i/exit_status\"\n";
  s << "  ((status == 0)) && status=$rc\n"
    << "done\n"
    << "exit $status\n";
}

}  // namespace

std::string slurm_script(const config::SystemConfig& c, const LaunchPlan& p, const LaunchRequest& req) {
  const auto& l = c.launch;
  const NodeTopology& t = p.node;
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# " << c.name << ": " << l.nodes << " node(s) x " << l.ranks_per_node << " ranks, " << l.threads_per_rank
    << " intra-op threads per rank; generated by `mlperf-maskrcnn launch --scheduler slurm` from " << c.file << ".\n"
    << "# Node: " << t.sockets << " sockets x " << t.cores_per_socket << " cores x " << t.threads_per_core
    << " threads, " << t.accelerators << " accelerators. Per local rank:\n";
  for (const auto& r : p.ranks)
    s << "#   rank " << r.local_rank << ": socket " << r.socket << ", cores " << range_text(r.cores)
      << (t.threads_per_core > 1 ? " (and their hyper-threads)" : "")
      << (r.accelerator >= 0 ? ", accelerator " + std::to_string(r.accelerator) : std::string()) << "\n";
  s << "#SBATCH --job-name=mlperf-maskrcnn-" << c.name << "\n"
    << "#SBATCH --nodes=" << l.nodes << "\n"
    << "#SBATCH --ntasks-per-node=" << l.ranks_per_node << "\n"
    << "#SBATCH --exclusive\n";
  if (c.run.device.starts_with("cuda")) s << "#SBATCH --gpus-per-node=" << t.accelerators << "\n";
  if (!req.time_limit.empty()) s << "#SBATCH --time=" << req.time_limit << "\n";
  for (const auto& a : l.sbatch_args) s << "#SBATCH " << a << "\n";
  s << "set -euo pipefail\n";
  for (const auto& [k, v] : l.env) s << "export " << k << "=" << shell_quoted(v) << "\n";
  s << "export OMP_NUM_THREADS=" << l.threads_per_rank << "\n";
  if (!l.nccl_net_plugin_dir.empty()) {
    const std::string dir = shell_quoted(l.nccl_net_plugin_dir);
    s << "# NCCL's network plugin: without it NCCL falls back to TCP sockets without a word.\n"
      << "compgen -G " << shell_quoted(l.nccl_net_plugin_dir + "/libnccl-net*.so") << " >/dev/null || { echo \"no NCCL network plugin (libnccl-net*.so) in " << l.nccl_net_plugin_dir
      << " (launch.nccl_net_plugin_dir)\" >&2; exit 2; }\n"
      << "export LD_LIBRARY_PATH=" << dir << "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n";
  }
  if (req.srun_mpi == "none") {
    // The ranks meet at the allocation's first host (rank 0 runs there), at a port from the job id.
    s << "# srun --mpi=none: the ranks read SLURM_PROCID and meet at the allocation's first host.\n"
      << "export MASTER_ADDR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\"\n"
      << "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))\n";
  }
  const std::string srun = srun_line(c, p, req);
  if (req.runs <= 1) {
    s << srun;
    for (const auto& a : req.rank_command) s << " " << shell_quoted(a);
    s << "\n";
    return s.str();
  }
  write_runs(s, srun, req);
  return s.str();
}

}  // namespace mrcnn::run
