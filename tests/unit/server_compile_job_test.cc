// CompileJob without gRPC: a real store in a temp dir, a fake compiler, events in a vector.
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/compile_job.h"

namespace kiln::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = v1::CompileEvent::Kind;

class CompileJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_job_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = *cache::Store::Open((dir_ / "kiln.db").string());
    model_ = *store_->PutBlob("model bytes");
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Runs one job; `interrupt_after` events in, the client "goes away".
  absl::Status Run(const std::vector<std::string>& targets, int interrupt_after = -1) {
    v1::CompileRequest request;
    request.set_model_digest(model_);
    for (const std::string& target : targets) request.add_targets(target);
    auto compiler = [this](std::string_view onnx, const ir::Target& target,
                           const driver::CompileOptions&,
                           const driver::EventSink& events) -> absl::StatusOr<driver::Artifact> {
      ++compiler_calls_;
      seen_model_ = std::string(onnx);
      events({driver::CompileEvent::Kind::kInfo, "note", "from the compiler"});
      return driver::Artifact{target.Canonical(), "", "artifact of " + target.preset, "{}"};
    };
    auto emit = [this](const v1::CompileEvent& event) { events_.push_back(event); };
    auto interrupted = [this, interrupt_after] {
      return interrupt_after >= 0 && static_cast<int>(events_.size()) >= interrupt_after
                 ? absl::CancelledError("client went away")
                 : absl::OkStatus();
    };
    return CompileJob(*store_, compiler, emit, interrupted).Run(request);
  }

  // Overwrites the model's bytes behind the store's back, as a disk fault would.
  void CorruptModel() {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "kiln.db").c_str(), &db), SQLITE_OK);
    const std::string sql = "UPDATE blobs SET bytes = X'00' WHERE digest = '" + model_ + "'";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }

  std::vector<Kind> Kinds() const {
    std::vector<Kind> kinds;
    for (const v1::CompileEvent& event : events_) kinds.push_back(event.kind());
    return kinds;
  }

  std::filesystem::path dir_;
  std::unique_ptr<cache::Store> store_;
  std::string model_;
  std::vector<v1::CompileEvent> events_;
  int compiler_calls_ = 0;
  std::string seen_model_;
};

TEST_F(CompileJobTest, MissCompilesAndStoresThenHitSkipsTheCompiler) {
  ASSERT_TRUE(Run({"x86_64"}).ok());
  EXPECT_THAT(Kinds(), ElementsAre(v1::CompileEvent::CACHE_MISS, v1::CompileEvent::INFO,
                                   v1::CompileEvent::TARGET_DONE));
  EXPECT_EQ(seen_model_, "model bytes");
  const v1::CompileEvent done = events_.back();
  EXPECT_EQ(done.artifact_digest(), cache::Sha256Digest("artifact of x86_64"));
  EXPECT_EQ(done.artifact_file_name(), "model.so");  // the target's default: the fake gave none
  EXPECT_EQ(**store_->GetBlob(done.artifact_digest()), "artifact of x86_64");

  events_.clear();
  ASSERT_TRUE(Run({"x86_64"}).ok());
  EXPECT_THAT(Kinds(), ElementsAre(v1::CompileEvent::CACHE_HIT, v1::CompileEvent::TARGET_DONE));
  EXPECT_EQ(events_.back().artifact_digest(), done.artifact_digest());
  EXPECT_EQ(compiler_calls_, 1);
}

TEST_F(CompileJobTest, InterruptionStopsBeforeTheNextTarget) {
  // Three events make up the first target; the job must not start the second one.
  absl::Status status = Run({"x86_64", "bogus"}, /*interrupt_after=*/3);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(events_.size(), 3u);
  EXPECT_EQ(compiler_calls_, 1);
}

TEST_F(CompileJobTest, UnknownModelIsNotFound) {
  model_ = cache::Sha256Digest("never stored");
  absl::Status status = Run({"x86_64"});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(model_));
  EXPECT_EQ(compiler_calls_, 0);
  EXPECT_TRUE(events_.empty());
}

TEST_F(CompileJobTest, CorruptModelIsNotCompiled) {
  CorruptModel();
  absl::Status status = Run({"x86_64"});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("upload it again"));
  EXPECT_EQ(compiler_calls_, 0);
  EXPECT_THAT(Kinds(), ElementsAre(v1::CompileEvent::CACHE_MISS, v1::CompileEvent::TARGET_ERROR));
}

TEST_F(CompileJobTest, CacheHitsDoNotReadTheModel) {
  ASSERT_TRUE(Run({"x86_64"}).ok());
  CorruptModel();  // would fail the job if the model were read
  events_.clear();
  EXPECT_TRUE(Run({"x86_64"}).ok());
  EXPECT_THAT(Kinds(), ElementsAre(v1::CompileEvent::CACHE_HIT, v1::CompileEvent::TARGET_DONE));
}

TEST_F(CompileJobTest, EveryTargetEndsWithDoneOrError) {
  absl::Status status = Run({"bogus", "x86_64", "also-bogus"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'bogus'"));  // the first failure, not the last
  std::vector<std::string> ends;
  for (const v1::CompileEvent& event : events_) {
    if (event.kind() == v1::CompileEvent::TARGET_DONE)
      ends.push_back("done " + event.target_preset());
    if (event.kind() == v1::CompileEvent::TARGET_ERROR)
      ends.push_back("error " + event.target_preset());
  }
  EXPECT_THAT(ends, ElementsAre("error bogus", "done x86_64", "error also-bogus"));
}

}  // namespace
}  // namespace kiln::server
