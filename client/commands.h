// The kiln CLI's commands as functions: arguments in, files and text out. cli.cc turns argv
// into these structs; tests call the functions directly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/v1/kiln.pb.h"

namespace kiln::cache {
class TuningDb;
}  // namespace kiln::cache

namespace kiln::client {

// Results go to out (stdout), progress to err (stderr).
struct Console {
  std::ostream& out;
  std::ostream& err;
};

struct CompileArgs {
  std::string model_path;
  std::vector<std::string> targets;  // presets or descriptions, as the user named them
  std::string server;                // "host:port"; empty compiles in-process
  std::string out_dir;
  std::map<std::string, int64_t> dim_bounds;
  int64_t timeout_s = 600;  // deadline of each RPC
  // In-process only: the folder of the tuning database whose records schedule the kernels
  // (empty: default schedules; kilnd always uses its own).
  std::string cache_dir;
  // A tuning budget per target, spent first on the kernels the database has no record for
  // (both 0: none); in-process it needs cache_dir, through kilnd the daemon's machine tunes.
  int64_t tune_trials = 0;
  int64_t tune_seconds = 0;  // 0: no limit
};
// Writes out_dir/<target>/<artifact file> and out_dir/<target>/manifest.json per target.
absl::Status Compile(const CompileArgs& args, Console console);
// One line per event of kilnd's: "[x86_64] cache hit", "[x86_64] pass fuse_ops", ...
void PrintCompileEvent(const v1::CompileEvent& event, std::ostream& err);

struct RunArgs {
  // A folder with one .so artifact, or the artifact itself; with `reference`, an ONNX model.
  std::string artifact_dir;
  // Run the model with the reference interpreter instead of an artifact.
  bool reference = false;
  std::vector<std::pair<std::string, std::string>> inputs;  // name, .npy or .pb file
  std::string out_dir;
};
// Runs the artifact and writes out_dir/<output name>.npy per output.
absl::Status Run(const RunArgs& args, Console console);

struct BenchArgs {
  std::string artifact_dir;                                          // as for `kiln run`
  std::vector<std::pair<std::string, std::string>> inputs;           // name, .npy or .pb file
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;  // name, dims of random data
  int32_t threads = -1;  // as kiln_model_set_num_threads (0: one per CPU); -1 leaves the default
  int64_t repeat = 20;   // timed runs
  int64_t warmup = 2;    // untimed runs before them
};
// Runs the artifact warmup + repeat times on the given or random inputs and prints latency
// statistics and peak memory, then one machine-readable line "kiln-bench {json}".
absl::Status Bench(const BenchArgs& args, Console console);

struct InspectArgs {
  std::string model_path;
  std::string after;  // a pass name (see compiler/driver/pipeline.cc) or "llvm"; empty: import
  std::string target = "x86_64";  // a preset or description (ir::ParseTarget)
  std::string cache_dir;          // when set, kernels take their tuning records from its kiln.db
};
// The bytes of a model file with its ONNX external data inlined (files.cc); NOT_FOUND naming
// a missing file, INVALID_ARGUMENT for external data that is unsafe or does not fit.
absl::StatusOr<std::string> ReadModelFile(const std::string& path);
// Prints the module in the IR text format, after import or after the named pass.
absl::Status Inspect(const InspectArgs& args, Console console);

struct TargetsArgs {
  std::string server;  // empty lists the compiler's own presets
  int64_t timeout_s = 600;
};
// One line per preset: name, tab, canonical form.
absl::Status ListTargets(const TargetsArgs& args, Console console);

struct TuningArgs {
  std::string action;               // "export", "import" or "stats"
  std::string file;                 // import: the JSON lines to read
  std::string cache_dir = "./var";  // holds kiln.db; kilnd's --data-dir default
};
// The tuning database of a local cache: export prints its records as JSON lines, import adds
// those of a file (all or none) and prints how many, stats prints counts.
absl::Status Tuning(const TuningArgs& args, Console console);

// The tuning database of `cache_dir` (its kiln.db); `create` makes the folder and database
// when missing, else a missing one is NOT_FOUND naming it.
absl::StatusOr<std::unique_ptr<cache::TuningDb>> OpenTuningDb(const std::string& cache_dir,
                                                              bool create);

struct TuneArgs {
  std::string model_path;
  std::string target = "host";      // tuning measures on this machine
  std::string cache_dir = "./var";  // the tuning database's folder, as for `kiln tuning`
  int64_t trials = 0;               // for the whole model; 0: trials_per_kernel each
  int64_t trials_per_kernel = 32;
  int64_t seconds = 0;                        // time limit; 0: none
  std::map<std::string, int64_t> dim_values;  // symbolic dims to measure at ("seq" -> 128)
  std::vector<int64_t> buckets;               // values to tune kernels with a symbolic extent at
  bool auto_buckets = false;                  // powers of two up to the --dim-bound of the extent
  std::map<std::string, int64_t> dim_bounds;
  bool retune = false;  // also the kernels the database has records for
  // "host:port": kilnd tunes on its machine into its own database (cache_dir unused).
  std::string server;
  int64_t timeout_s = 600;  // deadline of each RPC; a search still running then stops
};
// Tunes the model's kernels for the target on this machine (or kilnd's) into the tuning
// database, with progress on stderr and a table of kernels (default and tuned GFLOP/s) on
// stdout.
absl::Status Tune(const TuneArgs& args, Console console);
// The table `kiln tune` prints: each kernel's default and tuned GFLOP/s, its failed trials,
// and a line of totals.
void PrintTuneSummary(const v1::TuneSummary& summary, Console console);

struct JobsArgs {
  std::string action = "list";  // "list", "get", "watch" or "cancel"
  std::string job_id;           // all but list
  int64_t from_event = 0;       // watch: the first event to show
  std::string server;           // "host:port" (jobs live in kilnd)
  int64_t timeout_s = 600;
};
// kilnd's jobs: list prints one line per job, get one job, watch its events until it ends
// (resuming after a dropped connection; a failed or cancelled job is an error), cancel stops
// it.
absl::Status Jobs(const JobsArgs& args, Console console);

struct CacheArgs {
  std::string action;               // "stats" or "evict"
  std::string cache_dir = "./var";  // without --server: the folder holding kiln.db
  std::string server;               // "host:port": kilnd's cache (evict needs the admin role)
  int64_t timeout_s = 600;
  // evict: exactly one of
  bool all_artifacts = false;
  int64_t to_bytes = -1;  // least recently used artifacts go until the cache holds this
  std::string artifact_digest;
};
// stats prints the cache's counts and sizes; evict drops artifacts (never models or tuning
// records) and prints how many and how many bytes.
absl::Status Cache(const CacheArgs& args, Console console);

}  // namespace kiln::client
