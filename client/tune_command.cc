// `kiln tune`: measures a model's kernels on this machine and records the best schedule of
// each in a local tuning database, which later compiles (`kiln compile --cache`, or kilnd on
// that data dir) read.
#include <iomanip>

#include "absl/strings/str_format.h"
#include "cache/tuning_db.h"
#include "client/commands.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/tuning.h"

namespace kiln::client {
namespace {

void PrintSummary(const driver::TuneSummary& summary, Console console) {
  console.out << absl::StrFormat("%-32s %10s %10s %8s %7s %7s\n", "kernel", "default", "tuned",
                                 "speedup", "trials", "failed");
  for (const tune::TuneResult& r : summary.results) {
    auto gflops = [&](const tune::Measurement& m) {
      return m.ok ? absl::StrFormat("%.1f", r.flops / m.median_ns) : std::string("-");
    };
    std::string speedup = "-";
    if (r.default_measurement.ok && r.best_measurement.ok) {
      speedup = absl::StrFormat("%.2fx", static_cast<double>(r.default_measurement.median_ns) /
                                             r.best_measurement.median_ns);
    }
    console.out << absl::StrFormat("%-32s %10s %10s %8s %7d %7d\n", r.kernel.kernel,
                                   gflops(r.default_measurement), gflops(r.best_measurement),
                                   speedup, r.trials, r.failed);
  }
  for (const tune::TuneResult& r : summary.results) {
    if (r.failed > 0) console.out << r.kernel.kernel << ": first failure: " << r.first_failure << "\n";
  }
  console.out << absl::StrFormat(
      "%d tunable kernels: %d tuned now (%d trials, %d failed), %d had records (GFLOP/s)\n",
      summary.kernels, static_cast<int>(summary.results.size()), summary.trials,
      summary.failed_trials, summary.already_tuned);
}

}  // namespace

absl::Status Tune(const TuneArgs& args, Console console) {
  absl::StatusOr<std::string> model = ReadModelFile(args.model_path);
  if (!model.ok()) return model.status();
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(args.target);
  if (!target.ok()) return target.status();
  absl::StatusOr<std::unique_ptr<cache::TuningDb>> db = OpenTuningDb(args.cache_dir, true);
  if (!db.ok()) return db.status();
  driver::TuneModelOptions options;
  options.tune.trials = static_cast<int>(args.trials);
  options.tune.trials_per_kernel = static_cast<int>(args.trials_per_kernel);
  options.tune.time_limit = std::chrono::seconds(args.seconds);
  options.tune.symbol_values = args.dim_values;
  options.retune = args.retune;
  driver::CompileOptions compile;
  compile.dim_bounds = args.dim_bounds;
  auto events = [&](const driver::CompileEvent& e) {
    if (e.kind == driver::CompileEvent::Kind::kTuning) {
      console.err << "[" << args.target << "] tune: " << e.message << "\n";
    }
  };
  absl::StatusOr<driver::TuneSummary> summary =
      driver::TuneModel(*model, *target, compile, options, **db, events);
  if (!summary.ok()) return summary.status();
  PrintSummary(*summary, console);
  return absl::OkStatus();
}

}  // namespace kiln::client
