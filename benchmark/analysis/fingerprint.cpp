#include "benchmark/analysis/fingerprint.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "logging/sha256.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

// The flags that decide which vector kernels LibTorch, oneDNN and the project's code run.
const std::set<std::string>& kernel_flags() {
  static const std::set<std::string> flags = {
      "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
      "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2"};
  return flags;
}

std::string trim(std::string s) {
  const auto a = s.find_first_not_of(" \t");
  const auto b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return trim(line);
}

}  // namespace

std::map<std::string, std::string> mapped_libraries(std::istream& maps, const std::string& name_prefix) {
  std::map<std::string, std::string> found;
  for (std::string line; std::getline(maps, line);) {
    // address perms offset dev inode [path]: the path, which may hold spaces, is the rest.
    std::istringstream fields(line);
    std::string skip;
    for (int i = 0; i < 5 && (fields >> skip); ++i) {
    }
    std::string path;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path.front() != '/' || path.ends_with(" (deleted)")) continue;
    const std::string name = fs::path(path).filename().string();
    if (name.starts_with(name_prefix) && name.find(".so") != std::string::npos) found.emplace(name, path);
  }
  return found;
}

Json binary_fingerprint() {
  const BuildInfo& b = build_info();
  Json j{{"path", ""}, {"sha256", ""}};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    j["path"] = exe.string();
    static const std::string hash = [&] {  // once per process: train asks at start and for its fingerprint
      try {
        return logging::sha256_file(exe.string());
      } catch (const std::exception&) {  // replaced on disk while running: the hash stays empty
        return std::string();
      }
    }();
    j["sha256"] = hash;
  }
  // Hashed once per process too, as they were mapped when first asked.
  static const std::pair<Json, Json> libraries = [] {
    std::ifstream maps("/proc/self/maps");
    Json hashes = Json::object(), paths = Json::object();
    for (const auto& [name, path] : mapped_libraries(maps, "libmrcnn")) {
      paths[name] = path;
      try {
        hashes[name] = logging::sha256_file(path);
      } catch (const std::exception&) {
        hashes[name] = "";
      }
    }
    return std::pair{hashes, paths};
  }();
  j["libraries"] = libraries.first;
  j["library_paths"] = libraries.second;
  j["version"] = b.version;
  j["git_commit"] = b.git_commit;
  j["git_dirty"] = b.git_dirty;
  j["compiler"] = b.compiler;
  j["build_type"] = b.build_type;
  return j;
}

Json host_fingerprint() {
  Json j;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  j["hostname"] = host;
  utsname u{};
  j["os"] = uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "";
  std::string model;
  std::vector<std::string> flags;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (model.empty() && (name == "model name" || name == "Model")) model = value;
    if (flags.empty() && (name == "flags" || name == "Features")) {
      std::istringstream words(value);
      for (std::string w; words >> w;)
        if (kernel_flags().contains(w)) flags.push_back(w);
    }
  }
  j["cpu_model"] = model;
  j["cpu_flags"] = flags;
  j["logical_cpus"] = static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<std::string> gpus;  // the NVIDIA driver's view, in bus order
  std::error_code ec;
  std::vector<fs::path> boards;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) boards.push_back(e.path());
  std::sort(boards.begin(), boards.end());
  for (const fs::path& b : boards) {
    std::ifstream info(b / "information");
    for (std::string line; std::getline(info, line);)
      if (line.rfind("Model:", 0) == 0) gpus.push_back(trim(line.substr(6)));
  }
  j["gpus"] = gpus;
  j["gpu_driver"] = read_first_line("/proc/driver/nvidia/version");
  return j;
}

Json file_fingerprint(const std::string& path) {
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(path + ": " + ec.message());
  return Json{{"path", path}, {"bytes", static_cast<int64_t>(bytes)}, {"sha256", logging::sha256_file(path)}};
}

std::string config_sha256(const Json& resolved_config) { return logging::sha256_hex(resolved_config.dump(2)); }

Json fingerprint_summary(const Json& fp) {
  auto get = [&](const char* section, const char* key) -> Json {
    if (!fp.contains(section) || !fp[section].is_object() || !fp[section].contains(key)) return nullptr;
    return fp[section][key];
  };
  return Json{{"config_sha256", fp.value("config_sha256", "")},
              {"binary_sha256", get("binary", "sha256")},
              {"git_commit", get("binary", "git_commit")},
              {"git_dirty", get("binary", "git_dirty")},
              {"libtorch", get("libraries", "libtorch")},
              {"aten_cpu_capability", get("libraries", "aten_cpu_capability")},
              {"cpu_model", get("host", "cpu_model")},
              {"intra_op_threads", get("threads", "intra_op")},
              {"world_size", get("ranks", "world_size")},
              {"deterministic", get("settings", "deterministic")}};
}

void write_fingerprint(const Json& fingerprint, const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << fingerprint.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot write " + path + ": " + ec.message());
}

}  // namespace mrcnn::analysis
