// The kiln.v1.Kiln gRPC service: thin handlers that validate, delegate to UploadAssembler,
// CompileJob and the cache, and turn every outcome (exceptions included) into a status.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "server/compile_job.h"
#include "server/job_slots.h"
#include "server/tune_job.h"

namespace kiln::server {

struct ServiceOptions {
  // Larger uploads are refused. Also capped by what one SQLite blob can hold (about 1 GB).
  uint64_t max_model_bytes = uint64_t{512} << 20;
  // Compile jobs that run at once, and jobs that may wait for a turn before
  // RESOURCE_EXHAUSTED.
  int max_running_jobs = 2;
  int max_queued_jobs = 16;
  CompilerFn compiler = driver::CompileModel;
  // How the tuner measures each candidate (Tune, and Compile with a tuning budget).
  tune::MeasureOptions tune_measure;
};

class KilnService final : public v1::Kiln::Service {
 public:
  // `tuning_db` (may be null: default schedules, and Tune is FAILED_PRECONDITION) schedules
  // every compile and receives what Tune measures.
  KilnService(cache::Store& store, cache::TuningDb* tuning_db, ServiceOptions options);

  grpc::Status UploadModel(grpc::ServerContext* context,
                           grpc::ServerReader<v1::UploadModelRequest>* reader,
                           v1::UploadModelResponse* response) override;
  grpc::Status Compile(grpc::ServerContext* context, const v1::CompileRequest* request,
                       grpc::ServerWriter<v1::CompileEvent>* writer) override;
  grpc::Status FetchArtifact(grpc::ServerContext* context, const v1::FetchArtifactRequest* request,
                             grpc::ServerWriter<v1::ArtifactChunk>* writer) override;
  grpc::Status ListTargets(grpc::ServerContext* context, const v1::ListTargetsRequest* request,
                           v1::ListTargetsResponse* response) override;
  grpc::Status Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                    grpc::ServerWriter<v1::TuneEvent>* writer) override;

  // How many times the compiler has been called; cache hits do not call it.
  int64_t compiler_runs() const { return compiler_runs_.load(); }
  uint64_t max_model_bytes() const { return options_.max_model_bytes; }

 private:
  absl::Status Upload(grpc::ServerReader<v1::UploadModelRequest>* reader,
                      v1::UploadModelResponse* response);
  absl::Status RunCompile(grpc::ServerContext* context, const v1::CompileRequest& request,
                          grpc::ServerWriter<v1::CompileEvent>* writer);
  absl::Status Fetch(grpc::ServerContext* context, const v1::FetchArtifactRequest& request,
                     grpc::ServerWriter<v1::ArtifactChunk>* writer);
  absl::Status RunTune(grpc::ServerContext* context, const v1::TuneRequest& request,
                       grpc::ServerWriter<v1::TuneEvent>* writer);
  TuningSetup Tuning() const { return {tuning_db_, options_.tune_measure}; }

  cache::Store& store_;
  cache::TuningDb* tuning_db_;
  ServiceOptions options_;
  JobSlots slots_;
  std::atomic<int64_t> compiler_runs_{0};
};

}  // namespace kiln::server
