// The SQLite store: blobs, compile results, corruption handling and persistence.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/digest.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::cache {
namespace {

// The parts of a compile of model `name`; the other parts are fixed.
CompileKeyParts Parts(const std::string& name) {
  return {.model_digest = Sha256Digest(name),
          .target = "triple=x86_64-unknown-linux-gnu;cpu=x86-64",
          .options = "dim_bounds=",
          .compiler_version = "kiln 0.1.0"};
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_cache_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "kiln.db").string();
    store_ = OpenStore();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Store> OpenStore(StoreOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Runs SQL on the database file through a second connection, as damage from outside would.
  // `text` is bound to ?1 when the statement has one. Returns the first column of the first
  // row as text ("" when there is none).
  std::string Sql(const std::string& sql, const std::string& text = "") {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    if (sqlite3_bind_parameter_count(stmt) > 0) {
      sqlite3_bind_text(stmt, 1, text.data(), text.size(), SQLITE_TRANSIENT);
    }
    std::string result;
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 0) != SQLITE_NULL) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    EXPECT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return result;
  }

  // Runs several statements through a second connection.
  void ExecSql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
    sqlite3_free(error);
    sqlite3_close(db);
  }

  void CorruptBlob(const std::string& digest) {
    Sql("UPDATE blobs SET bytes = X'deadbeef' WHERE digest = ?1", digest);
  }
  std::string CountBlobs(const std::string& digest) {
    return Sql("SELECT COUNT(*) FROM blobs WHERE digest = ?1", digest);
  }

  // Stores an artifact and its manifest and records them under `parts`.
  CompileResult PutResult(const CompileKeyParts& parts, const std::string& artifact) {
    CompileResult result{.artifact_digest = *store_->PutBlob(artifact),
                         .manifest_digest = *store_->PutBlob("{\"for\": \"" + artifact + "\"}"),
                         .file_name = "model.so",
                         .artifact_size = artifact.size()};
    absl::Status status = store_->PutCompileResult(parts, result);
    EXPECT_TRUE(status.ok()) << status;
    return result;
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, PutThenGetReturnsTheBytes) {
  const std::string bytes("binary\0bytes\xff", 13);
  absl::StatusOr<std::string> digest = store_->PutBlob(bytes);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, Sha256Digest(bytes));
  EXPECT_EQ(*store_->HasBlob(*digest), true);
  absl::StatusOr<std::optional<std::string>> got = store_->GetBlob(*digest);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, bytes);
  EXPECT_EQ(Sql("SELECT size FROM blobs WHERE digest = ?1", *digest), "13");
}

TEST_F(StoreTest, UnknownBlobIsAMiss) {
  const std::string digest = Sha256Digest("never stored");
  EXPECT_EQ(*store_->HasBlob(digest), false);
  absl::StatusOr<std::optional<std::string>> got = store_->GetBlob(digest);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST_F(StoreTest, PutIsIdempotent) {
  const std::string first = *store_->PutBlob("same");
  const std::string second = *store_->PutBlob("same");
  EXPECT_EQ(first, second);
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM blobs"), "1");
}

TEST_F(StoreTest, CorruptBlobIsDroppedAndServedAsMiss) {
  const std::string digest = *store_->PutBlob("model bytes");
  CorruptBlob(digest);
  absl::StatusOr<std::optional<std::string>> got = store_->GetBlob(digest);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(CountBlobs(digest), "0");
  EXPECT_EQ(*store_->HasBlob(digest), false);
}

TEST_F(StoreTest, PuttingTheBytesAgainRepairsACorruptRow) {
  const std::string digest = *store_->PutBlob("model bytes");
  CorruptBlob(digest);
  ASSERT_EQ(*store_->PutBlob("model bytes"), digest);
  absl::StatusOr<std::optional<std::string>> got = store_->GetBlob(digest);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, "model bytes");
}

TEST_F(StoreTest, CompileResultRoundTrips) {
  const CompileResult put = PutResult(Parts("key-1"), "artifact bytes");
  absl::StatusOr<std::optional<CompileResult>> got = store_->GetCompileResult(Parts("key-1").Key());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->artifact_digest, put.artifact_digest);
  EXPECT_EQ((*got)->manifest_digest, put.manifest_digest);
  EXPECT_EQ((*got)->file_name, "model.so");
  EXPECT_EQ((*got)->artifact_size, 14u);
  absl::StatusOr<std::optional<CompileResult>> by_artifact =
      store_->GetArtifact(put.artifact_digest);
  ASSERT_TRUE(by_artifact.ok() && by_artifact->has_value());
  EXPECT_EQ((*by_artifact)->manifest_digest, put.manifest_digest);
  EXPECT_FALSE(store_->GetCompileResult(Parts("other key").Key())->has_value());
}

TEST_F(StoreTest, LaterCompileResultReplacesEarlier) {
  PutResult(Parts("key"), "old artifact");
  const CompileResult newer = PutResult(Parts("key"), "new artifact");
  EXPECT_EQ((*store_->GetCompileResult(Parts("key").Key()))->artifact_digest,
            newer.artifact_digest);
}

TEST_F(StoreTest, CompileResultNeedsItsBlobs) {
  CompileResult dangling{.artifact_digest = Sha256Digest("not stored"),
                         .manifest_digest = Sha256Digest("neither"),
                         .file_name = "model.so"};
  absl::Status status = store_->PutCompileResult(Parts("key"), dangling);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_FALSE(store_->GetCompileResult(Parts("key").Key())->has_value());
}

TEST_F(StoreTest, CorruptArtifactTakesItsCompileResultWithIt) {
  const CompileResult put = PutResult(Parts("key"), "artifact bytes");
  CorruptBlob(put.artifact_digest);
  EXPECT_FALSE(store_->GetBlob(put.artifact_digest)->has_value());
  EXPECT_FALSE(store_->GetCompileResult(Parts("key").Key())->has_value());
  EXPECT_FALSE(store_->GetArtifact(put.artifact_digest)->has_value());
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM compile_results"), "0");
}

TEST_F(StoreTest, CorruptManifestTakesItsCompileResultWithIt) {
  const CompileResult put = PutResult(Parts("key"), "artifact bytes");
  CorruptBlob(put.manifest_digest);
  EXPECT_FALSE(store_->GetBlob(put.manifest_digest)->has_value());
  EXPECT_FALSE(store_->GetCompileResult(Parts("key").Key())->has_value());
}

TEST_F(StoreTest, ReopenKeepsBlobsAndResults) {
  const std::string model = *store_->PutBlob("model");
  const CompileResult put = PutResult(Parts("key"), "artifact");
  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(**store_->GetBlob(model), "model");
  absl::StatusOr<std::optional<CompileResult>> got = store_->GetCompileResult(Parts("key").Key());
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->artifact_digest, put.artifact_digest);
}

TEST_F(StoreTest, UsesWriteAheadLogAndSchemaVersion) {
  EXPECT_EQ(Sql("PRAGMA journal_mode"), "wal");
  // foreign_keys is per connection; the store's own is checked by CompileResultNeedsItsBlobs.
  EXPECT_EQ(Sql("PRAGMA user_version"), "2");
}

TEST_F(StoreTest, RefusesANewerSchema) {
  store_.reset();
  Sql("PRAGMA user_version = 99");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
}

TEST_F(StoreTest, OpenFailsForAnUnwritablePath) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open((dir_ / "missing/dir/kiln.db").string());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable) << store.status();
}

TEST_F(StoreTest, ConcurrentUseIsSafe) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string bytes = "blob " + std::to_string(i % 10);  // shared across threads
        absl::StatusOr<std::string> digest = store_->PutBlob(bytes);
        ASSERT_TRUE(digest.ok()) << digest.status();
        absl::StatusOr<std::optional<std::string>> got = store_->GetBlob(*digest);
        ASSERT_TRUE(got.ok() && got->has_value()) << t;
        EXPECT_EQ(**got, bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM blobs"), "10");
}

// --- Cache management: migration, LRU eviction, quarantine, integrity, stats, miss reasons.

using ::testing::HasSubstr;

// 1000 bytes, distinct per `i`; with its manifest ({"for": "<artifact>"}) a result takes
// kResultBytes.
std::string Artifact(int i) { return std::string(999, 'a') + static_cast<char>('0' + i); }
constexpr uint64_t kResultBytes = 1000 + 1011;

TEST_F(StoreTest, MigratesVersion1KeepingItsRows) {
  store_.reset();
  path_ = (dir_ / "v1.db").string();
  const CompileKeyParts parts = Parts("old model");
  const std::string artifact = Sha256Digest("artifact"), manifest = Sha256Digest("{}");
  // The version 1 schema, verbatim, and one compile result in it.
  ExecSql(R"sql(
    CREATE TABLE blobs (digest TEXT PRIMARY KEY, bytes BLOB NOT NULL, size INTEGER NOT NULL,
                        created INTEGER NOT NULL);
    CREATE TABLE artifacts (
      digest TEXT PRIMARY KEY REFERENCES blobs(digest) ON DELETE CASCADE,
      manifest_digest TEXT NOT NULL REFERENCES blobs(digest) ON DELETE CASCADE,
      file_name TEXT NOT NULL, created INTEGER NOT NULL);
    CREATE INDEX artifacts_by_manifest ON artifacts(manifest_digest);
    CREATE TABLE compile_results (
      key TEXT PRIMARY KEY,
      artifact_digest TEXT NOT NULL REFERENCES artifacts(digest) ON DELETE CASCADE,
      created INTEGER NOT NULL);
    CREATE INDEX compile_results_by_artifact ON compile_results(artifact_digest);
    PRAGMA user_version = 1;
    INSERT INTO blobs VALUES (')sql" +
          artifact + R"sql(', CAST('artifact' AS BLOB), 8, 1);
    INSERT INTO blobs VALUES (')sql" +
          manifest + R"sql(', CAST('{}' AS BLOB), 2, 1);
    INSERT INTO artifacts VALUES (')sql" +
          artifact + "', '" + manifest + R"sql(', 'model.so', 1);
    INSERT INTO compile_results VALUES (')sql" +
          parts.Key() + "', '" + artifact + "', 1);");
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(Sql("PRAGMA user_version"), "2");
  absl::StatusOr<std::optional<CompileResult>> got = store_->GetCompileResult(parts.Key());
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->artifact_digest, artifact);
  EXPECT_EQ((*got)->artifact_size, 8u);
  EXPECT_EQ(**store_->GetBlob(manifest), "{}");
  // Its parts are unknown, so it explains nothing; new results record theirs.
  EXPECT_EQ(*store_->ExplainMiss(parts), "model never compiled here");
  PutResult(parts, "new artifact");
  EXPECT_EQ(Sql("SELECT target FROM compile_results WHERE key = ?1", parts.Key()), parts.target);
}

TEST_F(StoreTest, CapEvictsTheLeastRecentlyUsedArtifact) {
  store_ = OpenStore({.max_bytes = 100 + 3 * kResultBytes});
  const std::string model = *store_->PutBlob(std::string(100, 'm'));
  const CompileResult first = PutResult(Parts("1"), Artifact(1));
  const CompileResult second = PutResult(Parts("2"), Artifact(2));
  PutResult(Parts("3"), Artifact(3));
  ASSERT_EQ(store_->Stats()->evictions, 0);
  ASSERT_TRUE(store_->GetCompileResult(Parts("1").Key())->has_value());  // now the newest use
  PutResult(Parts("4"), Artifact(4));

  EXPECT_FALSE(store_->GetCompileResult(Parts("2").Key())->has_value());
  EXPECT_EQ(CountBlobs(second.artifact_digest), "0");
  EXPECT_EQ(CountBlobs(second.manifest_digest), "0");
  for (const char* kept : {"1", "3", "4"}) {
    EXPECT_TRUE(store_->GetCompileResult(Parts(kept).Key())->has_value()) << kept;
  }
  EXPECT_EQ(CountBlobs(first.artifact_digest), "1");
  EXPECT_EQ(CountBlobs(model), "1");
  absl::StatusOr<CacheStats> stats = store_->Stats();
  EXPECT_EQ(stats->evictions, 1);
  EXPECT_EQ(stats->blob_bytes, 100 + 3 * kResultBytes);
}

TEST_F(StoreTest, FetchingAnArtifactCountsAsAUse) {
  store_ = OpenStore({.max_bytes = 2 * kResultBytes});
  const CompileResult first = PutResult(Parts("1"), Artifact(1));
  PutResult(Parts("2"), Artifact(2));
  ASSERT_TRUE(store_->GetArtifact(first.artifact_digest)->has_value());
  PutResult(Parts("3"), Artifact(3));
  EXPECT_TRUE(store_->GetCompileResult(Parts("1").Key())->has_value());
  EXPECT_FALSE(store_->GetCompileResult(Parts("2").Key())->has_value());
}

TEST_F(StoreTest, TheArtifactJustStoredIsNeverEvicted) {
  store_ = OpenStore({.max_bytes = 10});  // smaller than any result
  PutResult(Parts("1"), Artifact(1));
  PutResult(Parts("2"), Artifact(2));
  EXPECT_FALSE(store_->GetCompileResult(Parts("1").Key())->has_value());
  EXPECT_TRUE(store_->GetCompileResult(Parts("2").Key())->has_value());
}

TEST_F(StoreTest, OpeningWithASmallerCapEvicts) {
  PutResult(Parts("1"), Artifact(1));
  PutResult(Parts("2"), Artifact(2));
  store_.reset();
  store_ = OpenStore({.max_bytes = kResultBytes});
  EXPECT_FALSE(store_->GetCompileResult(Parts("1").Key())->has_value());
  EXPECT_TRUE(store_->GetCompileResult(Parts("2").Key())->has_value());
  EXPECT_EQ(store_->Stats()->evictions, 1);
}

TEST_F(StoreTest, EvictionLeavesTuningRecordsAndModels) {
  absl::StatusOr<std::unique_ptr<TuningDb>> tuning = TuningDb::Open(path_);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  TuningKey key{.workload = "w:1", .target = "triple=x86_64", .space_version = 1, .bucket = ""};
  ASSERT_TRUE((*tuning)
                  ->Put({.key = key,
                         .trace_json = R"({"tile":16})",
                         .median_ns = 100,
                         .times_ns = {100},
                         .device = "cpu",
                         .compiler_version = "kiln 0.1.0"})
                  .ok());
  const std::string model = *store_->PutBlob("model");
  PutResult(Parts("1"), Artifact(1));
  absl::StatusOr<EvictResult> evicted =
      store_->Evict({.scope = EvictRequest::Scope::kAllArtifacts});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->artifacts, 1);
  EXPECT_EQ(evicted->bytes, kResultBytes);
  EXPECT_EQ(CountBlobs(model), "1");
  absl::StatusOr<std::optional<TuningRecord>> best = (*tuning)->Best(key, "kiln 0.1.0");
  ASSERT_TRUE(best.ok() && best->has_value()) << best.status();
  EXPECT_EQ((*best)->trace_json, R"({"tile":16})");
}

TEST_F(StoreTest, EvictsOneArtifactKeepingASharedManifest) {
  CompileResult first = PutResult(Parts("1"), Artifact(1));
  CompileResult second{.artifact_digest = *store_->PutBlob(Artifact(2)),
                       .manifest_digest = first.manifest_digest,
                       .file_name = "model.so"};
  ASSERT_TRUE(store_->PutCompileResult(Parts("2"), second).ok());
  absl::StatusOr<EvictResult> evicted = store_->Evict(
      {.scope = EvictRequest::Scope::kArtifact, .artifact_digest = first.artifact_digest});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->artifacts, 1);
  EXPECT_EQ(evicted->bytes, 1000u);  // the artifact only: the manifest is still used
  EXPECT_EQ(CountBlobs(first.manifest_digest), "1");
  EXPECT_FALSE(store_->GetCompileResult(Parts("1").Key())->has_value());
  EXPECT_TRUE(store_->GetCompileResult(Parts("2").Key())->has_value());
  absl::StatusOr<EvictResult> again = store_->Evict(
      {.scope = EvictRequest::Scope::kArtifact, .artifact_digest = first.artifact_digest});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound) << again.status();
}

TEST_F(StoreTest, EvictsToBytesOldestFirst) {
  for (int i = 1; i <= 4; ++i) PutResult(Parts(std::to_string(i)), Artifact(i));
  absl::StatusOr<EvictResult> evicted =
      store_->Evict({.scope = EvictRequest::Scope::kToBytes, .to_bytes = 2 * kResultBytes + 1});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->artifacts, 2);
  EXPECT_EQ(evicted->bytes, 2 * kResultBytes);
  EXPECT_FALSE(store_->GetCompileResult(Parts("2").Key())->has_value());
  EXPECT_TRUE(store_->GetCompileResult(Parts("3").Key())->has_value());
  EXPECT_EQ(store_->Stats()->evictions, 2);
}

TEST_F(StoreTest, CorruptBlobIsQuarantinedWithItsDependants) {
  const CompileResult put = PutResult(Parts("key"), "artifact bytes");
  CorruptBlob(put.artifact_digest);
  EXPECT_FALSE(store_->GetBlob(put.artifact_digest)->has_value());
  absl::StatusOr<CacheStats> stats = store_->Stats();
  EXPECT_EQ(stats->quarantined, 1);
  EXPECT_EQ(stats->quarantine_kept, 1);
  EXPECT_EQ(stats->quarantine_bytes, 4u);
  EXPECT_EQ(Sql("SELECT hex(bytes) FROM quarantine WHERE digest = ?1", put.artifact_digest),
            "DEADBEEF");
  EXPECT_THAT(Sql("SELECT reason FROM quarantine"), HasSubstr("bytes hash to sha256:"));
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM artifacts"), "0");
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM compile_results"), "0");
  // Nothing can serve the manifest any more.
  EXPECT_EQ(CountBlobs(put.manifest_digest), "0");
  EXPECT_EQ(stats->blobs, 0);
}

TEST_F(StoreTest, QuarantineKeepsTheNewest16) {
  for (int i = 0; i < 20; ++i) {
    const std::string digest = *store_->PutBlob("blob " + std::to_string(i));
    CorruptBlob(digest);
    ASSERT_FALSE(store_->GetBlob(digest)->has_value());
  }
  absl::StatusOr<CacheStats> stats = store_->Stats();
  EXPECT_EQ(stats->quarantined, 20);
  EXPECT_EQ(stats->quarantine_kept, 16);
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM quarantine WHERE digest = ?1", Sha256Digest("blob 19")), "1");
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM quarantine WHERE digest = ?1", Sha256Digest("blob 3")), "0");
}

TEST_F(StoreTest, DamagedFileIsDataLoss) {
  for (int i = 0; i < 300; ++i)
    ASSERT_TRUE(store_->PutBlob("blob number " + std::to_string(i)).ok());
  store_.reset();  // the last connection checkpoints the log into the file
  const uint64_t size = std::filesystem::file_size(path_);
  constexpr uint64_t kPage = 4096;
  ASSERT_GE(size, 8 * kPage);
  {
    std::fstream file(path_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>((size / kPage / 2) * kPage));
    const std::string garbage(kPage, '\x5a');
    file.write(garbage.data(), garbage.size());
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

TEST_F(StoreTest, StatsCountWhatIsStored) {
  store_ = OpenStore({.max_bytes = 1 << 20});
  *store_->PutBlob("model");  // 5 bytes
  PutResult(Parts("1"), Artifact(1));
  PutResult(Parts("2"), Artifact(2));
  ASSERT_TRUE(store_->GetCompileResult(Parts("1").Key())->has_value());
  ASSERT_FALSE(store_->GetCompileResult(Parts("3").Key())->has_value());
  ASSERT_FALSE(store_->GetCompileResult(Parts("4").Key())->has_value());
  store_.reset();
  store_ = OpenStore({.max_bytes = 1 << 20});  // the counters survive
  absl::StatusOr<CacheStats> stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->blobs, 5);
  EXPECT_EQ(stats->blob_bytes, 5 + 2 * kResultBytes);
  EXPECT_EQ(stats->models, 1);
  EXPECT_EQ(stats->model_bytes, 5u);
  EXPECT_EQ(stats->artifacts, 2);
  EXPECT_EQ(stats->compile_results, 2);
  EXPECT_EQ(stats->quarantined, 0);
  EXPECT_EQ(stats->evictions, 0);
  EXPECT_EQ(stats->hits, 1);
  EXPECT_EQ(stats->misses, 2);
  EXPECT_EQ(stats->max_bytes, 1u << 20);
}

TEST_F(StoreTest, ConcurrentPutsUnderACapStayWithinIt) {
  store_ = OpenStore({.max_bytes = 3 * kResultBytes});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 10; ++i) {
        const std::string name = std::to_string(t) + "/" + std::to_string(i);
        const std::string artifact = name + std::string(1000 - name.size(), 'a');
        PutResult(Parts(name), artifact);
        absl::StatusOr<std::optional<CompileResult>> got =
            store_->GetCompileResult(Parts(name).Key());
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_TRUE(store_->Stats().ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  absl::StatusOr<CacheStats> stats = store_->Stats();
  EXPECT_EQ(stats->artifacts, 3);
  EXPECT_EQ(stats->blob_bytes, 3 * kResultBytes);
  EXPECT_EQ(stats->evictions, 37);
  EXPECT_EQ(stats->hits + stats->misses, 40);
}

TEST_F(StoreTest, ExplainMissNamesThePartThatDiffers) {
  const CompileKeyParts stored = Parts("model");
  CompileKeyParts tuned = stored;
  tuned.options = "dim_bounds=n:64";
  tuned.tuning_revision = 3;
  PutResult(stored, Artifact(1));
  PutResult(tuned, Artifact(2));
  auto explain = [&](auto change) {
    CompileKeyParts parts = stored;
    change(parts);
    absl::StatusOr<std::string> reason = store_->ExplainMiss(parts);
    return reason.ok() ? *reason : reason.status().ToString();
  };
  EXPECT_EQ(explain([](CompileKeyParts& p) { p.model_digest = Sha256Digest("other"); }),
            "model never compiled here");
  EXPECT_EQ(explain([](CompileKeyParts& p) { p.target = "triple=wasm32"; }),
            "target differs: stored 'triple=x86_64-unknown-linux-gnu;cpu=x86-64' vs requested "
            "'triple=wasm32'");
  EXPECT_EQ(explain([](CompileKeyParts& p) { p.options = "dim_bounds=n:8"; }),
            "options differ: stored 'dim_bounds=' vs requested 'dim_bounds=n:8'");
  EXPECT_EQ(explain([](CompileKeyParts& p) { p.compiler_version = "kiln 0.2.0"; }),
            "compiled by compiler kiln 0.1.0, this is kiln 0.2.0");
  EXPECT_EQ(explain([](CompileKeyParts& p) {
              p.options = "dim_bounds=n:64";
              p.tuning_revision = 5;
            }),
            "tuning records changed since: revision 3, now 5");
  EXPECT_EQ(explain([](CompileKeyParts& p) { p.tuning_revision = 1; }),
            "tuning records changed since: revision none, now 1");
}

}  // namespace
}  // namespace kiln::cache
