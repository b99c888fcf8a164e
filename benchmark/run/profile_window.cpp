#include "benchmark/run/profile_window.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "benchmark/config/system_config.h"
#include "logging/console.h"

namespace mrcnn::run {

namespace profiler = torch::autograd::profiler;
using logging::Json;

namespace {

// The stages in the order of a step, nested ones indented.
constexpr std::pair<const char*, int> kStages[] = {
    {"mrcnn::data_wait", 0},     {"mrcnn::train_step", 0}, {"mrcnn::forward", 1},       {"mrcnn::backbone", 2},
    {"mrcnn::fpn", 2},           {"mrcnn::rpn", 2},        {"mrcnn::rpn_proposals", 2}, {"mrcnn::roi_sampling", 2},
    {"mrcnn::mask_targets", 2},  {"mrcnn::roi_box", 2},    {"mrcnn::roi_mask", 2},      {"mrcnn::backward", 1},
    {"mrcnn::allreduce", 1},     {"mrcnn::optimizer", 1},  {"mrcnn::read_results", 1},
};

std::set<torch::profiler::impl::ActivityType> activities() {
  std::set<torch::profiler::impl::ActivityType> a{torch::profiler::impl::ActivityType::CPU};
  if (torch::cuda::is_available()) a.insert(torch::profiler::impl::ActivityType::CUDA);
  return a;
}

torch::profiler::impl::ProfilerConfig config() {
  return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO);
}

}  // namespace

ProfileRequest parse_profile_request(const std::string& text) {
  ProfileRequest r;
  const auto at = text.find('@');
  try {
    size_t used = 0;
    r.steps = std::stoll(text.substr(0, at), &used);
    if (used != text.substr(0, at).size()) throw std::invalid_argument(text);
    if (at != std::string::npos) {
      r.first = std::stoll(text.substr(at + 1), &used);
      if (used != text.size() - at - 1) throw std::invalid_argument(text);
    }
  } catch (const std::exception&) {
    throw config::ConfigError("--profile " + text + ": expected STEPS or STEPS@FIRST_STEP (e.g. 10 or 10@20)");
  }
  if (r.steps < 1 || r.steps > 100000 || r.first < 0)
    throw config::ConfigError("--profile " + text + ": expected 1 <= STEPS <= 100000 and FIRST_STEP >= 0");
  return r;
}

Json stage_table(const std::vector<std::pair<std::string, double>>& scopes_ms, int64_t steps) {
  std::map<std::string, std::pair<int64_t, double>> sums;  // name -> calls, ms
  for (const auto& [name, ms] : scopes_ms) sums[name].first += 1, sums[name].second += ms;
  const double step_ms = sums["mrcnn::train_step"].second + sums["mrcnn::data_wait"].second;
  Json stages = Json::array();
  for (const auto& [name, depth] : kStages) {
    const auto it = sums.find(name);
    if (it == sums.end() || it->second.first == 0) continue;
    stages.push_back({{"stage", std::string(name).substr(7)}, {"depth", depth}, {"calls", it->second.first},
                      {"total_ms", it->second.second},
                      {"per_step_ms", steps > 0 ? it->second.second / static_cast<double>(steps) : 0.0},
                      {"share", step_ms > 0 ? it->second.second / step_ms : 0.0}});
  }
  return Json{{"steps", steps}, {"step_ms", steps > 0 ? step_ms / static_cast<double>(steps) : 0.0}, {"stages", stages}};
}

ProfileWindow::ProfileWindow(ProfileRequest request, std::string dir) : request_(request), dir_(std::move(dir)) {}

ProfileWindow::~ProfileWindow() {
  if (active_) {  // the run ended by an exception: stop the profiler, keep nothing half-written
    try {
      profiler::disableProfiler();
    } catch (...) {
    }
  }
}

void ProfileWindow::start() {
  profiler::prepareProfiler(config(), activities());
  profiler::enableProfiler(config(), activities());
  active_ = true;
  logging::info(logging::strprintf("profiling %lld steps from step %lld (the profiler's overhead counts in this run's time)",
                                   static_cast<long long>(request_.steps), static_cast<long long>(request_.first)));
}

void ProfileWindow::step_starting(int64_t) {
  if (active_ && profiled_ >= request_.steps) finish();
  if (!active_ && !done_ && request_.steps > 0 && steps_started_ == request_.first) start();
  ++steps_started_;
  if (active_) ++profiled_;
}

void ProfileWindow::epoch_done(int64_t) {
  if (active_ && profiled_ >= request_.steps) finish();
}

void ProfileWindow::finish() {
  if (!active_) return;
  active_ = false;
  done_ = true;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  const std::string trace = dir_ + "/profile_trace.json";
  result->save(trace);
  std::vector<std::pair<std::string, double>> scopes;
  for (const auto& e : result->events()) {
    const std::string name = e.name();
    if (name.rfind("mrcnn::", 0) == 0) scopes.emplace_back(name, static_cast<double>(e.durationNs()) / 1e6);
  }
  Json table = stage_table(scopes, profiled_);
  table["first_step"] = request_.first;
  table["trace"] = "profile_trace.json";
  std::ofstream(dir_ + "/profile.json") << table.dump(2) << "\n";
  std::string text = logging::strprintf("profile of %lld steps (%.1f ms per step): %s\n",
                                        static_cast<long long>(profiled_), table["step_ms"].get<double>(), trace.c_str());
  for (const Json& s : table["stages"])
    text += logging::strprintf("  %*s%-16s %9.1f ms/step %6.1f %%\n", 2 * s["depth"].get<int>(), "",
                               s["stage"].get<std::string>().c_str(), s["per_step_ms"].get<double>(),
                               100 * s["share"].get<double>());
  logging::info(text);
}

}  // namespace mrcnn::run
