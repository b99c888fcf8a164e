#include "benchmark/analysis/numbers.h"

#include <algorithm>
#include <cstdio>

namespace mrcnn::analysis {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string format_number(double v, const char* format) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

}  // namespace mrcnn::analysis
