// The job RPCs of kiln.v1.Kiln: Compile and Tune (submit and watch), SubmitCompile and
// SubmitTune, WatchJob, GetJob, ListJobs, CancelJob. The work of each job is a CompileJob or
// a TuneJob run by the JobManager.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/service.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// How often a watcher looks at its client while no event comes; cancellation has no wake-up.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

// Equal for equal requests: protobuf maps serialize in a fixed order only when asked to.
std::string DedupKey(std::string_view kind, const google::protobuf::Message& request) {
  std::string bytes(kind);
  bytes += '\n';
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  return bytes;
}

absl::StatusOr<absl::Duration> TimeoutOf(int64_t seconds) {
  if (seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout_seconds = ", seconds, "; must be >= 0 (0: the server's limit)"));
  }
  return seconds == 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

// Writes `job`'s events from index `from` until its final event. OK once that was written,
// else why the stream ended first (the client left, its deadline passed, a write failed).
template <typename WriteFn>
absl::Status Follow(grpc::ServerContext* context, const Job& job, int64_t from, WriteFn write) {
  for (int64_t next = from;;) {
    Job::Events batch = job.WaitForEvents(next, kPollInterval);
    for (const v1::JobEvent& event : batch.events) {
      if (!write(event)) {
        absl::Status why = ClientGone(context);
        return why.ok() ? absl::UnavailableError("the stream broke") : why;
      }
      ++next;
    }
    if (batch.finished) return absl::OkStatus();  // the batch ended with the final event
    if (absl::Status why = ClientGone(context); !why.ok()) return why;
  }
}

// Follows a job from its first event on behalf of a streaming Compile or Tune call, and
// answers with the job's outcome. A caller that leaves early may cancel the job (Detach).
template <typename WriteFn>
absl::Status WatchToTheEnd(grpc::ServerContext* context, Job& job, WriteFn write) {
  job.Attach();
  absl::Status streamed = Follow(context, job, 0, write);
  job.Detach(streamed);
  if (!streamed.ok()) return streamed;
  return job.Outcome().value_or(absl::InternalError("job finished without an outcome"));
}

// Times a compile job's stages from its events (kiln_job_duration_seconds{compile,STAGE}): a
// stage lasts until the next one begins or its target ends. Counts tuning trials too.
class StageClock {
 public:
  explicit StageClock(Metrics* metrics) : metrics_(metrics) {}

  void See(const v1::CompileEvent& event) {
    if (metrics_ == nullptr) return;
    if (event.kind() == v1::CompileEvent::TUNING) metrics_->tuning_trials.Add();
    const bool begins = event.kind() == v1::CompileEvent::STAGE;
    const bool ends = begins || event.kind() == v1::CompileEvent::TARGET_DONE ||
                      event.kind() == v1::CompileEvent::TARGET_ERROR;
    if (!ends) return;
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (!stage_.empty()) {
      metrics_->job_seconds.Observe({"compile", stage_}, absl::ToDoubleSeconds(now - start_));
    }
    stage_ = begins ? event.name() : "";
    start_ = now;
  }

 private:
  Metrics* const metrics_;
  absl::Mutex mu_;
  std::string stage_ ABSL_GUARDED_BY(mu_);
  absl::Time start_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

// --- Jobs ----------------------------------------------------------------------------------

absl::StatusOr<JobManager::Submitted> KilnService::SubmitCompileJob(
    const Caller& caller, const v1::CompileRequest& request, absl::Duration timeout) {
  if (absl::Status status = Authorize(caller, Role::kCompile, "Compile"); !status.ok()) {
    return status;
  }
  const bool tunes = request.tune_trials() > 0 || request.tune_seconds() > 0;
  if (tunes) {
    if (absl::Status status = Authorize(caller, Role::kTune, "a tuning budget"); !status.ok()) {
      return status;
    }
  }
  PullModel(request.model_digest());
  if (absl::Status status = CompileJob::Validate(store_, request); !status.ok()) return status;
  if (absl::Status status =
          CheckVisible(caller, request.model_digest(),
                       absl::NotFoundError(absl::StrCat("compile: model ", request.model_digest(),
                                                        " not found; upload it first")));
      !status.ok()) {
    return status;
  }
  v1::Job description;
  description.set_kind(v1::Job::COMPILE);
  description.set_model_digest(request.model_digest());
  *description.mutable_targets() = request.targets();
  description.set_tenant(caller.tenant);
  JobManager::Work work = [this, request, tenant = caller.tenant](Job& job) {
    StageClock clock(metrics_);
    // Each artifact becomes the tenant's before its watchers hear of it.
    auto emit = [this, &job, &tenant, &clock](const v1::CompileEvent& event) {
      clock.See(event);
      if (event.kind() == v1::CompileEvent::TARGET_DONE) Grant(tenant, event.artifact_digest());
      v1::JobEvent logged;
      *logged.mutable_compile() = event;
      job.Log(std::move(logged));
    };
    CompilerFn counted = [this](std::string_view onnx, const ir::Target& target,
                                const driver::CompileOptions& options,
                                const driver::EventSink& events) {
      compiler_runs_.fetch_add(1);
      return options_.compiler(onnx, target, options, events);
    };
    auto interrupted = [&job] { return job.Interrupted(); };
    absl::Status status =
        CompileJob(store_, counted, emit, interrupted, Tuning(), fleet_).Run(request);
    spdlog::info("job {}: compile {} for {} target(s): {}", job.id(), request.model_digest(),
                 request.targets_size(), status.ToString());
    return status;
  };
  // Cache hits skip the queue: they only read the cache, and must not wait behind compiles.
  if (CompileJob(store_, nullptr, nullptr, nullptr, Tuning()).AllTargetsCached(request)) {
    absl::StatusOr<std::shared_ptr<Job>> job =
        jobs_.RunNow(std::move(description), std::move(work));
    if (!job.ok()) return job.status();
    return JobManager::Submitted{*std::move(job), /*joined=*/false};
  }
  return jobs_.Submit(std::move(description), DedupKey("compile " + caller.tenant, request),
                      timeout, std::move(work));
}

absl::StatusOr<JobManager::Submitted> KilnService::SubmitTuneJob(const Caller& caller,
                                                                 const v1::TuneRequest& request,
                                                                 absl::Duration timeout) {
  // Tuning records are shared by every tenant: only the tune role writes them.
  if (absl::Status status = Authorize(caller, Role::kTune, "Tune"); !status.ok()) return status;
  PullModel(request.model_digest());
  auto log_nothing = [](const v1::TuneEvent&) {};
  auto never = [] { return absl::OkStatus(); };
  if (absl::Status status = TuneJob(store_, Tuning(), log_nothing, never).Validate(request);
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          CheckVisible(caller, request.model_digest(),
                       absl::NotFoundError(absl::StrCat("tune: model ", request.model_digest(),
                                                        " not found; upload it first")));
      !status.ok()) {
    return status;
  }
  v1::Job description;
  description.set_kind(v1::Job::TUNE);
  description.set_model_digest(request.model_digest());
  description.add_targets(request.target().empty() ? "host" : request.target());
  description.set_tenant(caller.tenant);
  JobManager::Work work = [this, request](Job& job) {
    auto emit = [this, &job](const v1::TuneEvent& event) {
      if (metrics_ != nullptr && event.has_progress()) metrics_->tuning_trials.Add();
      v1::JobEvent logged;
      *logged.mutable_tune() = event;
      job.Log(std::move(logged));
    };
    auto interrupted = [&job] { return job.Interrupted(); };
    absl::Status status = TuneJob(store_, Tuning(), emit, interrupted).Run(request);
    if (fleet_ != nullptr && tuning_db_ != nullptr) fleet_->PushTuning(*tuning_db_);
    spdlog::info("job {}: tune {} for {}: {}", job.id(), request.model_digest(), request.target(),
                 status.ToString());
    return status;
  };
  return jobs_.Submit(std::move(description), DedupKey("tune " + caller.tenant, request), timeout,
                      std::move(work));
}

// The streaming Compile: a job whose events this call forwards, cancelled when every caller
// that waits on it this way has left (and nobody submitted it on its own).
grpc::Status KilnService::Compile(grpc::ServerContext* context, const v1::CompileRequest* request,
                                  grpc::ServerWriter<v1::CompileEvent>* writer) {
  return Handle("Compile", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitCompileJob(caller, *request, absl::InfiniteDuration());
    if (!submitted.ok()) return submitted.status();
    return WatchToTheEnd(context, *submitted->job, [writer](const v1::JobEvent& event) {
      return !event.has_compile() || writer->Write(event.compile());
    });
  });
}

grpc::Status KilnService::Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                               grpc::ServerWriter<v1::TuneEvent>* writer) {
  return Handle("Tune", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitTuneJob(caller, *request, absl::InfiniteDuration());
    if (!submitted.ok()) return submitted.status();
    return WatchToTheEnd(context, *submitted->job, [writer](const v1::JobEvent& event) {
      return !event.has_tune() || writer->Write(event.tune());
    });
  });
}

grpc::Status KilnService::SubmitCompile(grpc::ServerContext* context,
                                        const v1::SubmitCompileRequest* request,
                                        v1::Job* response) {
  return Handle("SubmitCompile", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<absl::Duration> timeout = TimeoutOf(request->timeout_seconds());
    if (!timeout.ok()) return timeout.status();
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitCompileJob(caller, request->compile(), *timeout);
    if (!submitted.ok()) return submitted.status();
    submitted->job->KeepWithoutWatchers();
    *response = submitted->job->Info();
    response->set_joined(submitted->joined);
    return absl::OkStatus();
  });
}

grpc::Status KilnService::SubmitTune(grpc::ServerContext* context,
                                     const v1::SubmitTuneRequest* request, v1::Job* response) {
  return Handle("SubmitTune", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<absl::Duration> timeout = TimeoutOf(request->timeout_seconds());
    if (!timeout.ok()) return timeout.status();
    absl::StatusOr<JobManager::Submitted> submitted =
        SubmitTuneJob(caller, request->tune(), *timeout);
    if (!submitted.ok()) return submitted.status();
    submitted->job->KeepWithoutWatchers();
    *response = submitted->job->Info();
    response->set_joined(submitted->joined);
    return absl::OkStatus();
  });
}

grpc::Status KilnService::WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  return Handle("WatchJob", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<std::shared_ptr<Job>> job = FindJob(caller, request->job_id());
    if (!job.ok()) return job.status();
    const v1::Job info = (*job)->Info();
    const bool finished = info.finished_unix_ms() != 0;
    if (request->from_event() < 0 || (finished && request->from_event() > info.events())) {
      return absl::OutOfRangeError(absl::StrCat("watch: from_event = ", request->from_event(),
                                                "; job ", info.id(), " has events 0 to ",
                                                info.events() - 1));
    }
    return Follow(context, **job, request->from_event(),
                  [writer](const v1::JobEvent& event) { return writer->Write(event); });
  });
}

grpc::Status KilnService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                 v1::Job* response) {
  return Handle("GetJob", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<std::shared_ptr<Job>> job = FindJob(caller, request->job_id());
    if (!job.ok()) return job.status();
    *response = (*job)->Info();
    return absl::OkStatus();
  });
}

grpc::Status KilnService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                   v1::ListJobsResponse* response) {
  return Handle("ListJobs", context, [&](const Caller& caller) {
    for (v1::Job& job : jobs_.List()) {
      if (caller.admin || job.tenant() == caller.tenant) *response->add_jobs() = std::move(job);
    }
    return absl::OkStatus();
  });
}

grpc::Status KilnService::CancelJob(grpc::ServerContext* context,
                                    const v1::CancelJobRequest* request, v1::Job* response) {
  return Handle("CancelJob", context, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<std::shared_ptr<Job>> job = FindJob(caller, request->job_id());
    if (!job.ok()) return job.status();
    (*job)->Cancel(absl::CancelledError(absl::StrCat("job ", request->job_id(), " cancelled")));
    *response = (*job)->Info();
    return absl::OkStatus();
  });
}

}  // namespace kiln::server
