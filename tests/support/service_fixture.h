// An in-process kilnd on port 0 with a temporary data dir, driven through a real client stub:
// the fixture the server_* service tests share. FakeCompiler stands in for the compiler where
// a test is about the service, not about compiling.
#pragma once

#include <grpcpp/create_channel.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "server/server.h"
#include "tests/support/onnx_builder.h"

namespace kiln::server {

using Kind = v1::CompileEvent::Kind;

inline constexpr size_t kMiB = 1 << 20;

// Deterministic, non-repeating-looking bytes of a given size.
inline std::string Bytes(size_t size, int seed = 0) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7919 + seed * 31) >> 3);
  return bytes;
}

// y = a @ w + bias: a [n, 64] (n symbolic), w a constant [64, 48]: one tunable kernel.
inline std::string MatmulModel() {
  testing::OnnxBuilder b;
  b.Input("a", {"n", 64});
  std::vector<float> w(64 * 48), bias(48);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37 % 101) - 50) / 50;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 7) - 3;
  b.FloatInitializer("w", {64, 48}, w);
  b.FloatInitializer("bias", {48}, bias);
  b.Node("MatMul", {"a", "w"}, {"p"});
  b.Node("Add", {"p", "bias"}, {"y"});
  b.Output("y", {"n", 48});
  return b.Serialize();
}

// Stands in for driver::CompileModel where a test needs a compiler that succeeds: the
// artifact depends on everything the cache key covers, so a wrong hit would show.
struct FakeCompiler {
  std::atomic<int> calls{0};
  size_t artifact_size = 1000;   // room for the text that ties it to its inputs
  std::function<void()> during;  // runs inside each call: block, throw, ...

  absl::StatusOr<driver::Artifact> Compile(std::string_view onnx, const ir::Target& target,
                                           const driver::CompileOptions& options,
                                           const driver::EventSink& events) {
    ++calls;
    events({driver::CompileEvent::Kind::kStage, "import", "importing"});
    events({driver::CompileEvent::Kind::kPass, "fuse", ""});
    if (during) during();
    // Where the real compiler checks between passes.
    if (options.interrupted) {
      if (absl::Status why = options.interrupted(); !why.ok()) return why;
    }
    std::string bytes = cache::Sha256Hex(onnx) + target.Canonical() + options.Canonical();
    bytes += Bytes(artifact_size > bytes.size() ? artifact_size - bytes.size() : 0);
    return driver::Artifact{target.Canonical(), "model.so", bytes, "{\"fake\": true}"};
  }
};

class ServiceTestBase : public ::testing::Test {
 protected:
  void Start(ServiceOptions service) { Start(ServerOptions{.service = std::move(service)}); }
  // On 127.0.0.1, a free port and a fresh data dir named after the test.
  void Start(ServerOptions options) {
    data_dir_ = std::filesystem::path(::testing::TempDir()) /
                ("kiln_server_" +
                 std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(data_dir_);
    options.listen_address = "127.0.0.1:0";
    options.data_dir = data_dir_.string();
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    Connect(grpc::InsecureChannelCredentials());
  }
  void Connect(std::shared_ptr<grpc::ChannelCredentials> credentials,
               const grpc::ChannelArguments& arguments = {}) {
    ConnectTo(server_->port(), credentials, arguments);
  }
  // Points the stub at another kilnd (tests with several replicas).
  void ConnectTo(
      int port,
      std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
      const grpc::ChannelArguments& arguments = {}) {
    channel_ =
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), credentials, arguments);
    stub_ = v1::Kiln::NewStub(channel_);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(data_dir_);
  }

  // Every client call gets a deadline, as real clients must, and the bearer token if any.
  void SetDeadline(grpc::ClientContext& context) const {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
  }

  // The upload of `model` in `chunk`-byte pieces; the header may be overridden to lie.
  static std::vector<v1::UploadModelRequest> Chunks(const std::string& model, size_t chunk,
                                                    std::string sha256 = "",
                                                    int64_t total_bytes = -1) {
    std::vector<v1::UploadModelRequest> messages;
    for (size_t offset = 0; offset == 0 || offset < model.size(); offset += chunk) {
      v1::UploadModelRequest& message = messages.emplace_back();
      message.set_chunk(model.substr(offset, chunk));
    }
    messages[0].set_name("test.onnx");
    messages[0].set_sha256(sha256.empty() ? cache::Sha256Digest(model) : sha256);
    messages[0].set_total_bytes(total_bytes < 0 ? model.size() : total_bytes);
    return messages;
  }

  grpc::Status Upload(const std::vector<v1::UploadModelRequest>& messages,
                      v1::UploadModelResponse* response) {
    grpc::ClientContext context;
    SetDeadline(context);
    std::unique_ptr<grpc::ClientWriter<v1::UploadModelRequest>> writer =
        stub_->UploadModel(&context, response);
    for (const v1::UploadModelRequest& message : messages) {
      if (!writer->Write(message)) break;  // the server already answered
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // Uploads `model` and returns its digest.
  std::string UploadModel(const std::string& model) {
    v1::UploadModelResponse response;
    grpc::Status status = Upload(Chunks(model, kMiB), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.model_digest();
  }

  struct CompileOutcome {
    grpc::Status status;
    std::vector<v1::CompileEvent> events;
    std::vector<v1::CompileEvent> OfKind(Kind kind) const {
      std::vector<v1::CompileEvent> found;
      for (const v1::CompileEvent& event : events) {
        if (event.kind() == kind) found.push_back(event);
      }
      return found;
    }
  };

  CompileOutcome Compile(const std::string& digest, const std::vector<std::string>& targets,
                         const std::map<std::string, int64_t>& dim_bounds = {}) {
    v1::CompileRequest request;
    request.set_model_digest(digest);
    for (const std::string& target : targets) request.add_targets(target);
    for (const auto& [dim, bound] : dim_bounds) (*request.mutable_dim_bounds())[dim] = bound;
    return Compile(request);
  }

  CompileOutcome Compile(const v1::CompileRequest& request) {
    grpc::ClientContext context;
    SetDeadline(context);
    CompileOutcome outcome;
    std::unique_ptr<grpc::ClientReader<v1::CompileEvent>> reader =
        stub_->Compile(&context, request);
    v1::CompileEvent event;
    while (reader->Read(&event)) outcome.events.push_back(event);
    outcome.status = reader->Finish();
    return outcome;
  }

  grpc::Status Fetch(const std::string& digest, std::vector<v1::ArtifactChunk>* chunks) {
    v1::FetchArtifactRequest request;
    request.set_artifact_digest(digest);
    grpc::ClientContext context;
    SetDeadline(context);
    std::unique_ptr<grpc::ClientReader<v1::ArtifactChunk>> reader =
        stub_->FetchArtifact(&context, request);
    v1::ArtifactChunk chunk;
    while (reader->Read(&chunk)) chunks->push_back(chunk);
    return reader->Finish();
  }

  // grpc.health.v1.Health/Check without its generated code (Debian ships none): the request
  // is HealthCheckRequest{service}, the answer HealthCheckResponse{status}, status 1 SERVING.
  int HealthStatus(const std::string& service) {
    std::string request_bytes;
    if (!service.empty()) request_bytes = "\x0a" + std::string(1, char(service.size())) + service;
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(),
        grpc::internal::RpcMethod("/grpc.health.v1.Health/Check",
                                  grpc::internal::RpcMethod::NORMAL_RPC),
        &context, request, &response);
    if (!status.ok()) return -status.error_code();
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(response.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return bytes.size() == 2 && bytes[0] == '\x08' ? bytes[1] : -1;
  }

  // After a bad request: the daemon still answers, and still reports itself healthy.
  void ExpectStillServing() {
    v1::ListTargetsResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status status = stub_->ListTargets(&context, {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_GT(response.targets_size(), 0);
    EXPECT_EQ(HealthStatus(""), 1);
  }

  std::string token_;  // sent with every call when set
  std::filesystem::path data_dir_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Kiln::Stub> stub_;
};

// The daemon as shipped: driver::CompileModel.
class ServiceTest : public ServiceTestBase {
 protected:
  void SetUp() override { Start(ServiceOptions{.max_model_bytes = 8 * kMiB}); }
};

// A compiler that succeeds, for what happens after a compilation.
class FakeCompilerTest : public ServiceTestBase {
 protected:
  void SetUp() override { Start(Options()); }
  ServiceOptions Options() {
    return ServiceOptions{.compiler = [this](std::string_view onnx, const ir::Target& target,
                                             const driver::CompileOptions& options,
                                             const driver::EventSink& events) {
      return fake_.Compile(onnx, target, options, events);
    }};
  }
  FakeCompiler fake_;
};

}  // namespace kiln::server
