#include "cache/store.h"

#include <ctime>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "cache/sqlite.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {
namespace {

// Bumped when the schema changes incompatibly; an old kilnd refuses a newer database.
constexpr int kSchemaVersion = 1;

// Blobs are the only bytes; artifacts and compile results refer to them with ON DELETE
// CASCADE, so dropping a corrupt blob also drops every cache entry that would serve it.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS blobs (
  digest TEXT PRIMARY KEY,            -- "sha256:<hex>" of bytes
  bytes BLOB NOT NULL,
  size INTEGER NOT NULL,
  created INTEGER NOT NULL            -- unix seconds
);
CREATE TABLE IF NOT EXISTS artifacts (
  digest TEXT PRIMARY KEY REFERENCES blobs(digest) ON DELETE CASCADE,
  manifest_digest TEXT NOT NULL REFERENCES blobs(digest) ON DELETE CASCADE,
  file_name TEXT NOT NULL,
  created INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS artifacts_by_manifest ON artifacts(manifest_digest);
CREATE TABLE IF NOT EXISTS compile_results (
  key TEXT PRIMARY KEY,               -- cache/compile_key.h
  artifact_digest TEXT NOT NULL REFERENCES artifacts(digest) ON DELETE CASCADE,
  created INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS compile_results_by_artifact ON compile_results(artifact_digest);
)sql";

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

absl::Status MigrateSchema(sqlite3* db) {
  auto version = Statement::Prepare(db, "PRAGMA user_version");
  if (!version.ok()) return version.status();
  auto row = version->Step();
  if (!row.ok()) return row.status();
  int64_t found = *row ? version->ColumnInt(0) : 0;
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("cache database has schema version ", found,
                                                      "; this kilnd understands ", kSchemaVersion));
  }
  if (absl::Status status = Exec(db, kSchema); !status.ok()) return status;
  return Exec(db, absl::StrCat("PRAGMA user_version = ", kSchemaVersion).c_str());
}

// Both rows are upserts: recompiling a key (after its artifact was dropped) replaces it.
absl::Status InsertCompileResult(sqlite3* db, std::string_view key, const CompileResult& result) {
  static constexpr char kArtifact[] = R"sql(
    INSERT INTO artifacts (digest, manifest_digest, file_name, created) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (digest) DO UPDATE
      SET manifest_digest = excluded.manifest_digest, file_name = excluded.file_name)sql";
  static constexpr char kResult[] = R"sql(
    INSERT INTO compile_results (key, artifact_digest, created) VALUES (?1, ?2, ?3)
    ON CONFLICT (key) DO UPDATE
      SET artifact_digest = excluded.artifact_digest, created = excluded.created)sql";
  const int64_t now = Now();
  auto artifact = Statement::Prepare(db, kArtifact);
  if (!artifact.ok()) return artifact.status();
  artifact->BindText(1, result.artifact_digest)
      .BindText(2, result.manifest_digest)
      .BindText(3, result.file_name)
      .BindInt(4, now);
  if (absl::Status status = artifact->Run(); !status.ok()) return status;
  auto entry = Statement::Prepare(db, kResult);
  if (!entry.ok()) return entry.status();
  return entry->BindText(1, key).BindText(2, result.artifact_digest).BindInt(3, now).Run();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  absl::StatusOr<sqlite3*> connection = OpenConnection(path);
  if (!connection.ok()) return connection.status();
  sqlite3* db = *connection;
  if (absl::Status status = MigrateSchema(db); !status.ok()) {
    sqlite3_close(db);
    return status;
  }
  // A row holds the blob plus a few short columns; leave room for them.
  uint64_t max_blob = static_cast<uint64_t>(sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1)) - 4096;
  return std::unique_ptr<Store>(new Store(db, max_blob));
}

Store::~Store() { sqlite3_close(db_); }

absl::StatusOr<std::string> Store::PutBlob(std::string_view bytes) {
  if (bytes.size() > max_blob_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "blob of ", bytes.size(), " bytes exceeds the cache's limit of ", max_blob_bytes_));
  }
  std::string digest = Sha256Digest(bytes);
  // The update only fires when the stored bytes differ, i.e. the row was damaged on disk.
  static constexpr char kSql[] = R"sql(
    INSERT INTO blobs (digest, bytes, size, created) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (digest) DO UPDATE SET bytes = excluded.bytes, size = excluded.size
    WHERE blobs.bytes IS NOT excluded.bytes)sql";
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, kSql);
  if (!stmt.ok()) return stmt.status();
  stmt->BindText(1, digest).BindBlob(2, bytes).BindInt(3, bytes.size()).BindInt(4, Now());
  if (absl::Status status = stmt->Run(); !status.ok()) return status;
  return digest;
}

absl::StatusOr<std::optional<std::string>> Store::GetBlob(std::string_view digest) {
  std::string bytes;
  {
    absl::MutexLock lock(&mu_);
    auto stmt = Statement::Prepare(db_, "SELECT bytes FROM blobs WHERE digest = ?1");
    if (!stmt.ok()) return stmt.status();
    auto row = stmt->BindText(1, digest).Step();
    if (!row.ok()) return row.status();
    if (!*row) return std::nullopt;
    bytes = stmt->ColumnBytes(0);
  }
  // Hash outside the lock: large artifacts would otherwise stall every other request.
  std::string actual = Sha256Digest(bytes);
  if (actual == digest) return bytes;
  spdlog::warn("cache: blob {} is corrupt (its bytes hash to {}); dropping it", digest, actual);
  if (absl::Status status = DeleteCorruptBlob(digest, bytes); !status.ok()) return status;
  return std::nullopt;
}

absl::Status Store::DeleteCorruptBlob(std::string_view digest, std::string_view bytes) {
  absl::MutexLock lock(&mu_);
  // Only the damaged bytes: a PutBlob since the read may already have repaired the row.
  auto stmt = Statement::Prepare(db_, "DELETE FROM blobs WHERE digest = ?1 AND bytes = ?2");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, digest).BindBlob(2, bytes).Run();
}

absl::StatusOr<bool> Store::HasBlob(std::string_view digest) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, "SELECT 1 FROM blobs WHERE digest = ?1");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, digest).Step();
}

absl::Status Store::PutCompileResult(std::string_view key, const CompileResult& result) {
  absl::MutexLock lock(&mu_);
  // One transaction: a reader never sees a compile result whose artifact row is missing.
  return InTransaction(db_, [&] { return InsertCompileResult(db_, key, result); });
}

absl::StatusOr<std::optional<CompileResult>> Store::GetCompileResult(std::string_view key) {
  return QueryResult(
      "SELECT a.digest, a.manifest_digest, a.file_name, b.size FROM compile_results c "
      "JOIN artifacts a ON a.digest = c.artifact_digest JOIN blobs b ON b.digest = a.digest "
      "WHERE c.key = ?1",
      key);
}

absl::StatusOr<std::optional<CompileResult>> Store::GetArtifact(std::string_view artifact_digest) {
  return QueryResult(
      "SELECT a.digest, a.manifest_digest, a.file_name, b.size FROM artifacts a "
      "JOIN blobs b ON b.digest = a.digest WHERE a.digest = ?1",
      artifact_digest);
}

absl::StatusOr<std::optional<CompileResult>> Store::QueryResult(const char* sql,
                                                                std::string_view arg) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, sql);
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->BindText(1, arg).Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  return CompileResult{.artifact_digest = stmt->ColumnBytes(0),
                       .manifest_digest = stmt->ColumnBytes(1),
                       .file_name = stmt->ColumnBytes(2),
                       .artifact_size = static_cast<uint64_t>(stmt->ColumnInt(3))};
}

}  // namespace kiln::cache
