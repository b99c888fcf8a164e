#include "benchmark/analysis/rcp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mrcnn::analysis {

namespace {

// Reference epochs to converge, rcp_checker/training_3.1.0/rcps_maskrcnn.json (the same epochs in
// 2.0.0, 2.1.0 and 3.0.0; 1.0.0 and 1.1.0 have every point but batch 8).
struct Reference {
  int64_t bs;
  std::vector<double> epochs;
};
const std::vector<Reference>& references_310() {
  static const std::vector<Reference> refs = {
      {8, {13, 13, 12, 13, 13, 13, 13, 12, 13, 12}},
      {48, {14, 14, 14, 14, 14, 14, 14, 14, 14, 14}},
      {64, {14, 14, 14, 14, 14, 14, 14, 14, 14, 20}},
      {96, {14, 15, 14, 14, 14, 14, 14, 14, 14, 13, 14, 14, 15, 14, 14, 14, 14, 14, 14, 14}},
      {128, {14, 14, 14, 14, 14, 14, 14, 14, 14, 14}},
      {256, {17, 17, 18, 17, 17, 17, 17, 17, 17, 17}},
      {272, {18, 17, 17, 18, 17, 17, 17, 17, 17, 16}},
  };
  return refs;
}

const std::vector<Reference>& references(const std::string& ruleset) {
  static const std::vector<Reference> refs_100 = [] {
    std::vector<Reference> r = references_310();
    std::erase_if(r, [](const Reference& x) { return x.bs == 8; });
    return r;
  }();
  return ruleset == "1.0.0" || ruleset == "1.1.0" ? refs_100 : references_310();
}

constexpr int kSubmissionRuns = 5;  // Mask R-CNN
constexpr double kAlpha = 0.05;
constexpr double kTolerance = 0.0001;

// Regularized incomplete beta I_x(a, b), by its continued fraction (modified Lentz).
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(b, a, 1 - x);
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                                b * std::log1p(-x)) / a;
  constexpr double kTiny = 1e-300;
  double f = 1, c = 1, d = 0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double num;
    if (i == 0) num = 1;
    else if (i % 2 == 0) num = (m * (b - m) * x) / ((a + 2.0 * m - 1) * (a + 2.0 * m));
    else num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1));
    d = 1 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    d = 1 / d;
    c = 1 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    const double cd = c * d;
    f *= cd;
    if (std::fabs(1 - cd) < 1e-15) break;
  }
  return front * (f - 1);
}

double olympic_mean(std::vector<double> v, int drop) {
  std::sort(v.begin(), v.end());
  if (static_cast<int>(v.size()) <= 2 * drop) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(v.begin() + drop, v.end() - drop, 0.0) / static_cast<double>(v.size() - 2 * drop);
}

double population_stdev(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double s = 0;
  for (double x : v) s += (x - mean) * (x - mean);
  return std::sqrt(s / static_cast<double>(v.size()));
}

// One-sided p-value of the pooled two-sample t-test (scipy's ttest_ind_from_stats, equal_var).
double one_sided_p(double mean1, double std1, double n1, double mean2, double std2, double n2) {
  const double df = n1 + n2 - 2;
  const double svar = ((n1 - 1) * std1 * std1 + (n2 - 1) * std2 * std2) / df;
  const double t = (mean1 - mean2) / std::sqrt(svar * (1 / n1 + 1 / n2));
  const double two_sided = 2 * (1 - student_t_cdf(std::fabs(t), df));
  return t < 0 ? two_sided / 2 : 1 - two_sided / 2;
}

double min_acceptable_mean(double mean, double stdev, double num_samples_ref) {
  if (stdev == 0) return mean;
  const double n_subm = kSubmissionRuns - 2;
  double hi = mean, lo = 0, mid = (lo + hi) / 2;
  while (hi - lo > kTolerance) {
    if (one_sided_p(mid, stdev, num_samples_ref, mean, stdev, n_subm) > kAlpha) hi = mid;
    else lo = mid;
    mid = (lo + hi) / 2;
  }
  return mid;
}

double interp(double x, double x0, double x1, double y0, double y1) {
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  return y0 + (x - x0) * (y1 - y0) / (x1 - x0);
}

RcpStats interpolated(int64_t bs, const RcpStats& lo, const RcpStats& hi) {
  RcpStats r{.global_batch_size = bs, .interpolated = true};
  r.mean = interp(static_cast<double>(bs), static_cast<double>(lo.global_batch_size),
                  static_cast<double>(hi.global_batch_size), lo.mean, hi.mean);
  r.stdev = interp(static_cast<double>(bs), static_cast<double>(lo.global_batch_size),
                   static_cast<double>(hi.global_batch_size), lo.stdev, hi.stdev);
  r.min_epochs = min_acceptable_mean(r.mean, r.stdev, kSubmissionRuns * 2);
  r.max_speedup = r.mean / r.min_epochs;
  return r;
}

std::vector<RcpStats> all_rcps(const std::string& ruleset) {
  std::vector<RcpStats> out;
  for (const Reference& ref : references(ruleset)) {
    RcpStats s{.global_batch_size = ref.bs};
    s.mean = olympic_mean(ref.epochs, 1);
    s.stdev = population_stdev(ref.epochs);
    s.min_epochs = min_acceptable_mean(s.mean, s.stdev, static_cast<double>(ref.epochs.size()) - 2);
    s.max_speedup = s.mean / s.min_epochs;
    out.push_back(s);
  }
  return out;  // sorted by batch size
}

void evaluate(const RcpStats& rcp, std::vector<double> epochs, RcpVerdict& v) {
  v.rcp = rcp;
  v.has_rcp = true;
  v.submission_mean = olympic_mean(std::move(epochs), 1);
  v.norm_factor = std::max(1.0, rcp.mean / v.submission_mean);
  v.passed = v.submission_mean >= rcp.mean / rcp.max_speedup;
}

}  // namespace

double student_t_cdf(double t, double df) {
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t < 0 ? tail : 1 - tail;
}

std::vector<RcpStats> pruned_rcps(const std::string& ruleset) {
  std::vector<RcpStats> v = all_rcps(ruleset);
  const auto fastest = std::min_element(v.begin(), v.end(), [](const RcpStats& a, const RcpStats& b) { return a.mean < b.mean; });
  const int64_t fastest_bs = fastest->global_batch_size;
  std::erase_if(v, [&](const RcpStats& r) { return r.global_batch_size < fastest_bs; });
  // Drop every point that converges slower than the interpolation of its neighbours.
  for (size_t i = 1; i + 1 < v.size();) {
    const double expected = interp(static_cast<double>(v[i].global_batch_size), static_cast<double>(v[i - 1].global_batch_size),
                                   static_cast<double>(v[i + 1].global_batch_size), v[i - 1].mean, v[i + 1].mean);
    if (v[i].mean > expected) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));  // and look at the point now at i
    } else {
      ++i;
    }
  }
  return v;
}

std::optional<RcpStats> rcp_at(int64_t global_batch_size, const std::string& ruleset) {
  const std::vector<RcpStats> rcps = pruned_rcps(ruleset);
  const RcpStats* below = nullptr;
  const RcpStats* above = nullptr;
  for (const RcpStats& r : rcps) {
    if (r.global_batch_size == global_batch_size) return r;
    if (r.global_batch_size < global_batch_size && (!below || r.global_batch_size > below->global_batch_size)) below = &r;
    if (r.global_batch_size > global_batch_size && (!above || r.global_batch_size < above->global_batch_size)) above = &r;
  }
  if (below && above) return interpolated(global_batch_size, *below, *above);
  if (above) return rcps.front();
  return std::nullopt;
}

namespace {

// What the runs logged: "256 x4, 128 x1" (most runs first), a run without one as "not logged".
std::string batch_sizes_found(const std::vector<RcpRun>& runs) {
  std::vector<std::pair<int64_t, int>> counts;  // in order of first appearance
  for (const RcpRun& r : runs) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == r.global_batch_size; });
    if (it == counts.end()) counts.emplace_back(r.global_batch_size, 1);
    else ++it->second;
  }
  std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [bs, n] : counts)
    out += (out.empty() ? "" : ", ") + (bs == -1 ? std::string("not logged") : std::to_string(bs)) + " x" + std::to_string(n);
  return out;
}

}  // namespace

RcpVerdict rcp_check(const std::vector<RcpRun>& runs, const std::string& ruleset) {
  RcpVerdict v;
  v.ruleset = ruleset;
  int64_t bs = -1;
  int not_converged = 0;
  std::vector<double> epochs;
  for (const RcpRun& r : runs) {
    if (bs == -1) {
      bs = r.global_batch_size;
    } else if (r.global_batch_size != bs) {
      // The official checker gives up here ("Could not detect global_batch_size", or a crash):
      // say what the runs logged.
      v.message = "global batch size differs between runs (" + batch_sizes_found(runs) + ")";
      return v;
    }
    epochs.push_back(r.converged ? r.epochs : 1e9);
    not_converged += r.converged ? 0 : 1;
  }
  if (bs == -1) return v.message = "Could not detect global_batch_size", v;
  if (not_converged > 1) return v.message = "Insufficient convergence", v;
  const std::vector<RcpStats> rcps = pruned_rcps(ruleset);
  const std::string missing = "Missing RCP, please submit RCP with BS = " + std::to_string(bs);
  const RcpStats* exact = nullptr;
  const RcpStats* below = nullptr;  // the largest batch size under bs
  const RcpStats* above = nullptr;  // the smallest over it
  for (const RcpStats& r : rcps) {
    if (r.global_batch_size == bs) exact = &r;
    if (r.global_batch_size < bs && (!below || r.global_batch_size > below->global_batch_size)) below = &r;
    if (r.global_batch_size > bs && (!above || r.global_batch_size < above->global_batch_size)) above = &r;
  }
  if (exact) {
    v.message = "RCP found";
    evaluate(*exact, epochs, v);
  } else if (below && above) {
    v.message = "RCP Interpolation";
    evaluate(interpolated(bs, *below, *above), epochs, v);
  } else if (below) {
    v.message = missing;
  } else if (above) {
    evaluate(rcps.front(), epochs, v);
    v.message = v.passed ? "RCP not found but slower convergence on smaller batch size" : missing;
  } else {
    v.message = "Cannot find any RCPs";
  }
  return v;
}

}  // namespace mrcnn::analysis
