#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// Registration mistakes are the program's, found by the first test that builds a Metrics.
[[noreturn]] void Die(const std::string& message) {
  std::cerr << "metrics: " << message << std::endl;
  std::abort();
}

bool IsName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void CheckLabels(const LabelValues& labels, size_t expected) {
  if (labels.size() != expected) {
    Die(absl::StrCat("got ", labels.size(), " label values for ", expected, " label names"));
  }
}

// Go's ParseFloat reads what to_chars writes: the shortest form that round-trips.
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// Label values escape backslash, double quote and newline; HELP escapes backslash and newline.
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}`, with `extra` (already formatted, e.g. le="0.5") last; "" without labels.
std::string FormatLabels(const std::vector<std::string>& names, const LabelValues& values,
                         const std::string& extra = "") {
  std::vector<std::string> pairs;
  for (size_t i = 0; i < names.size(); ++i) {
    pairs.push_back(absl::StrCat(names[i], "=\"", Escape(values[i], true), "\""));
  }
  if (!extra.empty()) pairs.push_back(extra);
  if (pairs.empty()) return "";
  return absl::StrCat("{", absl::StrJoin(pairs, ","), "}");
}

}  // namespace

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> buckets = {0.005, 0.01, 0.05, 0.1, 0.5, 1,
                                              5,     10,   30,   60,  300, 600};
  return buckets;
}

void CounterFamily::Add(const LabelValues& labels, double n) {
  CheckLabels(labels, label_count_);
  if (n < 0) Die("a counter only goes up");
  absl::MutexLock lock(&mu_);
  values_[labels] += n;
}

double CounterFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void GaugeFamily::Set(const LabelValues& labels, double value) {
  CheckLabels(labels, label_count_);
  absl::MutexLock lock(&mu_);
  values_[labels] = value;
}

void GaugeFamily::Add(const LabelValues& labels, double delta) {
  CheckLabels(labels, label_count_);
  absl::MutexLock lock(&mu_);
  values_[labels] += delta;
}

double GaugeFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void HistogramFamily::Observe(const LabelValues& labels, double value) {
  CheckLabels(labels, label_count_);
  // The first bucket whose upper bound holds the value (bounds are inclusive: le).
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  Series& series = series_[labels];
  if (series.counts.empty()) series.counts.resize(bounds_.size() + 1);
  ++series.counts[bucket];
  series.sum += value;
  ++series.count;
}

int64_t HistogramFamily::Count(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

MetricsRegistry::Family& MetricsRegistry::Register(const std::string& name, const std::string& help,
                                                   Type type,
                                                   std::vector<std::string> label_names) {
  if (!IsName(name, /*allow_colon=*/true)) Die(absl::StrCat("invalid metric name '", name, "'"));
  for (const std::string& label : label_names) {
    if (!IsName(label, /*allow_colon=*/false) || label.rfind("__", 0) == 0 || label == "le") {
      Die(absl::StrCat("invalid label name '", label, "' of ", name));
    }
  }
  auto [it, inserted] = families_.try_emplace(name);
  if (!inserted) Die(absl::StrCat("metric ", name, " registered twice"));
  it->second.help = help;
  it->second.type = type;
  it->second.label_names = std::move(label_names);
  return it->second;
}

CounterFamily& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                           std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Family& family = Register(name, help, Type::kCounter, std::move(label_names));
  family.counter.reset(new CounterFamily(family.label_names.size()));
  return *family.counter;
}

GaugeFamily& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Family& family = Register(name, help, Type::kGauge, std::move(label_names));
  family.gauge.reset(new GaugeFamily(family.label_names.size()));
  return *family.gauge;
}

HistogramFamily& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               std::vector<std::string> label_names,
                                               std::vector<double> bounds) {
  if (bounds.empty() || !std::is_sorted(bounds.begin(), bounds.end()) ||
      std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end() ||
      std::isinf(bounds.back())) {
    Die(absl::StrCat("histogram ", name, " needs increasing finite bucket bounds"));
  }
  absl::MutexLock lock(&mu_);
  Family& family = Register(name, help, Type::kHistogram, std::move(label_names));
  family.histogram.reset(new HistogramFamily(family.label_names.size(), std::move(bounds)));
  return *family.histogram;
}

void MetricsRegistry::AddGaugeCallback(const std::string& name, const std::string& help,
                                       std::function<double()> read) {
  absl::MutexLock lock(&mu_);
  Register(name, help, Type::kGauge, {}).read = std::move(read);
}

void MetricsRegistry::AddCounterCallback(const std::string& name, const std::string& help,
                                         std::function<double()> read) {
  absl::MutexLock lock(&mu_);
  Register(name, help, Type::kCounter, {}).read = std::move(read);
}

void MetricsRegistry::AddScrapeHook(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  hooks_.push_back(std::move(hook));
}

std::string MetricsRegistry::Render() const {
  absl::MutexLock render_lock(&render_mu_);
  // Hooks and callbacks run outside mu_, so they may take their own locks freely. Families
  // are never removed, so the pointers stay valid.
  std::vector<std::function<void()>> hooks;
  std::vector<std::pair<const std::string*, const Family*>> families;
  {
    absl::MutexLock lock(&mu_);
    hooks = hooks_;
    for (const auto& [name, family] : families_) families.emplace_back(&name, &family);
  }
  for (const std::function<void()>& hook : hooks) hook();

  std::string out;
  for (const auto& [name_ptr, family] : families) {
    const std::string& name = *name_ptr;
    const char* type = family->type == Type::kCounter ? "counter"
                       : family->type == Type::kGauge ? "gauge"
                                                      : "histogram";
    absl::StrAppend(&out, "# HELP ", name, " ", Escape(family->help, false), "\n", "# TYPE ", name,
                    " ", type, "\n");
    const std::vector<std::string>& names = family->label_names;
    if (family->read) {
      absl::StrAppend(&out, name, " ", FormatValue(family->read()), "\n");
      continue;
    }
    if (family->counter != nullptr || family->gauge != nullptr) {
      std::map<LabelValues, double> values;
      if (family->counter != nullptr) {
        absl::MutexLock lock(&family->counter->mu_);
        values = family->counter->values_;
      } else {
        absl::MutexLock lock(&family->gauge->mu_);
        values = family->gauge->values_;
      }
      for (const auto& [labels, value] : values) {
        absl::StrAppend(&out, name, FormatLabels(names, labels), " ", FormatValue(value), "\n");
      }
      continue;
    }
    const HistogramFamily& histogram = *family->histogram;
    std::map<LabelValues, HistogramFamily::Series> series;
    {
      absl::MutexLock lock(&histogram.mu_);
      series = histogram.series_;
    }
    for (const auto& [labels, one] : series) {
      int64_t cumulative = 0;
      for (size_t i = 0; i <= histogram.bounds_.size(); ++i) {
        cumulative += one.counts[i];
        const std::string le =
            i < histogram.bounds_.size() ? FormatValue(histogram.bounds_[i]) : "+Inf";
        absl::StrAppend(&out, name, "_bucket", FormatLabels(names, labels, "le=\"" + le + "\""),
                        " ", cumulative, "\n");
      }
      absl::StrAppend(&out, name, "_sum", FormatLabels(names, labels), " ", FormatValue(one.sum),
                      "\n", name, "_count", FormatLabels(names, labels), " ", one.count, "\n");
    }
  }
  return out;
}

Metrics::Metrics()
    : grpc_requests(AddCounter("kiln_grpc_requests_total",
                               "gRPC calls finished, by method and status code.",
                               {"method", "code"})),
      grpc_request_seconds(AddHistogram("kiln_grpc_request_duration_seconds",
                                        "Time from a gRPC call's start to its status.",
                                        {"method"})),
      job_seconds(AddHistogram("kiln_job_duration_seconds",
                               "Time jobs spent in each stage: queued, running, or a compiler "
                               "stage.",
                               {"kind", "stage"})),
      jobs(AddCounter("kiln_jobs_total", "Jobs finished, by kind and final state.",
                      {"kind", "state"})),
      tuning_trials(AddCounter("kiln_tuning_trials_total", "Tuning candidates measured.", {})) {}

void Metrics::ExportCacheStats(cache::Store& store) {
  auto stats = std::make_shared<cache::CacheStats>();
  AddScrapeHook([&store, stats] {
    absl::StatusOr<cache::CacheStats> now = store.Stats();
    if (now.ok()) {
      *stats = *now;
    } else {
      spdlog::warn("metrics: cannot read cache stats: {}", now.status().ToString());
    }
  });
  AddCounterCallback("kiln_cache_hits_total", "Compile results found in the cache.",
                     [stats] { return static_cast<double>(stats->hits); });
  AddCounterCallback("kiln_cache_misses_total", "Compile results not found in the cache.",
                     [stats] { return static_cast<double>(stats->misses); });
  AddCounterCallback("kiln_cache_evictions_total", "Artifacts evicted from the cache.",
                     [stats] { return static_cast<double>(stats->evictions); });
  AddCounterCallback("kiln_cache_quarantined_total",
                     "Corrupt blobs found in the cache and quarantined.",
                     [stats] { return static_cast<double>(stats->quarantined); });
  AddGaugeCallback("kiln_cache_bytes", "Bytes of blobs stored in the cache.",
                   [stats] { return static_cast<double>(stats->blob_bytes); });
  AddGaugeCallback("kiln_cache_artifacts", "Artifacts stored in the cache.",
                   [stats] { return static_cast<double>(stats->artifacts); });
}

}  // namespace kiln::server
