// A gRPC server interceptor that counts every call by method and status code and observes its
// duration into Metrics (kiln_grpc_requests_total, kiln_grpc_request_duration_seconds). Added
// to the server with ServerBuilder::experimental().SetInterceptorCreators(). The status is the
// one the server sends (read before sending); a method no linked proto declares (a client's
// made-up path) is labelled "unknown", so clients cannot grow the series without bound.
#pragma once

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include <string>

#include "server/metrics.h"

namespace kiln::server {

// The code's name as gRPC writes it: "OK", "INVALID_ARGUMENT", ...
std::string StatusCodeName(grpc::StatusCode code);

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server.
  explicit MetricsInterceptorFactory(Metrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics& metrics_;
};

}  // namespace kiln::server
