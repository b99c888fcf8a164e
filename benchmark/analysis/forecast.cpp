#include "benchmark/analysis/forecast.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "benchmark/analysis/rcp.h"
#include "logging/sha256.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

int64_t steps_for(int64_t images, int64_t global_batch) { return (images + global_batch - 1) / global_batch; }

// The steps of one whole epoch of a run: metrics.jsonl's most in an epoch where steps were kept;
// else COCO train2017's images (a closed-division or val2017-validated log) or train_samples over
// the global batch, at most the steps a measurement cut its epochs to.
int64_t run_steps_per_epoch(const RunRecord& r) {
  std::map<int64_t, std::set<int64_t>> steps;
  for (const StepRecord& s : r.steps) steps[s.epoch].insert(s.step);
  size_t most = 0;
  for (const auto& [epoch, ids] : steps) most = std::max(most, ids.size());
  if (most > 0) return static_cast<int64_t>(most);
  const int64_t gb = r.global_batch_size.value_or(0);
  if (gb <= 0) return 0;
  const int64_t whole = r.division == "closed" || r.eval_samples == kCocoValImages ? steps_for(kCocoTrainImages, gb)
                        : r.train_samples && *r.train_samples > 0               ? steps_for(*r.train_samples, gb)
                                                                                 : 0;
  return r.max_steps_per_epoch && *r.max_steps_per_epoch > 0 && whole > 0 ? std::min(whole, *r.max_steps_per_epoch) : whole;
}

// What a step exposes of its all-reduce: all of it for the published harnesses (one flat buffer
// after backward); for this project's, which reduces buckets as backward produces them, at best
// what outlasts the backward pass (two thirds of the step), at worst all of it (where the ring's
// copies and additions compete with the backward pass for the same cores, as on the 2-core hosts
// of benchmark/README.md, whose overlapped step hid nothing).
double exposed(double allreduce, double compute, bool published_harness, bool overlap) {
  return published_harness || !overlap ? allreduce : std::max(0.0, allreduce - 2.0 / 3.0 * compute);
}

// The gradient a step all-reduces: a float16 flat buffer (the published harnesses), float32
// buckets (this project's), of the measured network where its run says, else R50-FPN's.
double gradient_bytes(const Assumptions& a, const Measurement& m) {
  const double params = m.trainable_parameters > 0 ? m.trainable_parameters : a.trainable_parameters;
  return params * (m.published_harness ? 2 : 4);
}

std::string org_folder(const SystemReport& s) {
  return fs::path(s.folder).parent_path().parent_path().parent_path().lexically_normal().string();
}

std::string fmt(double v, const char* f) { return format_number(v, f); }

}  // namespace

double ring_seconds(int64_t nodes, double bytes, double gbps, double efficiency, double hop_s) {
  if (nodes <= 1) return 0;
  const auto n = static_cast<double>(nodes);
  return 2 * (n - 1) / n * bytes / (efficiency * gbps * 1e9 / 8) + 2 * (n - 1) * hop_s;
}

double expected_max_normal(int64_t ranks) {
  if (ranks <= 1) return 0;
  const double q = (static_cast<double>(ranks) - 0.375) / (static_cast<double>(ranks) + 0.25);
  double lo = 0, hi = 10;  // Phi(x) = q by bisection: Phi(x) = erfc(-x / sqrt 2) / 2
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erfc(-mid / std::sqrt(2.0)) / 2 < q ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::optional<double> stated_network_gbps(const Json& config) {
  if (!config.is_object() || !config.contains("launch") || !config["launch"].is_object()) return std::nullopt;
  const Json& l = config["launch"];
  if (!l.contains("network_gbps") || !l["network_gbps"].is_number() || !(l["network_gbps"].get<double>() > 0)) return std::nullopt;
  return l["network_gbps"].get<double>();
}

namespace {

// The network of a system: launch.network_gbps of a kept run's configuration, else the
// description's host_networking as read.
NodeNetwork network_of(const SystemReport& s) {
  for (const RunSummary& r : s.runs)
    if (const auto g = stated_network_gbps(r.run.config)) return {*g, "launch.network_gbps"};
  return parse_host_networking(s.description.host_networking);
}

}  // namespace

std::optional<RunParts> decompose_run(const RunRecord& r, std::string* why) {
  const auto fail = [&](const std::string& w) -> std::optional<RunParts> {
    if (why) *why = r.name + ": " + w;
    return std::nullopt;
  };
  if (!r.run_start_ms || !r.run_stop_ms) return fail("run_start or run_stop not logged");
  // A run that converged, or one that spent its epoch budget (its last epoch whole, and scored).
  const bool budget_spent = r.status == "aborted" && !r.epochs.empty() && r.epochs.back().stop_ms && r.epochs.back().bbox;
  if (!r.success() && !budget_spent) return fail("stopped before its epochs ended (run_stop status '" + r.status + "')");
  std::vector<const EpochRecord*> trained;
  for (const EpochRecord& e : r.epochs)
    if (e.start_ms && e.stop_ms) trained.push_back(&e);
  if (trained.empty()) return fail("no epoch with epoch_start and epoch_stop");
  RunParts p;
  p.total = (*r.run_stop_ms - *r.run_start_ms) / 1000;
  p.first = (*trained.front()->start_ms - *r.run_start_ms) / 1000;
  p.tail = (*r.run_stop_ms - *trained.back()->stop_ms) / 1000;
  std::vector<double> epochs, pauses;
  for (size_t i = 0; i < trained.size(); ++i) {
    const double e = (*trained[i]->stop_ms - *trained[i]->start_ms) / 1000;
    p.epochs_sum += e;
    if (i > 0 || trained.size() == 1) epochs.push_back(e);
    if (i + 1 < trained.size()) {
      pauses.push_back((*trained[i + 1]->start_ms - *trained[i]->stop_ms) / 1000);
      p.pauses_sum += pauses.back();
    }
  }
  p.epoch = median(epochs);
  p.pause = pauses.empty() ? 0 : median(pauses);
  p.converged = r.success() && r.converged_epoch().has_value();
  p.epochs = p.converged ? *r.converged_epoch() : 0;
  p.steps_per_epoch = run_steps_per_epoch(r);
  if (p.steps_per_epoch <= 0) return fail("no way to count an epoch's steps (no kept steps, train_samples or COCO epoch)");
  return p;
}

namespace {

// The node a system describes, into a Measurement or a Target; its description must be readable.
template <typename T>
void node_of(const SystemReport& s, T& out) {
  if (!s.described) throw ForecastError(s.label + ": " + s.description.problem);
  out.nodes = s.nodes;
  out.accelerators_per_node = s.accelerators / std::max<int64_t>(1, s.nodes);
  out.accelerator_model = s.accelerator_model;
}

// A run's global batch, batch per training accelerator (d_batch_size where logged, else the global
// batch over the accelerators) and dedicated evaluation accelerators (those the batch leaves idle).
template <typename T>
void batches_of(const RunRecord& r, int64_t accelerators, T& out) {
  out.global_batch = r.global_batch_size.value_or(0);
  const auto d = r.hyperparameters.find("d_batch_size");
  const auto n = static_cast<double>(accelerators);
  out.batch = d != r.hyperparameters.end() && d->second.is_number() ? d->second.get<double>()
                                                                      : static_cast<double>(out.global_batch) / n;
  const double training = out.batch > 0 ? std::round(static_cast<double>(out.global_batch) / out.batch) : n;
  out.eval_ranks = training < n ? accelerators - static_cast<int64_t>(training) : 0;
}

}  // namespace

Measurement measure(const SystemReport& s) {
  Measurement m;
  m.label = s.label;
  node_of(s, m);
  std::vector<std::pair<RunParts, const RunSummary*>> runs;
  std::string why;
  // Every run that trained whole epochs times the node, compliant with the closed rules or not (an
  // open-division measurement is one too); converged runs first, when there are any.
  std::vector<std::pair<RunParts, const RunSummary*>> stopped;
  for (const RunSummary& r : s.runs)
    if (auto p = decompose_run(r.run, &why)) (p->converged ? runs : stopped).emplace_back(*p, &r);
  if (runs.empty()) runs = stopped;
  if (runs.empty()) throw ForecastError(s.label + ": no run to measure" + (why.empty() ? "" : " (" + why + ")"));
  // result_summarizer's olympic mean keeps all but the fastest and the slowest run; a run that did
  // not succeed counts as the slowest.
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first.total < b.first.total; });
  if (s.runs.size() >= 3) {
    const bool all_succeeded = runs.size() == s.runs.size();
    runs = std::vector(runs.begin() + 1, runs.end() - (all_succeeded && runs.size() > 2 ? 1 : 0));
  }
  const RunRecord& first = runs.front().second->run;
  batches_of(first, s.accelerators, m);
  if (m.global_batch <= 0) throw ForecastError(s.label + ": global_batch_size not logged");
  const double n = static_cast<double>(runs.size());
  for (const auto& [p, r] : runs) {
    std::vector<double> cvs;  // (p95 - median) / 1.645 / median of each rank and epoch
    for (const EpochRecord& e : r->run.epochs) {
      m.timed_ranks = std::max(m.timed_ranks, e.ranks);
      for (const auto& [med, p95] : e.rank_steps)
        if (med > 0) cvs.push_back((p95 - med) / 1.645 / med);
    }
    if (!cvs.empty()) m.step_cv += median(cvs) / n;
    m.first += p.first / n;
    m.step += p.epoch / static_cast<double>(p.steps_per_epoch) / n;
    m.pause += p.pause / n;
    m.tail += p.tail / n;
    m.epochs += p.epochs / n;
    m.minutes += p.total / 60 / n;
  }
  m.runs = static_cast<int>(runs.size());
  const NodeNetwork net = network_of(s);
  m.network_gbps = net.gbps;
  m.network_basis = net.basis;
  m.published_harness = !(first.config.is_object() && first.config.contains("run"));
  if (first.fingerprint.is_object() && first.fingerprint.contains("model") &&
      first.fingerprint["model"].value("trainable_parameters", Json()).is_number())
    m.trainable_parameters = first.fingerprint["model"]["trainable_parameters"].get<double>();
  return m;
}

Target target_of(const SystemReport& s, const Assumptions& a, const std::optional<NetworkFallback>& fallback) {
  Target t;
  t.name = s.label;
  node_of(s, t);
  for (const RunSummary& r : s.runs) {
    if (!r.run.global_batch_size) continue;
    batches_of(r.run, s.accelerators, t);
    break;
  }
  if (t.global_batch <= 0) throw ForecastError(s.label + ": no run logs global_batch_size");
  const NodeNetwork net = network_of(s);
  t.network_gbps = net.gbps;
  t.network_basis = net.basis;
  if (!t.network_gbps && t.nodes > 1) {
    t.network_assumed = true;
    t.network_gbps = fallback ? fallback->gbps : a.network_gbps;
    t.network_basis = fallback ? "as " + fallback->source + " describes the node" : "the default";
  }
  return t;
}

namespace {

// The forecast's arithmetic for one setting of the unmeasured assumptions.
struct Setting {
  double k, efficiency, hop_s, epochs;
  bool overlap = false;  // this project's all-reduce hidden behind backward (the band's optimistic end)
  double straggler = 1;  // of the straggler term (0: the ranks' delays shared; 2: heavier tails)
};

struct Model {
  const std::vector<Measurement>& measured;
  const Target& target;
  const Assumptions& a;
  const Measurement& base;  // the measurement at the batch nearest the target's

  double network(const Measurement& m) const { return m.network_gbps.value_or(a.network_gbps); }

  // The compute part of a measured step: the step less the all-reduce its own nodes exposed.
  double compute_of(const Measurement& m, const Setting& s) const {
    const double ar = ring_seconds(m.nodes, gradient_bytes(a, m), network(m), s.efficiency, s.hop_s);
    return std::max(0.0, m.step - exposed(ar, m.step, m.published_harness, s.overlap));
  }

  double compute(const Setting& s) const {
    std::map<double, double> by_batch;  // per-accelerator batch -> compute seconds (mean over measurements)
    std::map<double, int> count;
    for (const Measurement& m : measured) by_batch[m.batch] += compute_of(m, s), ++count[m.batch];
    for (auto& [b, t] : by_batch) t /= count[b];
    if (const auto hit = by_batch.find(target.batch); hit != by_batch.end()) return hit->second;
    if (by_batch.size() >= 2) {  // least squares t = c0 + c1 b through the measured batches
      double sb = 0, st = 0, sbb = 0, sbt = 0;
      const auto n = static_cast<double>(by_batch.size());
      for (const auto& [b, t] : by_batch) sb += b, st += t, sbb += b * b, sbt += b * t;
      const double c1 = (n * sbt - sb * st) / (n * sbb - sb * sb);
      return std::max(0.0, (st - c1 * sb) / n + c1 * target.batch);
    }
    return compute_of(base, s) * (target.batch + s.k) / (base.batch + s.k);
  }

  ForecastParts parts(const Setting& s) const {
    ForecastParts p;
    p.epochs = s.epochs;
    p.steps_per_epoch = steps_for(a.epoch_images, target.global_batch);
    p.step_compute = compute(s);
    p.step_straggler = s.straggler * base.step_cv * p.step_compute *
                       (expected_max_normal(training_ranks()) - expected_max_normal(base.timed_ranks));
    const double ar = ring_seconds(target.nodes, gradient_bytes(a, base),
                                   target.network_gbps.value_or(a.network_gbps), s.efficiency, s.hop_s);
    p.step_allreduce = exposed(ar, p.step_compute, base.published_harness, s.overlap);
    p.epoch = static_cast<double>(p.steps_per_epoch) * (p.step_compute + p.step_straggler + p.step_allreduce);
    const double steps = s.epochs * static_cast<double>(p.steps_per_epoch);
    p.compute = steps * p.step_compute;
    p.straggler = steps * p.step_straggler;
    p.allreduce = steps * p.step_allreduce;
    const double base_evaluating = static_cast<double>(base.nodes * base.accelerators_per_node - base.eval_ranks);
    const double accelerators = static_cast<double>(target.nodes * target.accelerators_per_node);
    const double evaluating = target.eval_ranks > 0 ? static_cast<double>(target.eval_ranks) : accelerators;
    const double pause = target.eval_ranks > 0 ? 0 : base.pause * base_evaluating / accelerators;
    p.pauses = std::max(0.0, s.epochs - 1) * pause;
    p.tail = std::max(0.0, base.tail - base.pause) + base.pause * base_evaluating / evaluating;
    p.first = base.first;
    return p;
  }

  // The straggler term is grown from the measured ranks (their slowest is in the step) to the target's.
  int64_t training_ranks() const { return target.nodes * target.accelerators_per_node - target.eval_ranks; }
  bool straggles() const { return base.step_cv > 0 && base.timed_ranks > 0 && training_ranks() != base.timed_ranks; }

  static double minutes(const ForecastParts& p) {
    return (p.first + p.compute + p.straggler + p.allreduce + p.pauses + p.tail) / 60;
  }
};

// One unmeasured assumption of the band: its name, what to measure to remove it, and its two ends.
struct Term {
  std::string name, remedy;
  Setting low, high;
};

// The band's terms, each assumption varied alone around `nominal`.
std::vector<Term> band_terms(const Model& model, const Setting& nominal, const Assumptions& a, bool batch_measured,
                             size_t batches, bool epochs_measured, const RcpStats& rcp) {
  const Target& t = model.target;
  const Measurement& base = model.base;
  std::vector<Term> terms;
  if (!batch_measured && batches == 1) {
    Setting lo = nominal, hi = nominal;
    lo.k = a.k_low, hi.k = a.k_high;
    terms.push_back({"the fixed cost a step (k, batch " + fmt(t.batch, "%g") + " not measured)",
                     "measure the step at " + fmt(t.batch, "%g") + " images an accelerator on the node", lo, hi});
  }
  if (t.nodes > 1) {
    Setting lo = nominal, hi = nominal;
    lo.efficiency = a.efficiency_high, lo.hop_s = a.hop_low_s;
    hi.efficiency = a.efficiency_low, hi.hop_s = a.hop_high_s;
    terms.push_back({"the network's efficiency and latency", "measure the all-reduce between two nodes (allreduce_probe)", lo, hi});
  }
  if (t.nodes > 1 && !base.published_harness) {
    Setting lo = nominal;
    lo.overlap = true;
    terms.push_back({"how much of the all-reduce backward hides", "measure a step on two nodes", lo, nominal});
  }
  if (model.straggles()) {
    Setting lo = nominal, hi = nominal;
    lo.straggler = 0, hi.straggler = 2;
    terms.push_back({"the ranks' independence (straggler term, " + std::to_string(base.timed_ranks) + " ranks timed)",
                     "measure a step on more ranks (two nodes)", lo, hi});
  }
  if (!epochs_measured) {
    Setting lo = nominal, hi = nominal;
    lo.epochs = std::max(1.0, std::ceil(rcp.mean - rcp.stdev - 1e-9));
    hi.epochs = std::ceil(rcp.mean + rcp.stdev - 1e-9);
    terms.push_back({"the epochs to converge (the RCP's spread at batch " + std::to_string(t.global_batch) + ")",
                     "nothing: runs differ by an epoch; only the runs themselves tell", lo, hi});
  }
  return terms;
}

// The row's flags: what the forecast assumed or could not model.
std::vector<std::string> flags_of(const Forecast& f, const Measurement& base, const Assumptions& a, bool batch_measured) {
  const Target& target = f.target;
  std::vector<std::string> flags;
  if (!batch_measured) flags.push_back("batch extrapolated");
  const double step = f.parts.step_compute + f.parts.step_straggler + f.parts.step_allreduce;
  if (step > 0 && f.parts.step_allreduce > 0.25 * step) flags.push_back("network-bound");
  if (target.eval_ranks > 0) flags.push_back("dedicated evaluation ranks (" + std::to_string(target.eval_ranks) + "): outside the model");
  if (target.batch < 2) flags.push_back("batch " + fmt(target.batch, "%g") + " an accelerator: outside the model");
  if (target.network_assumed)
    flags.push_back("network assumed: " + fmt(target.network_gbps.value_or(a.network_gbps), "%g") + " Gb/s, " + target.network_basis);
  if (target.accelerators_per_node != base.accelerators_per_node)
    flags.push_back("ANOTHER NODE: " + std::to_string(target.accelerators_per_node) + " accelerators a node, measured " +
                      std::to_string(base.accelerators_per_node));
  return flags;
}

}  // namespace

Forecast predict(const std::vector<Measurement>& measured, const Target& target, const Assumptions& a) {
  Forecast f;
  f.target = target;
  if (measured.empty()) return f.refused = "nothing measured", f;
  const Measurement* base = &measured.front();
  for (const Measurement& m : measured) {
    if (model_key(m.accelerator_model) != model_key(base->accelerator_model) || m.accelerators_per_node != base->accelerators_per_node)
      return f.refused = "the measurements are of different nodes (" + base->label + ", " + m.label + ")", f;
    if (std::abs(m.batch - target.batch) < std::abs(base->batch - target.batch)) base = &m;
  }
  if (model_key(target.accelerator_model) != model_key(base->accelerator_model))
    return f.refused = "another accelerator (" + target.accelerator_model + ") than the one measured (" + base->accelerator_model + ")", f;
  if (target.global_batch <= 0 || !(target.batch > 0)) return f.refused = "no global or per-accelerator batch", f;
  // Epochs: the measured mean at a measured global batch, else the RCP's (which also bounds GB).
  const std::optional<RcpStats> rcp = rcp_at(target.global_batch);
  if (!rcp) return f.refused = "global batch " + std::to_string(target.global_batch) + " has no RCP (the checker's table ends there): its result would fail the RCP check", f;
  std::optional<double> measured_epochs;
  for (const Measurement& m : measured)
    if (m.global_batch == target.global_batch && m.epochs > 0) measured_epochs = m.epochs;
  const double epochs = measured_epochs.value_or(std::ceil(rcp->mean - 1e-9));
  const Setting nominal{.k = a.k, .efficiency = a.efficiency, .hop_s = a.hop_s, .epochs = epochs};
  const Model model{measured, target, a, *base};
  f.parts = model.parts(nominal);
  f.minutes = Model::minutes(f.parts);
  bool batch_measured = false;
  std::set<double> batches;
  for (const Measurement& m : measured) batches.insert(m.batch), batch_measured = batch_measured || m.batch == target.batch;
  f.batch_source = batch_measured ? "measured" : "extrapolated";

  const std::vector<Term> terms = band_terms(model, nominal, a, batch_measured, batches.size(), measured_epochs.has_value(), *rcp);
  double widest = -1;
  f.low = f.high = f.minutes;
  for (const Term& t : terms) {
    const double lo = Model::minutes(model.parts(t.low)), hi = Model::minutes(model.parts(t.high));
    f.low -= std::max(0.0, f.minutes - std::min(lo, hi));
    f.high += std::max(0.0, std::max(lo, hi) - f.minutes);
    if (std::abs(hi - lo) > widest) widest = std::abs(hi - lo), f.dominant = t.name, f.remedy = t.remedy;
  }

  f.flags = flags_of(f, *base, a, batch_measured);
  f.accelerator_hours = f.minutes / 60 * static_cast<double>(target.nodes * target.accelerators_per_node);
  return f;
}

Validation validate(const std::vector<SystemReport>& systems, const Assumptions& a) {
  using Key = std::tuple<std::string, std::string, std::string, int64_t>;
  std::map<Key, std::vector<const SystemReport*>> series;
  for (const SystemReport& s : systems)
    if (s.described && s.has_accelerators && s.score_minutes)
      series[{org_folder(s), s.submitter, model_key(s.accelerator_model), s.accelerators / s.nodes}].push_back(&s);
  Validation v;
  // A system whose description cannot be read belongs to no series it could be checked in: its
  // row says why.
  for (const SystemReport& s : systems)
    if (!s.described)
      v.rows.push_back({.series = "(no series)", .base = "-", .target = s.label,
                        .forecast = Forecast{.refused = s.description.problem}, .published = s.score_minutes});
  // The network of each node type (submitter, accelerator model and count a node) where some
  // description of it names one: for the descriptions of that node that name none.
  std::map<std::tuple<std::string, std::string, int64_t>, NetworkFallback> networks;
  for (const SystemReport& s : systems) {
    if (!s.described || !s.has_accelerators) continue;
    const NodeNetwork n = parse_host_networking(s.description.host_networking);
    const auto key = std::tuple(s.submitter, model_key(s.accelerator_model), s.accelerators / s.nodes);
    if (n.gbps && (!networks.contains(key) || *n.gbps > networks[key].gbps)) networks[key] = {*n.gbps, s.label};
  }
  std::set<std::pair<std::string, std::string>> seen;  // (base logs, target logs) already counted
  const auto logs_hash = [](const SystemReport& s) {
    std::string all;
    for (const RunSummary& r : s.runs) all += logging::sha256_file(r.file);
    return logging::sha256_hex(all);
  };
  for (const auto& [key, members] : series) {
    const SystemReport* base = nullptr;
    for (const SystemReport* m : members)
      if (!base || m->nodes < base->nodes || (m->nodes == base->nodes && *m->score_minutes < *base->score_minutes)) base = m;
    if (std::all_of(members.begin(), members.end(), [&](const SystemReport* m) { return m->nodes == base->nodes; })) continue;
    const std::string name = std::get<1>(key) + " " + base->accelerator_model + " x" + std::to_string(std::get<3>(key));
    std::optional<Measurement> m;
    std::string problem;
    try {
      m = measure(*base);
    } catch (const ForecastError& e) {
      problem = e.what();
    }
    const std::string base_hash = logs_hash(*base);
    std::vector<const SystemReport*> targets{base};
    for (const SystemReport* t : members)
      if (t->nodes > base->nodes) targets.push_back(t);
    std::sort(targets.begin() + 1, targets.end(), [](const auto* x, const auto* y) { return x->nodes < y->nodes; });
    for (const SystemReport* t : targets) {
      ValidationRow row{.series = name, .base = base->label, .target = t->label, .published = t->score_minutes, .self = t == base};
      try {
        const auto known = networks.find({t->submitter, model_key(t->accelerator_model), t->accelerators / t->nodes});
        const Target target = target_of(*t, a, known == networks.end() ? std::nullopt : std::optional(known->second));
        row.forecast = m ? predict({*m}, target, a) : Forecast{.refused = problem};
      } catch (const ForecastError& e) {
        row.forecast.refused = e.what();
      }
      if (row.forecast.refused.empty() && row.published) row.error = row.forecast.minutes / *row.published - 1;
      if (!row.self) row.republished = !seen.insert({base_hash, logs_hash(*t)}).second;
      if (!row.self && !row.republished && row.error) {
        ++v.pairs;
        v.within_15 += std::abs(*row.error) <= 0.15;
        v.within_25 += std::abs(*row.error) <= 0.25;
        v.in_band += row.forecast.low <= *row.published && *row.published <= row.forecast.high;
      }
      v.rows.push_back(std::move(row));
    }
  }
  return v;
}

}  // namespace mrcnn::analysis
