// The SQLite store: blobs, compile results, corruption handling and persistence.
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cache/digest.h"
#include "cache/store.h"
#include "gtest/gtest.h"

namespace kiln::cache {
namespace {

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

  std::unique_ptr<Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
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

  void CorruptBlob(const std::string& digest) {
    Sql("UPDATE blobs SET bytes = X'deadbeef' WHERE digest = ?1", digest);
  }
  std::string CountBlobs(const std::string& digest) {
    return Sql("SELECT COUNT(*) FROM blobs WHERE digest = ?1", digest);
  }

  // Stores an artifact and its manifest and records them under `key`.
  CompileResult PutResult(const std::string& key, const std::string& artifact) {
    CompileResult result{.artifact_digest = *store_->PutBlob(artifact),
                         .manifest_digest = *store_->PutBlob("{\"for\": \"" + artifact + "\"}"),
                         .file_name = "model.so",
                         .artifact_size = artifact.size()};
    EXPECT_TRUE(store_->PutCompileResult(key, result).ok());
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
  const CompileResult put = PutResult("key-1", "artifact bytes");
  absl::StatusOr<std::optional<CompileResult>> got = store_->GetCompileResult("key-1");
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
  EXPECT_FALSE(store_->GetCompileResult("other key")->has_value());
}

TEST_F(StoreTest, LaterCompileResultReplacesEarlier) {
  PutResult("key", "old artifact");
  const CompileResult newer = PutResult("key", "new artifact");
  EXPECT_EQ((*store_->GetCompileResult("key"))->artifact_digest, newer.artifact_digest);
}

TEST_F(StoreTest, CompileResultNeedsItsBlobs) {
  CompileResult dangling{.artifact_digest = Sha256Digest("not stored"),
                         .manifest_digest = Sha256Digest("neither"),
                         .file_name = "model.so"};
  absl::Status status = store_->PutCompileResult("key", dangling);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_FALSE(store_->GetCompileResult("key")->has_value());
}

TEST_F(StoreTest, CorruptArtifactTakesItsCompileResultWithIt) {
  const CompileResult put = PutResult("key", "artifact bytes");
  CorruptBlob(put.artifact_digest);
  EXPECT_FALSE(store_->GetBlob(put.artifact_digest)->has_value());
  EXPECT_FALSE(store_->GetCompileResult("key")->has_value());
  EXPECT_FALSE(store_->GetArtifact(put.artifact_digest)->has_value());
  EXPECT_EQ(Sql("SELECT COUNT(*) FROM compile_results"), "0");
}

TEST_F(StoreTest, CorruptManifestTakesItsCompileResultWithIt) {
  const CompileResult put = PutResult("key", "artifact bytes");
  CorruptBlob(put.manifest_digest);
  EXPECT_FALSE(store_->GetBlob(put.manifest_digest)->has_value());
  EXPECT_FALSE(store_->GetCompileResult("key")->has_value());
}

TEST_F(StoreTest, ReopenKeepsBlobsAndResults) {
  const std::string model = *store_->PutBlob("model");
  const CompileResult put = PutResult("key", "artifact");
  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(**store_->GetBlob(model), "model");
  absl::StatusOr<std::optional<CompileResult>> got = store_->GetCompileResult("key");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->artifact_digest, put.artifact_digest);
}

TEST_F(StoreTest, UsesWriteAheadLogAndSchemaVersion) {
  EXPECT_EQ(Sql("PRAGMA journal_mode"), "wal");
  // foreign_keys is per connection; the store's own is checked by CompileResultNeedsItsBlobs.
  EXPECT_EQ(Sql("PRAGMA user_version"), "1");
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

}  // namespace
}  // namespace kiln::cache
