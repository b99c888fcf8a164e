#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "benchmark/run/command_line.h"
#include "benchmark/run/commands.h"
#include "benchmark/run/launch_plan.h"

namespace mrcnn::run {
namespace {

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn launch [--system FILE] [--set K=V ...] [--dry-run] [-- TRAIN_ARGS...]

Starts the training command on every rank of the system: through mpirun, with the rank count,
core binding and network environment of the system file's launch settings, or directly for a
single-rank system. TRAIN_ARGS go to `train` (their --set overrides also shape the launch).
--dry-run prints the command instead of running it.
)";

std::string shell_quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int launch_main(int argc, char** argv) {
  int split = argc;  // launch's own arguments end at "--"
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      split = i;
      break;
    }
  if (wants_help(split, argv)) return std::fputs(kUsage, stdout), 0;
  std::vector<std::string> command;
  try {
    CommandLine cl(split, argv, {}, {"--dry-run"});
    if (!cl.positional().empty()) throw config::ConfigError("unexpected argument '" + cl.positional()[0] + "'");
    std::vector<std::string> train_args(argv + std::min(split + 1, argc), argv + argc);
    const std::vector<std::string> own_overrides = cl.overrides();
    for (size_t i = 0; i + 1 < train_args.size(); ++i)
      if (train_args[i] == "--set") cl.add_override(train_args[i + 1]);
    const config::SystemConfig cfg = cl.system_config();
    command = mpirun_prefix(cfg);
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    command.push_back(n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("mlperf-maskrcnn"));
    command.insert(command.end(), {"train", "--system", cfg.file});
    for (const auto& o : own_overrides) command.insert(command.end(), {"--set", o});
    command.insert(command.end(), train_args.begin(), train_args.end());
    if (cl.flag("--dry-run")) {
      for (size_t i = 0; i < command.size(); ++i) std::printf("%s%s", i ? " " : "", shell_quoted(command[i]).c_str());
      std::printf("\n");
      return 0;
    }
  } catch (const std::exception& e) {
    return report_error("launch", e, 2);
  }
  std::vector<char*> exec_argv;
  for (auto& a : command) exec_argv.push_back(a.data());
  exec_argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(exec_argv[0], exec_argv.data());
  std::fprintf(stderr, "mlperf-maskrcnn launch: error: cannot run %s: %s\n", exec_argv[0], std::strerror(errno));
  return 2;
}

}  // namespace mrcnn::run
