// Who may call: the token table (parsing the token file, whose errors name the line but never
// the token; bearer metadata; roles), then tenants and roles through the service: another
// tenant's models, artifacts and jobs are NOT_FOUND, and each RPC needs its role.
#include <fstream>
#include <map>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

constexpr char kTokens[] = R"(# tenants of this kilnd
alpha-compile-token-0001 alpha compile
alpha-tuner-token-000002 alpha compile,tune

ops-admin-token-00000003 ops admin
)";

absl::StatusOr<Caller> As(const TokenTable& table, const std::string& authorization) {
  Metadata metadata;
  if (!authorization.empty()) metadata.emplace("authorization", authorization);
  return table.Authenticate(metadata);
}

TEST(TokenTableTest, BearerTokensNameTheirTenantAndRoles) {
  absl::StatusOr<TokenTable> table = TokenTable::Parse(kTokens, "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3);
  absl::StatusOr<Caller> compiler = As(*table, "Bearer alpha-compile-token-0001");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  EXPECT_EQ(compiler->tenant, "alpha");
  EXPECT_TRUE(compiler->Has(Role::kCompile));
  EXPECT_FALSE(compiler->Has(Role::kTune));
  EXPECT_FALSE(compiler->Has(Role::kAdmin));
  absl::StatusOr<Caller> tuner = As(*table, "bearer alpha-tuner-token-000002");
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  EXPECT_TRUE(tuner->Has(Role::kTune));
  absl::StatusOr<Caller> admin = As(*table, "Bearer ops-admin-token-00000003");
  ASSERT_TRUE(admin.ok());
  EXPECT_TRUE(admin->Has(Role::kCompile) && admin->Has(Role::kTune) && admin->Has(Role::kAdmin));
}

TEST(TokenTableTest, MissingOrUnknownTokenIsUnauthenticated) {
  absl::StatusOr<TokenTable> table = TokenTable::Parse(kTokens, "tokens");
  ASSERT_TRUE(table.ok());
  for (const char* authorization :
       {"", "Bearer nope-nope-nope-nope", "alpha-compile-token-0001", "Basic YWxwaGE6"}) {
    absl::StatusOr<Caller> caller = As(*table, authorization);
    EXPECT_TRUE(absl::IsUnauthenticated(caller.status())) << authorization;
  }
}

TEST(TokenTableTest, OpenTableLetsEveryoneInWithEveryRole) {
  TokenTable table = TokenTable::Open();
  absl::StatusOr<Caller> caller = As(table, "");
  ASSERT_TRUE(caller.ok());
  EXPECT_EQ(caller->tenant, "");
  EXPECT_TRUE(caller->Has(Role::kAdmin));
}

TEST(TokenTableTest, AuthorizeNamesTheTenantRoleAndCall) {
  Caller caller{.tenant = "alpha", .compile = true};
  EXPECT_TRUE(Authorize(caller, Role::kCompile, "Compile").ok());
  absl::Status denied = Authorize(caller, Role::kTune, "Tune");
  EXPECT_TRUE(absl::IsPermissionDenied(denied));
  EXPECT_THAT(denied.message(), HasSubstr("\"alpha\""));
  EXPECT_THAT(denied.message(), HasSubstr("tune role"));
  EXPECT_THAT(denied.message(), HasSubstr("Tune"));
}

TEST(TokenTableTest, BadLinesAreRejectedNamingTheLineButNotTheToken) {
  struct Case {
    const char* text;
    const char* problem;
  };
  for (const Case& c : {
           Case{"short alpha compile\n", "shorter than 16"},
           Case{"# ok\nalpha-compile-token-0001 alpha\n", "expected `TOKEN TENANT ROLE"},
           Case{"alpha-compile-token-0001 al/pha compile\n", "tenant \"al/pha\""},
           Case{"alpha-compile-token-0001 alpha compile,root\n", "unknown role \"root\""},
           Case{"alpha-compile-token-0001 alpha compile\nalpha-compile-token-0001 beta tune\n",
                "appears twice"},
       }) {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(c.text, "tokens.txt");
    EXPECT_TRUE(absl::IsInvalidArgument(table.status())) << c.text;
    EXPECT_THAT(table.status().message(), HasSubstr(c.problem));
    EXPECT_THAT(table.status().message(), HasSubstr("tokens.txt:"));
    EXPECT_THAT(table.status().message(), Not(HasSubstr("alpha-compile-token-0001")));
  }
  EXPECT_THAT(TokenTable::Load("/nonexistent/tokens").status().message(),
              HasSubstr("/nonexistent/tokens"));
}

// --- Through the service -------------------------------------------------------------------

class TenantsTest : public ServiceTestBase {
 protected:
  void SetUp() override {
    const std::string path = ::testing::TempDir() + "/kiln_tokens_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::ofstream(path) << "alpha-compile-token-0001 alpha compile\n"
                        << "beta-compile-token-00002 beta compile\n"
                        << "beta-tuner-token-0000003 beta compile,tune\n"
                        << "ops-admin-token-00000004 ops admin\n";
    ServerOptions options;
    options.token_file = path;
    options.service.compiler = [this](std::string_view onnx, const ir::Target& target,
                                      const driver::CompileOptions& compile_options,
                                      const driver::EventSink& events) {
      return fake_.Compile(onnx, target, compile_options, events);
    };
    Start(options);
  }

  // The artifact digest of a successful compile of `digest` for x86_64.
  std::string CompileOk(const std::string& digest) {
    CompileOutcome outcome = Compile(digest, {"x86_64"});
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    std::vector<v1::CompileEvent> done = outcome.OfKind(v1::CompileEvent::TARGET_DONE);
    return done.empty() ? "" : done[0].artifact_digest();
  }

  FakeCompiler fake_;
};

TEST_F(TenantsTest, CallsWithoutAValidTokenAreUnauthenticated) {
  for (const std::string& token : {std::string(), std::string("not-a-known-token-at-all")}) {
    token_ = token;
    v1::UploadModelResponse response;
    EXPECT_EQ(Upload(Chunks(Bytes(100), kMiB), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::ListTargetsResponse targets;
    grpc::ClientContext context;
    SetDeadline(context);
    EXPECT_EQ(stub_->ListTargets(&context, {}, &targets).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(HealthStatus(""), 1);  // probes need no token
}

TEST_F(TenantsTest, AnotherTenantsModelAndArtifactAreNotFound) {
  token_ = "alpha-compile-token-0001";
  const std::string model = Bytes(100);
  const std::string digest = UploadModel(model);
  const std::string artifact = CompileOk(digest);
  ASSERT_FALSE(artifact.empty());

  token_ = "beta-compile-token-00002";
  CompileOutcome theirs = Compile(digest, {"x86_64"});
  EXPECT_EQ(theirs.status.error_code(), grpc::StatusCode::NOT_FOUND);
  // Word for word what a model nobody uploaded gets: nothing tells the two apart.
  const std::string never = cache::Sha256Digest("never uploaded");
  CompileOutcome missing = Compile(never, {"x86_64"});
  EXPECT_EQ(theirs.status.error_message(),
            absl::StrReplaceAll(missing.status.error_message(), {{never, digest}}));
  std::vector<v1::ArtifactChunk> chunks;
  grpc::Status fetch = Fetch(artifact, &chunks);
  EXPECT_EQ(fetch.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(fetch.error_message(), HasSubstr("not found"));

  // The same bytes uploaded by beta are beta's too, new to beta, and compile from the cache.
  v1::UploadModelResponse response;
  ASSERT_TRUE(Upload(Chunks(model, kMiB), &response).ok());
  EXPECT_FALSE(response.already_present());
  EXPECT_EQ(CompileOk(digest), artifact);
  EXPECT_EQ(fake_.calls.load(), 1);
  chunks.clear();
  EXPECT_TRUE(Fetch(artifact, &chunks).ok());
}

TEST_F(TenantsTest, JobsAreVisibleToTheirTenantAndToAdmins) {
  token_ = "alpha-compile-token-0001";
  const std::string digest = UploadModel(Bytes(100));
  v1::SubmitCompileRequest submit;
  submit.mutable_compile()->set_model_digest(digest);
  submit.mutable_compile()->add_targets("x86_64");
  v1::Job job;
  {
    grpc::ClientContext context;
    SetDeadline(context);
    ASSERT_TRUE(stub_->SubmitCompile(&context, submit, &job).ok());
  }
  EXPECT_EQ(job.tenant(), "alpha");
  auto list = [this] {
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    EXPECT_TRUE(stub_->ListJobs(&context, {}, &response).ok());
    return response.jobs_size();
  };
  auto get = [this, &job] {
    v1::GetJobRequest request;
    request.set_job_id(job.id());
    v1::Job found;
    grpc::ClientContext context;
    SetDeadline(context);
    return stub_->GetJob(&context, request, &found).error_code();
  };
  EXPECT_EQ(list(), 1);
  EXPECT_EQ(get(), grpc::StatusCode::OK);
  token_ = "beta-compile-token-00002";
  EXPECT_EQ(list(), 0);
  EXPECT_EQ(get(), grpc::StatusCode::NOT_FOUND);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  v1::Job ignored;
  grpc::ClientContext context;
  SetDeadline(context);
  EXPECT_EQ(stub_->CancelJob(&context, cancel, &ignored).error_code(), grpc::StatusCode::NOT_FOUND);
  token_ = "ops-admin-token-00000004";
  EXPECT_EQ(list(), 1);
  EXPECT_EQ(get(), grpc::StatusCode::OK);
}

TEST_F(TenantsTest, TuningAndEvictionNeedTheirRoles) {
  token_ = "beta-compile-token-00002";
  const std::string digest = UploadModel(Bytes(100));
  v1::CompileRequest budget;
  budget.set_model_digest(digest);
  budget.add_targets("x86_64");
  budget.set_tune_trials(2);
  CompileOutcome tuned = Compile(budget);
  EXPECT_EQ(tuned.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(tuned.status.error_message(), HasSubstr("tune role"));
  v1::TuneRequest tune;
  tune.set_model_digest(digest);
  {
    grpc::ClientContext context;
    SetDeadline(context);
    auto reader = stub_->Tune(&context, tune);
    v1::TuneEvent event;
    while (reader->Read(&event)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  v1::EvictCacheRequest evict;
  evict.set_all_artifacts(true);
  v1::EvictCacheResponse evicted;
  {
    grpc::ClientContext context;
    SetDeadline(context);
    EXPECT_EQ(stub_->EvictCache(&context, evict, &evicted).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_FALSE(CompileOk(digest).empty());  // the compile role still compiles
  token_ = "ops-admin-token-00000004";
  {
    grpc::ClientContext context;
    SetDeadline(context);
    ASSERT_TRUE(stub_->EvictCache(&context, evict, &evicted).ok());
  }
  EXPECT_EQ(evicted.artifacts(), 1u);
  EXPECT_GT(evicted.bytes(), 0u);
  v1::CacheStats stats;
  grpc::ClientContext context;
  SetDeadline(context);
  ASSERT_TRUE(stub_->GetCacheStats(&context, {}, &stats).ok());
  EXPECT_EQ(stats.artifacts(), 0u);
  EXPECT_EQ(stats.models(), 1u);
  EXPECT_EQ(stats.evictions(), 1u);
  EXPECT_EQ(stats.misses(), 1u);
}

}  // namespace
}  // namespace kiln::server
