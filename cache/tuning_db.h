// The tuning database: the measured schedules of kernels, so that a kernel tuned once is
// scheduled from its best record by every later compile that meets it. Records live in the
// tuning_records table of the cache's SQLite file (beside cache::Store's tables) and travel
// between machines as JSON lines. Like Store it knows keys and opaque strings only: the
// compiler computes workloads and targets and writes the traces. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;

namespace kiln::cache {

// What a record is looked up by; every lookup names all four fields.
struct TuningKey {
  std::string workload;   // structural hash of the normalized kernel (symbolic extents as vars)
  std::string target;     // ir::Target::Canonical()
  int space_version = 0;  // version of the tuning space the schedule was drawn from
  // "" for a schedule tuned for every value of the kernel's symbols, else the value of its
  // bucket symbol it was tuned at ("64"), used up to that value.
  std::string bucket;
};

struct TuningRecord {
  TuningKey key;
  // The replayable schedule trace, a JSON value. Stored (and returned) in canonical form:
  // no whitespace, object keys sorted.
  std::string trace_json;
  double median_ns = 0;
  std::vector<double> times_ns;  // every timed run
  std::string device;            // the CPU or GPU model it was measured on
  std::string compiler_version;  // driver::CompilerVersion() of the compiler that measured it
  int64_t created_unix = 0;      // 0 in Put means now
};

struct TuningStats {
  int64_t records = 0;
  int64_t workloads = 0;  // distinct workload hashes
  std::map<std::string, int64_t> records_by_compiler_version;
};

class TuningDb {
 public:
  // Opens or creates the database at `sqlite_path` (the file cache::Store uses) and the
  // tuning_records table.
  static absl::StatusOr<std::unique_ptr<TuningDb>> Open(const std::string& sqlite_path);
  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  // Adds a record; INVALID_ARGUMENT naming the field when it is malformed. A record with the
  // same key, trace and compiler version replaces the stored one only if it is faster.
  absl::Status Put(const TuningRecord& record);
  // The record with the lowest median for exactly `key`, measured by `compiler_version`;
  // records of other compiler versions are never used.
  absl::StatusOr<std::optional<TuningRecord>> Best(const TuningKey& key,
                                                   std::string_view compiler_version);
  // The buckets with records for `key`'s workload, target and space version (key.bucket
  // is ignored) measured by `compiler_version`, in text order.
  absl::StatusOr<std::vector<std::string>> Buckets(const TuningKey& key,
                                                   std::string_view compiler_version);
  // Deletes the records of every compiler version but `current_compiler_version`; returns
  // how many.
  absl::StatusOr<int64_t> Retire(std::string_view current_compiler_version);
  // A number that changes whenever a record for `target` (a TuningKey::target) is added,
  // replaced or deleted, by any writer of this database file; 0 before the first. Callers
  // that cache what they built from the records key it by this (kilnd's compile keys).
  absl::StatusOr<int64_t> Revision(std::string_view target);
  absl::StatusOr<TuningStats> Stats();

  // Every record, one JSON object per line, in a stable order (key, compiler version,
  // median, trace) with the fields in a fixed order.
  absl::StatusOr<std::string> ExportJsonLines();
  // Adds the records of `text` (as written by ExportJsonLines; blank lines skipped), all or
  // none: a bad line is INVALID_ARGUMENT naming its number and the field. Returns how many
  // records were added or replaced a slower one.
  absl::StatusOr<int64_t> ImportJsonLines(std::string_view text);

 private:
  explicit TuningDb(sqlite3* db) : db_(db) {}

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace kiln::cache
