#include "compiler/tune/cost_model.h"

#include <algorithm>
#include <cmath>

#include "compiler/arith/check.h"

namespace kiln::tune {

std::vector<double> TraceFeatures(const std::vector<schedule::SearchSpace>& spaces,
                                  const schedule::Trace& trace) {
  std::vector<double> features;
  for (const schedule::SearchSpace& space : spaces) {
    const bool mine = space.rule == trace.rule;
    features.push_back(mine ? 1 : 0);
    for (const schedule::Knob& knob : space.knobs) {
      const int64_t value = mine ? trace.Get(knob.name, knob.choices.front()) : 0;
      features.push_back(mine ? std::log2(1.0 + std::abs(static_cast<double>(value))) : 0);
      for (int64_t choice : knob.choices) features.push_back(mine && value == choice ? 1 : 0);
    }
  }
  return features;
}

void RidgeModel::Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  KILN_CHECK(!x.empty() && x.size() == y.size());
  const size_t n = x.front().size() + 1;  // with the intercept
  // Normal equations (X^T X + lambda I) w = X^T y, solved by Gaussian elimination with
  // partial pivoting; the intercept is not penalized.
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0));
  for (size_t row = 0; row < x.size(); ++row) {
    std::vector<double> v = {1};
    v.insert(v.end(), x[row].begin(), x[row].end());
    KILN_CHECK_EQ(v.size(), n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) a[i][j] += v[i] * v[j];
      a[i][n] += v[i] * y[row];
    }
  }
  for (size_t i = 1; i < n; ++i) a[i][i] += lambda_;
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    if (std::fabs(a[col][col]) < 1e-12) continue;  // a feature no sample has
    for (size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c <= n; ++c) a[r][c] -= f * a[col][c];
    }
  }
  weights_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(a[i][i]) >= 1e-12) weights_[i] = a[i][n] / a[i][i];
  }
}

double RidgeModel::Predict(const std::vector<double>& x) const {
  KILN_CHECK(fitted() && x.size() + 1 == weights_.size());
  double sum = weights_[0];
  for (size_t i = 0; i < x.size(); ++i) sum += weights_[i + 1] * x[i];
  return sum;
}

}  // namespace kiln::tune
