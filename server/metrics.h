// kilnd's Prometheus metrics: a small thread-safe registry of counters, gauges and histograms
// with labels, rendered in the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Written here because no
// client library ships with Debian 12. One Metrics object is owned by the server (not a
// global), so each test gets a fresh one.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cache/store.h"

namespace kiln::server {

// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// Upper bounds (seconds) of the histograms' buckets, for RPC and job durations.
const std::vector<double>& DurationBuckets();

// A counter with labels: only goes up.
class CounterFamily {
 public:
  void Add(const LabelValues& labels = {}, double n = 1);
  double Value(const LabelValues& labels = {}) const;  // 0 if never added to

 private:
  friend class MetricsRegistry;
  explicit CounterFamily(size_t label_count) : label_count_(label_count) {}
  const size_t label_count_;
  mutable absl::Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// A gauge with labels: a value that goes up and down.
class GaugeFamily {
 public:
  void Set(const LabelValues& labels, double value);
  void Add(const LabelValues& labels, double delta);
  double Value(const LabelValues& labels = {}) const;

 private:
  friend class MetricsRegistry;
  explicit GaugeFamily(size_t label_count) : label_count_(label_count) {}
  const size_t label_count_;
  mutable absl::Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// A histogram with labels and fixed buckets (cumulative when rendered, with _sum and _count).
class HistogramFamily {
 public:
  void Observe(const LabelValues& labels, double value);
  int64_t Count(const LabelValues& labels = {}) const;

 private:
  friend class MetricsRegistry;
  struct Series {
    std::vector<int64_t> counts;  // per bucket, not cumulative; one more for +Inf
    double sum = 0;
    int64_t count = 0;
  };
  HistogramFamily(size_t label_count, std::vector<double> bounds)
      : label_count_(label_count), bounds_(std::move(bounds)) {}
  const size_t label_count_;
  const std::vector<double> bounds_;  // sorted upper bounds, +Inf implied
  mutable absl::Mutex mu_;
  std::map<LabelValues, Series> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;
  virtual ~MetricsRegistry() = default;

  // Registering a name twice, or an invalid name, is a programming error: the process aborts
  // with a message naming it. The returned families live as long as the registry.
  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {});
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names,
                                std::vector<double> bounds = DurationBuckets());
  // Metrics whose value lives elsewhere (queue depth, bytes stored), read at every Render.
  // The callback runs without the registry's lock but never concurrently with another
  // Render; it must not block for long.
  void AddGaugeCallback(const std::string& name, const std::string& help,
                        std::function<double()> read);
  void AddCounterCallback(const std::string& name, const std::string& help,
                          std::function<double()> read);
  // Runs first at every Render, before the callbacks: for taking one snapshot that several
  // callbacks read from.
  void AddScrapeHook(std::function<void()> hook);

  // The text exposition format: families sorted by name, each with HELP and TYPE once, its
  // series sorted by label values.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    std::string help;
    Type type;
    std::vector<std::string> label_names;
    std::unique_ptr<CounterFamily> counter;
    std::unique_ptr<GaugeFamily> gauge;
    std::unique_ptr<HistogramFamily> histogram;
    std::function<double()> read;  // callback families: counter or gauge without labels
  };
  Family& Register(const std::string& name, const std::string& help, Type type,
                   std::vector<std::string> label_names) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex render_mu_;  // one Render at a time, so hooks and callbacks never race
  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
};

// Kiln's metrics, typed so call sites stay short: `metrics.grpc_requests.Add({method, code})`.
class Metrics : public MetricsRegistry {
 public:
  Metrics();

  // Filled by MetricsInterceptor.
  CounterFamily& grpc_requests;           // kiln_grpc_requests_total{method,code}
  HistogramFamily& grpc_request_seconds;  // kiln_grpc_request_duration_seconds{method}
  // Jobs: stage "queued" (submit to start), "running" (start to end), or a compiler stage.
  HistogramFamily& job_seconds;  // kiln_job_duration_seconds{kind,stage}
  CounterFamily& jobs;           // kiln_jobs_total{kind,state}: finished jobs by final state
  CounterFamily& tuning_trials;  // kiln_tuning_trials_total: candidates measured

  // kiln_cache_{hits,misses,evictions,quarantined}_total and kiln_cache_bytes,
  // kiln_cache_artifacts, from one store.Stats() per scrape. The counters live in the
  // database, so they survive restarts. `store` must outlive this object's Render calls.
  void ExportCacheStats(cache::Store& store);
};

}  // namespace kiln::server
