// kilnd's metrics: the registry's exposition text, the HTTP endpoint Prometheus scrapes, and
// the gRPC interceptor that counts calls, each driven for real (sockets, an in-process
// gRPC server).
#include <arpa/inet.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/byte_buffer.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/metrics_interceptor.h"
#include "tests/support/http_exchange.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// --- The registry ---

TEST(MetricsRegistryTest, RendersKnownValuesExactly) {
  MetricsRegistry registry;
  CounterFamily& requests = registry.AddCounter("test_requests_total", "Requests.", {"method"});
  GaugeFamily& temperature = registry.AddGauge("test_temperature", "Degrees.");
  HistogramFamily& latency =
      registry.AddHistogram("test_latency_seconds", "Latency.", {"stage"}, {0.5, 1, 5});
  registry.AddGaugeCallback("test_queue_depth", "Waiting jobs.", [] { return 7.0; });
  requests.Add({"b"}, 2);
  requests.Add({"a"});
  temperature.Set({}, 21.5);
  latency.Observe({"run"}, 0.25);
  latency.Observe({"run"}, 0.5);  // bounds are inclusive
  latency.Observe({"run"}, 3);
  latency.Observe({"run"}, 100);

  // Families by name, series by label values, HELP and TYPE once per family.
  EXPECT_EQ(registry.Render(),
            "# HELP test_latency_seconds Latency.\n"
            "# TYPE test_latency_seconds histogram\n"
            "test_latency_seconds_bucket{stage=\"run\",le=\"0.5\"} 2\n"
            "test_latency_seconds_bucket{stage=\"run\",le=\"1\"} 2\n"
            "test_latency_seconds_bucket{stage=\"run\",le=\"5\"} 3\n"
            "test_latency_seconds_bucket{stage=\"run\",le=\"+Inf\"} 4\n"
            "test_latency_seconds_sum{stage=\"run\"} 103.75\n"
            "test_latency_seconds_count{stage=\"run\"} 4\n"
            "# HELP test_queue_depth Waiting jobs.\n"
            "# TYPE test_queue_depth gauge\n"
            "test_queue_depth 7\n"
            "# HELP test_requests_total Requests.\n"
            "# TYPE test_requests_total counter\n"
            "test_requests_total{method=\"a\"} 1\n"
            "test_requests_total{method=\"b\"} 2\n"
            "# HELP test_temperature Degrees.\n"
            "# TYPE test_temperature gauge\n"
            "test_temperature 21.5\n");
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  CounterFamily& counter = registry.AddCounter("test_total", "Back\\slash and\nnewline.", {"path"});
  counter.Add({"C:\\dir \"quoted\"\nnext"});
  EXPECT_EQ(registry.Render(),
            "# HELP test_total Back\\\\slash and\\nnewline.\n"
            "# TYPE test_total counter\n"
            "test_total{path=\"C:\\\\dir \\\"quoted\\\"\\nnext\"} 1\n");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  HistogramFamily& histogram = registry.AddHistogram("test_seconds", "Durations.", {"kind"});
  for (double seconds : {0.001, 0.02, 0.02, 2.0, 45.0, 1000.0}) {
    histogram.Observe({"compile"}, seconds);
  }
  const std::string text = registry.Render();
  // The default buckets (seconds), each counting every observation at or below it.
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"0.01\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"0.05\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"1\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"5\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"60\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"600\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{kind=\"compile\",le=\"+Inf\"} 6\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_sum{kind=\"compile\"} 1047.041\n"));
  EXPECT_THAT(text, HasSubstr("test_seconds_count{kind=\"compile\"} 6\n"));
  EXPECT_EQ(histogram.Count({"compile"}), 6);
}

TEST(MetricsRegistryTest, CallbacksAreReadAtEveryRender) {
  MetricsRegistry registry;
  std::atomic<int> depth{3};
  int hook_runs = 0;
  registry.AddScrapeHook([&] { ++hook_runs; });
  registry.AddGaugeCallback("test_depth", "Depth.", [&] { return depth.load(); });
  registry.AddCounterCallback("test_done_total", "Done.", [&] { return 10.0 * hook_runs; });
  EXPECT_THAT(registry.Render(), HasSubstr("test_depth 3\n"));
  depth = 5;
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("test_depth 5\n"));
  // The hook runs before the callbacks that read what it took.
  EXPECT_THAT(text, HasSubstr("# TYPE test_done_total counter\ntest_done_total 20\n"));
}

TEST(MetricsRegistryTest, ConcurrentUpdatesSumExactly) {
  MetricsRegistry registry;
  CounterFamily& counter = registry.AddCounter("test_total", "Calls.", {"thread_parity"});
  HistogramFamily& histogram = registry.AddHistogram("test_seconds", "Durations.", {});
  constexpr int kThreads = 8, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        counter.Add({t % 2 == 0 ? "even" : "odd"});
        histogram.Observe({}, 0.5);
        if (i % 1000 == 0) registry.Render();  // scrapes while others write
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter.Value({"even"}), kThreads / 2 * kEach);
  EXPECT_EQ(counter.Value({"odd"}), kThreads / 2 * kEach);
  EXPECT_EQ(histogram.Count(), kThreads * kEach);
  EXPECT_THAT(registry.Render(), HasSubstr("test_total{thread_parity=\"odd\"} 80000\n"));
}

TEST(MetricsRegistryTest, KilnMetricsAreRegistered) {
  Metrics metrics;
  metrics.jobs.Add({"compile", "succeeded"});
  metrics.job_seconds.Observe({"compile", "running"}, 1.5);
  metrics.tuning_trials.Add({}, 3);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("kiln_jobs_total{kind=\"compile\",state=\"succeeded\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("kiln_job_duration_seconds_count{kind=\"compile\",stage=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_tuning_trials_total 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_grpc_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_grpc_request_duration_seconds histogram\n"));
}

TEST(MetricsRegistryTest, ExportsTheCacheStats) {
  const std::string dir = ::testing::TempDir() + "/metrics_cache_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::unique_ptr<cache::Store>> store = cache::Store::Open(dir + "/kiln.db");
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->PutBlob(std::string(1000, 'x')).ok());
  Metrics metrics;
  metrics.ExportCacheStats(**store);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_cache_bytes gauge\nkiln_cache_bytes 1000\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_cache_hits_total counter\nkiln_cache_hits_total 0\n"));
  EXPECT_THAT(text, HasSubstr("kiln_cache_misses_total 0\n"));
  EXPECT_THAT(text, HasSubstr("kiln_cache_evictions_total 0\n"));
  EXPECT_THAT(text, HasSubstr("kiln_cache_quarantined_total 0\n"));
  std::filesystem::remove_all(dir);
}

TEST(MetricsRegistryDeathTest, RegisteringANameTwiceAborts) {
  MetricsRegistry registry;
  registry.AddCounter("test_total", "Calls.");
  EXPECT_DEATH(registry.AddGauge("test_total", "Again."), "registered twice");
  EXPECT_DEATH(registry.AddCounter("bad-name", "Dash."), "invalid metric name");
}

// --- The HTTP endpoint ---

class MetricsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_.AddGaugeCallback("test_up", "Always one.", [] { return 1.0; });
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
        MetricsHttpServer::Start("127.0.0.1:0", [this] { return metrics_.Render(); });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
  }

  MetricsRegistry metrics_;
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpTest, ServesTheMetrics) {
  HttpReply reply = Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(reply.status_line, "HTTP/1.1 200 OK");
  EXPECT_THAT(reply.head, HasSubstr("\r\nContent-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(reply.head, HasSubstr("\r\nConnection: close"));
  EXPECT_EQ(reply.body, metrics_.Render());
  EXPECT_THAT(reply.body, HasSubstr("test_up 1\n"));
}

TEST_F(MetricsHttpTest, AnswersHealthAndUnknownPaths) {
  HttpReply health = Exchange(server_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(health.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(Exchange(server_->port(), "GET /other HTTP/1.1\r\n\r\n").status_line,
            "HTTP/1.1 404 Not Found");
  EXPECT_EQ(Exchange(server_->port(), "POST /metrics HTTP/1.1\r\n\r\n").status_line,
            "HTTP/1.1 405 Method Not Allowed");
  // HEAD: the head only.
  HttpReply head = Exchange(server_->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(head.body, "");
}

TEST_F(MetricsHttpTest, GarbageGets400AndTheServerKeepsServing) {
  EXPECT_EQ(Exchange(server_->port(), "\x01\x02 garbage\r\n\r\n").status_line,
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(Exchange(server_->port(), "GET metrics\r\n\r\n").status_line,
            "HTTP/1.1 400 Bad Request");
  // A head past 8 KiB is refused without reading on.
  EXPECT_EQ(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a'))
                .status_line,
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n").status_line,
            "HTTP/1.1 200 OK");
}

TEST_F(MetricsHttpTest, StopReturnsPromptlyWithAClientConnected) {
  // A client that connects and says nothing holds the one serving thread.
  const int idle = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(idle, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  server_->Stop();  // idempotent
  close(idle);
  // The port is closed.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  close(fd);
}

TEST(MetricsHttpErrorsTest, BadAddressesAreNamed) {
  auto render = [] { return std::string(); };
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> no_port =
      MetricsHttpServer::Start("127.0.0.1", render);
  EXPECT_EQ(no_port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_port.status().message(), HasSubstr("127.0.0.1"));
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1:http", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1:70000", render).status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> first =
      MetricsHttpServer::Start("127.0.0.1:0", render);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Start(taken, render);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(taken));
}

// --- The gRPC interceptor ---

class MetricsInterceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    // The generated base class answers every method UNIMPLEMENTED; a sync service is needed
    // for the health service to be served at all.
    builder.RegisterService(&kiln_);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<MetricsInterceptorFactory>(metrics_));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    server_->GetHealthCheckService()->SetServingStatus(true);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_->Shutdown(); }

  // A unary call with raw bytes: grpc.health.v1.HealthCheckRequest{service} without its
  // generated code (Debian ships none).
  grpc::Status Call(const std::string& method, const std::string& service) {
    std::string request_bytes;
    if (!service.empty()) request_bytes = "\x0a" + std::string(1, char(service.size())) + service;
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(),
        grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC), &context,
        request, &response);
  }

  Metrics metrics_;
  v1::Kiln::Service kiln_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(MetricsInterceptorTest, CountsCallsByMethodAndCode) {
  constexpr char kCheck[] = "/grpc.health.v1.Health/Check";
  EXPECT_TRUE(Call(kCheck, "").ok());
  EXPECT_TRUE(Call(kCheck, "").ok());
  EXPECT_EQ(Call(kCheck, "no.such.Service").error_code(), grpc::StatusCode::NOT_FOUND);

  // Recorded before the status is sent, so already there when the client has it.
  const std::string text = metrics_.Render();
  EXPECT_THAT(text, HasSubstr("kiln_grpc_requests_total{method=\"/grpc.health.v1.Health/Check\","
                              "code=\"NOT_FOUND\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_grpc_requests_total{method=\"/grpc.health.v1.Health/Check\","
                              "code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("kiln_grpc_request_duration_seconds_count{method=\"/grpc.health."
                              "v1.Health/Check\"} 3\n"));
}

TEST_F(MetricsInterceptorTest, UnknownMethodsShareOneLabel) {
  // A client's made-up method names must not each make a new series.
  EXPECT_EQ(Call("/no.such.Service/Method1", "").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call("/no.such.Service/Method2", "").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // A registered method the service does not implement counts under its own name.
  EXPECT_EQ(Call("/kiln.v1.Kiln/ListTargets", "").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  const std::string text = metrics_.Render();
  EXPECT_THAT(text, Not(HasSubstr("Method1")));
  EXPECT_THAT(text, HasSubstr("kiln_grpc_requests_total{method=\"/kiln.v1.Kiln/ListTargets\","
                              "code=\"UNIMPLEMENTED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_grpc_requests_total{method=\"unknown\","
                              "code=\"UNIMPLEMENTED\"} 2\n"));
}

TEST(StatusCodeNameTest, NamesCodesAsGrpcDoes) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_THAT(StatusCodeName(static_cast<grpc::StatusCode>(99)), StartsWith("CODE_"));
}

}  // namespace
}  // namespace kiln::server
