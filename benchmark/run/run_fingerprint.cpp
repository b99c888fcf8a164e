#include "benchmark/run/run_fingerprint.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/Device.h>
#include <torch/headeronly/version.h>

#include <filesystem>
#include <fstream>

#include "benchmark/analysis/fingerprint.h"
#include "benchmark/analysis/run_record.h"
#include "benchmark/comm/communicator.h"
#include "benchmark/data/coco_layout.h"
#include "model/ops/implementation.h"

namespace mrcnn::run {

using analysis::Json;

namespace {

std::string cuda_version(long v) {  // 13000 -> "13.0"; 0 -> ""
  return v > 0 ? std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) : "";
}

// The folder LibTorch's libraries were loaded from (its version is recorded beside it).
std::string libtorch_dir() {
  std::ifstream maps("/proc/self/maps");
  const auto found = analysis::mapped_libraries(maps, "libtorch_cpu");
  return found.empty() ? "" : std::filesystem::path(found.begin()->second).parent_path().string();
}

std::string cudnn_version(long v) {  // 91000 -> "9.10.0"
  return v > 0 ? std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100) : "";
}

}  // namespace

std::string library_versions() {
  const auto& cuda = at::detail::getCUDAHooks();
  std::string s = std::string("LibTorch ") + TORCH_VERSION;
  if (cuda.hasCUDA())
    s += ", CUDA runtime " + cuda_version(cuda.versionCUDART()) + " with " + std::to_string(cuda.deviceCount()) +
         " GPU(s)";
  else
    s += ", no CUDA device here";
  s += ops::has_native_kernels(c10::kCUDA) ? "; the project's CUDA kernels are built in"
                                           : "; built without the project's CUDA kernels";
  return s;
}

Json run_fingerprint(const config::SystemConfig& c, int world_size, const std::string& communicator) {
  const auto& cuda = at::detail::getCUDAHooks();
  const bool has_cuda = cuda.hasCUDA();
  Json fp{{"format", analysis::kFingerprintFormat},
          {"config_sha256", analysis::config_sha256(c.resolved)},
          {"seed", c.run.seed},
          {"binary", analysis::binary_fingerprint()},
          {"libraries", {{"libtorch", TORCH_VERSION},
                         {"libtorch_dir", libtorch_dir()},
                         {"aten_cpu_capability", at::get_cpu_capability()},
                         {"mkldnn", at::get_mkldnn_version()},
                         {"openmp", at::get_openmp_version()},
                         {"cuda_runtime", has_cuda ? cuda_version(cuda.versionCUDART()) : ""},
                         {"cudnn", has_cuda ? cudnn_version(cuda.versionCuDNN()) : ""},
                         {"communicators", comm::available_backends()},
                         {"backend_library", c.launch.backend_library.empty()
                                                 ? Json(nullptr)
                                                 : analysis::file_fingerprint(c.launch.backend_library)}}},
          {"host", analysis::host_fingerprint()},
          {"threads", {{"intra_op", at::get_num_threads()},
                       {"inter_op", at::get_num_interop_threads()},
                       {"loader", c.data.loader_threads},
                       {"eval", c.run.eval_threads}}},
          {"ranks", {{"world_size", world_size},
                     {"nodes", c.launch.nodes},
                     {"ranks_per_node", c.launch.ranks_per_node},
                     {"communicator", c.launch.communicator},
                     {"communicator_resolved", communicator},
                     {"device", c.run.device}}},
          {"settings", {{"deterministic", c.run.deterministic},
                        {"ops", ops::to_string(c.run.ops)},
                        {"ops_resolved", ops::resolved_implementation(c.run.ops,
                                                                      c10::Device(c.run.device).type())},
                        {"deterministic_algorithms", at::globalContext().deterministicAlgorithms()},
                        {"tf32", at::globalContext().allowTF32CuDNN() || at::globalContext().allowTF32CuBLAS()},
                        {"precision", c.resolved["run"].value("precision", "")},
                        {"channels_last", c.run.channels_last}}},
          {"data", nullptr}};
  return fp;
}

void add_data_fingerprint(Json& fp, const config::SystemConfig& c, const std::string& log_path) {
  const data::CocoLayout layout{c.run.data_dir};
  auto file = [](const std::filesystem::path& p) -> Json {
    try {
      return analysis::file_fingerprint(p.string());
    } catch (const std::exception& e) {
      return Json{{"path", p.string()}, {"error", e.what()}};
    }
  };
  Json data{{"dir", c.run.data_dir},
            {"train_annotations", file(layout.annotation_file(c.data.train_split))},
            {"val_annotations", file(layout.annotation_file(c.data.val_split))},
            // The prepared index, where there is one (the log's train_samples says whether it was read).
            {"train_index", std::filesystem::exists(layout.index_file(c.data.train_split))
                                ? file(layout.index_file(c.data.train_split))
                                : Json(nullptr)},
            {"train_images", nullptr},
            {"val_images", nullptr}};
  try {
    const analysis::RunRecord logged = analysis::read_run(log_path);
    if (logged.train_samples) data["train_images"] = *logged.train_samples;
    if (logged.eval_samples) data["val_images"] = *logged.eval_samples;
  } catch (const std::exception&) {  // no log to read back: the counts stay null
  }
  fp["data"] = std::move(data);
}

}  // namespace mrcnn::run
