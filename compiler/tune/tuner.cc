#include "compiler/tune/tuner.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/tune/cost_model.h"

namespace kiln::tune {
namespace {

using arith::ExprKind;
using arith::PrimExpr;
using schedule::SearchSpace;
using schedule::Trace;
using schedule::TunableKernel;
using Clock = std::chrono::steady_clock;

double ExprFlops(const PrimExpr& e) {
  if (!e) return 0;
  double flops = 0;
  if (e->dtype.is_float() && (arith::IsBinary(e->kind) || e->kind == ExprKind::kCall)) flops = 1;
  for (const PrimExpr& arg : e->args) flops += ExprFlops(arg);
  return flops;
}

double StmtFlops(const ir::Stmt& s, const std::map<std::string, int64_t>& values) {
  if (!s) return 0;
  auto lookup = [&](const arith::ExprNode& var) -> std::optional<int64_t> {
    auto it = values.find(var.name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
  switch (s->kind) {
    case ir::StmtKind::kFor: {
      absl::StatusOr<int64_t> extent = arith::EvaluateInt(s->extent, lookup);
      return (extent.ok() ? std::max<int64_t>(*extent, 0) : 1) * StmtFlops(s->body, values);
    }
    case ir::StmtKind::kSeq: {
      double total = 0;
      for (const ir::Stmt& child : s->seq) total += StmtFlops(child, values);
      return total;
    }
    case ir::StmtKind::kIfThenElse:
      return std::max(StmtFlops(s->then_case, values), StmtFlops(s->else_case, values));
    case ir::StmtKind::kLet:
      return ExprFlops(s->value) + StmtFlops(s->body, values);
    case ir::StmtKind::kAllocate:
      return StmtFlops(s->body, values);
    default:
      return ExprFlops(s->value);
  }
}

// The module the search schedules again and again: the graph functions (the kernel's call
// site binds its constants) and the one kernel.
ir::IRModule KernelModule(const ir::IRModule& module, const std::string& kernel) {
  ir::IRModule reduced = module;
  reduced.prim_funcs.clear();
  reduced.prim_funcs.emplace(kernel, module.prim_funcs.at(kernel));
  return reduced;
}

class KernelSearch {
 public:
  KernelSearch(const ir::IRModule& module, const TunableKernel& kernel, const ir::Target& target,
               const std::map<std::string, int64_t>& scalars, const TuneOptions& options,
               std::mt19937_64& random, bool bucket)
      : bucket_(bucket),
        module_(KernelModule(module, kernel.kernel)),
        kernel_(kernel),
        target_(target),
        scalars_(scalars),
        options_(options),
        random_(random) {}

  // Measures each space's default schedule, then the spaces' seeds, then more candidates, up
  // to `budget` in all, while `keep_going` says so; `on_trial` hears each.
  absl::StatusOr<TuneResult> Run(int budget, const std::function<bool()>& keep_going,
                                 const std::function<void(const TuneResult&)>& on_trial) {
    TuneResult result;
    result.kernel = kernel_;
    result.flops = StmtFlops(module_.prim_funcs.at(kernel_.kernel).body, scalars_);
    KILN_ASSIGN_OR_RETURN(reference_, Scheduled(nullptr));
    // The reference runs once; its time (compiling included) sets a floor under the
    // candidates' timeout, so a kernel whose every run is long is not mistaken for a runaway.
    // Compiling a candidate is bounded by measure.compile_timeout alone.
    MeasureOptions reference_options = options_.measure;
    reference_options.timeout *= 10;
    const Clock::time_point start = Clock::now();
    absl::StatusOr<ReferenceResult> reference =
        RunReferenceIsolated(reference_, kernel_.kernel, scalars_, reference_options);
    if (!reference.ok()) {
      result.failures.push_back(std::string(reference.status().message()));
      return result;  // not tunable here; the default schedule stays
    }
    reference_result_ = *std::move(reference);
    candidate_options_ = options_.measure;
    candidate_options_.timeout =
        std::max(candidate_options_.timeout,
                 4 * std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
    std::vector<Trace> first;
    for (const SearchSpace& space : kernel_.spaces) first.push_back(space.Default());
    for (const SearchSpace& space : kernel_.spaces) {
      for (const Trace& seed : space.seeds) {
        if (space.Contains(seed) && std::find(first.begin(), first.end(), seed) == first.end()) {
          first.push_back(seed);
        }
      }
    }
    while (result.trials < budget && keep_going()) {
      std::optional<Trace> next;
      if (!first.empty()) {
        next = first.front();
        first.erase(first.begin());
      } else {
        next = Propose();
      }
      if (!next) break;  // the space is exhausted
      KILN_ASSIGN_OR_RETURN(bool measured, Try(*next, result));
      if (measured) on_trial(result);
    }
    if (options_.confirm_rounds > 0 && keep_going()) KILN_RETURN_IF_ERROR(Confirm(result));
    return result;
  }

 private:
  struct Trial {
    Trace trace;
    double ns = 0;  // 0: failed
  };

  absl::StatusOr<ir::IRModule> Scheduled(const Trace* trace) const {
    const std::string& name = kernel_.kernel;
    return schedule::Schedule(module_, target_,
                              [&](const TunableKernel& k) -> std::optional<Trace> {
                                if (trace && k.kernel == name) return *trace;
                                return std::nullopt;
                              });
  }

  // A bucket's schedule shares the kernel's parameters with the fallback (the default), so
  // it must pack the weights the same way (schedule.cc WithBuckets leaves it out otherwise).
  bool PacksLikeTheReference(const ir::IRModule& candidate) const {
    auto ours = ConstantArguments(candidate, kernel_.kernel);
    auto theirs = ConstantArguments(reference_, kernel_.kernel);
    if (ours.size() != theirs.size()) return false;
    for (const auto& [index, data] : ours) {
      auto it = theirs.find(index);
      if (it == theirs.end() || it->second->shape != data->shape ||
          it->second->bytes != data->bytes) {
        return false;
      }
    }
    return true;
  }

  // Measures `trace` into `result`; false when it was not measured (unusable here).
  absl::StatusOr<bool> Try(const Trace& trace, TuneResult& result) {
    KILN_ASSIGN_OR_RETURN(ir::IRModule candidate, Scheduled(&trace));
    if (bucket_ && !PacksLikeTheReference(candidate)) {
      tried_.insert(trace.ToJson());  // no trial spent
      return false;
    }
    KILN_ASSIGN_OR_RETURN(Measurement m,
                          MeasureKernelIsolated(candidate, reference_, kernel_.kernel, scalars_,
                                                candidate_options_, &reference_result_));
    ++result.trials;
    result.tried.push_back(trace);
    tried_.insert(trace.ToJson());
    if (trace == kernel_.spaces.front().Default()) result.default_measurement = m;
    if (!m.ok) {
      ++result.failed;
      result.failures.push_back(trace.ToJson() + ": " + m.failure);
      return true;
    }
    trials_.push_back({trace, static_cast<double>(m.median_ns)});
    if (!result.best_measurement.ok || m.median_ns < result.best_measurement.median_ns) {
      result.best = trace;
      result.best_measurement = m;
    }
    return true;
  }

  // The search compares trials measured seconds apart, on a machine whose speed drifts by more
  // than good schedules differ, and its fastest is the luckiest of many noisy times. So its
  // kConfirmed fastest trials and the default run again in turns, and the fastest of that
  // comparison is the result, with its times and the default's from it. Where the comparison
  // fails (a candidate that ran alone crashes beside the others), the search's pick stands.
  absl::Status Confirm(TuneResult& result) {
    constexpr size_t kConfirmed = 3;
    std::vector<Trial> ranked = trials_;
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Trial& a, const Trial& b) { return a.ns < b.ns; });
    std::vector<Trace> traces;
    for (size_t i = 0; i < std::min(ranked.size(), kConfirmed); ++i) {
      traces.push_back(ranked[i].trace);
    }
    const Trace default_trace = kernel_.spaces.front().Default();
    const bool default_ran = std::any_of(trials_.begin(), trials_.end(),
                                         [&](const Trial& t) { return t.trace == default_trace; });
    if (default_ran && std::find(traces.begin(), traces.end(), default_trace) == traces.end()) {
      traces.push_back(default_trace);
    }
    if (traces.size() < 2) return absl::OkStatus();
    std::vector<ir::IRModule> candidates;
    for (const Trace& trace : traces) {
      KILN_ASSIGN_OR_RETURN(ir::IRModule candidate, Scheduled(&trace));
      candidates.push_back(std::move(candidate));
    }
    absl::StatusOr<std::vector<Measurement>> compared = CompareKernelsIsolated(
        candidates, kernel_.kernel, scalars_, candidate_options_, options_.confirm_rounds);
    if (!compared.ok()) {
      result.failures.push_back(std::string(compared.status().message()));
      return absl::OkStatus();
    }
    std::optional<size_t> best;
    for (size_t i = 0; i < traces.size(); ++i) {
      const Measurement& m = (*compared)[i];
      if (!m.ok) {
        result.failures.push_back(traces[i].ToJson() + ": compared again: " + m.failure);
        continue;
      }
      if (traces[i] == default_trace) result.default_measurement = m;
      if (!best || m.median_ns < (*compared)[*best].median_ns) best = i;
    }
    if (best) {
      result.best = traces[*best];
      result.best_measurement = (*compared)[*best];
    }
    return absl::OkStatus();
  }

  const SearchSpace& SpaceOf(const Trace& trace) const {
    for (const SearchSpace& space : kernel_.spaces) {
      if (space.rule == trace.rule) return space;
    }
    return kernel_.spaces.front();
  }

  int64_t Pick(const std::vector<int64_t>& choices) {
    return choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(random_)];
  }

  Trace RandomTrace() {
    const SearchSpace& space =
        kernel_
            .spaces[std::uniform_int_distribution<size_t>(0, kernel_.spaces.size() - 1)(random_)];
    Trace trace{space.rule, {}};
    for (const schedule::Knob& knob : space.knobs) {
      trace.decisions.push_back({knob.name, Pick(knob.choices)});
    }
    return trace;
  }

  // One or two knobs of `parent` changed.
  Trace Mutate(const Trace& parent) {
    const SearchSpace& space = SpaceOf(parent);
    Trace child = parent;
    if (space.knobs.empty()) return child;
    const int changes = std::uniform_int_distribution<int>(1, 2)(random_);
    for (int c = 0; c < changes; ++c) {
      size_t k = std::uniform_int_distribution<size_t>(0, space.knobs.size() - 1)(random_);
      child.decisions[k].value = Pick(space.knobs[k].choices);
    }
    return child;
  }

  // Each knob from one parent or the other (same rule).
  Trace Crossover(const Trace& a, const Trace& b) {
    if (a.rule != b.rule) return a;
    Trace child = a;
    for (size_t k = 0; k < child.decisions.size(); ++k) {
      if (random_() & 1) child.decisions[k] = b.decisions[k];
    }
    return child;
  }

  // The next candidate: from a pool of mutations and crossovers of the fastest trials (and
  // some random ones), the one the cost model ranks first; now and then a random one of the
  // pool, so a wrong model cannot keep the search away from a region.
  std::optional<Trace> Propose() {
    std::vector<Trial> ranked = trials_;
    std::sort(ranked.begin(), ranked.end(),
              [](const Trial& a, const Trial& b) { return a.ns < b.ns; });
    ranked.resize(std::min<size_t>(ranked.size(), 4));
    std::vector<Trace> pool;
    std::set<std::string> seen = tried_;
    for (int attempt = 0; attempt < 512 && pool.size() < 64; ++attempt) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(random_);
      Trace t;
      if (ranked.empty() || kind < 2) {
        t = RandomTrace();
      } else if (kind < 3 && ranked.size() > 1) {
        t = Crossover(ranked[random_() % ranked.size()].trace,
                      ranked[random_() % ranked.size()].trace);
      } else {
        t = Mutate(ranked[random_() % ranked.size()].trace);
      }
      if (seen.insert(t.ToJson()).second) pool.push_back(std::move(t));
    }
    if (pool.empty()) return std::nullopt;
    if (trials_.size() < 3 || std::uniform_real_distribution<double>(0, 1)(random_) < 0.2) {
      return pool[random_() % pool.size()];
    }
    RidgeModel model;
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    for (const Trial& trial : trials_) {
      x.push_back(TraceFeatures(kernel_.spaces, trial.trace));
      y.push_back(std::log(trial.ns));
    }
    model.Fit(x, y);
    return *std::min_element(pool.begin(), pool.end(), [&](const Trace& a, const Trace& b) {
      return model.Predict(TraceFeatures(kernel_.spaces, a)) <
             model.Predict(TraceFeatures(kernel_.spaces, b));
    });
  }

  const bool bucket_;
  const ir::IRModule module_;
  const TunableKernel& kernel_;
  const ir::Target& target_;
  const std::map<std::string, int64_t>& scalars_;
  const TuneOptions& options_;
  std::mt19937_64& random_;
  ir::IRModule reference_;
  ReferenceResult reference_result_;
  MeasureOptions candidate_options_;
  std::vector<Trial> trials_;  // the ones that ran
  std::set<std::string> tried_;
};

// The values of `func`'s scalars: the user's, else the default.
std::map<std::string, int64_t> ScalarValues(const ir::PrimFunc& func, const TuneOptions& options) {
  std::map<std::string, int64_t> values;
  for (const PrimExpr& s : func.scalars) {
    auto it = options.symbol_values.find(s->name);
    values[s->name] = it != options.symbol_values.end() ? it->second : options.default_symbol_value;
  }
  return values;
}

// One search: a kernel, for all values of its symbols or for one bucket.
struct Task {
  TunableKernel kernel;
  std::string bucket;
  std::map<std::string, int64_t> scalars;  // the values it is measured at
};

// The values to tune `kernel` at, one bucket each; empty: once for all values.
std::vector<int64_t> BucketValues(const TunableKernel& kernel, const TuneOptions& options) {
  if (kernel.bucket_symbol.empty()) return {};
  if (!options.bucket_values.empty()) return options.bucket_values;
  auto bound = options.symbol_bounds.find(kernel.bucket_symbol);
  if (!options.auto_buckets || bound == options.symbol_bounds.end()) return {};
  std::vector<int64_t> values;
  for (int64_t v = 1; v < bound->second; v *= 2) values.push_back(v);
  values.push_back(bound->second);
  return values;
}

std::vector<Task> TasksOf(const TunableKernel& kernel, const ir::PrimFunc& func,
                          const TuneOptions& options) {
  const std::map<std::string, int64_t> scalars = ScalarValues(func, options);
  const std::vector<int64_t> buckets = BucketValues(kernel, options);
  if (buckets.empty()) return {{kernel, "", scalars}};
  std::vector<Task> tasks;
  for (int64_t value : buckets) {
    Task task{kernel, absl::StrCat(value), scalars};
    task.scalars[kernel.bucket_symbol] = value;
    tasks.push_back(std::move(task));
  }
  return tasks;
}

}  // namespace

std::string DisplayName(const TuneResult& result) {
  if (result.bucket.empty()) return result.kernel.kernel;
  return absl::StrCat(result.kernel.kernel, " (", result.kernel.bucket_symbol, "=", result.bucket,
                      ")");
}

double CountFlops(const ir::PrimFunc& func, const std::map<std::string, int64_t>& values) {
  return StmtFlops(func.body, values);
}

absl::StatusOr<std::vector<TuneResult>> TuneModule(
    const ir::IRModule& module, const ir::Target& target, const TuneOptions& options,
    const std::function<bool(const TunableKernel&, const std::string& bucket)>& skip,
    const std::function<void(const TuneResult&)>& on_result,
    const std::function<void(const TuneProgress&)>& progress) {
  std::vector<Task> kernels;
  std::set<std::string> workloads;
  for (TunableKernel& k : schedule::TunableKernels(module, target)) {
    if (!workloads.insert(k.workload).second) continue;
    for (Task& task : TasksOf(k, module.prim_funcs.at(k.kernel), options)) {
      if (!skip || !skip(task.kernel, task.bucket)) kernels.push_back(std::move(task));
    }
  }
  const int budget = options.trials > 0
                         ? options.trials
                         : options.trials_per_kernel * static_cast<int>(kernels.size());
  const Clock::time_point start = Clock::now();
  auto time_left = [&]() -> std::optional<double> {
    if (options.time_limit.count() <= 0) return std::nullopt;
    return std::chrono::duration<double>(start + options.time_limit - Clock::now()).count();
  };
  std::mt19937_64 random(options.seed);
  std::vector<TuneResult> results;
  int done = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const int kernels_left = static_cast<int>(kernels.size() - i);
    const int kernel_budget =
        std::min(options.trials_per_kernel, std::max(1, (budget - done) / kernels_left));
    if (done >= budget) break;
    const std::map<std::string, int64_t>& scalars = kernels[i].scalars;
    auto keep_going = [&] {
      if (options.cancelled && options.cancelled()) return false;
      std::optional<double> left = time_left();
      return !left || *left > 0;
    };
    const int done_before = done;
    auto on_trial = [&](const TuneResult& r) {
      done = done_before + r.trials;
      if (!progress) return;
      std::string name = kernels[i].kernel.kernel;
      if (!kernels[i].bucket.empty()) {
        absl::StrAppend(&name, " (", kernels[i].kernel.bucket_symbol, "=", kernels[i].bucket, ")");
      }
      TuneProgress p{name, static_cast<int>(i + 1), static_cast<int>(kernels.size()), done, budget};
      if (r.best_measurement.ok) p.best_gflops = r.flops / r.best_measurement.median_ns;
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      p.seconds_left = elapsed / done * (budget - done);
      if (std::optional<double> left = time_left())
        p.seconds_left = std::min(p.seconds_left, *left);
      progress(p);
    };
    KernelSearch search(module, kernels[i].kernel, target, scalars, options, random,
                        !kernels[i].bucket.empty());
    KILN_ASSIGN_OR_RETURN(TuneResult result, search.Run(kernel_budget, keep_going, on_trial));
    result.bucket = kernels[i].bucket;
    if (result.best_measurement.ok && on_result) on_result(result);
    results.push_back(std::move(result));
    if (!keep_going()) break;
  }
  return results;
}

}  // namespace kiln::tune
