// The fleet tier against a real PostgreSQL server: chunked blobs and their verification,
// compile results, shared tuning lines with cursors, compile leases, and two replicas
// (two connections) seeing each other's writes.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/digest.h"
#include "cache/fleet_tier.h"
#include "gtest/gtest.h"
#include "tests/support/postgres_fixture.h"

namespace kiln::cache {
namespace {

// `size` bytes that differ from those of every other seed.
std::string Bytes(size_t size, int seed) {
  std::string bytes(size, '\0');
  uint32_t state = 2166136261u ^ static_cast<uint32_t>(seed);
  for (char& byte : bytes) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<char>(state >> 24);
  }
  return bytes;
}

class FleetTierTest : public kiln::testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    tier_ = Connect();
    ASSERT_NE(tier_, nullptr);
  }

  std::unique_ptr<FleetTier> Connect() {
    absl::StatusOr<std::unique_ptr<FleetTier>> tier = FleetTier::Connect(conninfo_);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? *std::move(tier) : nullptr;
  }

  // Stores `bytes` and returns their digest.
  std::string Put(const std::string& bytes) {
    std::string digest = Sha256Digest(bytes);
    EXPECT_TRUE(tier_->PutBlob(digest, bytes).ok());
    return digest;
  }

  std::optional<std::string> Get(const std::string& digest) {
    absl::StatusOr<std::optional<std::string>> bytes = tier_->GetBlob(digest);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? *bytes : std::nullopt;
  }

  std::unique_ptr<FleetTier> tier_;
};

TEST_F(FleetTierTest, BlobsRoundTripInChunksOfAtMostOneMebibyte) {
  for (size_t size :
       {size_t{0}, size_t{1}, FleetTier::kChunkBytes, FleetTier::kChunkBytes * 5 / 2}) {
    std::string bytes = Bytes(size, static_cast<int>(size));
    std::string digest = Put(bytes);
    EXPECT_EQ(Get(digest), bytes) << size;
    const size_t chunks =
        size == 0 ? 1 : (size + FleetTier::kChunkBytes - 1) / FleetTier::kChunkBytes;
    EXPECT_EQ(Sql("SELECT count(*) FROM blob_chunks WHERE digest = $1", {digest}),
              std::to_string(chunks));
    EXPECT_EQ(Sql("SELECT chunks FROM blobs WHERE digest = $1", {digest}), std::to_string(chunks));
  }
  EXPECT_EQ(Sql("SELECT max(length(bytes)) FROM blob_chunks"),
            std::to_string(FleetTier::kChunkBytes));
}

TEST_F(FleetTierTest, PutBlobIsIdempotent) {
  std::string bytes = Bytes(FleetTier::kChunkBytes + 7, 1);
  std::string digest = Put(bytes);
  Put(bytes);
  EXPECT_EQ(Get(digest), bytes);
  EXPECT_EQ(Sql("SELECT count(*) FROM blobs"), "1");
  EXPECT_EQ(Sql("SELECT count(*) FROM blob_chunks"), "2");
}

TEST_F(FleetTierTest, PutBlobRefusesBytesThatDoNotMatchTheDigest) {
  absl::Status status = tier_->PutBlob(Sha256Digest("other"), "bytes");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(Sql("SELECT count(*) FROM blob_chunks"), "0");
}

TEST_F(FleetTierTest, MissingBlobIsAMiss) {
  EXPECT_EQ(Get(Sha256Digest("never stored")), std::nullopt);
}

TEST_F(FleetTierTest, CorruptChunkIsAMissAndTheNextPutRepairsIt) {
  std::string bytes = Bytes(FleetTier::kChunkBytes * 5 / 2, 2);
  std::string digest = Put(bytes);
  Sql("UPDATE blob_chunks SET bytes = set_byte(bytes, 10, (get_byte(bytes, 10) + 1) % 256) "
      "WHERE digest = $1 AND idx = 1",
      {digest});
  EXPECT_EQ(Get(digest), std::nullopt);
  // The damaged blob is gone, so write-through of the recompiled bytes stores it again.
  EXPECT_EQ(Sql("SELECT count(*) FROM blobs WHERE digest = $1", {digest}), "0");
  EXPECT_EQ(Sql("SELECT count(*) FROM blob_chunks WHERE digest = $1", {digest}), "0");
  Put(bytes);
  EXPECT_EQ(Get(digest), bytes);
}

TEST_F(FleetTierTest, MissingChunkIsAMiss) {
  std::string bytes = Bytes(FleetTier::kChunkBytes * 5 / 2, 3);
  std::string digest = Put(bytes);
  Sql("DELETE FROM blob_chunks WHERE digest = $1 AND idx = 2", {digest});
  EXPECT_EQ(Get(digest), std::nullopt);
  Put(bytes);
  EXPECT_EQ(Get(digest), bytes);
}

TEST_F(FleetTierTest, CompileResultsAreUpserted) {
  std::string artifact = Put("artifact bytes"), manifest = Put("{\"manifest\": 1}");
  CompileResult result{.artifact_digest = artifact,
                       .manifest_digest = manifest,
                       .file_name = "model.so",
                       .artifact_size = 14};
  ASSERT_TRUE(tier_->PutCompileResult("key-1", result).ok());
  absl::StatusOr<std::optional<CompileResult>> got = tier_->GetCompileResult("key-1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->artifact_digest, artifact);
  EXPECT_EQ((*got)->manifest_digest, manifest);
  EXPECT_EQ((*got)->file_name, "model.so");
  EXPECT_EQ((*got)->artifact_size, 14u);

  result.file_name = "model.wasm";
  ASSERT_TRUE(tier_->PutCompileResult("key-1", result).ok());
  got = tier_->GetCompileResult("key-1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->file_name, "model.wasm");
  EXPECT_EQ(Sql("SELECT count(*) FROM compile_results"), "1");

  got = tier_->GetCompileResult("key-2");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
}

TEST_F(FleetTierTest, CompileResultNeedsItsBlobsStoredFirst) {
  CompileResult result{.artifact_digest = Put("artifact"),
                       .manifest_digest = Sha256Digest("manifest never stored"),
                       .file_name = "model.so",
                       .artifact_size = 8};
  absl::Status status = tier_->PutCompileResult("key", result);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  absl::StatusOr<std::optional<CompileResult>> got = tier_->GetCompileResult("key");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
}

TEST_F(FleetTierTest, TuningLinesAreDeduplicatedAndReadAfterACursor) {
  absl::StatusOr<int64_t> added = tier_->PutTuningLines("{\"a\":1}\n{\"b\":2}\n\n");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 2);
  added = tier_->PutTuningLines("{\"b\":2}\n{\"c\":\"Ryzen™ 9\"}");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 1);

  absl::StatusOr<TuningLines> page = tier_->TuningLinesSince(0);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->text, "{\"a\":1}\n{\"b\":2}\n{\"c\":\"Ryzen™ 9\"}\n");
  EXPECT_EQ(page->lines, 3);
  const int64_t cursor = page->next_cursor;

  page = tier_->TuningLinesSince(cursor);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->text, "");
  EXPECT_EQ(page->next_cursor, cursor);

  ASSERT_TRUE(tier_->PutTuningLines("{\"a\":1}\n{\"d\":4}\n").ok());
  page = tier_->TuningLinesSince(cursor);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->text, "{\"d\":4}\n");
  EXPECT_GT(page->next_cursor, cursor);
}

TEST_F(FleetTierTest, TuningLinesComeInPages) {
  ASSERT_TRUE(tier_->PutTuningLines("1\n2\n3\n4\n5\n").ok());
  std::string all;
  int64_t cursor = 0, pages = 0;
  for (;;) {
    absl::StatusOr<TuningLines> page = tier_->TuningLinesSince(cursor, /*max_lines=*/2);
    ASSERT_TRUE(page.ok()) << page.status();
    if (page->lines == 0) break;
    EXPECT_LE(page->lines, 2);
    all += page->text;
    cursor = page->next_cursor;
    ++pages;
  }
  EXPECT_EQ(all, "1\n2\n3\n4\n5\n");
  EXPECT_EQ(pages, 3);
}

TEST_F(FleetTierTest, LeaseIsHeldByOneOwnerUntilReleasedOrExpired) {
  auto acquire = [&](const char* owner, absl::Duration ttl) {
    absl::StatusOr<bool> held = tier_->TryAcquireLease("key", owner, ttl);
    EXPECT_TRUE(held.ok()) << held.status();
    return held.ok() && *held;
  };
  auto renew = [&](const char* owner) {
    absl::StatusOr<bool> held = tier_->RenewLease("key", owner, absl::Seconds(60));
    EXPECT_TRUE(held.ok()) << held.status();
    return held.ok() && *held;
  };
  EXPECT_TRUE(acquire("a", absl::Seconds(60)));
  EXPECT_FALSE(acquire("b", absl::Seconds(60)));
  EXPECT_TRUE(acquire("a", absl::Seconds(60)));  // renewal by the holder
  EXPECT_TRUE(renew("a"));
  EXPECT_FALSE(renew("b"));
  // Another key is independent.
  absl::StatusOr<bool> other = tier_->TryAcquireLease("other key", "b", absl::Seconds(60));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(*other);

  // Release by someone else does nothing; by the holder it frees the lease.
  ASSERT_TRUE(tier_->ReleaseLease("key", "b").ok());
  EXPECT_FALSE(acquire("b", absl::Seconds(60)));
  ASSERT_TRUE(tier_->ReleaseLease("key", "a").ok());
  EXPECT_FALSE(renew("a"));
  EXPECT_TRUE(acquire("b", absl::Seconds(1)));

  // b's short lease lapses (as a killed replica's would) and a takes over; b has lost it.
  EXPECT_FALSE(acquire("a", absl::Seconds(60)));
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_TRUE(acquire("a", absl::Seconds(60)));
  EXPECT_FALSE(renew("b"));
  EXPECT_FALSE(acquire("b", absl::Seconds(60)));
  EXPECT_EQ(Sql("SELECT owner FROM leases WHERE key = 'key'"), "a");
}

TEST_F(FleetTierTest, LeaseTtlMustBePositive) {
  absl::StatusOr<bool> held = tier_->TryAcquireLease("key", "a", absl::ZeroDuration());
  EXPECT_EQ(held.status().code(), absl::StatusCode::kInvalidArgument) << held.status();
  held = tier_->RenewLease("key", "a", absl::Seconds(-1));
  EXPECT_EQ(held.status().code(), absl::StatusCode::kInvalidArgument) << held.status();
}

// What the fleet relies on: one replica's writes are the others' hits, and leases exclude
// across replicas.
TEST_F(FleetTierTest, TwoReplicasSeeEachOthersWrites) {
  std::unique_ptr<FleetTier> other = Connect();
  ASSERT_NE(other, nullptr);
  std::string bytes = Bytes(FleetTier::kChunkBytes * 2 + 1, 4);
  std::string digest = Put(bytes);
  absl::StatusOr<std::optional<std::string>> got = other->GetBlob(digest);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, bytes);

  CompileResult result{.artifact_digest = digest,
                       .manifest_digest = Put("{}"),
                       .file_name = "model.so",
                       .artifact_size = bytes.size()};
  ASSERT_TRUE(other->PutCompileResult("key", result).ok());
  absl::StatusOr<std::optional<CompileResult>> found = tier_->GetCompileResult("key");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->artifact_size, bytes.size());

  ASSERT_TRUE(other->PutTuningLines("{\"record\":1}\n").ok());
  absl::StatusOr<TuningLines> page = tier_->TuningLinesSince(0);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->text, "{\"record\":1}\n");

  absl::StatusOr<bool> mine = tier_->TryAcquireLease("key", "replica-1", absl::Seconds(60));
  absl::StatusOr<bool> theirs = other->TryAcquireLease("key", "replica-2", absl::Seconds(60));
  ASSERT_TRUE(mine.ok() && theirs.ok());
  EXPECT_TRUE(*mine);
  EXPECT_FALSE(*theirs);
}

TEST_F(FleetTierTest, OwnersAreSharedPerTenant) {
  std::unique_ptr<FleetTier> other = Connect();
  ASSERT_NE(other, nullptr);
  const std::string digest = Put("model");
  ASSERT_TRUE(tier_->GrantOwner("alpha", digest).ok());
  ASSERT_TRUE(tier_->GrantOwner("alpha", digest).ok());  // idempotent
  absl::StatusOr<bool> alpha = other->Owns("alpha", digest);
  absl::StatusOr<bool> beta = other->Owns("beta", digest);
  ASSERT_TRUE(alpha.ok() && beta.ok());
  EXPECT_TRUE(*alpha);
  EXPECT_FALSE(*beta);
}

TEST_F(FleetTierTest, ConcurrentPutsAndGets) {
  std::unique_ptr<FleetTier> other = Connect();
  ASSERT_NE(other, nullptr);
  // Two threads on one tier and a third on another connection, overlapping in what they put.
  auto work = [](FleetTier* tier, int first, std::vector<std::string>* failures) {
    for (int i = first; i < first + 12; ++i) {
      std::string bytes = Bytes(1000 + i * 10000, i);
      std::string digest = Sha256Digest(bytes);
      if (absl::Status status = tier->PutBlob(digest, bytes); !status.ok()) {
        failures->push_back(status.ToString());
      }
      absl::StatusOr<std::optional<std::string>> got = tier->GetBlob(digest);
      if (!got.ok() || *got != bytes) failures->push_back(absl::StrCat("blob ", i));
    }
  };
  std::vector<std::string> failures[3];
  std::thread a(work, tier_.get(), 0, &failures[0]);
  std::thread b(work, tier_.get(), 6, &failures[1]);
  std::thread c(work, other.get(), 3, &failures[2]);
  a.join();
  b.join();
  c.join();
  for (const auto& list : failures) EXPECT_TRUE(list.empty()) << list.front();
  EXPECT_EQ(Sql("SELECT count(*) FROM blobs"), "18");
}

TEST_F(FleetTierTest, ConnectTwiceKeepsTheSchemaAndTheData) {
  std::string digest = Put("kept");
  tier_ = Connect();
  ASSERT_NE(tier_, nullptr);
  EXPECT_EQ(Get(digest), "kept");
  EXPECT_EQ(Sql("SELECT version FROM kiln_schema"), "1");
}

TEST_F(FleetTierTest, NewerSchemaIsRefused) {
  Sql("UPDATE kiln_schema SET version = 99");
  absl::StatusOr<std::unique_ptr<FleetTier>> tier = FleetTier::Connect(conninfo_);
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kFailedPrecondition) << tier.status();
  EXPECT_NE(tier.status().message().find("99"), std::string::npos) << tier.status();
}

TEST_F(FleetTierTest, LostConnectionIsResetForTheNextCall) {
  std::string digest = Put("before");
  Sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE datname = current_database() AND pid <> pg_backend_pid()");
  // The call that finds the connection dead fails UNAVAILABLE (or succeeds on a fresh one).
  absl::StatusOr<std::optional<std::string>> first = tier_->GetBlob(digest);
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  }
  EXPECT_EQ(Get(digest), "before");
}

TEST(FleetTierConnectTest, UnreachableServerIsUnavailable) {
  absl::StatusOr<std::unique_ptr<FleetTier>> tier =
      FleetTier::Connect("host=/nonexistent/kiln dbname=kiln connect_timeout=5");
  ASSERT_EQ(tier.status().code(), absl::StatusCode::kUnavailable) << tier.status();
  EXPECT_NE(tier.status().message().find("/nonexistent/kiln"), std::string::npos)
      << tier.status();  // libpq's message names the socket it tried
}

TEST(FleetTierConnectTest, MalformedConninfoIsInvalidArgument) {
  absl::StatusOr<std::unique_ptr<FleetTier>> tier = FleetTier::Connect("no_such_option=1");
  ASSERT_EQ(tier.status().code(), absl::StatusCode::kInvalidArgument) << tier.status();
  EXPECT_NE(tier.status().message().find("no_such_option"), std::string::npos) << tier.status();
}

}  // namespace
}  // namespace kiln::cache
