#include "cache/store.h"

#include <sqlite3.h>

#include <ctime>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
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

absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string message = absl::StrCat(
      "cache database: ", absl::string_view(what.data(), what.size()), ": ", sqlite3_errmsg(db));
  switch (rc & 0xff) {  // the primary result code
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_FULL:
    case SQLITE_TOOBIG:
      return absl::ResourceExhaustedError(message);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// One prepared statement; finalized on destruction. Bind failures are kept and reported by
// the next Step, so call sites read as a straight line.
class Statement {
 public:
  static absl::StatusOr<Statement> Prepare(sqlite3* db, std::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db, rc, "prepare");
    return Statement(db, stmt);
  }
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), bind_rc_(other.bind_rc_) {}
  Statement& operator=(Statement&&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  // Text and blobs are bound without copying: the caller's bytes outlive the statement.
  Statement& BindText(int index, std::string_view text) {
    return Check(
        sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  Statement& BindBlob(int index, std::string_view bytes) {
    return Check(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_STATIC));
  }
  Statement& BindInt(int index, int64_t value) {
    return Check(sqlite3_bind_int64(stmt_, index, value));
  }

  // True while a row is available, false once the statement is done.
  absl::StatusOr<bool> Step() {
    if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, "bind");
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, sqlite3_sql(stmt_));
  }
  absl::Status Run() { return Step().status(); }

  std::string ColumnBytes(int index) {
    const void* data = sqlite3_column_blob(stmt_, index);
    return std::string(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, index));
  }
  int64_t ColumnInt(int index) { return sqlite3_column_int64(stmt_, index); }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement& Check(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

absl::Status Exec(sqlite3* db, const char* sql) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteError(db, rc, sql);
}

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

absl::Status Configure(sqlite3* db) {
  // WAL lets readers (a fetch) proceed while a compile result is written; the busy timeout
  // covers a second process (the CLI's local mode) holding the write lock briefly.
  sqlite3_busy_timeout(db, 5000);
  if (absl::Status status = Exec(db,
                                 "PRAGMA journal_mode = WAL;"
                                 "PRAGMA synchronous = NORMAL;"
                                 "PRAGMA foreign_keys = ON;");
      !status.ok()) {
    return status;
  }
  return MigrateSchema(db);
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
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = absl::UnavailableError(
        absl::StrCat("cannot open cache database ", path, ": ", sqlite3_errstr(rc)));
    sqlite3_close(db);
    return status;
  }
  if (absl::Status status = Configure(db); !status.ok()) {
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
  if (absl::Status status = Exec(db_, "BEGIN IMMEDIATE"); !status.ok()) return status;
  absl::Status status = InsertCompileResult(db_, key, result);
  if (!status.ok()) {
    Exec(db_, "ROLLBACK").IgnoreError();  // the first error is the one worth reporting
    return status;
  }
  return Exec(db_, "COMMIT");
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
