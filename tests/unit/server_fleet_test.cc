// Two kilnd replicas on their own data dirs behind one PostgreSQL fleet tier (a private
// server the test starts): what one compiles is a hit on the other, what one tunes the other
// uses, one compiles while the other waits for its result, and the lease of a replica that
// died mid-compile lapses and is taken over.
#include <chrono>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "cache/compile_key.h"
#include "cache/fleet_tier.h"
#include "compiler/driver/driver.h"
#include "tests/support/postgres_fixture.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

class FleetTest : public ServiceTestBase {
 protected:
  static void SetUpTestSuite() { postgres_ = testing::PostgresServer::Start(&skip_reason_); }
  static void TearDownTestSuite() { postgres_.reset(); }

  void SetUp() override {
    if (postgres_ == nullptr) GTEST_SKIP() << skip_reason_;
    std::string name = "kiln_fleet_";
    for (char c : std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
      name +=
          std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
    }
    name = name.substr(0, 63);
    std::string why;
    ASSERT_TRUE(postgres_->CreateDatabase(name, &why)) << why;
    conninfo_ = postgres_->Conninfo(name);
  }

  void TearDown() override {
    other_.reset();
    ServiceTestBase::TearDown();
    std::filesystem::remove_all(other_dir_);
  }

  ServerOptions Replica(bool fake_compiler) {
    ServerOptions options;
    options.postgres = conninfo_;
    options.fleet = {.lease_ttl = absl::Seconds(2), .poll_interval = absl::Milliseconds(50)};
    options.service.tune_measure.warmup = 1;
    options.service.tune_measure.repeats = 3;
    if (fake_compiler) {
      options.service.compiler = [this](std::string_view onnx, const ir::Target& target,
                                        const driver::CompileOptions& compile_options,
                                        const driver::EventSink& events) {
        return fake_.Compile(onnx, target, compile_options, events);
      };
    }
    return options;
  }

  // Replica A through the fixture (server_, its own data dir), replica B beside it.
  void StartReplicas(bool fake_compiler = true) {
    Start(Replica(fake_compiler));
    other_dir_ = data_dir_.string() + "_b";
    std::filesystem::remove_all(other_dir_);
    ServerOptions b = Replica(fake_compiler);
    b.listen_address = "127.0.0.1:0";
    b.data_dir = other_dir_;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(std::move(b));
    ASSERT_TRUE(server.ok()) << server.status();
    other_ = *std::move(server);
  }
  void UseA() { ConnectTo(server_->port()); }
  void UseB() { ConnectTo(other_->port()); }

  static std::string ArtifactOf(const CompileOutcome& outcome) {
    std::vector<v1::CompileEvent> done = outcome.OfKind(v1::CompileEvent::TARGET_DONE);
    return done.empty() ? "" : done[0].artifact_digest();
  }
  static bool Saw(const CompileOutcome& outcome, Kind kind, const std::string& text) {
    for (const v1::CompileEvent& event : outcome.OfKind(kind)) {
      if (event.message().find(text) != std::string::npos) return true;
    }
    return false;
  }

  inline static std::unique_ptr<testing::PostgresServer> postgres_;
  inline static std::string skip_reason_;
  std::string conninfo_;
  std::string other_dir_;
  std::unique_ptr<Server> other_;
  FakeCompiler fake_;  // both replicas compile with it, so its count is the fleet's
};

TEST_F(FleetTest, ModelCompiledThroughOneReplicaIsACacheHitOnTheOther) {
  StartReplicas();
  UseA();
  const std::string digest = UploadModel(Bytes(3000));
  CompileOutcome first = Compile(digest, {"x86_64"});
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  UseB();
  // B never saw the upload: the model and the artifact come from the fleet tier.
  CompileOutcome second = Compile(digest, {"x86_64"});
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_TRUE(Saw(second, v1::CompileEvent::CACHE_HIT, "from the fleet tier"));
  EXPECT_EQ(fake_.calls.load(), 1);
  EXPECT_EQ(ArtifactOf(second), ArtifactOf(first));
  std::vector<v1::ArtifactChunk> chunks;
  ASSERT_TRUE(Fetch(ArtifactOf(second), &chunks).ok());
  std::string bytes;
  for (const v1::ArtifactChunk& chunk : chunks) bytes += chunk.chunk();
  EXPECT_EQ(cache::Sha256Digest(bytes), ArtifactOf(first));
  // Now in B's own cache: a third compile is a local hit, without the fleet's message.
  CompileOutcome third = Compile(digest, {"x86_64"});
  ASSERT_THAT(third.OfKind(v1::CompileEvent::CACHE_HIT), SizeIs(1));
  EXPECT_FALSE(Saw(third, v1::CompileEvent::CACHE_HIT, "fleet"));
}

TEST_F(FleetTest, SecondReplicaWaitsForTheFirstsResultInsteadOfCompiling) {
  StartReplicas();
  UseA();
  const std::string digest = UploadModel(Bytes(3000));
  absl::Notification compiling, release;
  fake_.during = [&] {
    if (!compiling.HasBeenNotified()) compiling.Notify();
    release.WaitForNotification();
  };
  CompileOutcome on_a;
  std::thread a([&] { on_a = Compile(digest, {"x86_64"}); });
  compiling.WaitForNotification();
  UseB();
  CompileOutcome on_b;
  std::thread b([&] { on_b = Compile(digest, {"x86_64"}); });
  absl::SleepFor(absl::Milliseconds(500));  // B is waiting on A's lease by now
  release.Notify();
  a.join();
  b.join();
  ASSERT_TRUE(on_a.status.ok()) << on_a.status.error_message();
  ASSERT_TRUE(on_b.status.ok()) << on_b.status.error_message();
  EXPECT_EQ(fake_.calls.load(), 1);
  EXPECT_TRUE(Saw(on_b, v1::CompileEvent::INFO, "another replica is compiling"));
  EXPECT_TRUE(Saw(on_b, v1::CompileEvent::CACHE_HIT, "from the fleet tier"));
  EXPECT_EQ(ArtifactOf(on_b), ArtifactOf(on_a));
}

// A replica killed mid-compile stops renewing its lease; after the lease's ttl another
// replica takes it over and compiles. The dead replica is played by a lease taken directly
// in the fleet database and never renewed.
TEST_F(FleetTest, LeaseOfADeadReplicaLapsesAndIsTakenOver) {
  StartReplicas();
  UseB();
  const std::string digest = UploadModel(Bytes(3000));
  absl::StatusOr<ir::Target> target = driver::ResolveTarget("x86_64");
  ASSERT_TRUE(target.ok());
  const cache::CompileKeyParts key{.model_digest = digest,
                                   .target = target->Canonical(),
                                   .options = driver::CompileOptions().Canonical(),
                                   .compiler_version = driver::CompilerVersion(),
                                   .tuning_revision = 0};
  absl::StatusOr<std::unique_ptr<cache::FleetTier>> tier = cache::FleetTier::Connect(conninfo_);
  ASSERT_TRUE(tier.ok()) << tier.status();
  absl::StatusOr<bool> held = (*tier)->TryAcquireLease(key.Key(), "dead-replica", absl::Seconds(2));
  ASSERT_TRUE(held.ok() && *held);

  const auto start = std::chrono::steady_clock::now();
  CompileOutcome outcome = Compile(digest, {"x86_64"});
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_TRUE(Saw(outcome, v1::CompileEvent::INFO, "another replica is compiling"));
  EXPECT_THAT(outcome.OfKind(v1::CompileEvent::CACHE_MISS), SizeIs(1));
  EXPECT_EQ(fake_.calls.load(), 1);
  EXPECT_GE(waited, std::chrono::milliseconds(1500));  // it did wait for the lease to lapse
  // And the result reached the fleet: A gets it as a hit.
  UseA();
  CompileOutcome on_a = Compile(digest, {"x86_64"});
  EXPECT_TRUE(Saw(on_a, v1::CompileEvent::CACHE_HIT, "from the fleet tier"));
  EXPECT_EQ(fake_.calls.load(), 1);
}

TEST_F(FleetTest, TuningDoneOnOneReplicaIsUsedByTheOther) {
  StartReplicas(/*fake_compiler=*/false);
  UseA();
  const std::string digest = UploadModel(MatmulModel());
  v1::TuneRequest tune;
  tune.set_model_digest(digest);
  tune.set_target("host");
  tune.set_trials(2);
  (*tune.mutable_dim_values())["n"] = 64;
  {
    grpc::ClientContext context;
    SetDeadline(context);
    auto reader = stub_->Tune(&context, tune);
    v1::TuneEvent event;
    while (reader->Read(&event)) {
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  UseB();
  CompileOutcome outcome = Compile(digest, {"host"});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  bool from_records = false;
  for (const v1::CompileEvent& event : outcome.OfKind(v1::CompileEvent::INFO)) {
    from_records |= event.name() == "schedule" &&
                    event.message() == "1 of 1 tunable kernels from tuning records";
  }
  EXPECT_TRUE(from_records);
}

TEST_F(FleetTest, TenantsOwnTheirModelsOnEveryReplica) {
  std::ofstream(::testing::TempDir() + "/kiln_fleet_tokens")
      << "alpha-compile-token-0001 alpha compile\nbeta-compile-token-00002 beta compile\n";
  ServerOptions a = Replica(true);
  a.token_file = ::testing::TempDir() + "/kiln_fleet_tokens";
  Start(a);
  other_dir_ = data_dir_.string() + "_b";
  std::filesystem::remove_all(other_dir_);
  ServerOptions b = Replica(true);
  b.token_file = a.token_file;
  b.listen_address = "127.0.0.1:0";
  b.data_dir = other_dir_;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(std::move(b));
  ASSERT_TRUE(server.ok()) << server.status();
  other_ = *std::move(server);

  token_ = "alpha-compile-token-0001";
  const std::string digest = UploadModel(Bytes(3000));
  UseB();
  token_ = "beta-compile-token-00002";
  EXPECT_EQ(Compile(digest, {"x86_64"}).status.error_code(), grpc::StatusCode::NOT_FOUND);
  token_ = "alpha-compile-token-0001";
  EXPECT_TRUE(Compile(digest, {"x86_64"}).status.ok());
}

}  // namespace
}  // namespace kiln::server
