#include "server/metrics_interceptor.h"

#include <grpcpp/impl/codegen/config_protobuf.h>

#include <chrono>
#include <string_view>

namespace kiln::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// The method's name as a label: "/package.Service/Method" for a method that a linked proto
// declares (the Kiln service, reflection) or the health service's, "unknown" for anything
// else. gRPC hands over whatever path a client asked for, and made-up paths must not each
// make a new series.
std::string MethodLabel(const char* method) {
  if (method == nullptr) return "unknown";
  const std::string_view path = method;
  if (path == "/grpc.health.v1.Health/Check" || path == "/grpc.health.v1.Health/Watch") {
    return std::string(path);
  }
  const size_t slash = path.rfind('/');
  if (path.size() < 3 || path[0] != '/' || slash == 0) return "unknown";
  std::string full_name(path.substr(1));
  full_name[slash - 1] = '.';  // "package.Service.Method"
  const bool known =
      grpc::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full_name) != nullptr;
  return known ? std::string(path) : "unknown";
}

// Lives as long as one call. The clock starts when gRPC creates it, as the call arrives.
class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(Metrics& metrics, const char* method)
      : metrics_(metrics), method_(MethodLabel(method)) {}

  // A call that ends without the server sending a status (abandoned as the server stops)
  // still counts, as CANCELLED.
  ~MetricsInterceptor() override {
    if (!recorded_) Record(grpc::StatusCode::CANCELLED);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // The status is readable only here, before it is sent; recording now also means the
    // counter is up to date by the time the client sees the answer.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Record(grpc::StatusCode code) {
    recorded_ = true;
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start_;
    metrics_.grpc_requests.Add({method_, StatusCodeName(code)});
    metrics_.grpc_request_seconds.Observe({method_}, seconds.count());
  }

  Metrics& metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool recorded_ = false;
};

}  // namespace

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "CODE_" + std::to_string(static_cast<int>(code));
  }
}

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new MetricsInterceptor(metrics_, info->method());
}

}  // namespace kiln::server
