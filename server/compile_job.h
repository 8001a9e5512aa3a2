// One Compile request: for each target either a cache hit or a compilation whose artifact is
// then stored, reported as a stream of events. With a tuning database the compiler builds
// kernels from its records, and the cache key covers the database's revision for the target;
// with a tuning budget as well, the target's untuned kernels are tuned first. Knows nothing of
// gRPC: events go to a callback and cancellation is polled through another, so it is tested without
// a network.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/compile_key.h"
#include "cache/store.h"
#include "compiler/driver/driver.h"
#include "compiler/ir/target.h"
#include "kiln/v1/kiln.pb.h"
#include "server/fleet.h"
#include "server/tune_job.h"

namespace kiln::server {

// driver::CompileModel's signature; the daemon uses it, tests may pass a fake.
using CompilerFn = std::function<absl::StatusOr<driver::Artifact>(
    std::string_view onnx_bytes, const ir::Target& target, const driver::CompileOptions& options,
    const driver::EventSink& events)>;

class CompileJob {
 public:
  // Receives every event. May be called from the compiler's threads; must be thread-safe.
  using EmitFn = std::function<void(const v1::CompileEvent&)>;
  // OK while the client still wants the result; else why not (CANCELLED, DEADLINE_EXCEEDED).
  using InterruptFn = std::function<absl::Status()>;

  // With a `fleet`, results and tuning records are also looked up in and written to the
  // fleet's shared tier, and its compile lease makes the fleet compile each key once.
  CompileJob(cache::Store& store, CompilerFn compiler, EmitFn emit, InterruptFn interrupted,
             TuningSetup tuning = {}, Fleet* fleet = nullptr)
      : store_(store),
        compiler_(std::move(compiler)),
        emit_(std::move(emit)),
        interrupted_(std::move(interrupted)),
        tuning_(std::move(tuning)),
        fleet_(fleet) {}

  // Checks the request (INVALID_ARGUMENT naming a bad field, NOT_FOUND naming a model that
  // was never uploaded) without compiling anything; Run calls it first.
  static absl::Status Validate(cache::Store& store, const v1::CompileRequest& request);
  // Whether every target of a valid request is already in the local cache, so Run will
  // only look results up: such a request need not wait in the job queue. A quick look: a
  // result whose blobs turn out corrupt is still rebuilt by Run.
  bool AllTargetsCached(const v1::CompileRequest& request);
  // Every target ends with TARGET_DONE or TARGET_ERROR, in request order; a failed target
  // does not stop the others. Returns OK when all succeeded, else the first failure.
  absl::Status Run(const v1::CompileRequest& request);

 private:
  // The events of one target share its names (as requested, and canonical once parsed).
  struct TargetEvents {
    CompileJob* job;
    v1::CompileEvent base;
    void Emit(v1::CompileEvent::Kind kind, std::string name = "", std::string message = "") const;
    void Forward(const driver::CompileEvent& event) const;  // a compiler or tuner event
    void Done(const cache::CompileResult& result) const;
    void Error(const absl::Status& status) const;
  };

  absl::Status RunTarget(const std::string& preset, const driver::CompileOptions& options,
                         const v1::CompileRequest& request);
  absl::Status TuneTarget(const ir::Target& target, const driver::CompileOptions& options,
                          const v1::CompileRequest& request, const TargetEvents& events);
  absl::StatusOr<cache::CompileResult> BuildTarget(const ir::Target& target,
                                                   const driver::CompileOptions& options,
                                                   const TargetEvents& events);
  absl::StatusOr<std::optional<cache::CompileResult>> LookUp(const std::string& key);
  // The cache key's parts for the model on `target` with `options` (and the tuning
  // database's revision for the target, when there is one).
  static absl::StatusOr<cache::CompileKeyParts> KeyOf(const std::string& model_digest,
                                                      const ir::Target& target,
                                                      const driver::CompileOptions& options);
  absl::StatusOr<std::optional<cache::CompileResult>> AwaitFleetLease(
      const cache::CompileKeyParts& key, const TargetEvents& events,
      std::unique_ptr<Fleet::Lease>* lease);
  absl::StatusOr<cache::CompileResult> CompileAndStore(const ir::Target& target,
                                                       const driver::CompileOptions& options,
                                                       const cache::CompileKeyParts& key,
                                                       const TargetEvents& events);
  absl::StatusOr<std::string_view> ModelBytes();

  cache::Store& store_;
  CompilerFn compiler_;
  EmitFn emit_;
  InterruptFn interrupted_;
  TuningSetup tuning_;
  Fleet* fleet_;
  std::string model_digest_;
  std::optional<std::string> model_;  // read on the first cache miss only
};

}  // namespace kiln::server
