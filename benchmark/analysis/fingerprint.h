// A run's fingerprint: everything besides the seed that decides its numbers, written by every
// run as fingerprint.json in its folder, so that `audit` can say why two runs differ.
//
//   {"format": 1,
//    "config_sha256": ..., "seed": N,
//    "binary":    {"path", "sha256", "libraries": {"libmrcnn_ops.so": sha256, ...},
//                  "library_paths": {"libmrcnn_ops.so": path, ...}, "version", "git_commit",
//                  "git_dirty", "compiler", "build_type"},
//    "libraries": {"libtorch", "libtorch_dir", "cuda", "cudnn", "nccl", "mpi", "aten_cpu_capability", ...,
//                  "backend_library": {"path", "bytes", "sha256"} or null},
//    "host":      {"hostname", "os", "cpu_model", "cpu_flags", "logical_cpus", "gpus", "gpu_driver"},
//    "threads":   {"intra_op", "inter_op", "loader", "eval"},
//    "ranks":     {"world_size", "nodes", "ranks_per_node", "communicator",
//                  "communicator_resolved" (local | mpi | tcp | nccl), "device"},
//    "settings":  {"deterministic", "ops", "ops_resolved" (native | portable),
//                  "deterministic_algorithms", "tf32", "precision", "channels_last"},
//    "data":      {"dir", "train_annotations": {"path", "bytes", "sha256"}, "val_annotations": {...},
//                  "train_images", "val_images"}}
//
// The parts here need no LibTorch; the training command adds the library versions, the threads
// and the ranks (benchmark/run/run_fingerprint.h). The data part is filled in after run_stop: the
// MLPerf clock must start before any data is touched, and hashing the annotation files would be
// touching them.
#pragma once

#include <istream>
#include <map>
#include <string>
#include <vector>

#include "logging/py_json.h"

namespace mrcnn::analysis {

using logging::Json;

inline constexpr int kFingerprintFormat = 1;

// What this build is (generated at build time by build_info.cmake).
struct BuildInfo {
  std::string version;
  std::string git_commit;  // "unknown" outside a git checkout
  bool git_dirty = false;  // tracked files differed from the commit when it was built
  std::string compiler;
  std::string build_type;
};
const BuildInfo& build_info();

// The running executable: its path and SHA-256, the build info, and the project's shared libraries
// mapped into the process (`libraries`: file name -> SHA-256, `library_paths`: file name -> path;
// the kernels live in libmrcnn_ops.so, the network in libmrcnn_model.so, so a rebuilt library
// changes results as a rebuilt executable does).
Json binary_fingerprint();

// The files a /proc/<pid>/maps text maps whose file name starts with `name_prefix` and holds
// ".so": file name -> path (one path per name, the first mapped). Deleted files are left out.
std::map<std::string, std::string> mapped_libraries(std::istream& maps, const std::string& name_prefix);

// The machine: hostname, OS (uname), CPU model and the ISA flags that choose kernels, logical
// CPUs, the NVIDIA driver when one is loaded.
Json host_fingerprint();

// {"path", "bytes", "sha256"} of a file; throws std::runtime_error naming it when unreadable.
Json file_fingerprint(const std::string& path);

// SHA-256 of the configuration's canonical text (keys in their resolved order, 2-space dump).
std::string config_sha256(const Json& resolved_config);

// One line of the fingerprint for the MLPerf log's free-form `run_fingerprint` event: the hashes
// and the facts that change results (no key the official tools read by substring).
Json fingerprint_summary(const Json& fingerprint);

// Writes `fingerprint` to `path` atomically (a temporary file renamed over it).
void write_fingerprint(const Json& fingerprint, const std::string& path);

}  // namespace mrcnn::analysis
