#include "benchmark/analysis/run_record.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "logging/log_reader.h"
#include "logging/json_file.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw RunReadError(p.string() + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw RunReadError(p.string() + ": read error");
  return s.str();
}

bool is_hyperparameter(const std::string& key) {
  return key.rfind("opt_", 0) == 0 || key == "global_batch_size" || key == "gradient_accumulation_steps" ||
         key == "num_image_candidates" || key == "min_image_size" || key == "max_image_size" ||
         key == "d_batch_size";  // the per-accelerator batch (NVIDIA's harness logs it)
}

std::optional<int64_t> as_int(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
  return std::nullopt;
}

EpochRecord& epoch_of(std::vector<EpochRecord>& epochs, int64_t n) {
  auto it = std::find_if(epochs.begin(), epochs.end(), [&](const EpochRecord& e) { return e.epoch == n; });
  if (it != epochs.end()) return *it;
  epochs.push_back(EpochRecord{.epoch = n});
  return epochs.back();
}

// {"median": [...], "p95": [...]}: the ranks whose both figures are numbers >= 0.
void read_rank_steps(const Json& value, EpochRecord& e) {
  const Json m = value.value("median", Json()), p = value.value("p95", Json());
  if (!m.is_array() || !p.is_array() || m.size() != p.size()) return;
  e.ranks = static_cast<int64_t>(m.size());
  e.rank_steps.clear();
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i].is_number() && p[i].is_number() && m[i].get<double>() >= 0 && p[i].get<double>() >= m[i].get<double>())
      e.rank_steps.emplace_back(m[i].get<double>(), p[i].get<double>());
}

// block_start opens a block {first_epoch_num, epoch_count}; block_stop closes the last open block of
// its first_epoch_num (or the last open one when it names none).
void read_block(std::vector<BlockRecord>& blocks, bool start, const Json& meta, double t) {
  const bool named = meta.contains("first_epoch_num") && as_int(meta["first_epoch_num"]).has_value();
  const int64_t first = named ? *as_int(meta["first_epoch_num"]) : 0;
  if (start) {
    int64_t count = 1;
    // Counts beyond any real run are cut (a damaged log's numbers must not overflow a sum).
    if (meta.contains("epoch_count") && as_int(meta["epoch_count"])) count = std::clamp<int64_t>(*as_int(meta["epoch_count"]), 0, 1 << 20);
    blocks.push_back({.first_epoch = first, .epoch_count = count, .start_ms = t});
    return;
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (!it->stop_ms && (!named || it->first_epoch == first)) {
      it->stop_ms = t;
      return;
    }
}

void read_log(RunRecord& r) {
  // The compliance check's reader: the official parser's view of the records (Latin-1 text, the
  // last token of a line, json.loads semantics), every damaged record an error instead of a crash.
  constexpr size_t kMaxRecord = size_t{64} << 20;
  logging::detail::ParsedLog parsed;
  try {
    parsed = logging::detail::parse_records(logging::detail::read_log_file(r.log_path, kMaxRecord).records, kMaxRecord);
  } catch (const logging::detail::LogReadError& e) {
    throw RunReadError(r.log_path + ": " + e.what());
  }
  r.unreadable_log_lines = static_cast<int64_t>(parsed.errors.size());
  for (const logging::detail::LogLine& rec : parsed.lines) {
    if (!rec.key.is_string()) {
      ++r.unreadable_log_lines;
      continue;
    }
    const std::string key = rec.key_str();
    const double t = rec.timestamp;
    const Json& value = rec.value;
    const Json meta = rec.metadata.is_object() ? rec.metadata : Json::object();
    bool epoch = false;  // metadata.epoch_num is a number: `n`
    int64_t n = 0;
    if (meta.contains("epoch_num"))
      if (const auto v = as_int(meta["epoch_num"])) epoch = true, n = *v;
    if (key == "init_start") r.init_start_ms = t;
    else if (key == "init_stop") r.init_stop_ms = t;
    else if (key == "run_start") r.run_start_ms = t;
    else if (key == "run_stop") {
      r.run_stop_ms = t;
      r.status = meta.value("status", "");
    } else if (key == "seed") r.seed = as_int(value);
    else if (key == "train_samples") r.train_samples = as_int(value);
    else if (key == "eval_samples") r.eval_samples = as_int(value);
    else if (key == "max_steps_per_epoch") r.max_steps_per_epoch = as_int(value);
    else if (key == "submission_benchmark" && value.is_string()) r.benchmark = value.get<std::string>();
    else if (key == "submission_division" && value.is_string()) r.division = value.get<std::string>();
    else if (key == "submission_org" && value.is_string()) r.org = value.get<std::string>();
    else if (key == "submission_platform" && value.is_string()) r.platform = value.get<std::string>();
    else if (key == "epoch_start" && epoch) epoch_of(r.epochs, n).start_ms = t;
    else if (key == "epoch_stop" && epoch) epoch_of(r.epochs, n).stop_ms = t;
    else if (key == "eval_start" && epoch) epoch_of(r.epochs, n).eval_start_ms = t;
    else if (key == "eval_stop" && epoch) epoch_of(r.epochs, n).eval_stop_ms = t;
    else if (key == "eval_accuracy" && epoch) {
      EpochRecord& e = epoch_of(r.epochs, n);
      e.accuracy_ms = t;
      if (value.is_object() && value.contains("BBOX") && value["BBOX"].is_number()) e.bbox = value["BBOX"].get<double>();
      if (value.is_object() && value.contains("SEGM") && value["SEGM"].is_number()) e.segm = value["SEGM"].get<double>();
    }
    else if (key == "rank_step_seconds" && epoch && value.is_object()) read_rank_steps(value, epoch_of(r.epochs, n));
    else if (key == "block_start" || key == "block_stop") read_block(r.blocks, key == "block_start", meta, t);
    else if (key == "throughput" && value.is_number() && value.get<double>() > 0) r.throughput.push_back(value.get<double>());
    if (is_hyperparameter(key)) r.hyperparameters[key] = value;
    if (key == "global_batch_size") r.global_batch_size = as_int(value);
  }
}

double number(const Json& m, const char* key, const std::string& where) {
  if (!m.contains(key) || !m[key].is_number()) throw RunReadError(where + ": no number \"" + key + "\"");
  return m[key].get<double>();
}

void read_metrics(RunRecord& r) {
  const std::string text = read_text(r.metrics_path);
  std::istringstream lines(text);
  int64_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    if (line.empty()) continue;
    const std::string where = r.metrics_path + " line " + std::to_string(n);
    Json m = Json::parse(line, nullptr, false);
    if (!m.is_object()) throw RunReadError(where + ": not a JSON object");
    const std::string event = m.value("event", "");
    if (event == "step") {
      StepRecord s{.line = n,
                   .step = static_cast<int64_t>(number(m, "step", where)),
                   .epoch = static_cast<int64_t>(number(m, "epoch", where)),
                   .loss = number(m, "loss", where),
                   .lr = number(m, "lr", where),
                   .images_per_s = m.contains("images_per_s") ? number(m, "images_per_s", where) : 0.0,
                   .time_ms = m.contains("time_ms") ? number(m, "time_ms", where) : 0.0};
      if (m.contains("grad_norm")) s.grad_norm = number(m, "grad_norm", where);
      if (m.contains("losses") && m["losses"].is_object())
        for (const auto& [k, v] : m["losses"].items())
          if (v.is_number()) s.losses.emplace_back(k, v.get<double>());
      s.skipped = m.value("skipped", false);
      r.steps.push_back(std::move(s));
    } else if (event == "eval") {
      const auto e = static_cast<int64_t>(number(m, "epoch", where));
      if (m.contains("scoring_seconds") && m["scoring_seconds"].is_number())
        epoch_of(r.epochs, e).scoring_seconds = m["scoring_seconds"].get<double>();
    }
  }
}

Json read_json(const std::string& path) {
  try {
    return logging::read_json_file(path);
  } catch (const logging::JsonFileError& e) {
    throw RunReadError(e.what());
  }
}

}  // namespace

std::optional<double> RunRecord::run_seconds() const {
  if (!run_start_ms || !run_stop_ms) return std::nullopt;
  return (*run_stop_ms - *run_start_ms) / 1000.0;
}

std::optional<double> RunRecord::converged_epoch() const {
  if (!success()) return std::nullopt;
  std::optional<double> last;
  double last_t = -1;
  for (const EpochRecord& e : epochs)
    if (e.accuracy_ms && *e.accuracy_ms >= last_t) last = static_cast<double>(e.epoch), last_t = *e.accuracy_ms;
  return last;
}

const EpochRecord* RunRecord::epoch(int64_t n) const {
  for (const EpochRecord& e : epochs)
    if (e.epoch == n) return &e;
  return nullptr;
}

RunRecord read_run(const std::string& path) {
  RunRecord r{.name = path};
  std::error_code ec;
  const fs::path p(path);
  fs::path folder;
  if (fs::is_directory(p, ec)) {
    if (!fs::is_regular_file(p / "mlperf_log.txt", ec))
      throw RunReadError(path + ": not a run folder (no mlperf_log.txt)");
    folder = p;
    r.log_path = (p / "mlperf_log.txt").string();
  } else if (fs::is_regular_file(p, ec)) {
    r.log_path = path;
    static const std::regex kResult(R"(result_(\d+)\.txt)");
    std::smatch m;
    const std::string file = p.filename().string();
    if (std::regex_match(file, m, kResult)) {
      const fs::path kept = p.parent_path() / "runs" / ("result_" + m[1].str());
      if (fs::is_directory(kept, ec)) folder = kept;
    }
  } else {
    throw RunReadError(path + ": does not exist");
  }
  if (!folder.empty()) {
    if (fs::is_regular_file(folder / "metrics.jsonl", ec)) r.metrics_path = (folder / "metrics.jsonl").string();
    if (fs::is_regular_file(folder / "fingerprint.json", ec)) r.fingerprint_path = (folder / "fingerprint.json").string();
    if (fs::is_regular_file(folder / "config.json", ec)) r.config_path = (folder / "config.json").string();
    if (fs::is_regular_file(folder / "profile.json", ec)) r.profile_path = (folder / "profile.json").string();
  }
  read_log(r);
  if (!r.metrics_path.empty()) read_metrics(r);
  if (!r.fingerprint_path.empty()) r.fingerprint = read_json(r.fingerprint_path);
  if (!r.config_path.empty()) r.config = read_json(r.config_path);
  if (!r.profile_path.empty()) r.profile = read_json(r.profile_path);
  std::sort(r.epochs.begin(), r.epochs.end(), [](const EpochRecord& a, const EpochRecord& b) { return a.epoch < b.epoch; });
  return r;
}

}  // namespace mrcnn::analysis
