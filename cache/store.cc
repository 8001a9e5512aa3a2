#include "cache/store.h"

#include <algorithm>
#include <ctime>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "cache/sqlite.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {
namespace {

// Version 1: blobs, artifacts, compile results. Frozen: a new database runs every migration
// from here, so the path an old file takes is the one every test exercises.
// Blobs are the only bytes; artifacts and compile results refer to them with ON DELETE
// CASCADE, so dropping a blob also drops every cache entry that would serve it.
constexpr char kSchemaV1[] = R"sql(
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

// Version 2: cache management.
// - compile_results keeps the key's parts, so a miss can name what differs (NULL in rows
//   from version 1, whose parts are unknown; ExplainMiss skips them).
// - artifacts.last_used orders eviction. It is a counter (the largest value plus one at each
//   use), not a time: uses within one second stay ordered and a clock step cannot make a
//   fresh hit look old. Old rows start in insertion order.
// - blobs_sizes covers (digest, size), so sums, eviction and lookups never read the bytes'
//   pages (size follows bytes in the row; SQLite would walk a large blob's overflow chain to
//   reach it). Queries that need a size name it with INDEXED BY.
// - quarantine keeps the newest corrupt blobs; counters persists hits, misses, evictions.
constexpr char kMigrateV1ToV2[] = R"sql(
ALTER TABLE compile_results ADD COLUMN model_digest TEXT;
ALTER TABLE compile_results ADD COLUMN target TEXT;
ALTER TABLE compile_results ADD COLUMN options TEXT;
ALTER TABLE compile_results ADD COLUMN compiler_version TEXT;
ALTER TABLE compile_results ADD COLUMN tuning_revision INTEGER;
CREATE INDEX compile_results_by_model ON compile_results(model_digest, target, options);
ALTER TABLE artifacts ADD COLUMN last_used INTEGER NOT NULL DEFAULT 0;
UPDATE artifacts SET last_used = rowid;
CREATE INDEX artifacts_by_last_used ON artifacts(last_used);
CREATE INDEX blobs_sizes ON blobs(digest, size);
CREATE TABLE quarantine (
  id INTEGER PRIMARY KEY,             -- increasing: the newest rows are kept
  digest TEXT NOT NULL,               -- what the bytes should have hashed to
  size INTEGER NOT NULL,
  found INTEGER NOT NULL,             -- unix seconds
  reason TEXT NOT NULL,
  bytes BLOB NOT NULL
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
)sql";

// kMigrations[v] takes a database from version v to v + 1.
constexpr const char* kMigrations[] = {kSchemaV1, kMigrateV1ToV2};
constexpr int kSchemaVersion = std::size(kMigrations);

// Enough for a post-mortem of a failing disk, and a bound on what one can make us keep.
constexpr int kQuarantineKept = 16;

// The newest use: one more than any artifact's.
constexpr char kNextUse[] = "(SELECT COALESCE(MAX(last_used), 0) + 1 FROM artifacts)";

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

// The first column of the first row; 0 when there is none (a count, or a counter not yet
// created).
absl::StatusOr<int64_t> QueryInt(sqlite3* db, std::string_view sql, std::string_view arg = {}) {
  auto stmt = Statement::Prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  if (!arg.empty()) stmt->BindText(1, arg);
  auto row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->ColumnInt(0) : 0;
}

// A count and a sum of sizes.
absl::StatusOr<std::pair<int64_t, uint64_t>> QueryCountAndBytes(sqlite3* db, const char* sql) {
  auto stmt = Statement::Prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->Step();
  if (!row.ok()) return row.status();
  return std::pair(stmt->ColumnInt(0), static_cast<uint64_t>(stmt->ColumnInt(1)));
}

absl::Status BumpCounter(sqlite3* db, std::string_view name, int64_t by = 1) {
  if (by == 0) return absl::OkStatus();
  auto stmt = Statement::Prepare(db, R"sql(
    INSERT INTO counters (name, value) VALUES (?1, ?2)
    ON CONFLICT (name) DO UPDATE SET value = value + excluded.value)sql");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, name).BindInt(2, by).Run();
}

// SQLite reports a damaged file as CORRUPT or NOTADB, wherever it notices.
absl::Status DataLossIfCorrupt(sqlite3* db, absl::Status status, const std::string& path) {
  int code = sqlite3_errcode(db) & 0xff;
  if (code != SQLITE_CORRUPT && code != SQLITE_NOTADB) return status;
  return absl::DataLossError(absl::StrCat("cache database ", path,
                                          " is damaged: ", status.message(),
                                          "; move it aside and restart to rebuild the cache"));
}

// quick_check reads every page (without cross-checking index contents, so it stays linear)
// and names the first problem it finds.
absl::Status CheckIntegrity(sqlite3* db, const std::string& path) {
  auto stmt = Statement::Prepare(db, "PRAGMA quick_check(1)");
  if (!stmt.ok()) return DataLossIfCorrupt(db, stmt.status(), path);
  auto row = stmt->Step();
  if (!row.ok()) return DataLossIfCorrupt(db, row.status(), path);
  std::string first = *row ? stmt->ColumnBytes(0) : "quick_check gave no answer";
  if (first == "ok") return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("cache database ", path, " is damaged: ", first,
                                          "; move it aside and restart to rebuild the cache"));
}

// In one transaction, re-reading the version inside it: two processes opening an old file
// at once migrate it once.
absl::Status MigrateSchema(sqlite3* db) {
  return InTransaction(db, [&]() -> absl::Status {
    absl::StatusOr<int64_t> found = QueryInt(db, "PRAGMA user_version");
    if (!found.ok()) return found.status();
    if (*found > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("cache database has schema version ",
                                                        *found, "; this kilnd understands ",
                                                        kSchemaVersion));
    }
    for (int64_t version = *found; version < kSchemaVersion; ++version) {
      if (absl::Status status = Exec(db, kMigrations[version]); !status.ok()) return status;
    }
    return Exec(db, absl::StrCat("PRAGMA user_version = ", kSchemaVersion).c_str());
  });
}

// Both rows are upserts: recompiling a key (after its artifact was dropped) replaces it.
absl::Status InsertCompileResult(sqlite3* db, std::string_view key, const CompileKeyParts& parts,
                                 const CompileResult& result) {
  const std::string artifact_sql = absl::StrCat(R"sql(
    INSERT INTO artifacts (digest, manifest_digest, file_name, created, last_used)
    VALUES (?1, ?2, ?3, ?4, )sql",
                                                kNextUse, R"sql()
    ON CONFLICT (digest) DO UPDATE
      SET manifest_digest = excluded.manifest_digest, file_name = excluded.file_name,
          last_used = excluded.last_used)sql");
  static constexpr char kResult[] = R"sql(
    INSERT INTO compile_results (key, artifact_digest, created, model_digest, target, options,
                                 compiler_version, tuning_revision)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
    ON CONFLICT (key) DO UPDATE
      SET artifact_digest = excluded.artifact_digest, created = excluded.created,
          model_digest = excluded.model_digest, target = excluded.target,
          options = excluded.options, compiler_version = excluded.compiler_version,
          tuning_revision = excluded.tuning_revision)sql";
  const int64_t now = Now();
  auto artifact = Statement::Prepare(db, artifact_sql);
  if (!artifact.ok()) return artifact.status();
  artifact->BindText(1, result.artifact_digest)
      .BindText(2, result.manifest_digest)
      .BindText(3, result.file_name)
      .BindInt(4, now);
  if (absl::Status status = artifact->Run(); !status.ok()) return status;
  auto entry = Statement::Prepare(db, kResult);
  if (!entry.ok()) return entry.status();
  entry->BindText(1, key)
      .BindText(2, result.artifact_digest)
      .BindInt(3, now)
      .BindText(4, parts.model_digest)
      .BindText(5, parts.target)
      .BindText(6, parts.options)
      .BindText(7, parts.compiler_version);
  // An unbound parameter is NULL: no revision when the compile read no tuning database.
  if (parts.tuning_revision.has_value()) entry->BindInt(8, *parts.tuning_revision);
  return entry->Run();
}

// Deletes the blob unless an artifact still uses it or a compile result names it as its
// model; returns the bytes freed.
absl::StatusOr<uint64_t> DropBlobIfUnused(sqlite3* db, std::string_view digest) {
  auto unused = Statement::Prepare(db, R"sql(
    SELECT size FROM blobs INDEXED BY blobs_sizes WHERE digest = ?1
      AND NOT EXISTS (SELECT 1 FROM artifacts WHERE digest = ?1 OR manifest_digest = ?1)
      AND NOT EXISTS (SELECT 1 FROM compile_results WHERE model_digest = ?1))sql");
  if (!unused.ok()) return unused.status();
  auto row = unused->BindText(1, digest).Step();
  if (!row.ok()) return row.status();
  if (!*row) return 0;
  const auto size = static_cast<uint64_t>(unused->ColumnInt(0));
  auto drop = Statement::Prepare(db, "DELETE FROM blobs WHERE digest = ?1");
  if (!drop.ok()) return drop.status();
  if (absl::Status status = drop->BindText(1, digest).Run(); !status.ok()) return status;
  return size;
}

// Drops an artifact, its compile results (by cascade) and its blobs; returns the bytes freed.
absl::StatusOr<uint64_t> DropArtifact(sqlite3* db, const std::string& digest) {
  auto select = Statement::Prepare(db, "SELECT manifest_digest FROM artifacts WHERE digest = ?1");
  if (!select.ok()) return select.status();
  auto row = select->BindText(1, digest).Step();
  if (!row.ok() || !*row) return row.status();
  const std::string manifest = select->ColumnBytes(0);
  auto drop = Statement::Prepare(db, "DELETE FROM artifacts WHERE digest = ?1");
  if (!drop.ok()) return drop.status();
  if (absl::Status status = drop->BindText(1, digest).Run(); !status.ok()) return status;
  uint64_t freed = 0;
  for (const std::string& blob : {digest, manifest}) {
    absl::StatusOr<uint64_t> bytes = DropBlobIfUnused(db, blob);
    if (!bytes.ok()) return bytes.status();
    freed += *bytes;
  }
  return freed;
}

// Evicts least recently used artifacts, except `keep`, until the blobs take at most
// `limit` bytes (every one without a limit) or no artifact is left. Runs inside the
// caller's transaction.
absl::StatusOr<EvictResult> EvictLeastRecentlyUsed(sqlite3* db, std::optional<uint64_t> limit,
                                                   std::string_view keep) {
  absl::StatusOr<std::pair<int64_t, uint64_t>> blobs =
      QueryCountAndBytes(db, "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs");
  if (!blobs.ok()) return blobs.status();
  uint64_t total = blobs->second;
  EvictResult result;
  while (!limit.has_value() || total > *limit) {
    auto oldest = Statement::Prepare(
        db, "SELECT digest FROM artifacts WHERE digest != ?1 ORDER BY last_used LIMIT 1");
    if (!oldest.ok()) return oldest.status();
    auto row = oldest->BindText(1, keep).Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    absl::StatusOr<uint64_t> freed = DropArtifact(db, oldest->ColumnBytes(0));
    if (!freed.ok()) return freed.status();
    total -= std::min(total, *freed);
    result.artifacts += 1;
    result.bytes += *freed;
  }
  if (absl::Status status = BumpCounter(db, "evictions", result.artifacts); !status.ok()) {
    return status;
  }
  return result;
}

absl::StatusOr<EvictResult> EvictOne(sqlite3* db, const std::string& digest) {
  absl::StatusOr<int64_t> found =
      QueryInt(db, "SELECT COUNT(*) FROM artifacts WHERE digest = ?1", digest);
  if (!found.ok()) return found.status();
  if (*found == 0) return absl::NotFoundError(absl::StrCat("evict: no artifact ", digest));
  absl::StatusOr<uint64_t> freed = DropArtifact(db, digest);
  if (!freed.ok()) return freed.status();
  if (absl::Status status = BumpCounter(db, "evictions"); !status.ok()) return status;
  return EvictResult{.artifacts = 1, .bytes = *freed};
}

// Both blobs of every artifact that uses `digest` as its file or manifest.
absl::StatusOr<std::vector<std::string>> ArtifactBlobsUsing(sqlite3* db, std::string_view digest) {
  auto stmt = Statement::Prepare(
      db,
      "SELECT digest, manifest_digest FROM artifacts WHERE digest = ?1 OR manifest_digest = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->BindText(1, digest);
  std::vector<std::string> blobs;
  for (;;) {
    auto row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return blobs;
    blobs.push_back(stmt->ColumnBytes(0));
    blobs.push_back(stmt->ColumnBytes(1));
  }
}

std::string Quote(const std::string& text) { return absl::StrCat("'", text, "'"); }

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, StoreOptions options) {
  absl::StatusOr<sqlite3*> connection = OpenConnection(path);
  if (!connection.ok()) return connection.status();
  sqlite3* db = *connection;
  absl::Status status = CheckIntegrity(db, path);
  if (status.ok()) status = MigrateSchema(db);
  if (!status.ok()) {
    sqlite3_close(db);
    return status;
  }
  // A row holds the blob plus a few short columns; leave room for them.
  uint64_t max_blob = static_cast<uint64_t>(sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1)) - 4096;
  std::unique_ptr<Store> store(new Store(db, max_blob, options.max_bytes));
  // The cap may have been lowered since the last run.
  if (options.max_bytes > 0) {
    absl::StatusOr<EvictResult> evicted =
        store->Evict({.scope = EvictRequest::Scope::kToBytes, .to_bytes = options.max_bytes});
    if (!evicted.ok()) return evicted.status();
  }
  return store;
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
  spdlog::warn("cache: blob {} is corrupt (its bytes hash to {}); quarantining it", digest, actual);
  std::string reason = absl::StrCat("bytes hash to ", actual);
  if (absl::Status status = QuarantineBlob(digest, bytes, reason); !status.ok()) return status;
  return std::nullopt;
}

// Moves the bytes to quarantine and drops the artifacts that used them, with their other
// blob, which nothing could serve any more.
absl::Status Store::QuarantineBlob(std::string_view digest, std::string_view bytes,
                                   std::string_view reason) {
  absl::MutexLock lock(&mu_);
  return InTransaction(db_, [&]() -> absl::Status {
    absl::StatusOr<std::vector<std::string>> orphans = ArtifactBlobsUsing(db_, digest);
    if (!orphans.ok()) return orphans.status();
    // Only the damaged bytes: a PutBlob since the read may already have repaired the row.
    auto drop = Statement::Prepare(db_, "DELETE FROM blobs WHERE digest = ?1 AND bytes = ?2");
    if (!drop.ok()) return drop.status();
    if (absl::Status status = drop->BindText(1, digest).BindBlob(2, bytes).Run(); !status.ok()) {
      return status;
    }
    if (sqlite3_changes(db_) == 0) return absl::OkStatus();
    for (const std::string& blob : *orphans) {
      if (absl::StatusOr<uint64_t> freed = DropBlobIfUnused(db_, blob); !freed.ok()) {
        return freed.status();
      }
    }
    auto keep = Statement::Prepare(db_, R"sql(
      INSERT INTO quarantine (digest, size, found, reason, bytes) VALUES (?1, ?2, ?3, ?4, ?5))sql");
    if (!keep.ok()) return keep.status();
    keep->BindText(1, digest).BindInt(2, bytes.size()).BindInt(3, Now()).BindText(4, reason);
    if (absl::Status status = keep->BindBlob(5, bytes).Run(); !status.ok()) return status;
    absl::Status trim = Exec(db_, absl::StrCat("DELETE FROM quarantine WHERE id NOT IN (SELECT id "
                                               "FROM quarantine ORDER BY id DESC LIMIT ",
                                               kQuarantineKept, ")")
                                      .c_str());
    if (!trim.ok()) return trim;
    return BumpCounter(db_, "quarantined");
  });
}

absl::StatusOr<bool> Store::HasBlob(std::string_view digest) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, "SELECT 1 FROM blobs WHERE digest = ?1");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, digest).Step();
}

absl::StatusOr<bool> Store::HasCompileResult(std::string_view key) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, "SELECT 1 FROM compile_results WHERE key = ?1");
  if (!stmt.ok()) return stmt.status();
  return stmt->BindText(1, key).Step();
}

absl::Status Store::PutCompileResult(const CompileKeyParts& parts, const CompileResult& result) {
  const std::string key = parts.Key();
  absl::MutexLock lock(&mu_);
  // One transaction: a reader never sees a compile result whose artifact row is missing, nor
  // an artifact row whose blobs an eviction took.
  return InTransaction(db_, [&]() -> absl::Status {
    if (absl::Status status = InsertCompileResult(db_, key, parts, result); !status.ok()) {
      return status;
    }
    if (max_bytes_ == 0) return absl::OkStatus();
    absl::StatusOr<EvictResult> evicted =
        EvictLeastRecentlyUsed(db_, max_bytes_, result.artifact_digest);
    if (!evicted.ok()) return evicted.status();
    if (evicted->artifacts > 0) {
      spdlog::info("cache: evicted {} artifacts ({} bytes) to stay under {} bytes",
                   evicted->artifacts, evicted->bytes, max_bytes_);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<CompileResult>> Store::GetCompileResult(std::string_view key) {
  return QueryResult(
      "SELECT a.digest, a.manifest_digest, a.file_name, b.size FROM compile_results c "
      "JOIN artifacts a ON a.digest = c.artifact_digest "
      "JOIN blobs b INDEXED BY blobs_sizes ON b.digest = a.digest "
      "WHERE c.key = ?1",
      key, /*count=*/true);
}

absl::StatusOr<std::optional<CompileResult>> Store::GetArtifact(std::string_view artifact_digest) {
  return QueryResult(
      "SELECT a.digest, a.manifest_digest, a.file_name, b.size FROM artifacts a "
      "JOIN blobs b INDEXED BY blobs_sizes ON b.digest = a.digest WHERE a.digest = ?1",
      artifact_digest, /*count=*/false);
}

absl::StatusOr<std::optional<CompileResult>> Store::QueryResult(const char* sql,
                                                                std::string_view arg, bool count) {
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, sql);
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->BindText(1, arg).Step();
  if (!row.ok()) return row.status();
  std::optional<CompileResult> result;
  if (*row) {
    result = CompileResult{.artifact_digest = stmt->ColumnBytes(0),
                           .manifest_digest = stmt->ColumnBytes(1),
                           .file_name = stmt->ColumnBytes(2),
                           .artifact_size = static_cast<uint64_t>(stmt->ColumnInt(3))};
  }
  // Bookkeeping only: a hit is still served when the file is busy or full.
  absl::Status noted = InTransaction(db_, [&]() -> absl::Status {
    if (count) {
      if (absl::Status status = BumpCounter(db_, result ? "hits" : "misses"); !status.ok()) {
        return status;
      }
    }
    if (!result) return absl::OkStatus();
    auto touch = Statement::Prepare(
        db_, absl::StrCat("UPDATE artifacts SET last_used = ", kNextUse, " WHERE digest = ?1"));
    if (!touch.ok()) return touch.status();
    return touch->BindText(1, result->artifact_digest).Run();
  });
  if (!noted.ok()) spdlog::warn("cache: cannot record a use: {}", noted.ToString());
  return result;
}

absl::StatusOr<std::string> Store::ExplainMiss(const CompileKeyParts& parts) {
  // Lexicographic nearness: the same target counts before the same options, and so on.
  static constexpr char kNearest[] = R"sql(
    SELECT target, options, compiler_version, COALESCE(CAST(tuning_revision AS TEXT), 'none')
    FROM compile_results WHERE model_digest = ?1
    ORDER BY target = ?2 DESC, options = ?3 DESC, compiler_version = ?4 DESC,
             tuning_revision IS ?5 DESC, created DESC, rowid DESC
    LIMIT 1)sql";
  absl::MutexLock lock(&mu_);
  auto stmt = Statement::Prepare(db_, kNearest);
  if (!stmt.ok()) return stmt.status();
  stmt->BindText(1, parts.model_digest)
      .BindText(2, parts.target)
      .BindText(3, parts.options)
      .BindText(4, parts.compiler_version);
  if (parts.tuning_revision.has_value()) stmt->BindInt(5, *parts.tuning_revision);
  auto row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::string("model never compiled here");
  const std::string target = stmt->ColumnBytes(0), options = stmt->ColumnBytes(1),
                    compiler = stmt->ColumnBytes(2), revision = stmt->ColumnBytes(3);
  if (target != parts.target) {
    return absl::StrCat("target differs: stored ", Quote(target), " vs requested ",
                        Quote(parts.target));
  }
  if (options != parts.options) {
    return absl::StrCat("options differ: stored ", Quote(options), " vs requested ",
                        Quote(parts.options));
  }
  if (compiler != parts.compiler_version) {
    return absl::StrCat("compiled by compiler ", compiler, ", this is ", parts.compiler_version);
  }
  const std::string wanted =
      parts.tuning_revision ? std::to_string(*parts.tuning_revision) : std::string("none");
  if (revision != wanted) {
    return absl::StrCat("tuning records changed since: revision ", revision, ", now ", wanted);
  }
  return std::string("an entry for this key was stored meanwhile");
}

absl::StatusOr<CacheStats> Store::Stats() {
  CacheStats stats{.max_bytes = max_bytes_};
  absl::MutexLock lock(&mu_);
  // One transaction, so the numbers describe one state of the file.
  absl::Status status = InTransaction(db_, [&]() -> absl::Status {
    struct Pair {
      int64_t* count;
      uint64_t* bytes;
      const char* sql;
    };
    const Pair pairs[] = {
        {&stats.blobs, &stats.blob_bytes, "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs"},
        {&stats.models, &stats.model_bytes,
         "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM "
         "artifacts a WHERE a.digest = b.digest OR a.manifest_digest = b.digest)"},
        {&stats.quarantine_kept, &stats.quarantine_bytes,
         "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM quarantine"},
    };
    for (const Pair& pair : pairs) {
      absl::StatusOr<std::pair<int64_t, uint64_t>> got = QueryCountAndBytes(db_, pair.sql);
      if (!got.ok()) return got.status();
      std::tie(*pair.count, *pair.bytes) = *got;
    }
    const std::pair<int64_t*, const char*> counts[] = {
        {&stats.artifacts, "SELECT COUNT(*) FROM artifacts"},
        {&stats.compile_results, "SELECT COUNT(*) FROM compile_results"},
        {&stats.quarantined, "SELECT value FROM counters WHERE name = 'quarantined'"},
        {&stats.evictions, "SELECT value FROM counters WHERE name = 'evictions'"},
        {&stats.hits, "SELECT value FROM counters WHERE name = 'hits'"},
        {&stats.misses, "SELECT value FROM counters WHERE name = 'misses'"},
    };
    for (const auto& [field, sql] : counts) {
      absl::StatusOr<int64_t> got = QueryInt(db_, sql);
      if (!got.ok()) return got.status();
      *field = *got;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return stats;
}

absl::StatusOr<EvictResult> Store::Evict(const EvictRequest& request) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<EvictResult> result;
  absl::Status status = InTransaction(db_, [&]() -> absl::Status {
    switch (request.scope) {
      case EvictRequest::Scope::kAllArtifacts:
        result = EvictLeastRecentlyUsed(db_, std::nullopt, "");
        break;
      case EvictRequest::Scope::kToBytes:
        result = EvictLeastRecentlyUsed(db_, request.to_bytes, "");
        break;
      case EvictRequest::Scope::kArtifact:
        result = EvictOne(db_, request.artifact_digest);
        break;
    }
    return result.status();
  });
  if (!status.ok()) return status;
  return result;
}

absl::Status Store::Checkpoint() {
  absl::MutexLock lock(&mu_);
  return Exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
}

}  // namespace kiln::cache
