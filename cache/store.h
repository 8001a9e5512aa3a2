// The persistent cache: content-addressed blobs and compile results in one SQLite file.
// It knows bytes and keys only (no IR, no proto), so the server and the CLI's local mode can
// share it. Every method is thread-safe; one connection is shared under a mutex.
//
// Management: with a size cap, the least recently used artifacts are evicted (models and the
// tuning records in the same file never are); a blob that no longer matches its digest is
// quarantined; the file is checked at open; Stats and Evict serve `kiln cache stats` and the
// admin RPC.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/compile_key.h"

struct sqlite3;

namespace kiln::cache {

// What one compilation produced: the artifact file and the manifest.json beside it, both
// stored as blobs.
struct CompileResult {
  std::string artifact_digest;  // "sha256:<hex>" of the artifact bytes
  std::string manifest_digest;  // "sha256:<hex>" of manifest.json
  std::string file_name;        // "model.so"
  uint64_t artifact_size = 0;
};

struct StoreOptions {
  // The most bytes of blobs to keep (the sum of their sizes); 0 for no limit. Enforced when a
  // compile result is recorded and at open, by evicting the least recently used artifacts.
  // Models are never evicted, so they alone may exceed it.
  uint64_t max_bytes = 0;
};

// The counters since the database was created (they live in the file, so every process that
// opens it, kilnd or the CLI, reports the same) and the contents now.
struct CacheStats {
  int64_t blobs = 0;
  uint64_t blob_bytes = 0;
  int64_t models = 0;  // blobs no artifact refers to: uploaded models
  uint64_t model_bytes = 0;
  int64_t artifacts = 0;
  int64_t compile_results = 0;
  int64_t quarantined = 0;  // corrupt blobs found
  // The newest quarantined blobs are kept, bytes and all, for a post-mortem.
  int64_t quarantine_kept = 0;
  uint64_t quarantine_bytes = 0;
  int64_t evictions = 0;  // artifacts evicted, by the cap or by Evict
  int64_t hits = 0;       // GetCompileResult answers
  int64_t misses = 0;
  uint64_t max_bytes = 0;  // StoreOptions::max_bytes of this Store
};

// What Evict drops: every artifact, the least recently used ones until the blobs take at
// most `to_bytes`, or the one named. An artifact goes with its compile results and its two
// blobs (unless another artifact shares them).
struct EvictRequest {
  enum class Scope { kAllArtifacts, kToBytes, kArtifact };
  Scope scope = Scope::kToBytes;
  uint64_t to_bytes = 0;        // kToBytes
  std::string artifact_digest;  // kArtifact
};

struct EvictResult {
  int64_t artifacts = 0;
  uint64_t bytes = 0;  // blob bytes freed
};

class Store {
 public:
  // Opens or creates the database at `path` (WAL journal, busy timeout, foreign keys on),
  // migrating an older schema. A file that fails SQLite's quick_check is DATA_LOSS naming
  // the file and its first problem: serving from a damaged cache is worse than not starting.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     StoreOptions options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Stores `bytes` under their digest and returns the digest. Idempotent; storing bytes
  // whose row was damaged on disk repairs the row. Never evicts: a compile between storing
  // its blobs and recording its result must not lose them.
  absl::StatusOr<std::string> PutBlob(std::string_view bytes);
  // The blob's bytes, verified against the digest. A blob that no longer matches its digest
  // is moved to quarantine, every artifact and compile result that refers to it is dropped,
  // and it is reported as a miss: a corrupt entry is rebuilt, never served.
  absl::StatusOr<std::optional<std::string>> GetBlob(std::string_view digest);
  // Whether a row exists; does not read or verify the bytes.
  absl::StatusOr<bool> HasBlob(std::string_view digest);
  // Whether a compile result is recorded for `key`; reads no blob and counts neither a hit
  // nor a miss (kilnd's quick look before it queues a compile).
  absl::StatusOr<bool> HasCompileResult(std::string_view key);

  // Records that the compilation `parts` produced `result`, under parts.Key(), then evicts
  // down to the cap (never this artifact). Both blobs must already be stored
  // (FAILED_PRECONDITION otherwise). Overwrites an earlier result for the key.
  absl::Status PutCompileResult(const CompileKeyParts& parts, const CompileResult& result);
  // The result for `key` (a CompileKeyParts::Key()); a hit makes its artifact the most
  // recently used. Counted as a hit or a miss.
  absl::StatusOr<std::optional<CompileResult>> GetCompileResult(std::string_view key);
  // Looks up a result by its artifact digest, for FetchArtifact (manifest and file name);
  // makes the artifact the most recently used.
  absl::StatusOr<std::optional<CompileResult>> GetArtifact(std::string_view artifact_digest);

  // Why `parts` has no entry, from the stored entry of the same model with the most parts in
  // common (target, then options, then compiler version): "model never compiled here",
  // "target differs: stored '...' vs requested '...'", "options differ: ...", "compiled by
  // compiler X, this is Y" or "tuning records changed since: revision A, now B".
  absl::StatusOr<std::string> ExplainMiss(const CompileKeyParts& parts);

  absl::StatusOr<CacheStats> Stats();
  // NOT_FOUND for a kArtifact request naming no stored artifact.
  absl::StatusOr<EvictResult> Evict(const EvictRequest& request);
  // Copies the write-ahead log into the database file and truncates it, so a stopped
  // daemon leaves one self-contained file (kilnd calls it when it shuts down).
  absl::Status Checkpoint();

  // The largest blob SQLite will store (its SQLITE_LIMIT_LENGTH, less room for the row).
  uint64_t max_blob_bytes() const { return max_blob_bytes_; }

 private:
  Store(sqlite3* db, uint64_t max_blob_bytes, uint64_t max_bytes)
      : db_(db), max_blob_bytes_(max_blob_bytes), max_bytes_(max_bytes) {}
  absl::Status QuarantineBlob(std::string_view digest, std::string_view bytes,
                              std::string_view reason);
  absl::StatusOr<std::optional<CompileResult>> QueryResult(const char* sql, std::string_view arg,
                                                           bool count);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
  const uint64_t max_blob_bytes_;
  const uint64_t max_bytes_;
};

}  // namespace kiln::cache
