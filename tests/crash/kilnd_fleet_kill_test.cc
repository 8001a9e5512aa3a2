// Two real kilnd processes on their own data dirs behind one PostgreSQL (a private server the
// test starts). Replica A takes a compile, and is killed with SIGKILL in the middle of it;
// replica B, asked for the same compile, waits while A's lease is live, then takes the lease
// over and compiles. Then A, restarted, gets B's result from the fleet as a cache hit.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "cache/digest.h"
#include "gtest/gtest.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "tests/crash/kilnd_process.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/postgres_fixture.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using crash::KilndProcess;
using crash::ReadFile;

// A chain of elementwise nodes that takes the compiler seconds, not milliseconds, so the
// kill lands while A compiles.
std::string SlowModel() {
  testing::OnnxBuilder b;
  b.Input("x", {"n", 16});
  std::string previous = "x";
  for (int i = 0; i < 1500; ++i) {
    const std::string constant = "c" + std::to_string(i);
    b.FloatInitializer(constant, {1}, {static_cast<float>(i % 7 + 1)});
    const std::string out = "v" + std::to_string(i);
    b.Node(i % 2 == 0 ? "Add" : "Mul", {previous, constant}, {out});
    previous = out;
  }
  b.Output(previous, {"n", 16});
  return b.Serialize();
}

std::unique_ptr<grpc::ClientContext> Context(int seconds = 120) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

std::string Upload(v1::Kiln::Stub& stub, const std::string& model) {
  auto context = Context();
  v1::UploadModelResponse response;
  auto writer = stub.UploadModel(context.get(), &response);
  for (size_t offset = 0; offset == 0 || offset < model.size(); offset += 1 << 20) {
    v1::UploadModelRequest request;
    if (offset == 0) {
      request.set_name("slow.onnx");
      request.set_sha256(cache::Sha256Digest(model));
      request.set_total_bytes(model.size());
    }
    request.set_chunk(model.substr(offset, 1 << 20));
    writer->Write(request);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.model_digest();
}

v1::CompileRequest Request(const std::string& digest) {
  v1::CompileRequest request;
  request.set_model_digest(digest);
  request.add_targets("x86_64");
  return request;
}

class FleetKillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { postgres_ = testing::PostgresServer::Start(&skip_reason_); }
  static void TearDownTestSuite() { postgres_.reset(); }
  void SetUp() override {
    if (postgres_ == nullptr) GTEST_SKIP() << skip_reason_;
    std::string why;
    ASSERT_TRUE(postgres_->CreateDatabase("kiln_fleet_kill", &why)) << why;
    dir_ = fs::temp_directory_path() / ("kiln_fleet_kill_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Flags() const {
    return {"--postgres=" + postgres_->Conninfo("kiln_fleet_kill"), "--fleet-lease-seconds=3",
            "--log-level=info"};
  }

  inline static std::unique_ptr<testing::PostgresServer> postgres_;
  inline static std::string skip_reason_;
  fs::path dir_;
};

TEST_F(FleetKillTest, KillingAReplicaMidCompileLetsTheOtherTakeTheLeaseOver) {
  KilndProcess a(KILND_PATH, dir_ / "a", dir_ / "a.log");
  KilndProcess b(KILND_PATH, dir_ / "b", dir_ / "b.log");
  ASSERT_EQ(a.Start(Flags()), "");
  ASSERT_EQ(b.Start(Flags()), "");
  auto stub_a = v1::Kiln::NewStub(a.NewChannel());
  const std::string digest = Upload(*stub_a, SlowModel());
  ASSERT_FALSE(digest.empty());

  // A compiles; once it reports the miss it holds the fleet's lease, and is killed.
  absl::Notification compiling;
  std::thread on_a([&] {
    auto context = Context();
    auto reader = stub_a->Compile(context.get(), Request(digest));
    v1::CompileEvent event;
    while (reader->Read(&event)) {
      if (event.kind() == v1::CompileEvent::CACHE_MISS && !compiling.HasBeenNotified()) {
        compiling.Notify();
      }
      EXPECT_NE(event.kind(), v1::CompileEvent::TARGET_DONE) << "A finished before the kill";
    }
    reader->Finish();
  });
  ASSERT_TRUE(compiling.WaitForNotificationWithTimeout(absl::Seconds(60)));
  a.Signal(SIGKILL);
  ASSERT_TRUE(a.Wait(std::chrono::seconds(10)).has_value());
  on_a.join();

  // B waits for the lease of the dead A to lapse, then compiles the model itself.
  auto stub_b = v1::Kiln::NewStub(b.NewChannel());
  auto context = Context();
  auto reader = stub_b->Compile(context.get(), Request(digest));
  std::vector<v1::CompileEvent> events;
  v1::CompileEvent event;
  while (reader->Read(&event)) events.push_back(event);
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << ReadFile(dir_ / "b.log");
  bool waited = false, missed = false;
  std::string artifact;
  for (const v1::CompileEvent& e : events) {
    waited |= e.kind() == v1::CompileEvent::INFO &&
              e.message().find("another replica is compiling") != std::string::npos;
    missed |= e.kind() == v1::CompileEvent::CACHE_MISS;
    if (e.kind() == v1::CompileEvent::TARGET_DONE) artifact = e.artifact_digest();
  }
  EXPECT_TRUE(waited) << "B did not find A's lease";
  EXPECT_TRUE(missed) << "B did not compile";
  ASSERT_FALSE(artifact.empty());

  // A, restarted on its own data dir, gets B's artifact from the fleet.
  ASSERT_EQ(a.Start(Flags()), "");
  auto again = v1::Kiln::NewStub(a.NewChannel());
  auto context_a = Context();
  auto reader_a = again->Compile(context_a.get(), Request(digest));
  bool fleet_hit = false;
  while (reader_a->Read(&event)) {
    fleet_hit |= event.kind() == v1::CompileEvent::CACHE_HIT &&
                 event.message().find("from the fleet tier") != std::string::npos;
    if (event.kind() == v1::CompileEvent::TARGET_DONE) EXPECT_EQ(event.artifact_digest(), artifact);
  }
  EXPECT_TRUE(reader_a->Finish().ok());
  EXPECT_TRUE(fleet_hit);
}

}  // namespace
}  // namespace kiln
