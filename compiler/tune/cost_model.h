// The tuner's cost model: ridge regression from a schedule's features to the log of its
// measured time. Small and fast to refit after every batch of trials; it only has to rank
// unmeasured candidates well enough that the measurements go to promising ones.
#pragma once

#include <vector>

#include "compiler/schedule/trace.h"

namespace kiln::tune {

// The features of `trace`, a schedule from one of `spaces`: which rule it is, and per knob
// which choice it took (one-hot) and the log2 of its value. Every trace of the same spaces
// has the same number of features.
std::vector<double> TraceFeatures(const std::vector<schedule::SearchSpace>& spaces,
                                  const schedule::Trace& trace);

class RidgeModel {
 public:
  explicit RidgeModel(double lambda = 1.0) : lambda_(lambda) {}

  // Fits weights to predict `y` from `x` (rows of equal length), with an intercept.
  void Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);
  double Predict(const std::vector<double>& x) const;
  bool fitted() const { return !weights_.empty(); }

 private:
  double lambda_;
  std::vector<double> weights_;  // intercept first
};

}  // namespace kiln::tune
