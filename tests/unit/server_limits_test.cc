// kilnd's limits on what one client may take: message size, upload rate, calls in flight and
// streams per connection. Each bad input gets its status and the daemon keeps serving.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "server/compile_sandbox.h"
#include "server/kilnd_flags.h"
#include "server/upload.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

class LimitsTest : public FakeCompilerTest {
 protected:
  void SetUp() override {}  // each test starts its own server

  // Compile calls held open (their fake compile blocks) until Release.
  void Hold(int calls, v1::Kiln::Stub& stub) {
    fake_.during = [this] {
      while (!released_) absl::SleepFor(absl::Milliseconds(5));
    };
    for (int i = 0; i < calls; ++i) {
      held_.emplace_back([this, &stub] {
        grpc::ClientContext context;
        SetDeadline(context);
        v1::CompileRequest request;
        request.set_model_digest(digest_);
        request.add_targets("x86_64");
        std::unique_ptr<grpc::ClientReader<v1::CompileEvent>> reader =
            stub.Compile(&context, request);
        v1::CompileEvent event;
        while (reader->Read(&event)) {
        }
        reader->Finish();
      });
    }
    // Until the compiler runs and each call is in its handler.
    while (fake_.calls == 0) absl::SleepFor(absl::Milliseconds(5));
    absl::SleepFor(absl::Milliseconds(300));
  }
  void Release() {
    released_ = true;
    for (std::thread& call : held_) call.join();
    held_.clear();
  }
  void TearDown() override {
    Release();
    FakeCompilerTest::TearDown();
  }

  grpc::Status ListTargets(v1::Kiln::Stub& stub, absl::Duration timeout = absl::Seconds(30)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    v1::ListTargetsResponse response;
    return stub.ListTargets(&context, {}, &response);
  }

  std::string digest_;
  std::atomic<bool> released_{false};
  std::vector<std::thread> held_;
};

TEST_F(LimitsTest, AMessageOverTheLimitIsResourceExhausted) {
  ServerOptions options{.service = Options()};
  options.max_receive_message_bytes = 2 * kMiB;
  Start(std::move(options));
  // One message of 3 MiB: the chunk limit is the service's, but gRPC refuses it before.
  v1::UploadModelResponse response;
  grpc::Status status = Upload(Chunks(Bytes(3 * kMiB), 3 * kMiB), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("larger than max"));
  // Chunks of 1 MiB go through.
  EXPECT_FALSE(UploadModel(Bytes(3 * kMiB)).empty());
  ExpectStillServing();
}

TEST_F(LimitsTest, CallsPastTheThreadQuotaAreResourceExhausted) {
  ServerOptions options{.service = Options()};
  options.max_rpcs = 6;
  options.service.max_running_jobs = 1;
  Start(std::move(options));
  digest_ = UploadModel(Bytes(1000));
  // Each held call keeps a thread; gRPC's pollers take some too. Hold calls until the next
  // one is refused, which must happen within the quota.
  Hold(1, *stub_);
  grpc::Status refused;
  for (int held = 1; held <= 6; ++held) {
    refused = ListTargets(*stub_);
    if (!refused.ok()) break;
    Hold(1, *stub_);
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("Threadpool Exhausted"));
  Release();
  ExpectStillServing();
}

TEST_F(LimitsTest, StreamsPastThePerConnectionLimitWaitForAFreeOne) {
  ServerOptions options{.service = Options()};
  options.max_streams_per_connection = 2;
  Start(std::move(options));
  digest_ = UploadModel(Bytes(1000));
  Hold(2, *stub_);
  // A third call on the same connection waits for one of the two streams...
  grpc::Status waited = ListTargets(*stub_, absl::Milliseconds(500));
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << waited.error_message();
  // ...while another connection is served.
  grpc::ChannelArguments separate;
  separate.SetInt("kiln.test.separate_connection", 1);
  std::shared_ptr<grpc::Channel> other = grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials(), separate);
  std::unique_ptr<v1::Kiln::Stub> other_stub = v1::Kiln::NewStub(other);
  grpc::Status served = ListTargets(*other_stub);
  EXPECT_TRUE(served.ok()) << served.error_message();
  Release();
  ExpectStillServing();
}

TEST_F(LimitsTest, AnUploadIsHeldToTheRate) {
  ServerOptions options{.service = Options()};
  options.service.max_upload_bytes_per_second = 2 * kMiB;
  Start(std::move(options));
  // 5 MiB at 2 MiB/s, the first MiB free: about 2 s.
  const absl::Time start = absl::Now();
  EXPECT_FALSE(UploadModel(Bytes(5 * kMiB)).empty());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1900));
  ExpectStillServing();
}

// A constant of 2^31 floats (8 GiB) that the importer folds.
std::string ShapeBlowUpModel() {
  kiln::testing::OnnxBuilder b;
  b.Input("x", {1});
  b.Int64Initializer("shape", {1}, {int64_t{1} << 31});
  b.Node("ConstantOfShape", {"shape"}, {"big"});
  b.Node("Add", {"x", "big"}, {"y"});
  b.Output("y", {int64_t{1} << 31});
  return b.Serialize();
}

std::string SmallModel() {
  kiln::testing::OnnxBuilder b;
  b.Input("x", {"n", 4});
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y", {"n", 4});
  return b.Serialize();
}

TEST_F(LimitsTest, AShapeBlowUpEndsItsJobWhileTheDaemonServes) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds run the worker without a memory limit";
#endif
  // What the service does with job_memory_bytes set, with this build's kilnd as the worker.
  Start(ServiceOptions{.compiler = SandboxedCompiler(
                           {.worker_path = KILN_KILND, .memory_bytes = int64_t{512} << 20})});
  CompileOutcome outcome = Compile(UploadModel(ShapeBlowUpModel()), {"x86_64"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << outcome.status.error_message();
  ASSERT_EQ(outcome.OfKind(v1::CompileEvent::TARGET_ERROR).size(), 1u);
  EXPECT_THAT(outcome.OfKind(v1::CompileEvent::TARGET_ERROR)[0].message(),
              HasSubstr("memory limit of 536870912 bytes"));
  ExpectStillServing();
  CompileOutcome next = Compile(UploadModel(SmallModel()), {"x86_64"});
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
}

TEST_F(LimitsTest, AJobMemoryLimitCompilesInAWorker) {
  // With a worker that cannot start, the compile fails naming it: proof that the service did
  // not compile in process.
  ServiceOptions options;
  options.job_memory_bytes = int64_t{1} << 30;
  options.compile_worker_path = "/nonexistent/kilnd";
  Start(std::move(options));
  CompileOutcome outcome = Compile(UploadModel(SmallModel()), {"x86_64"});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INTERNAL)
      << outcome.status.error_message();
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("/nonexistent/kilnd"));
  ExpectStillServing();
}

// The rate through UploadAssembler, on a fake clock.
struct FakeClock {
  absl::Time now = absl::UnixEpoch();
  absl::Duration slept;
  UploadRate Rate(int64_t bytes_per_second) {
    return {.bytes_per_second = bytes_per_second,
            .now = [this] { return now; },
            .sleep =
                [this](absl::Duration d) {
                  slept += d;
                  now += d;
                }};
  }
};

std::vector<v1::UploadModelRequest> Messages(const std::string& model, size_t chunk) {
  std::vector<v1::UploadModelRequest> messages;
  for (size_t offset = 0; offset < model.size(); offset += chunk) {
    messages.emplace_back().set_chunk(model.substr(offset, chunk));
  }
  messages[0].set_sha256(cache::Sha256Digest(model));
  messages[0].set_total_bytes(model.size());
  return messages;
}

TEST(UploadRateTest, ChunksPastTheBurstWaitForTheRate) {
  FakeClock clock;
  UploadAssembler upload(64 * kMiB, clock.Rate(kMiB));
  for (const v1::UploadModelRequest& message : Messages(Bytes(4 * kMiB), kMiB)) {
    ASSERT_TRUE(upload.Add(message).ok());
  }
  EXPECT_TRUE(upload.Finish().ok());
  EXPECT_EQ(clock.slept, absl::Seconds(3));  // 4 MiB at 1 MiB/s, the first MiB free
}

TEST(UploadRateTest, AFloodOfTinyChunksIsHeldBackToo) {
  FakeClock clock;
  UploadAssembler upload(64 * kMiB, clock.Rate(kMiB));
  // 2048 one-byte messages count as 2048 * 1 KiB = 2 MiB.
  for (const v1::UploadModelRequest& message : Messages(Bytes(2048), 1)) {
    ASSERT_TRUE(upload.Add(message).ok());
  }
  EXPECT_EQ(clock.slept, absl::Seconds(1));
}

TEST(UploadRateTest, ASlowClientNeverWaits) {
  FakeClock clock;
  UploadAssembler upload(64 * kMiB, clock.Rate(kMiB));
  for (const v1::UploadModelRequest& message : Messages(Bytes(4 * kMiB), kMiB)) {
    ASSERT_TRUE(upload.Add(message).ok());
    clock.now += absl::Seconds(2);
  }
  EXPECT_EQ(clock.slept, absl::ZeroDuration());
}

TEST(UploadRateTest, NoRateNoWait) {
  FakeClock clock;
  UploadAssembler upload(64 * kMiB, clock.Rate(0));
  for (const v1::UploadModelRequest& message : Messages(Bytes(4 * kMiB), kMiB)) {
    ASSERT_TRUE(upload.Add(message).ok());
  }
  EXPECT_EQ(clock.slept, absl::ZeroDuration());
}

TEST(LimitFlagsTest, DefaultsAndSpellings) {
  absl::StatusOr<KilndFlags> defaults = ParseKilndFlags({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->server.service.job_memory_bytes, kDefaultJobMemoryBytes);
  EXPECT_EQ(defaults->server.service.max_upload_bytes_per_second, 0);
  EXPECT_EQ(defaults->server.max_rpcs, 256);
  EXPECT_EQ(ServiceOptions().job_memory_bytes, 0);  // embedders and tests compile in process

  absl::StatusOr<KilndFlags> flags =
      ParseKilndFlags({"--job-memory-bytes=0", "--max-upload-bytes-per-second", "8388608",
                       "--max-streams=8", "--max-rpcs=64"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->server.service.job_memory_bytes, 0);
  EXPECT_EQ(flags->server.service.max_upload_bytes_per_second, 8388608);
  EXPECT_EQ(flags->server.max_streams_per_connection, 8);
  EXPECT_EQ(flags->server.max_rpcs, 64);

  absl::StatusOr<KilndFlags> slow = ParseKilndFlags({"--max-upload-bytes-per-second=1000"});
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slow.status().message(), HasSubstr("--max-upload-bytes-per-second"));
  EXPECT_FALSE(ParseKilndFlags({"--max-streams=0"}).ok());
  EXPECT_FALSE(ParseKilndFlags({"--max-rpcs=2"}).ok());
  EXPECT_TRUE(ParseKilndFlags({"--max-rpcs=0"}).ok());
}

}  // namespace
}  // namespace kiln::server
