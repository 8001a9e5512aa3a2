// kilnd's observability end to end: the Prometheus page on --metrics-listen counts the calls
// made through the gRPC port, the jobs and their stages, and the cache's hits and misses; and
// server reflection describes the API.
#include <grpcpp/support/sync_stream.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "tests/support/http_exchange.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class ObservabilityTest : public ServiceTestBase {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.metrics_listen = "127.0.0.1:0";
    options.service.compiler = [this](std::string_view onnx, const ir::Target& target,
                                      const driver::CompileOptions& compile_options,
                                      const driver::EventSink& events) {
      return fake_.Compile(onnx, target, compile_options, events);
    };
    Start(options);
  }
  FakeCompiler fake_;
};

TEST_F(ObservabilityTest, MetricsPageCountsCallsJobsAndCacheTraffic) {
  ASSERT_GT(server_->metrics_port(), 0);
  const std::string digest = UploadModel(Bytes(100));
  ASSERT_TRUE(Compile(digest, {"x86_64"}).status.ok());
  ASSERT_TRUE(Compile(digest, {"x86_64"}).status.ok());  // a cache hit
  EXPECT_EQ(Compile(cache::Sha256Digest("nope"), {"x86_64"}).status.error_code(),
            grpc::StatusCode::NOT_FOUND);

  const std::string page = HttpGetBody(server_->metrics_port(), "/metrics");
  EXPECT_THAT(page, HasSubstr("kiln_grpc_requests_total{method=\"/kiln.v1.Kiln/UploadModel\","
                              "code=\"OK\"} 1\n"));
  EXPECT_THAT(
      page,
      HasSubstr("kiln_grpc_requests_total{method=\"/kiln.v1.Kiln/Compile\",code=\"OK\"} 2\n"));
  EXPECT_THAT(page, HasSubstr("kiln_grpc_requests_total{method=\"/kiln.v1.Kiln/Compile\","
                              "code=\"NOT_FOUND\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("kiln_jobs_total{kind=\"compile\",state=\"succeeded\"} 2\n"));
  EXPECT_THAT(page,
              HasSubstr("kiln_job_duration_seconds_count{kind=\"compile\",stage=\"running\"} 2\n"));
  // The fake compiler reports one stage, "import", which lasts until its target is done.
  EXPECT_THAT(page,
              HasSubstr("kiln_job_duration_seconds_count{kind=\"compile\",stage=\"import\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("kiln_cache_hits_total 1\n"));
  EXPECT_THAT(page, HasSubstr("kiln_cache_misses_total 1\n"));
  EXPECT_THAT(page, HasSubstr("kiln_job_queue_depth 0\n"));
  EXPECT_THAT(page, HasSubstr("kiln_jobs_running 0\n"));
  EXPECT_THAT(page, ContainsRegex("kiln_cache_bytes [1-9][0-9]*\n"));
}

// Server reflection (grpc.reflection.v1alpha) lists the Kiln service, so tools such as
// grpcurl work without the .proto files. The request is ServerReflectionRequest with
// list_services (field 7) set, written by hand: Debian ships no generated reflection client.
TEST_F(ObservabilityTest, ReflectionListsTheKilnService) {
  grpc::ClientContext context;
  SetDeadline(context);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod(
              "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
              grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  grpc::Slice slice(std::string("\x3a\x00", 2));
  ASSERT_TRUE(stream->Write(grpc::ByteBuffer(&slice, 1)));
  stream->WritesDone();
  grpc::ByteBuffer response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_THAT(bytes, HasSubstr("kiln.v1.Kiln"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace kiln::server
