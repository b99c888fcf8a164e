#include "benchmark/analysis/audit_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "benchmark/analysis/audit.h"
#include "logging/arguments.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"usage(usage: mlperf-maskrcnn audit RUN_A RUN_B [--tolerance REL] [--json FILE]
       mlperf-maskrcnn audit --replay RUN [--replay-out DIR] [--tolerance REL] [--json FILE]

Compares two runs as a reproducibility reviewer would. A run is a run folder (mlperf_log.txt with
metrics.jsonl, fingerprint.json and config.json beside it) or a result file
results/<system>/maskrcnn/result_N.txt (with its run folder runs/result_N/ when kept). Two results
folders (results/<system>/maskrcnn, or results/<system>) are compared result by result: result_N
with result_N, and the exit status is the worst pair's.

First the setup: every difference in the fingerprints (binary, libraries, CPU and GPU, threads,
ranks, data checksums), the resolved configurations and the seeds, each marked whether it changes
results and what to expect. Then the values in run order: per-step losses, learning rate and
gradient norm, then the per-epoch accuracies and the outcome. It prints "bit-identical ...",
"identical up to step K, then diverges (first differing value ...)", or "differ in setup: ...".

  --tolerance REL   values within this relative difference count as equal (across platforms)
  --json FILE       the comparison as JSON too (a list, one per pair, for two results folders)
  --replay RUN      run RUN again from its own config.json (seed included) through `launch`, then
                    audit the pair
  --replay-out DIR  where the replay writes its run folder (default: a new folder under $TMPDIR)

exit status: 0 identical (or equal within the tolerance), 1 diverges with the same setup (not
reproducible), 3 differs and a setup difference explains it, 2 bad input (or the replay failed)

examples:
  mlperf-maskrcnn audit results/sysA/maskrcnn/result_0.txt results/sysB/maskrcnn/result_0.txt
  mlperf-maskrcnn audit results/sysA results/sysB --tolerance 1e-4 --json audit.json
  mlperf-maskrcnn audit --replay out/cpu-dev/latest
)usage";

struct Args {
  std::vector<std::string> runs;
  std::string replay, replay_out, json;
  double tolerance = 0;
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

Args parse(const cli::Arguments& args) {
  Args a;
  a.runs = args.positional();
  a.tolerance = args.number("--tolerance", 0, {0, 1});
  if (a.tolerance >= 1) throw cli::UsageError("--tolerance 1: expected a relative difference below 1");
  a.json = args.value("--json");
  a.replay = args.value("--replay");
  a.replay_out = args.value("--replay-out");
  if (a.replay.empty() && a.runs.size() != 2)
    throw cli::UsageError("expected two runs to compare, or --replay RUN (see --help)");
  if (!a.replay.empty() && !a.runs.empty()) throw cli::UsageError("--replay takes one run, no other run argument");
  return a;
}

// Runs RUN's configuration again (`launch --system RUN/config.json -- --out DIR`); returns the new
// run folder.
std::string replay(const RunRecord& original, const std::string& out_arg) {
  if (original.config_path.empty()) bad(original.name + ": no config.json to replay from");
  std::string out = out_arg;
  if (out.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mlperf-maskrcnn-replay-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) bad("cannot create a folder for the replay: " + std::string(std::strerror(errno)));
    out = pattern;
  }
  std::error_code ec;
  const std::string exe = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) bad("cannot find the running executable: " + ec.message());
  std::vector<std::string> args = {exe, "launch", "--system", original.config_path, "--",
                                   "--out", out, "--quiet", "--no-progress"};
  std::fprintf(stderr, "[audit] replaying %s into %s\n", original.name.c_str(), out.c_str());
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) bad("cannot start the replay: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    std::vector<char*> cargs;
    for (auto& s : args) cargs.push_back(s.data());
    cargs.push_back(nullptr);
    // The replay is the recorded run: the caller's path defaults must not choose its system, data
    // or output (config.json holds them).
    for (const char* v : {"MRCNN_SYSTEM", "MRCNN_DATA_DIR", "MRCNN_OUT"}) ::unsetenv(v);
    execv(exe.c_str(), cargs.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0 && code != 3) bad("the replay of " + original.name + " failed (exit " + std::to_string(code) + ")");
  const fs::path latest = fs::path(out) / "latest";
  const fs::path dir = fs::canonical(latest, ec);
  if (ec) bad("the replay left no run folder in " + out);
  return dir.string();
}

// The result files of a results folder (<system>/maskrcnn or <system>), sorted; empty when `path`
// is not one (a run folder, a file).
std::vector<fs::path> result_files_of(const std::string& path) {
  std::error_code ec;
  fs::path dir(path);
  if (!fs::is_directory(dir, ec) || fs::exists(dir / "mlperf_log.txt", ec)) return {};
  if (fs::is_directory(dir / "maskrcnn", ec)) dir /= "maskrcnn";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("result_", 0) == 0 && name.size() > 11 && name.ends_with(".txt")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Severity for a folder of pairs: not reproducible (1) over explained (3) over identical (0).
int worse(int a, int b) {
  auto rank = [](int s) { return s == 1 ? 2 : s == 3 ? 1 : 0; };
  return rank(b) > rank(a) ? b : a;
}

int audit_folders(const std::vector<fs::path>& fa, const std::vector<fs::path>& fb, const Args& args) {
  int status = 0, pairs = 0;
  Json all = Json::array();
  std::string summary;
  for (const fs::path& a_file : fa) {
    const auto match = std::find_if(fb.begin(), fb.end(), [&](const fs::path& f) { return f.filename() == a_file.filename(); });
    if (match == fb.end()) continue;
    const RunRecord a = read_run(a_file.string()), b = read_run(match->string());
    const AuditResult r = audit_runs(a, b, {.tolerance = args.tolerance});
    std::fputs((format_audit(a, b, r) + "\n").c_str(), stdout);
    summary += "  " + a_file.filename().string() + ": " + r.headline + "\n";
    all.push_back(audit_json(a, b, r));
    status = worse(status, r.exit_status());
    ++pairs;
  }
  if (pairs == 0) bad("no result_N.txt in both folders to compare");
  std::printf("%d pairs:\n%s", pairs, summary.c_str());
  if (!args.json.empty()) {
    std::ofstream out(args.json);
    out << all.dump(2) << "\n";
    if (!out) bad("cannot write " + args.json);
  }
  return status;
}

}  // namespace

int audit_main(int argc, char** argv) {
  const cli::Arguments parsed(argc, argv, {.with_value = {"--tolerance", "--json", "--replay", "--replay-out"}});
  if (parsed.help()) return std::printf("%s", kUsage), 0;
  const Args args = parse(parsed);
  try {
    if (args.replay.empty()) {
      const auto fa = result_files_of(args.runs[0]), fb = result_files_of(args.runs[1]);
      if (!fa.empty() && !fb.empty()) return audit_folders(fa, fb, args);
    }
    RunRecord a, b;
    if (!args.replay.empty()) {
      a = read_run(args.replay);
      b = read_run(replay(a, args.replay_out));
    } else {
      a = read_run(args.runs[0]);
      b = read_run(args.runs[1]);
    }
    const AuditResult result = audit_runs(a, b, {.tolerance = args.tolerance});
    std::fputs(format_audit(a, b, result).c_str(), stdout);
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << audit_json(a, b, result).dump(2) << "\n";
      if (!out) bad("cannot write " + args.json);
    }
    return result.exit_status();
  } catch (const std::exception& e) {
    return cli::print_error("mlperf-maskrcnn audit", e, 2);
  }
}

}  // namespace mrcnn::analysis
