// The Kiln gRPC service end to end through tests/support/service_fixture.h (an in-process kilnd),
// driven through a real client stub. Correctness first, then user errors (each followed by a
// check that the daemon still serves).
#include <grpcpp/create_channel.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "cache/digest.h"
#include "cache/tuning_db.h"
#include "compiler/ir/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "server/server.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// --- Correctness ---------------------------------------------------------------------------

TEST_F(ServiceTest, UploadInChunksReturnsTheDigest) {
  const std::string model = Bytes(2 * kMiB + 12345);
  v1::UploadModelResponse response;
  grpc::Status status = Upload(Chunks(model, kMiB), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_digest(), cache::Sha256Digest(model));
  EXPECT_EQ(response.size_bytes(), model.size());
  EXPECT_FALSE(response.already_present());
}

TEST_F(ServiceTest, SecondUploadIsAlreadyPresent) {
  const std::string model = Bytes(1000);
  const std::string digest = UploadModel(model);
  v1::UploadModelResponse response;
  ASSERT_TRUE(Upload(Chunks(model, 100), &response).ok());
  EXPECT_EQ(response.model_digest(), digest);
  EXPECT_TRUE(response.already_present());
}

TEST_F(ServiceTest, ListTargetsNamesThePresets) {
  v1::ListTargetsResponse response;
  grpc::ClientContext context;
  SetDeadline(context);
  ASSERT_TRUE(stub_->ListTargets(&context, {}, &response).ok());
  ASSERT_EQ(static_cast<size_t>(response.targets_size()), ir::ListPresetTargets().size() + 1);
  EXPECT_EQ(response.targets(response.targets_size() - 1).name(), "host");
  EXPECT_EQ(response.targets(0).name(), "x86_64");
  EXPECT_EQ(response.targets(0).canonical(), ir::ParseTarget("x86_64")->Canonical());
  EXPECT_EQ(response.targets(0).canonical(),
            "triple=x86_64-unknown-linux-gnu;cpu=x86-64;features=;vector_bits=128");
  EXPECT_THAT(response.targets(0).description(), HasSubstr("x86_64"));
}

TEST_F(ServiceTest, HealthCheckServesTheServerAndTheKilnService) {
  EXPECT_EQ(HealthStatus(""), 1);
  EXPECT_EQ(HealthStatus("kiln.v1.Kiln"), 1);
}

TEST_F(ServiceTest, ShutdownStopsServing) {
  server_->Shutdown();
  v1::ListTargetsResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_FALSE(stub_->ListTargets(&context, {}, &response).ok());
}

TEST_F(FakeCompilerTest, SecondIdenticalCompileDoesNotRunTheCompiler) {
  const std::string digest = UploadModel(Bytes(5000));
  CompileOutcome first = Compile(digest, {"x86_64"});
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_THAT(first.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(1));
  ASSERT_THAT(first.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  EXPECT_EQ(fake_.calls, 1);

  CompileOutcome second = Compile(digest, {"x86_64"});
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_THAT(second.OfKind(v1::CompileEvent::CACHE_HIT), SizeIs(1));
  EXPECT_THAT(second.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(0));
  ASSERT_THAT(second.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  EXPECT_EQ(fake_.calls, 1);
  EXPECT_EQ(server_->service().compiler_runs(), 1);
  const v1::CompileEvent done = second.OfKind(v1::CompileEvent::TARGET_DONE)[0];
  EXPECT_EQ(done.artifact_digest(),
            first.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest());
  EXPECT_EQ(done.artifact_file_name(), "model.so");
  EXPECT_EQ(done.artifact_size(), fake_.artifact_size);
}

TEST_F(FakeCompilerTest, PresetAndEquivalentDescriptionShareTheCacheEntry) {
  const std::string digest = UploadModel(Bytes(300));
  CompileOutcome first = Compile(digest, {"x86_64-v3"});
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_THAT(first.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(1));
  const std::string description = "features=+fma,+avx2,+fma;triple=x86_64-linux-gnu;cpu=x86-64-v3";
  CompileOutcome second = Compile(digest, {description});
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_THAT(second.OfKind(v1::CompileEvent::CACHE_HIT), SizeIs(1));
  ASSERT_THAT(second.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  EXPECT_EQ(second.OfKind(v1::CompileEvent::TARGET_DONE)[0].target_preset(), description);
  EXPECT_EQ(second.OfKind(v1::CompileEvent::TARGET_DONE)[0].target(),
            "triple=x86_64-unknown-linux-gnu;cpu=x86-64-v3;features=+avx2,+fma;vector_bits=256");
  EXPECT_EQ(fake_.calls, 1);
}

TEST_F(FakeCompilerTest, UnknownCpuOrFeatureIsRejectedBeforeCompiling) {
  const std::string digest = UploadModel(Bytes(300));
  CompileOutcome cpu = Compile(digest, {"triple=x86_64-linux-gnu;cpu=foo"});
  EXPECT_EQ(cpu.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(cpu.status.error_message(),
              HasSubstr("unknown cpu 'foo' for x86_64-unknown-linux-gnu"));
  CompileOutcome feature = Compile(digest, {"triple=x86_64-linux-gnu;features=+avx9000"});
  EXPECT_EQ(feature.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(feature.status.error_message(), HasSubstr("unknown feature 'avx9000'"));
  EXPECT_THAT(feature.OfKind(v1::CompileEvent::TARGET_ERROR), SizeIs(1));
  EXPECT_THAT(feature.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(0));
  EXPECT_EQ(fake_.calls, 0);
}

TEST_F(FakeCompilerTest, CompilerEventsReachTheClientNamingTheTarget) {
  CompileOutcome outcome = Compile(UploadModel(Bytes(100)), {"host"});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  std::vector<v1::CompileEvent> stages = outcome.OfKind(v1::CompileEvent::STAGE);
  ASSERT_THAT(stages, SizeIs(1));
  EXPECT_EQ(stages[0].name(), "import");
  EXPECT_EQ(stages[0].target_preset(), "host");
  EXPECT_EQ(stages[0].target(), driver::ResolveTarget("host")->Canonical());
  EXPECT_THAT(outcome.OfKind(v1::CompileEvent::PASS), SizeIs(1));
  EXPECT_EQ(outcome.events.back().kind(), v1::CompileEvent::TARGET_DONE);
}

TEST_F(FakeCompilerTest, DifferentOptionsCompileAgain) {
  const std::string digest = UploadModel(Bytes(100));
  ASSERT_TRUE(Compile(digest, {"x86_64"}, {{"seq", 128}}).status.ok());
  ASSERT_TRUE(Compile(digest, {"x86_64"}, {{"seq", 4096}}).status.ok());
  EXPECT_EQ(fake_.calls, 2);
}

TEST_F(FakeCompilerTest, FetchReturnsTheArtifactInChunks) {
  fake_.artifact_size = 2 * kMiB + 5;
  CompileOutcome outcome = Compile(UploadModel(Bytes(100)), {"x86_64"});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  const std::string digest = outcome.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest();

  std::vector<v1::ArtifactChunk> chunks;
  grpc::Status status = Fetch(digest, &chunks);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(chunks, SizeIs(3));
  EXPECT_EQ(chunks[0].artifact_digest(), digest);
  EXPECT_EQ(chunks[0].total_bytes(), fake_.artifact_size);
  EXPECT_EQ(chunks[0].file_name(), "model.so");
  EXPECT_EQ(chunks[0].manifest_json(), "{\"fake\": true}");
  std::string bytes;
  for (const v1::ArtifactChunk& chunk : chunks) {
    EXPECT_LE(chunk.chunk().size(), kMiB);
    bytes += chunk.chunk();
  }
  EXPECT_EQ(cache::Sha256Digest(bytes), digest);
}

TEST_F(FakeCompilerTest, CorruptCachedArtifactIsRebuiltNotServed) {
  const std::string model = UploadModel(Bytes(100));
  const std::string artifact =
      Compile(model, {"x86_64"}).OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((data_dir_ / "kiln.db").c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  const std::string sql = "UPDATE blobs SET bytes = X'00' WHERE digest = '" + artifact + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  CompileOutcome again = Compile(model, {"x86_64"});
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_THAT(again.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(1));
  EXPECT_EQ(fake_.calls, 2);
  std::vector<v1::ArtifactChunk> chunks;
  ASSERT_TRUE(Fetch(artifact, &chunks).ok());
  EXPECT_EQ(cache::Sha256Digest(chunks[0].chunk()), artifact);
}

// --- User errors: a precise status, and the daemon carries on ------------------------------

TEST_F(ServiceTest, TruncatedUploadIsInvalidArgument) {
  const std::string model = Bytes(3000);
  std::vector<v1::UploadModelRequest> messages = Chunks(model, 1000);
  messages.pop_back();
  v1::UploadModelResponse response;
  grpc::Status status = Upload(messages, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "truncated upload: got 2000 of 3000 bytes");
  ExpectStillServing();
}

TEST_F(ServiceTest, WrongDigestIsInvalidArgumentNamingBoth) {
  const std::string model = Bytes(3000);
  const std::string claimed = cache::Sha256Digest("something else");
  v1::UploadModelResponse response;
  grpc::Status status = Upload(Chunks(model, 1000, claimed), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(claimed));
  EXPECT_THAT(status.error_message(), HasSubstr(cache::Sha256Digest(model)));
  ExpectStillServing();
}

TEST_F(ServiceTest, MalformedDigestIsInvalidArgument) {
  v1::UploadModelResponse response;
  grpc::Status status = Upload(Chunks(Bytes(10), 10, "md5:abc"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("md5:abc"));
  ExpectStillServing();
}

TEST_F(ServiceTest, ChunkOverOneMebibyteIsInvalidArgument) {
  const std::string model = Bytes(3 * kMiB);
  std::vector<v1::UploadModelRequest> messages = Chunks(model, kMiB);
  messages[1].set_chunk(messages[1].chunk() + messages[2].chunk());  // chunk 1: 2 MiB
  messages.pop_back();
  v1::UploadModelResponse response;
  grpc::Status status = Upload(messages, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("chunk 1 is 2097152 bytes"));
  ExpectStillServing();
}

TEST_F(ServiceTest, MoreBytesThanAnnouncedIsInvalidArgument) {
  v1::UploadModelResponse response;
  grpc::Status status = Upload(Chunks(Bytes(3000), 1000, "", 1500), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("more than the announced total_bytes 1500"));
  ExpectStillServing();
}

TEST_F(ServiceTest, ModelOverTheSizeLimitIsRefusedBeforeItIsSent) {
  v1::UploadModelResponse response;
  grpc::Status status = Upload(Chunks(Bytes(10), 10, "", 9 * kMiB), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("limit of 8388608 bytes"));
  ExpectStillServing();
}

TEST_F(ServiceTest, EmptyUploadIsInvalidArgument) {
  v1::UploadModelResponse response;
  grpc::Status status = Upload({}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectStillServing();
}

TEST_F(ServiceTest, CompileUnknownModelIsNotFound) {
  const std::string digest = cache::Sha256Digest("never uploaded");
  CompileOutcome outcome = Compile(digest, {"x86_64"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr(digest));
  EXPECT_EQ(server_->service().compiler_runs(), 0);
  ExpectStillServing();
}

TEST_F(ServiceTest, CompileMalformedDigestIsInvalidArgument) {
  CompileOutcome outcome = Compile("sha256:xyz", {"x86_64"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectStillServing();
}

TEST_F(ServiceTest, CompileWithoutTargetsIsInvalidArgument) {
  CompileOutcome outcome = Compile(UploadModel(Bytes(10)), {});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("no targets"));
}

TEST_F(ServiceTest, UnknownTargetIsInvalidArgumentNamingIt) {
  CompileOutcome outcome = Compile(UploadModel(Bytes(10)), {"riscv-toaster"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("riscv-toaster"));
  std::vector<v1::CompileEvent> errors = outcome.OfKind(v1::CompileEvent::TARGET_ERROR);
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].target_preset(), "riscv-toaster");
  EXPECT_EQ(errors[0].error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server_->service().compiler_runs(), 0);
  ExpectStillServing();
}

TEST_F(ServiceTest, NonPositiveDimBoundIsInvalidArgument) {
  CompileOutcome outcome = Compile(UploadModel(Bytes(10)), {"x86_64"}, {{"seq", 0}});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("seq"));
}

// Garbage bytes reach the real compiler, whose user error must come back unchanged: on the
// TARGET_ERROR event and as the call's status.
TEST_F(ServiceTest, GarbageModelGetsTheCompilersError) {
  CompileOutcome outcome = Compile(UploadModel("this is not an ONNX model"), {"x86_64"});
  EXPECT_FALSE(outcome.status.ok());
  EXPECT_EQ(server_->service().compiler_runs(), 1);
  std::vector<v1::CompileEvent> errors = outcome.OfKind(v1::CompileEvent::TARGET_ERROR);
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].error_code(), outcome.status.error_code());
  EXPECT_EQ(errors[0].message(), outcome.status.error_message());
  ExpectStillServing();
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("not an ONNX model"));
}

TEST_F(ServiceTest, FetchUnknownArtifactIsNotFound) {
  std::vector<v1::ArtifactChunk> chunks;
  const std::string digest = cache::Sha256Digest("no such artifact");
  grpc::Status status = Fetch(digest, &chunks);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(digest));
  EXPECT_EQ(Fetch("nonsense", &chunks).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(chunks.empty());
  ExpectStillServing();
}

TEST_F(ServiceTest, FetchOfAModelIsNotFound) {
  // Only compile results are fetchable; an uploaded model is not an artifact.
  std::vector<v1::ArtifactChunk> chunks;
  EXPECT_EQ(Fetch(UploadModel(Bytes(10)), &chunks).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(FakeCompilerTest, FailedTargetDoesNotStopTheOthers) {
  CompileOutcome outcome = Compile(UploadModel(Bytes(100)), {"bogus", "x86_64"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("bogus"));
  ASSERT_THAT(outcome.OfKind(v1::CompileEvent::TARGET_ERROR), SizeIs(1));
  ASSERT_THAT(outcome.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  EXPECT_EQ(outcome.OfKind(v1::CompileEvent::TARGET_DONE)[0].target_preset(), "x86_64");
}

TEST_F(FakeCompilerTest, CompilerExceptionBecomesInternalAndTheDaemonLives) {
  fake_.during = [] { throw std::runtime_error("boom"); };
  CompileOutcome outcome = Compile(UploadModel(Bytes(100)), {"x86_64"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("boom"));
  ASSERT_THAT(outcome.OfKind(v1::CompileEvent::TARGET_ERROR), SizeIs(1));
  ExpectStillServing();
}

// --- Tuning through the service (the real compiler and tuner, measured cheaply) ---------

class TuningTest : public ServiceTestBase {
 protected:
  void SetUp() override {
    ServiceOptions options{.max_model_bytes = 8 * kMiB};
    options.tune_measure.warmup = 1;
    options.tune_measure.repeats = 3;
    Start(options);
  }

  struct TuneOutcome {
    grpc::Status status;
    std::vector<v1::TuneEvent> progress;  // events without a summary
    std::optional<v1::TuneSummary> summary;
  };

  TuneOutcome Tune(const v1::TuneRequest& request,
                   std::chrono::seconds deadline = std::chrono::seconds(120)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    TuneOutcome outcome;
    std::unique_ptr<grpc::ClientReader<v1::TuneEvent>> reader = stub_->Tune(&context, request);
    v1::TuneEvent event;
    while (reader->Read(&event)) {
      if (event.has_summary()) {
        EXPECT_FALSE(outcome.summary.has_value()) << "a second summary";
        outcome.summary = event.summary();
      } else {
        EXPECT_FALSE(outcome.summary.has_value()) << "progress after the summary";
        outcome.progress.push_back(event);
      }
    }
    outcome.status = reader->Finish();
    return outcome;
  }

  static v1::TuneRequest TuneRequest(const std::string& digest, int64_t trials,
                                     const std::string& target = "host") {
    v1::TuneRequest request;
    request.set_model_digest(digest);
    request.set_target(target);
    request.set_trials(trials);
    (*request.mutable_dim_values())["n"] = 64;
    return request;
  }

  // What a second reader of the daemon's kiln.db (kiln tuning stats) would see.
  int64_t RecordsOnDisk() {
    absl::StatusOr<std::unique_ptr<cache::TuningDb>> db =
        cache::TuningDb::Open((data_dir_ / "kiln.db").string());
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? (*db)->Stats()->records : -1;
  }

  static std::string ScheduleMessage(const CompileOutcome& outcome) {
    for (const v1::CompileEvent& event : outcome.OfKind(v1::CompileEvent::INFO)) {
      if (event.name() == "schedule") return event.message();
    }
    return "no schedule event";
  }
};

TEST_F(TuningTest, TuneRecordsTheKernelAndASecondTuneFindsTheRecord) {
  const std::string digest = UploadModel(MatmulModel());
  TuneOutcome first = Tune(TuneRequest(digest, 4));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_TRUE(first.summary.has_value());
  EXPECT_EQ(first.summary->kernels(), 1);
  EXPECT_EQ(first.summary->already_tuned(), 0);
  ASSERT_EQ(first.summary->results_size(), 1);
  const v1::KernelTuneResult& result = first.summary->results(0);
  EXPECT_FALSE(result.kernel().empty());
  EXPECT_GT(result.default_gflops(), 0);
  EXPECT_GE(result.best_gflops(), result.default_gflops());
  EXPECT_GT(result.trials(), 0);
  EXPECT_LE(result.trials(), 4);
  EXPECT_EQ(first.summary->trials(), result.trials());
  ASSERT_FALSE(first.progress.empty());
  const v1::TuneProgress& last = first.progress.back().progress();
  EXPECT_EQ(last.kernel(), result.kernel());
  EXPECT_EQ(last.trials_budget(), 4);
  EXPECT_GT(last.trials_done(), 0);
  EXPECT_THAT(first.progress.back().message(), HasSubstr("GFLOP/s"));
  EXPECT_EQ(RecordsOnDisk(), 1);

  TuneOutcome second = Tune(TuneRequest(digest, 4));
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  ASSERT_TRUE(second.summary.has_value());
  EXPECT_EQ(second.summary->kernels(), 1);
  EXPECT_EQ(second.summary->already_tuned(), 1);
  EXPECT_EQ(second.summary->trials(), 0);
  EXPECT_EQ(second.summary->results_size(), 0);
  EXPECT_EQ(RecordsOnDisk(), 1);
}

// A cached artifact never hides new records: the first compile after tuning is a miss that
// builds the kernel from its record, the next one a hit.
TEST_F(TuningTest, CompileAfterTuningUsesTheRecordAndMissesTheCacheOnce) {
  const std::string digest = UploadModel(MatmulModel());
  CompileOutcome before = Compile(digest, {"host"});
  ASSERT_TRUE(before.status.ok()) << before.status.error_message();
  EXPECT_THAT(before.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(1));
  EXPECT_EQ(ScheduleMessage(before), "0 of 1 tunable kernels from tuning records");

  TuneOutcome tuned = Tune(TuneRequest(digest, 2));
  ASSERT_TRUE(tuned.status.ok()) << tuned.status.error_message();
  ASSERT_TRUE(tuned.summary.has_value());
  ASSERT_EQ(tuned.summary->results_size(), 1);
  // The default schedule is the first trial, and a later one is kept only when strictly
  // faster: the record holds the default exactly when the best time is the default's. Its
  // kernel is then the default one, and so is the artifact (on a busy machine the default
  // can win).
  const v1::KernelTuneResult& result = tuned.summary->results(0);
  ASSERT_GT(result.default_gflops(), 0);
  const bool default_kept = result.best_gflops() == result.default_gflops();

  CompileOutcome after = Compile(digest, {"host"});
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_THAT(after.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(1));
  EXPECT_EQ(ScheduleMessage(after), "1 of 1 tunable kernels from tuning records");
  ASSERT_THAT(after.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  ASSERT_THAT(before.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));
  EXPECT_EQ(after.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest() ==
                before.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest(),
            default_kept)
      << "default " << result.default_gflops() << " GFLOP/s, best " << result.best_gflops();

  CompileOutcome again = Compile(digest, {"host"});
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_THAT(again.OfKind(v1::CompileEvent::CACHE_HIT), SizeIs(1));
  EXPECT_EQ(again.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest(),
            after.OfKind(v1::CompileEvent::TARGET_DONE)[0].artifact_digest());
}

TEST_F(TuningTest, CompileWithABudgetTunesFirstAndStreamsProgress) {
  const std::string digest = UploadModel(MatmulModel());
  v1::CompileRequest request;
  request.set_model_digest(digest);
  request.add_targets("host");
  request.set_tune_trials(2);
  CompileOutcome outcome = Compile(request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  std::vector<v1::CompileEvent> tuning = outcome.OfKind(v1::CompileEvent::TUNING);
  ASSERT_FALSE(tuning.empty());
  EXPECT_EQ(tuning.back().tuning().trials_budget(), 2);
  EXPECT_GT(tuning.back().tuning().trials_done(), 0);
  EXPECT_FALSE(tuning.back().tuning().kernel().empty());
  EXPECT_FALSE(tuning.back().target().empty());
  EXPECT_EQ(tuning.back().target_preset(), "host");
  EXPECT_EQ(ScheduleMessage(outcome), "1 of 1 tunable kernels from tuning records");
  EXPECT_THAT(outcome.OfKind(v1::CompileEvent::TARGET_DONE), SizeIs(1));

  // The kernel has its record now: the same request measures nothing and hits the cache.
  CompileOutcome again = Compile(request);
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_THAT(again.OfKind(v1::CompileEvent::TUNING), SizeIs(0));
  EXPECT_THAT(again.OfKind(v1::CompileEvent::CACHE_HIT), SizeIs(1));
}

TEST_F(TuningTest, TuneUnknownModelIsNotFoundNamingIt) {
  const std::string digest = cache::Sha256Digest("never uploaded");
  TuneOutcome outcome = Tune(TuneRequest(digest, 4));
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr(digest));
  ExpectStillServing();
}

TEST_F(TuningTest, TuneForAnotherArchOrAnUnknownTargetIsInvalidArgumentNamingIt) {
  const std::string digest = UploadModel(MatmulModel());
  TuneOutcome other_arch = Tune(TuneRequest(digest, 4, "aarch64"));
  EXPECT_EQ(other_arch.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(other_arch.status.error_message(), HasSubstr("aarch64"));
  TuneOutcome unknown = Tune(TuneRequest(digest, 4, "vax"));
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("vax"));
  v1::TuneRequest negative = TuneRequest(digest, -1);
  EXPECT_EQ(Tune(negative).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RecordsOnDisk(), 0);
  ExpectStillServing();
}

// Without a budget another arch compiles as before; with one, only that target fails.
TEST_F(TuningTest, CompileBudgetForAnotherArchFailsThatTargetOnly) {
  const std::string digest = UploadModel(MatmulModel());
  v1::CompileRequest request;
  request.set_model_digest(digest);
  request.add_targets("aarch64");
  request.set_tune_trials(2);
  CompileOutcome outcome = Compile(request);
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::vector<v1::CompileEvent> errors = outcome.OfKind(v1::CompileEvent::TARGET_ERROR);
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(errors[0].message(), HasSubstr("aarch64"));
  EXPECT_THAT(outcome.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(0));
}

// The client's deadline stops the search between trials: the handler returns within a trial
// or so, so shutting down (which waits for handlers) is quick, not 200 trials long. The one
// kernel may take all 200 (at the default 32 a kernel, a fast machine finished them in 2.8 s).
TEST_F(TuningTest, DeadlineStopsTheSearch) {
  const std::string digest = UploadModel(MatmulModel());
  v1::TuneRequest request = TuneRequest(digest, 200);
  request.set_trials_per_kernel(200);
  const auto start = std::chrono::steady_clock::now();
  TuneOutcome outcome = Tune(request, std::chrono::seconds(3));
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  server_->Shutdown(absl::Seconds(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace kiln::server
