// The compiler as a library: ONNX bytes in, one artifact for one target out. kilnd and the
// kiln CLI (in-process mode) both call CompileModel; neither knows the passes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"
#include "compiler/tune/tuner.h"

namespace kiln::cache {
class TuningDb;
}  // namespace kiln::cache

namespace kiln::driver {

// The compiler's version; part of every cache key, so a new compiler never serves an old
// artifact.
const char* CompilerVersion();

struct CompileOptions {
  // Upper bounds for symbolic dims ("seq" -> 4096), used by memory planning.
  std::map<std::string, int64_t> dim_bounds;
  // Schedule the kernels for this target instead of the compile target (PassContext's
  // schedule_target): a GPU target's schedules on a CPU, to check them without a GPU.
  std::optional<ir::Target> schedule_as;
  // The tuning database: every kernel it has a record for (this compiler's, for the target)
  // is built from the record's schedule. Null: default schedules. Not part of Canonical():
  // callers that cache artifacts key them by the database's state too (TuningDb::Revision).
  cache::TuningDb* tuning_db = nullptr;
  // Polled between passes and before code generation: a non-OK status (the job was cancelled
  // or ran out of time) ends the compile with that status. Unset: never interrupted. Not part
  // of Canonical().
  std::function<absl::Status()> interrupted;
  // Stable text of the options, for cache keys ("dim_bounds=seq:4096").
  std::string Canonical() const;
};

struct CompileEvent {
  enum class Kind { kStage, kPass, kInfo, kTuning };
  Kind kind = Kind::kInfo;
  std::string name;           // stage or pass name ("import", "legalize", "codegen")
  std::string message;        // human text
  tune::TuneProgress tuning;  // kTuning: trials done, best GFLOP/s, time left
};
using EventSink = std::function<void(const CompileEvent&)>;

struct Artifact {
  std::string target;         // canonical target
  std::string file_name;      // "model.so"
  std::string bytes;          // the artifact file
  std::string manifest_json;  // manifest.json beside it
};

// The target named by `text` (a preset or a description, see ir::ParseTarget; "host" is the
// machine that compiles, as LLVM detects it), checked against LLVM: an unknown cpu or feature
// is INVALID_ARGUMENT naming it. Callers resolve targets here, before any compiling or cache
// lookup.
absl::StatusOr<ir::Target> ResolveTarget(std::string_view text);

// The presets (ir::ListPresetTargets), then "host" when this machine is a supported target.
std::vector<ir::Target> ListTargets();

// Imports an ONNX model into the graph IR (for `kiln inspect` and the reference interpreter).
absl::StatusOr<ir::IRModule> ImportModel(std::string_view onnx_bytes);

// The PTX of the model's kernels for a GPU target (`kiln inspect --after ptx`): the pipeline
// as CompileModel runs it, then codegen::EmitPtx.
absl::StatusOr<std::string> CompilePtx(std::string_view onnx_bytes, const ir::Target& target,
                                       const CompileOptions& options);

// Compiles one ONNX model for one target. User errors (bad model, unsupported operator,
// unknown target, cpu or feature) are INVALID_ARGUMENT naming the node, op type and reason.
absl::StatusOr<Artifact> CompileModel(std::string_view onnx_bytes, const ir::Target& target,
                                      const CompileOptions& options, const EventSink& events);

}  // namespace kiln::driver
