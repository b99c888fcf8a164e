// The evaluator's parameters and numbers shared with numpy (linspace, pairwise sums), the IoU type
// names, and the 12-line summary pycocotools prints.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "eval/coco_eval.h"
#include "eval/coco_eval_detail.h"

namespace mrcnn::eval {

const char* to_string(IouType t) { return t == IouType::kBbox ? "bbox" : "segm"; }

IouType parse_iou_type(std::string_view s) {
  if (s == "bbox") return IouType::kBbox;
  if (s == "segm") return IouType::kSegm;
  throw std::invalid_argument("unknown IoU type '" + std::string(s) + "': expected bbox or segm");
}

std::vector<double> numpy_linspace(double start, double stop, size_t num) {
  std::vector<double> y(num);
  if (num == 0) return y;
  if (num == 1) {
    y[0] = start;
    return y;
  }
  const double div = static_cast<double>(num - 1);
  const double delta = stop - start;
  const double step = delta / div;
  for (size_t i = 0; i < num; ++i) {
    // numpy: arange * step + start (two separate roundings), or arange / div * delta if step == 0
    y[i] = step == 0 ? static_cast<double>(i) / div * delta + start : static_cast<double>(i) * step + start;
  }
  y[num - 1] = stop;
  return y;
}

double numpy_pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_pairwise_sum(a, n2) + numpy_pairwise_sum(a + n2, n - n2);
}

EvalParams EvalParams::coco_default() {
  EvalParams p;
  // int(np.round((0.95 - .5) / .05)) + 1 == 10 and int(np.round((1.00 - .0) / .01)) + 1 == 101
  p.iou_thresholds = numpy_linspace(.5, 0.95, 10);
  p.recall_thresholds = numpy_linspace(.0, 1.00, 101);
  return p;
}

// ---- summary --------------------------------------------------------------------------------------

namespace {

struct SummarySpec {
  bool ap;
  double iou;  // < 0: all thresholds
  const char* area;
  int max_dets_index;
};
constexpr SummarySpec kSummary[12] = {
    {true, -1, "all", 2},    {true, .5, "all", 2},    {true, .75, "all", 2},
    {true, -1, "small", 2},  {true, -1, "medium", 2}, {true, -1, "large", 2},
    {false, -1, "all", 0},   {false, -1, "all", 1},   {false, -1, "all", 2},
    {false, -1, "small", 2}, {false, -1, "medium", 2}, {false, -1, "large", 2},
};

// _summarize(): the mean of the selected entries > -1 (numpy's pairwise mean), -1 if none.
double summarize_one(const EvalResult& r, const EvalParams& p, const SummarySpec& s) {
  const uint32_t max_det = p.max_dets[static_cast<size_t>(s.max_dets_index)];
  std::vector<size_t> ts, as, ms;
  for (size_t t = 0; t < p.iou_thresholds.size(); ++t) {
    if (s.iou < 0 || p.iou_thresholds[t] == s.iou) ts.push_back(t);
  }
  for (size_t a = 0; a < p.area_labels.size(); ++a) {
    if (p.area_labels[a] == s.area) as.push_back(a);
  }
  for (size_t m = 0; m < p.max_dets.size(); ++m) {
    if (p.max_dets[m] == max_det) ms.push_back(m);
  }
  // numpy's s[:, :, :, aind, mind] pairs aind and mind elementwise (both of length 1 here).
  const size_t pairs = std::min(as.size(), ms.size());
  std::vector<double> vals;
  if (s.ap) {
    for (size_t t : ts)
      for (size_t ri = 0; ri < r.R; ++ri)
        for (size_t k = 0; k < r.K; ++k)
          for (size_t j = 0; j < pairs; ++j) {
            const double v = r.precision[(((t * r.R + ri) * r.K + k) * r.A + as[j]) * r.M + ms[j]];
            if (v > -1) vals.push_back(v);
          }
  } else {
    for (size_t t : ts)
      for (size_t k = 0; k < r.K; ++k)
        for (size_t j = 0; j < pairs; ++j) {
          const double v = r.recall[((t * r.K + k) * r.A + as[j]) * r.M + ms[j]];
          if (v > -1) vals.push_back(v);
        }
  }
  if (vals.empty()) return -1;
  return numpy_pairwise_sum(vals.data(), vals.size()) / static_cast<double>(vals.size());
}

}  // namespace

std::string EvalResult::summary() const {
  const EvalParams p = EvalParams::coco_default();
  std::string out;
  char line[160];
  for (const SummarySpec& s : kSummary) {
    char iou[32];
    if (s.iou < 0) {
      std::snprintf(iou, sizeof iou, "%0.2f:%0.2f", p.iou_thresholds.front(), p.iou_thresholds.back());
    } else {
      std::snprintf(iou, sizeof iou, "%0.2f", s.iou);
    }
    const size_t i = static_cast<size_t>(&s - kSummary);
    std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3u ] = %0.3f\n",
                  s.ap ? "Average Precision" : "Average Recall", s.ap ? "(AP)" : "(AR)", iou,
                  s.area, p.max_dets[static_cast<size_t>(s.max_dets_index)], stats[i]);
    out += line;
  }
  return out;
}

void summarize_stats(EvalResult& r, const EvalParams& p) {
  for (size_t i = 0; i < 12; ++i) r.stats[i] = summarize_one(r, p, kSummary[i]);
}

}  // namespace mrcnn::eval
