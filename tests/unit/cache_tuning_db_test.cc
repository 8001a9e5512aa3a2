// The tuning database: best-record lookup by the full key and compiler version, validation,
// JSON lines export and import, persistence and concurrent use.
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::cache {
namespace {

using ::testing::HasSubstr;

constexpr char kVersion[] = "kiln 0.1.0 (abc)";

TuningKey Key() {
  return {.workload = "w:1f2e",
          .target = "triple=x86_64-unknown-linux-gnu;cpu=x86-64",
          .space_version = 3,
          .bucket = "n=64"};
}

TuningRecord Record(std::string trace_json, double median_ns) {
  return {.key = Key(),
          .trace_json = std::move(trace_json),
          .median_ns = median_ns,
          .times_ns = {median_ns, median_ns + 1.5},
          .device = "AMD EPYC 9454",
          .compiler_version = kVersion,
          .created_unix = 1700000000};
}

class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_tuning_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    db_ = Open("kiln.db");
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<TuningDb> Open(const std::string& name) {
    absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open((dir_ / name).string());
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? *std::move(db) : nullptr;
  }

  // The trace of the best record for `key`, or "none".
  std::string BestTrace(const TuningKey& key, std::string_view version = kVersion) {
    absl::StatusOr<std::optional<TuningRecord>> best = db_->Best(key, version);
    EXPECT_TRUE(best.ok()) << best.status();
    return best.ok() && best->has_value() ? (*best)->trace_json : "none";
  }

  std::string Export(TuningDb& db) {
    absl::StatusOr<std::string> text = db.ExportJsonLines();
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }

  std::filesystem::path dir_;
  std::unique_ptr<TuningDb> db_;
};

TEST_F(TuningDbTest, BestIsTheLowestMedian) {
  EXPECT_EQ(BestTrace(Key()), "none");
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 8})", 300)).ok());
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 32})", 200)).ok());
  absl::StatusOr<std::optional<TuningRecord>> best = db_->Best(Key(), kVersion);
  ASSERT_TRUE(best.ok() && best->has_value()) << best.status();
  const TuningRecord& record = **best;
  EXPECT_EQ(record.trace_json, R"({"tile":16})");  // canonical form
  EXPECT_EQ(record.median_ns, 100);
  EXPECT_EQ(record.times_ns, (std::vector<double>{100, 101.5}));
  EXPECT_EQ(record.device, "AMD EPYC 9454");
  EXPECT_EQ(record.compiler_version, kVersion);
  EXPECT_EQ(record.created_unix, 1700000000);
  EXPECT_EQ(record.key.workload, Key().workload);
  EXPECT_EQ(record.key.bucket, "n=64");
  EXPECT_EQ(record.key.space_version, 3);
}

TEST_F(TuningDbTest, EveryKeyFieldMatters) {
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  TuningKey other_workload = Key(), other_target = Key(), other_space = Key(), other_bucket = Key(),
            static_bucket = Key();
  other_workload.workload = "w:9999";
  other_target.target = "triple=aarch64-unknown-linux-gnu";
  other_space.space_version = 4;
  other_bucket.bucket = "n=128";
  static_bucket.bucket = "";
  for (const TuningKey& key :
       {other_workload, other_target, other_space, other_bucket, static_bucket}) {
    EXPECT_EQ(BestTrace(key), "none") << key.workload << " " << key.target << " "
                                      << key.space_version << " '" << key.bucket << "'";
  }
  EXPECT_EQ(BestTrace(Key()), R"({"tile":16})");
}

TEST_F(TuningDbTest, SameTraceIsReplacedOnlyByAFasterMeasurement) {
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  ASSERT_TRUE(db_->Put(Record(R"({ "tile" : 16 })", 150)).ok());  // the same trace, slower
  EXPECT_EQ((*db_->Best(Key(), kVersion))->median_ns, 100);
  ASSERT_TRUE(db_->Put(Record(R"({"tile":16})", 90)).ok());
  EXPECT_EQ((*db_->Best(Key(), kVersion))->median_ns, 90);
  EXPECT_EQ(db_->Stats()->records, 1);
}

TEST_F(TuningDbTest, OtherCompilerVersionsAreIgnoredAndRetired) {
  TuningRecord old_fast = Record(R"({"tile": 4})", 10);
  old_fast.compiler_version = "kiln 0.0.9 (old)";
  ASSERT_TRUE(db_->Put(old_fast).ok());
  EXPECT_EQ(BestTrace(Key()), "none");
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  EXPECT_EQ(BestTrace(Key()), R"({"tile":16})");
  EXPECT_EQ(BestTrace(Key(), "kiln 0.0.9 (old)"), R"({"tile":4})");

  absl::StatusOr<TuningStats> stats = db_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 2);
  EXPECT_EQ(stats->workloads, 1);
  EXPECT_EQ(stats->records_by_compiler_version,
            (std::map<std::string, int64_t>{{"kiln 0.0.9 (old)", 1}, {kVersion, 1}}));

  EXPECT_EQ(db_->Retire(kVersion).value_or(-1), 1);
  EXPECT_EQ(BestTrace(Key(), "kiln 0.0.9 (old)"), "none");
  EXPECT_EQ(BestTrace(Key()), R"({"tile":16})");
  EXPECT_EQ(db_->Retire(kVersion).value_or(-1), 0);
}

// A compile keyed by the revision must see every change to its target's records, and
// nothing else: a slower duplicate, a failed put and other targets leave it alone.
TEST_F(TuningDbTest, RevisionChangesWithTheTargetsRecordsOnly) {
  const std::string target = Key().target;
  auto revision = [&](const std::string& t) { return db_->Revision(t).value_or(-1); };
  EXPECT_EQ(revision(target), 0);
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  const int64_t added = revision(target);
  EXPECT_GT(added, 0);
  EXPECT_EQ(revision(target), added);  // reading changes nothing

  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 150)).ok());  // slower: not stored
  EXPECT_FALSE(db_->Put(Record("not json", 100)).ok());
  TuningRecord other = Record(R"({"tile": 8})", 50);
  other.key.target = "triple=aarch64-unknown-linux-gnu;cpu=generic";
  ASSERT_TRUE(db_->Put(other).ok());
  EXPECT_EQ(revision(target), added);
  EXPECT_GT(revision(other.key.target), 0);

  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 90)).ok());  // faster: replaces
  const int64_t replaced = revision(target);
  EXPECT_NE(replaced, added);

  TuningRecord old_version = Record(R"({"tile": 4})", 10);
  old_version.compiler_version = "kiln 0.0.9 (old)";
  ASSERT_TRUE(db_->Put(old_version).ok());
  const int64_t before_retire = revision(target);
  EXPECT_NE(before_retire, replaced);
  EXPECT_EQ(db_->Retire(kVersion).value_or(-1), 1);
  EXPECT_NE(revision(target), before_retire);

  const int64_t before_import = revision(target);
  std::unique_ptr<TuningDb> fresh = Open("fresh.db");
  ASSERT_TRUE(fresh->Put(Record(R"({"tile": 32})", 80)).ok());
  ASSERT_TRUE(db_->ImportJsonLines(Export(*fresh)).ok());
  EXPECT_NE(revision(target), before_import);

  // Kept in the file: another connection (another process) sees the same number.
  const int64_t now = revision(target);
  db_.reset();
  db_ = Open("kiln.db");
  EXPECT_EQ(revision(target), now);
}

TEST_F(TuningDbTest, ValidationNamesTheField) {
  auto error_of = [&](auto change) {
    TuningRecord record = Record(R"({"tile": 16})", 100);
    change(record);
    absl::Status status = db_->Put(record);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  EXPECT_EQ(error_of([](TuningRecord& r) { r.key.workload = ""; }),
            "tuning record: workload: must not be empty");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.key.target = ""; }),
            "tuning record: target: must not be empty");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.compiler_version = ""; }),
            "tuning record: compiler_version: must not be empty");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.median_ns = 0; }),
            "tuning record: median_ns: must be > 0 and finite, got 0");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.median_ns = std::nan(""); }),
            "tuning record: median_ns: must be > 0 and finite, got nan");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.median_ns = INFINITY; }),
            "tuning record: median_ns: must be > 0 and finite, got inf");
  EXPECT_EQ(error_of([](TuningRecord& r) {
              r.times_ns = {1, -2};
            }),
            "tuning record: times_ns: must be >= 0 and finite, got -2");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.key.space_version = -1; }),
            "tuning record: space_version: must be >= 0, got -1");
  EXPECT_EQ(error_of([](TuningRecord& r) { r.device = "\xff"; }),
            "tuning record: device: is not valid UTF-8");
  EXPECT_THAT(error_of([](TuningRecord& r) { r.trace_json = R"({"tile": )"; }),
              HasSubstr("tuning record: trace_json: is not valid JSON"));
  EXPECT_THAT(error_of([](TuningRecord& r) { r.trace_json = ""; }),
              HasSubstr("tuning record: trace_json: is not valid JSON"));
  EXPECT_EQ(db_->Stats()->records, 0);
}

TEST_F(TuningDbTest, ExportIsOneStableLinePerRecord) {
  EXPECT_EQ(Export(*db_), "");
  TuningRecord record = Record(R"({"steps": [{"split": [8, 4]}], "a": 1.5})", 1234.5);
  record.key.bucket = "";
  ASSERT_TRUE(db_->Put(record).ok());
  EXPECT_EQ(Export(*db_),
            R"j({"workload":"w:1f2e","target":"triple=x86_64-unknown-linux-gnu;cpu=x86-64",)j"
            R"j("space_version":3,"bucket":"","compiler_version":"kiln 0.1.0 (abc)",)j"
            R"j("device":"AMD EPYC 9454","median_ns":1234.5,"times_ns":[1234.5,1236.0],)j"
            R"j("created_unix":1700000000,"trace_json":{"a":1.5,"steps":[{"split":[8,4]}]}})j"
            "\n");
}

TEST_F(TuningDbTest, ExportImportRoundTrips) {
  TuningRecord other = Record(R"(["replay", 0.1, null, "ü"])", 0.1 + 0.2);
  other.key.workload = "w:0000";
  other.compiler_version = "kiln 0.0.9 (old)";
  other.times_ns = {};
  for (const TuningRecord& record :
       {Record(R"({"tile": 8})", 300), Record(R"({"tile": 16})", 1e-3), other}) {
    ASSERT_TRUE(db_->Put(record).ok());
  }
  const std::string exported = Export(*db_);
  std::unique_ptr<TuningDb> fresh = Open("fresh.db");
  absl::StatusOr<int64_t> imported = fresh->ImportJsonLines(exported);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(*imported, 3);
  EXPECT_EQ(Export(*fresh), exported);
  // Importing again changes nothing: every record is already there, as fast.
  EXPECT_EQ(fresh->ImportJsonLines(exported).value_or(-1), 0);
  EXPECT_EQ(Export(*fresh), exported);
}

TEST_F(TuningDbTest, ImportSkipsBlankLines) {
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 8})", 300)).ok());
  const std::string line = Export(*db_);
  std::unique_ptr<TuningDb> fresh = Open("fresh.db");
  EXPECT_EQ(fresh->ImportJsonLines(absl::StrCat("\n  \n", line, "\r\n\n")).value_or(-1), 1);
  EXPECT_EQ(fresh->ImportJsonLines("").value_or(-1), 0);
  EXPECT_EQ(Export(*fresh), line);
}

TEST_F(TuningDbTest, BadImportLineIsNamedAndChangesNothing) {
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 8})", 300)).ok());
  const std::string good = Export(*db_);
  std::unique_ptr<TuningDb> target = Open("target.db");
  ASSERT_TRUE(target->Put(Record(R"({"tile": 2})", 50)).ok());
  const std::string before = Export(*target);

  auto error_of = [&](const std::string& bad_line) {
    // The bad line is line 3; line 1 is good and would be imported were it not for it.
    absl::StatusOr<int64_t> imported =
        target->ImportJsonLines(absl::StrCat(good, "\n", bad_line, "\n"));
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument) << imported.status();
    EXPECT_EQ(Export(*target), before);
    return std::string(imported.status().message());
  };
  std::string line = good.substr(0, good.size() - 1);
  auto replace = [&](std::string_view from, std::string_view to) {
    std::string changed = line;
    changed.replace(changed.find(from), from.size(), to);
    return changed;
  };
  EXPECT_EQ(error_of("{not json"), "line 3: not valid JSON");
  EXPECT_EQ(error_of("[1, 2]"), "line 3: not a JSON object");
  EXPECT_EQ(error_of(replace(R"("median_ns":300.0)", R"("median_ns":-1)")),
            "line 3: median_ns: must be > 0 and finite, got -1");
  EXPECT_EQ(error_of(replace(R"("median_ns":300.0,)", "")), "line 3: median_ns: missing");
  EXPECT_EQ(error_of(replace(R"("workload":"w:1f2e")", R"("workload":7)")),
            "line 3: workload: must be a string");
  EXPECT_EQ(error_of(replace(R"("workload":"w:1f2e")", R"("workload":"")")),
            "line 3: workload: must not be empty");
  EXPECT_EQ(error_of(replace(R"("space_version":3)", R"("space_version":3.5)")),
            "line 3: space_version: must be an integer");
  EXPECT_EQ(error_of(replace(R"("space_version":3)", R"("space_version":-3)")),
            "line 3: space_version: is out of range");
  EXPECT_EQ(error_of(replace(R"("times_ns":[300.0,301.5])", R"("times_ns":[1,"x"])")),
            "line 3: times_ns: must be a list of numbers");
  EXPECT_EQ(error_of(replace(R"(,"trace_json":{"tile":8})", "")), "line 3: trace_json: missing");
  EXPECT_EQ(error_of(replace(R"("device")", R"("devise")")), "line 3: devise: unknown field");
}

TEST_F(TuningDbTest, RecordsSurviveReopening) {
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  const std::string before = Export(*db_);
  db_.reset();
  db_ = Open("kiln.db");
  EXPECT_EQ(BestTrace(Key()), R"({"tile":16})");
  EXPECT_EQ(Export(*db_), before);
}

TEST_F(TuningDbTest, SharesTheFileWithTheStore) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open((dir_ / "kiln.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::string> digest = (*store)->PutBlob("bytes");
  ASSERT_TRUE(digest.ok()) << digest.status();
  ASSERT_TRUE(db_->Put(Record(R"({"tile": 16})", 100)).ok());
  EXPECT_EQ(BestTrace(Key()), R"({"tile":16})");
  EXPECT_TRUE((*store)->HasBlob(*digest).value_or(false));
}

TEST_F(TuningDbTest, ConcurrentPutsAndLookups) {
  constexpr int kThreads = 4, kRecordsPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kRecordsPerThread; ++i) {
        // Every thread's medians are distinct; the overall best is thread 3's last record.
        const double median = 1000 - (i * kThreads + t);
        EXPECT_TRUE(db_->Put(Record(absl::StrCat(R"({"id":")", t, "-", i, R"("})"), median)).ok());
        absl::StatusOr<std::optional<TuningRecord>> best = db_->Best(Key(), kVersion);
        EXPECT_TRUE(best.ok() && best->has_value() && (*best)->median_ns <= median);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(db_->Stats()->records, kThreads * kRecordsPerThread);
  EXPECT_EQ(BestTrace(Key()), R"({"id":"3-24"})");
}

}  // namespace
}  // namespace kiln::cache
