// The kiln.v1.Kiln gRPC service: thin handlers that validate, delegate to UploadAssembler,
// CompileJob and the cache, and turn every outcome (exceptions included) into a status.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "cache/owners.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "server/auth.h"
#include "server/compile_job.h"
#include "server/fleet.h"
#include "server/job_manager.h"
#include "server/metrics.h"
#include "server/tune_job.h"

namespace kiln::server {

struct ServiceOptions {
  // Larger uploads are refused. Also capped by what one SQLite blob can hold (about 1 GB).
  uint64_t max_model_bytes = uint64_t{512} << 20;
  // Jobs that run at once (0: one per core of this machine), and jobs that may wait for a
  // turn before RESOURCE_EXHAUSTED.
  int max_running_jobs = 0;
  int max_queued_jobs = 16;
  // The longest a job may run before it ends with DEADLINE_EXCEEDED; 0: no limit.
  int64_t max_job_seconds = 0;
  CompilerFn compiler = driver::CompileModel;
  // How the tuner measures each candidate (Tune, and Compile with a tuning budget).
  tune::MeasureOptions tune_measure;
  // Who may call (server/auth.h); open by default: every caller is admin of tenant "".
  TokenTable tokens = TokenTable::Open();
  // Each compile's address space limit in bytes: with one, every compile runs in a child
  // process under it (server/compile_sandbox.h), and a model that needs more ends with
  // RESOURCE_EXHAUSTED while the daemon keeps serving. 0: compile in this process with
  // `compiler` as is.
  int64_t job_memory_bytes = 0;
  // kiln.db, which the compile worker opens to build tuned kernels (set by Server::Start).
  std::string tuning_db_path;
  // The kilnd binary that runs as the compile worker; "": this process's own, which must then
  // be kilnd (tests set their build's kilnd).
  std::string compile_worker_path;
  // An upload stream is held to this many bytes per second (by reading it no faster, so the
  // client is slowed by flow control rather than failed); 0: no limit.
  int64_t max_upload_bytes_per_second = 0;
};

// OK while the client of `context` still waits for the answer; else why not (CANCELLED,
// DEADLINE_EXCEEDED).
absl::Status ClientGone(const grpc::ServerContext* context);

// The service's handlers live in service.cc (models, artifacts, targets, the cache) and
// service_jobs.cc (compile and tune jobs).
class KilnService final : public v1::Kiln::Service {
 public:
  // `tuning_db` (may be null: default schedules, and Tune is FAILED_PRECONDITION) schedules
  // every compile and receives what Tune measures. `owners` says which tenant sees which
  // model and artifact.
  // With a `fleet` (may be null), models, results, owners and tuning records are shared with
  // the other replicas through it.
  KilnService(cache::Store& store, cache::TuningDb* tuning_db, cache::Owners& owners, Fleet* fleet,
              ServiceOptions options);

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
  grpc::Status SubmitCompile(grpc::ServerContext* context, const v1::SubmitCompileRequest* request,
                             v1::Job* response) override;
  grpc::Status SubmitTune(grpc::ServerContext* context, const v1::SubmitTuneRequest* request,
                          v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status GetCacheStats(grpc::ServerContext* context, const v1::GetCacheStatsRequest* request,
                             v1::CacheStats* response) override;
  grpc::Status EvictCache(grpc::ServerContext* context, const v1::EvictCacheRequest* request,
                          v1::EvictCacheResponse* response) override;

  // Job counts, durations by stage, queue depth and tuning trials into `metrics`, which
  // must outlive this service. Call before serving.
  void ExportMetrics(Metrics& metrics);

  // Refuses new jobs and lets those in flight finish within `grace`, then cancels them.
  void DrainJobs(absl::Duration grace) { jobs_.Shutdown(grace); }

  // How many times the compiler has been called; cache hits do not call it.
  int64_t compiler_runs() const { return compiler_runs_.load(); }
  uint64_t max_model_bytes() const { return options_.max_model_bytes; }

 private:
  // Every RPC: the caller authenticated, `body(caller)` run, exceptions turned into INTERNAL.
  grpc::Status Handle(const char* method, const grpc::ServerContext* context,
                      absl::FunctionRef<absl::Status(const Caller&)> body);

  absl::Status Upload(const Caller& caller, grpc::ServerReader<v1::UploadModelRequest>* reader,
                      v1::UploadModelResponse* response);
  absl::Status Fetch(const Caller& caller, grpc::ServerContext* context,
                     const v1::FetchArtifactRequest& request,
                     grpc::ServerWriter<v1::ArtifactChunk>* writer);
  // Validate the request (answering at once when it is bad) and queue its job.
  absl::StatusOr<JobManager::Submitted> SubmitCompileJob(const Caller& caller,
                                                         const v1::CompileRequest& request,
                                                         absl::Duration timeout);
  absl::StatusOr<JobManager::Submitted> SubmitTuneJob(const Caller& caller,
                                                      const v1::TuneRequest& request,
                                                      absl::Duration timeout);
  // `not_found` unless the caller may see the model or artifact `digest`: its tenant
  // uploaded or compiled it, or it is admin. The same answer as for a digest nobody has.
  absl::Status CheckVisible(const Caller& caller, const std::string& digest,
                            absl::Status not_found);
  // Recorded here and in the fleet; a failure is logged, not the caller's problem.
  void Grant(const std::string& tenant, const std::string& digest);
  // A model uploaded through another replica, copied here (a no-op without a fleet).
  void PullModel(const std::string& digest);
  // The job, if the caller's tenant submitted it (or the caller is admin); else NOT_FOUND.
  absl::StatusOr<std::shared_ptr<Job>> FindJob(const Caller& caller, const std::string& id);
  TuningSetup Tuning() const { return {tuning_db_, options_.tune_measure}; }

  cache::Store& store_;
  cache::TuningDb* tuning_db_;
  cache::Owners& owners_;
  Fleet* fleet_;
  Metrics* metrics_ = nullptr;
  ServiceOptions options_;
  JobManager jobs_;
  std::atomic<int64_t> compiler_runs_{0};
};

}  // namespace kiln::server
