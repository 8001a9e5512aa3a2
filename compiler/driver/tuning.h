// Tuning as a service of the driver: TuneModel measures a model's kernels on this machine and
// writes the best schedules into the tuning database; CompileModel (driver.h, with
// CompileOptions::tuning_db) builds every kernel from its record when the database has one.
// Records are keyed by the kernel's workload, so they serve every later model that meets the
// same kernel.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/tuning_db.h"
#include "compiler/driver/driver.h"
#include "compiler/schedule/schedule.h"
#include "compiler/tune/tuner.h"

namespace kiln::driver {

// The version of the schedule rules' knobs (schedule/*_rule.cc): bumped when a knob changes
// meaning, or a rule gains one (a record's trace names every knob of its space), so that no
// record is replayed into another space; also when what a knob builds changes enough that
// its records' times mislead. 2: the conv tiler's tile_rows. 3: the conv row form's plane.
// 5: the matmul's pack_a copies rows instead of interleaving them (a quarter faster at M =
// 1024), so records that chose not to pack are retuned. 6: the conv row form carries a
// stride-2 row's repeated tap instead of gathering it (those convs about twice as fast).
// 7: a pointwise conv gains the conv tiler's space beside the matmul's. 8: the conv row
// form's plane form sums a band flattened (full tiles on narrow planes). 9: the conv tiler's
// epilogue runs on whole vectors (a pointwise conv's choice between the tiler and the matmul
// rule, and the tiler's tile widths, shift). 10: the conv tiler's parallel_blocks knob is
// gone (records that ran a block at a time, slow on two threads, are retuned). 11: the matmul
// rule's pack_b knob (a pointwise conv reads its input plane in place by default). 12: the
// conv row form's channel_lanes (a depthwise conv with channels in the vector lanes). 13:
// the Winograd rule F(4x4, 3x3), "winograd4", beside F(2x2, 3x3). 14: the conv tiler's
// column-lanes form (column_channels, column_vectors) for convs of few taps. 15: the conv
// plane form sums planes of rows a vector wide or wider flattened too (depthwise 28 x 28 in
// 0.6x the time). 16: the tuner's evicted runs load the activations after evicting the
// weights, no longer before (records chosen with cold activations are retuned). 17: the conv
// tiler's staged epilogue transposes its tile in registers, no longer gathers (its tile widths
// shift).
inline constexpr int kTuningSpaceVersion = 17;

// The database key of a kernel's workload scheduled for `target`, for one bucket ("" for
// all values of its symbols).
cache::TuningKey TuningKeyOf(const std::string& workload, const ir::Target& target,
                             const std::string& bucket = "");

// The best trace (JSON) the tuning database holds for `workload` on `target`, per bucket
// ("" for all values; else the bucket symbol's value it was tuned at), for
// PassContext::tuned_traces.
std::map<std::string, std::string> TunedTraces(cache::TuningDb& db, const std::string& workload,
                                               const ir::Target& target);

struct TuneModelOptions {
  tune::TuneOptions tune;
  // Tune kernels that already have a record too (a new record replaces it only if faster).
  bool retune = false;
};

struct TuneSummary {
  int kernels = 0;        // searches asked for: distinct tunable kernels, per bucket
  int already_tuned = 0;  // of those, skipped: the database had a record
  std::vector<tune::TuneResult> results;  // the kernels measured this time
  int trials = 0;
  int failed_trials = 0;
  // The model's weights, timed alternately warm and evicted (tune::WeightCache::kAlternating).
  int64_t weight_bytes = 0;
};

// Tunes the kernels of an ONNX model for `target` (this machine's arch; "host" is the usual
// choice) and records the best schedule of each in `db`. Progress streams through `events`
// as kTuning events, after a kInfo event saying how the weights are timed. INVALID_ARGUMENT for a
// target this machine cannot run.
absl::StatusOr<TuneSummary> TuneModel(std::string_view onnx_bytes, const ir::Target& target,
                                      const CompileOptions& options,
                                      const TuneModelOptions& tune_options, cache::TuningDb& db,
                                      const EventSink& events);

// The CPU this process runs on ("AMD EPYC 7B13"), as records name the device.
std::string HostDeviceName();

}  // namespace kiln::driver
