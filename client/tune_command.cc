// `kiln tune`: measures a model's kernels on this machine and records the best schedule of
// each in a local tuning database, which later compiles (`kiln compile --cache`, or kilnd on
// that data dir) read; with --server, kilnd does it on its machine into its own database.
#include <filesystem>
#include <iomanip>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "cache/tuning_db.h"
#include "client/commands.h"
#include "client/remote.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/tuning.h"

namespace kiln::client {
namespace {

// The local summary in the API's form, so that both modes print one table.
v1::TuneSummary ToProto(const driver::TuneSummary& summary) {
  auto gflops = [](const tune::Measurement& m, double flops) {
    return m.ok && m.median_ns > 0 ? flops / static_cast<double>(m.median_ns) : 0.0;
  };
  v1::TuneSummary proto;
  proto.set_kernels(summary.kernels);
  proto.set_already_tuned(summary.already_tuned);
  proto.set_trials(summary.trials);
  proto.set_failed_trials(summary.failed_trials);
  for (const tune::TuneResult& r : summary.results) {
    v1::KernelTuneResult* result = proto.add_results();
    result->set_kernel(tune::DisplayName(r));
    result->set_default_gflops(gflops(r.default_measurement, r.flops));
    result->set_best_gflops(gflops(r.best_measurement, r.flops));
    result->set_trials(r.trials);
    result->set_failed(r.failed);
    for (const std::string& failure : r.failures) result->add_failures(failure);
    if (!r.failures.empty()) result->set_first_failure(r.failures.front());
  }
  return proto;
}

// Every failed trial of `r`, or why it could not be tuned at all. A server that predates
// `failures` sends only the first.
void PrintFailures(const v1::KernelTuneResult& r, Console console) {
  std::vector<std::string> failures(r.failures().begin(), r.failures().end());
  if (failures.empty() && !r.first_failure().empty()) failures.push_back(r.first_failure());
  if (failures.empty()) return;
  if (r.trials() == 0) {
    console.out << r.kernel() << ": not tuned: " << failures.front() << "\n";
    return;
  }
  console.out << absl::StrFormat("%s: %d failed trials:\n", r.kernel(), r.failed());
  for (const std::string& failure : failures) console.out << "  " << failure << "\n";
}

absl::StatusOr<v1::TuneSummary> TuneLocally(const TuneArgs& args, const std::string& model,
                                            Console console) {
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(args.target);
  if (!target.ok()) return target.status();
  absl::StatusOr<std::unique_ptr<cache::TuningDb>> db = OpenTuningDb(args.cache_dir, true);
  if (!db.ok()) return db.status();
  driver::TuneModelOptions options;
  options.tune.trials = static_cast<int>(args.trials);
  options.tune.trials_per_kernel = static_cast<int>(args.trials_per_kernel);
  options.tune.time_limit = std::chrono::seconds(args.seconds);
  options.tune.symbol_values = args.dim_values;
  options.tune.bucket_values = args.buckets;
  options.tune.auto_buckets = args.auto_buckets;
  options.retune = args.retune;
  driver::CompileOptions compile;
  compile.dim_bounds = args.dim_bounds;
  auto events = [&](const driver::CompileEvent& e) {
    if (!e.message.empty()) console.err << "[" << args.target << "] tune: " << e.message << "\n";
  };
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(model, *target, compile, options, **db, events);
  if (!summary.ok()) return summary.status();
  return ToProto(*summary);
}

absl::StatusOr<v1::TuneSummary> TuneRemotely(const TuneArgs& args, const std::string& model,
                                             Console console) {
  absl::StatusOr<std::unique_ptr<RemoteKiln>> connected =
      RemoteKiln::Connect(args.server, std::chrono::seconds(args.timeout_s));
  if (!connected.ok()) return connected.status();
  RemoteKiln& remote = **connected;
  std::string name = std::filesystem::path(args.model_path).filename().string();
  absl::StatusOr<std::string> digest = remote.UploadModel(name, model);
  if (!digest.ok()) return digest.status();
  console.err << "uploaded " << name << " (" << model.size() << " bytes) as " << *digest << "\n";
  v1::TuneRequest request;
  request.set_model_digest(*digest);
  request.set_target(args.target);
  request.set_trials(args.trials);
  request.set_trials_per_kernel(args.trials_per_kernel);
  request.set_seconds(args.seconds);
  request.set_retune(args.retune);
  for (const auto& [dim, value] : args.dim_values) (*request.mutable_dim_values())[dim] = value;
  for (int64_t value : args.buckets) request.add_bucket_values(value);
  request.set_auto_buckets(args.auto_buckets);
  for (const auto& [dim, bound] : args.dim_bounds) (*request.mutable_dim_bounds())[dim] = bound;
  return remote.Tune(request, [&](const v1::TuneEvent& event) {
    if (!event.message().empty()) {
      console.err << "[" << args.target << "] tune: " << event.message() << "\n";
    }
  });
}

}  // namespace

void PrintTuneSummary(const v1::TuneSummary& summary, Console console) {
  console.out << absl::StrFormat("%-32s %10s %10s %8s %7s %7s\n", "kernel", "default", "tuned",
                                 "speedup", "trials", "failed");
  auto gflops = [](double value) {
    return value > 0 ? absl::StrFormat("%.1f", value) : std::string("-");
  };
  for (const v1::KernelTuneResult& r : summary.results()) {
    std::string speedup = "-";
    if (r.default_gflops() > 0 && r.best_gflops() > 0) {
      speedup = absl::StrFormat("%.2fx", r.best_gflops() / r.default_gflops());
    }
    console.out << absl::StrFormat("%-32s %10s %10s %8s %7d %7d\n", r.kernel(),
                                   gflops(r.default_gflops()), gflops(r.best_gflops()), speedup,
                                   r.trials(), r.failed());
  }
  for (const v1::KernelTuneResult& r : summary.results()) PrintFailures(r, console);
  // A kernel none of whose trials ran (its default failed, or every candidate did) is not
  // tuned: it has no record.
  int tuned = 0;
  for (const v1::KernelTuneResult& r : summary.results()) tuned += r.trials() > r.failed();
  const int untuned = summary.results_size() - tuned;
  console.out << absl::StrFormat(
      "%d tunable kernels: %d tuned now (%d trials, %d failed)%s, %d had records (GFLOP/s)\n",
      summary.kernels(), tuned, summary.trials(), summary.failed_trials(),
      untuned > 0 ? absl::StrFormat(", %d could not be tuned", untuned) : "",
      summary.already_tuned());
}

absl::Status Tune(const TuneArgs& args, Console console) {
  absl::StatusOr<std::string> model = ReadModelFile(args.model_path);
  if (!model.ok()) return model.status();
  absl::StatusOr<v1::TuneSummary> summary = args.server.empty()
                                                ? TuneLocally(args, *model, console)
                                                : TuneRemotely(args, *model, console);
  if (!summary.ok()) return summary.status();
  PrintTuneSummary(*summary, console);
  return absl::OkStatus();
}

}  // namespace kiln::client
