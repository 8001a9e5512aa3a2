// One Tune request: the uploaded model's kernels measured on this machine for one target and
// the best schedules recorded in the daemon's tuning database, reported as a stream of
// events ending in a summary. Like CompileJob it knows nothing of gRPC. Also the tuning step
// that a Compile with a budget runs before compiling a target.
#pragma once

#include <functional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/tuning.h"
#include "compiler/tune/measure.h"
#include "kiln/v1/kiln.pb.h"

namespace kiln::server {

// What the daemon tunes with: its tuning database (null: no tuning, default schedules) and
// how each candidate is measured (tests make it cheaper).
struct TuningSetup {
  cache::TuningDb* db = nullptr;
  tune::MeasureOptions measure;
};

// driver::TuneModel with `interrupted` polled between trials (a non-OK status stops the
// search, keeping the kernels finished by then) and exceptions turned into INTERNAL.
// The tuner measures each candidate in a fork()ed child (tune::MeasureKernelIsolated). In
// this threaded daemon that is acceptable for now only because the child runs nothing but
// the candidate's JIT code and leaves with _exit: it touches no lock another thread of the
// daemon may have held at the fork.
absl::StatusOr<driver::TuneSummary> TuneForJob(
    std::string_view onnx_bytes, const ir::Target& target, const driver::CompileOptions& options,
    driver::TuneModelOptions tune_options, const TuningSetup& tuning,
    const driver::EventSink& events, const std::function<absl::Status()>& interrupted);

v1::TuneProgress ToProto(const tune::TuneProgress& progress);
v1::TuneSummary ToProto(const driver::TuneSummary& summary, const ir::Target& target);

class TuneJob {
 public:
  using EmitFn = std::function<void(const v1::TuneEvent&)>;
  using InterruptFn = std::function<absl::Status()>;

  TuneJob(cache::Store& store, TuningSetup tuning, EmitFn emit, InterruptFn interrupted)
      : store_(store),
        tuning_(std::move(tuning)),
        emit_(std::move(emit)),
        interrupted_(std::move(interrupted)) {}

  // Checks the request (INVALID_ARGUMENT naming a bad field or target, NOT_FOUND naming a
  // model that was never uploaded) without tuning anything; Run calls it first.
  absl::Status Validate(const v1::TuneRequest& request);
  // Progress events, then one with the summary. A search stopped by `interrupted` still
  // records what it found, and answers the interruption's status.
  absl::Status Run(const v1::TuneRequest& request);

 private:
  cache::Store& store_;
  TuningSetup tuning_;
  EmitFn emit_;
  InterruptFn interrupted_;
};

}  // namespace kiln::server
