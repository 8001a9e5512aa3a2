// The persistent cache: content-addressed blobs and compile results in one SQLite file.
// It knows bytes and keys only (no IR, no proto), so the server and the CLI's local mode can
// share it. Every method is thread-safe; one connection is shared under a mutex.
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

class Store {
 public:
  // Opens or creates the database at `path` (WAL journal, busy timeout, foreign keys on).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Stores `bytes` under their digest and returns the digest. Idempotent; storing bytes
  // whose row was damaged on disk repairs the row.
  absl::StatusOr<std::string> PutBlob(std::string_view bytes);
  // The blob's bytes, verified against the digest. A blob that no longer matches its digest
  // is deleted, together with every artifact and compile result that refers to it, and is
  // reported as a miss: a corrupt entry is rebuilt, never served.
  absl::StatusOr<std::optional<std::string>> GetBlob(std::string_view digest);
  // Whether a row exists; does not read or verify the bytes.
  absl::StatusOr<bool> HasBlob(std::string_view digest);

  // Records that the compilation named `key` produced `result`. Both blobs must already be
  // stored (FAILED_PRECONDITION otherwise). Overwrites an earlier result for `key`.
  absl::Status PutCompileResult(std::string_view key, const CompileResult& result);
  absl::StatusOr<std::optional<CompileResult>> GetCompileResult(std::string_view key);
  // Looks up a result by its artifact digest, for FetchArtifact (manifest and file name).
  absl::StatusOr<std::optional<CompileResult>> GetArtifact(std::string_view artifact_digest);

  // The largest blob SQLite will store (its SQLITE_LIMIT_LENGTH, less room for the row).
  uint64_t max_blob_bytes() const { return max_blob_bytes_; }

 private:
  Store(sqlite3* db, uint64_t max_blob_bytes) : db_(db), max_blob_bytes_(max_blob_bytes) {}
  absl::Status DeleteCorruptBlob(std::string_view digest, std::string_view bytes);
  absl::StatusOr<std::optional<CompileResult>> QueryResult(const char* sql, std::string_view arg);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
  const uint64_t max_blob_bytes_;
};

}  // namespace kiln::cache
