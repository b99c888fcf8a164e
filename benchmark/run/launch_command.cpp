#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "benchmark/run/command_line.h"
#include "benchmark/run/commands.h"
#include "benchmark/run/launch_plan.h"

namespace mrcnn::run {
namespace {

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn launch [--system FILE] [--set K=V ...] [--nodes N]
                              [--scheduler mpirun|slurm|torchrun] [--hostfile FILE]
                              [--script FILE] [--time LIMIT] [--runs N] [--srun-mpi pmix|none]
                              [--container IMAGE] [--container-mounts MOUNTS]
                              [--rendezvous HOST:PORT] [--dry-run] [-- TRAIN_ARGS...]

Starts the training command on every rank of the system, placed as its system file says: the
node's sockets, cores, hyper-threads and accelerators (from the system description) shared out
among launch.ranks_per_node ranks, each with launch.threads_per_rank cores of its own, its
socket's memory and, on accelerators, the accelerator on its socket; launch.env (EFA, HCCL ...)
exported to every rank. Layouts that cannot work (more threads than cores, ranks that do not
divide the accelerators or the sockets) are refused before anything starts.

  --scheduler mpirun  (default) mpirun with ppr/PE mapping and core binding; a single-rank
                      system on one node is started directly
  --scheduler slurm   a Slurm batch script (srun --mpi=pmix, one task per accelerator, one CPU
                      mask per local rank, local memory), submitted with `sbatch --wait`
  --scheduler torchrun  torchrun --no-python from PATH (the project's .venv has it): ranks from
                      RANK/WORLD_SIZE on the tcp or nccl communicator, no MPI; one node
                      --standalone, several a c10d rendezvous at --rendezvous (run the same
                      command on every node); on GPUs --numa-binding=node, CPU ranks unbound
  --nodes N           run on N nodes (launch.nodes and system.number_of_nodes)
  --hostfile FILE     mpirun: the nodes to run on
  --script FILE       slurm: where the batch script is written (default:
                      mlperf-maskrcnn-<system>.sbatch in the current folder)
  --time LIMIT        slurm: the job's time limit (#SBATCH --time: MINUTES, H:MM:SS or D-HH:MM:SS)
  --runs N            slurm: N runs one after another in the one allocation, run i with seed
                      S + i (S: train's --seed, else random) and --out DIR/run_<i>
  --srun-mpi MODE     slurm: pmix (default: the ranks are MPI's) or none (the ranks read SLURM_*
                      and meet at the allocation's first host: the tcp or nccl communicator)
  --rendezvous HOST:PORT  torchrun on several nodes: the first node's address and a free port
  --container IMAGE   slurm: run every rank in this container (pyxis --container-image; default:
                      $CONT, as NVIDIA's scripts take it). The rank command names this program,
                      the system file and the output folder by their paths here: mount them at
                      the same paths (or build the image at this repository's path)
  --container-mounts MOUNTS  slurm: SRC:DST[,...] into the container (default: $MOUNTS)
  --dry-run           print the command (mpirun) or the script (slurm) instead of running it

TRAIN_ARGS go to `train` (their --set overrides also shape the launch).

exit status: the training run's (through mpirun, sbatch --wait or torchrun; see train --help),
or 2 for a layout or argument refused here (nothing started)

examples:
  mlperf-maskrcnn launch --system systems/aws-p5.48xlarge.json --dry-run -- --data /data/coco2017
  mlperf-maskrcnn launch --system systems/aws-p5.48xlarge-4n.json --scheduler slurm --time 60 \
      --container nvcr.io/my/mlperf-maskrcnn -- --data /data/coco2017 --seed 7
  mlperf-maskrcnn launch --system systems/aws-p3dn.24xlarge-2n.json --hostfile hosts -- --data /data/coco2017
)";

std::string self_path() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("mlperf-maskrcnn");
}

[[noreturn]] void exec_or_die(std::vector<std::string> command) {
  std::vector<char*> exec_argv;
  for (auto& a : command) exec_argv.push_back(a.data());
  exec_argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(exec_argv[0], exec_argv.data());
  std::fprintf(stderr, "mlperf-maskrcnn launch: error: cannot run %s: %s\n", exec_argv[0], std::strerror(errno));
  std::_Exit(2);
}

// aws-ofi-nccl installs libnccl-net.so (older releases) or libnccl-net-ofi.so / -aws-ofi.so.
bool has_nccl_net_plugin(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("libnccl-net") && name.ends_with(".so")) return true;
  }
  return false;
}

// --runs and --srun-mpi (slurm), --rendezvous (torchrun): checked against the scheduler and the
// communicator, whose ranks must be the kind the scheduler starts.
void read_scheduler_options(const CommandLine& cl, const std::string& scheduler, const config::SystemConfig& cfg,
                            LaunchRequest& req) {
  if (scheduler != "slurm" && (cl.has("--runs") || cl.has("--srun-mpi")))
    throw config::ConfigError("--runs and --srun-mpi are for --scheduler slurm");
  if (scheduler != "torchrun" && cl.has("--rendezvous"))
    throw config::ConfigError("--rendezvous is for --scheduler torchrun (mpirun takes --hostfile)");
  if (scheduler == "torchrun" && !req.hostfile.empty())
    throw config::ConfigError("--hostfile: torchrun starts the ranks of its own node (use --rendezvous)");
  if (cl.has("--runs")) {
    static const std::regex runs(R"([1-9]\d{0,3})");
    if (!std::regex_match(cl.value("--runs"), runs))
      throw config::ConfigError("--runs " + cl.value("--runs") + ": expected a number of runs from 1 to 9999");
    req.runs = std::stoi(cl.value("--runs"));
  }
  req.srun_mpi = cl.value("--srun-mpi", "pmix");
  if (req.srun_mpi != "pmix" && req.srun_mpi != "none")
    throw config::ConfigError("--srun-mpi: expected pmix or none, got '" + req.srun_mpi + "'");
  req.rendezvous = cl.value("--rendezvous");
  static const std::regex endpoint(R"([A-Za-z0-9_.-]+:[1-9]\d{0,4})");
  if (!req.rendezvous.empty() && !std::regex_match(req.rendezvous, endpoint))
    throw config::ConfigError("--rendezvous " + req.rendezvous + ": expected HOST:PORT");
  if (scheduler == "torchrun" && cfg.launch.nodes > 1 && req.rendezvous.empty())
    throw config::ConfigError("torchrun on " + std::to_string(cfg.launch.nodes) +
                              " nodes needs --rendezvous HOST:PORT (the first node), and this command run on "
                              "every node");
  const bool mpi_ranks = scheduler == "mpirun" || (scheduler == "slurm" && req.srun_mpi == "pmix");
  if (!mpi_ranks && cfg.launch.communicator == "mpi")
    throw config::ConfigError(cfg.source("launch.communicator") +
                              ": launch.communicator \"mpi\" needs ranks that MPI starts; " +
                              (scheduler == "torchrun" ? "torchrun" : "srun --mpi=none") +
                              " ranks run on \"tcp\", \"nccl\" or \"auto\"");
}

// Where launch's own arguments end: at "--", or at the end.
int launch_arguments_end(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") return i;
  return argc;
}

// --scheduler, checked.
std::string read_scheduler(const CommandLine& cl) {
  const std::string scheduler = cl.value("--scheduler", "mpirun");
  if (scheduler != "mpirun" && scheduler != "slurm" && scheduler != "torchrun")
    throw config::ConfigError("--scheduler: expected mpirun, slurm or torchrun, got '" + scheduler + "'");
  return scheduler;
}

// The request without its rank command: --hostfile, --time and the container (NVIDIA's CONT and
// MOUNTS: the container of a Slurm job; mpirun runs on the host), then the scheduler's options.
LaunchRequest read_request(const CommandLine& cl, const std::string& scheduler, const config::SystemConfig& cfg) {
  const char* cont = scheduler == "slurm" ? std::getenv("CONT") : nullptr;
  const char* mounts = scheduler == "slurm" ? std::getenv("MOUNTS") : nullptr;
  LaunchRequest req{.hostfile = cl.value("--hostfile"),
                    .time_limit = cl.value("--time"),
                    .container_image = cl.value("--container", cont ? cont : ""),
                    .container_mounts = cl.value("--container-mounts", mounts ? mounts : "")};
  if (!req.hostfile.empty()) require_file(req.hostfile, "--hostfile");
  // Slurm reads M:SS as minutes and seconds: H:MM:SS is asked for instead, to say hours plainly.
  static const std::regex time_limit(R"(\d+|\d+:\d{2}:\d{2}|\d+-\d{1,2}(:\d{2}(:\d{2})?)?)");
  if (!req.time_limit.empty() && !std::regex_match(req.time_limit, time_limit))
    throw config::ConfigError("--time " + req.time_limit + ": expected MINUTES, H:MM:SS or D-HH:MM:SS");
  if (scheduler != "slurm" && (cl.has("--time") || cl.has("--container") || cl.has("--container-mounts")))
    throw config::ConfigError("--time, --container and --container-mounts are for --scheduler slurm");
  if (req.container_image.empty() && !req.container_mounts.empty())
    throw config::ConfigError("--container-mounts without a container (--container IMAGE or $CONT)");
  read_scheduler_options(cl, scheduler, cfg, req);
  return req;
}

// Each rank runs `train` on the system file with launch's own overrides, then TRAIN_ARGS; with
// --runs, a --seed among them must be a whole number to count up from.
void set_rank_command(LaunchRequest& req, const config::SystemConfig& cfg, const std::vector<std::string>& own_overrides,
                      const std::vector<std::string>& train_args) {
  req.rank_command = {self_path(), "train", "--system", std::filesystem::absolute(cfg.file).string()};
  for (const auto& o : own_overrides) req.rank_command.insert(req.rank_command.end(), {"--set", o});
  req.rank_command.insert(req.rank_command.end(), train_args.begin(), train_args.end());
  static const std::regex digits(R"(\d{1,18})");
  for (size_t i = 0; req.runs > 1 && i + 1 < train_args.size(); ++i)
    if (train_args[i] == "--seed" && !std::regex_match(train_args[i + 1], digits))
      throw config::ConfigError("--seed " + train_args[i + 1] + ": --runs counts seeds up from a whole number");
}

// mpirun on this host: a configured NCCL network plugin folder must hold the plugin.
void check_nccl_net_plugin(const config::SystemConfig& cfg, const std::string& scheduler, bool dry_run) {
  const std::string& plugin = cfg.launch.nccl_net_plugin_dir;
  if (!dry_run && scheduler == "mpirun" && !plugin.empty() && !has_nccl_net_plugin(plugin))
    throw config::ConfigError(cfg.source("launch.nccl_net_plugin_dir") + ": launch.nccl_net_plugin_dir: no NCCL " +
                              "network plugin (libnccl-net*.so) in " + plugin +
                              " (install aws-ofi-nccl there: without it NCCL would fall back to TCP sockets)");
}

void print_command(const std::vector<std::string>& command) {
  for (size_t i = 0; i < command.size(); ++i) std::printf("%s%s", i ? " " : "", shell_quoted(command[i]).c_str());
  std::printf("\n");
}

// Each scheduler's start returns the command to run in place of this process, or nothing when a
// dry run has printed what it would run.

// torchrun, with the rank environment exported here for torchrun to hand on; a dry run prints it
// as a shell line (the rank environment, then torchrun).
std::vector<std::string> torchrun_start(const config::SystemConfig& cfg, const LaunchRequest& req, bool dry_run) {
  const std::vector<std::string> command = torchrun_command(cfg, req);
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  const auto rank_env = rank_environment(cfg, ld ? ld : "");
  if (dry_run) {
    for (const auto& [k, v] : rank_env) std::printf("%s=%s ", k.c_str(), shell_quoted(v).c_str());
    print_command(command);
    return {};
  }
  for (const auto& [k, v] : rank_env) ::setenv(k.c_str(), v.c_str(), 1);
  return command;
}

// mpirun, or the rank itself when one rank on this node is started directly (with the rank
// environment here).
std::vector<std::string> mpirun_start(const config::SystemConfig& cfg, const LaunchPlan& plan, const LaunchRequest& req,
                                      bool dry_run) {
  const std::vector<std::string> command = mpirun_command(cfg, plan, req);
  if (dry_run) {
    print_command(command);
    return {};
  }
  if (command.front() != "mpirun") {
    const char* ld = std::getenv("LD_LIBRARY_PATH");
    for (const auto& [k, v] : rank_environment(cfg, ld ? ld : "")) ::setenv(k.c_str(), v.c_str(), 1);
  }
  return command;
}

// sbatch --wait on the batch script, written to --script (default mlperf-maskrcnn-<system>.sbatch)
// and made executable; a dry run prints the script (and writes it only when --script names a file).
std::vector<std::string> slurm_start(std::string script_path, const config::SystemConfig& cfg, const LaunchPlan& plan,
                                     const LaunchRequest& req, bool dry_run) {
  if (!req.hostfile.empty()) throw config::ConfigError("--hostfile: Slurm chooses the nodes (use sbatch options)");
  const std::string script = slurm_script(cfg, plan, req);
  if (dry_run && script_path.empty()) {
    std::fputs(script.c_str(), stdout);
    return {};
  }
  if (script_path.empty()) script_path = "mlperf-maskrcnn-" + cfg.name + ".sbatch";
  require_writable_folder(std::filesystem::absolute(script_path).parent_path().string(), "--script");
  std::ofstream out(script_path, std::ios::trunc);
  out << script;
  out.close();
  if (!out) throw config::ConfigError("--script: cannot write " + script_path);
  std::filesystem::permissions(script_path, std::filesystem::perms::owner_exec, std::filesystem::perm_options::add);
  if (dry_run) {
    std::printf("%s", script.c_str());
    return {};
  }
  return {"sbatch", "--wait", script_path};
}

}  // namespace

int launch_main(int argc, char** argv) {
  const int split = launch_arguments_end(argc, argv);
  if (wants_help(split, argv)) return std::fputs(kUsage, stdout), 0;
  std::vector<std::string> command;
  try {
    CommandLine cl(split, argv,
                   {"--nodes", "--scheduler", "--hostfile", "--script", "--time", "--container", "--container-mounts",
                    "--runs", "--srun-mpi", "--rendezvous"},
                   {"--dry-run"});
    if (!cl.positional().empty()) throw config::ConfigError("unexpected argument '" + cl.positional()[0] + "'");
    const bool dry_run = cl.flag("--dry-run");
    const std::string scheduler = read_scheduler(cl);
    if (cl.has("--nodes")) {
      const std::string n = cl.value("--nodes");
      cl.add_override("launch.nodes=" + n);
      cl.add_override("system.number_of_nodes=\"" + n + "\"");
    }
    const std::vector<std::string> train_args(argv + std::min(split + 1, argc), argv + argc);
    const std::vector<std::string> own_overrides = cl.overrides();
    for (size_t i = 0; i + 1 < train_args.size(); ++i)  // (main split --set=K=V already)
      if (train_args[i] == "--set") cl.add_override(train_args[i + 1]);
    const config::SystemConfig cfg = cl.system_config();
    const LaunchPlan plan = plan_launch(cfg);
    LaunchRequest req = read_request(cl, scheduler, cfg);
    set_rank_command(req, cfg, own_overrides, train_args);
    check_nccl_net_plugin(cfg, scheduler, dry_run);
    if (scheduler == "torchrun") command = torchrun_start(cfg, req, dry_run);
    else if (scheduler == "mpirun") command = mpirun_start(cfg, plan, req, dry_run);
    else command = slurm_start(cl.value("--script"), cfg, plan, req, dry_run);
    if (command.empty()) return 0;
  } catch (const std::exception& e) {
    return report_error("launch", e, 2);
  }
  exec_or_die(command);
}

}  // namespace mrcnn::run
