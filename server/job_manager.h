// Compile and tune jobs (DESIGN.md: a bounded worker pool with a bounded queue). A job has an
// id, a state and an in-memory event log that any number of watchers read from any index, so
// a client that lost its connection resumes where it was. Work runs on a fixed pool of
// workers; a job beyond the pool and the queue is refused with RESOURCE_EXHAUSTED instead of
// piling up. Two identical requests in flight run once: the second joins the first.
// Knows nothing of gRPC streams: the service turns a job's log into a stream.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kiln/v1/kiln.pb.h"

namespace kiln::server {

class Job {
 public:
  Job(std::string id, v1::Job description, absl::Time deadline);

  const std::string& id() const { return id_; }

  // For the job's work, polled between compiler passes and tuning trials: OK while it should
  // go on, else why not (CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE when the server stops).
  absl::Status Interrupted() const;
  // Appends an event (its index is set here). Thread-safe: the compiler reports from its
  // threads.
  void Log(v1::JobEvent event);

  // Makes Interrupted() return `why` from now on; the first reason wins. No effect once the
  // job finished.
  void Cancel(absl::Status why);
  // Callers of the streaming Compile and Tune RPCs hold the job while they watch it; when the
  // last one leaves early (cancelled, past its deadline) the job is cancelled with that
  // reason, unless it was also submitted on its own (SubmitCompile, SubmitTune).
  void Attach();
  void Detach(const absl::Status& why);
  void KeepWithoutWatchers();

  v1::Job Info() const;
  // The job's outcome once finished; nullopt before.
  std::optional<absl::Status> Outcome() const;

  // Events from index `from` on: returns once there is at least one, the job has finished
  // (`finished`, with whatever remained), or `timeout` passed.
  struct Events {
    std::vector<v1::JobEvent> events;
    bool finished = false;
  };
  Events WaitForEvents(int64_t from, absl::Duration timeout) const;

 private:
  friend class JobManager;
  void Start();
  void Finish(const absl::Status& outcome);

  const std::string id_;
  const absl::Time deadline_;
  mutable absl::Mutex mu_;
  v1::Job info_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::JobEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> outcome_ ABSL_GUARDED_BY(mu_);
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
  bool keep_without_watchers_ ABSL_GUARDED_BY(mu_) = false;
};

struct JobLimits {
  int workers = 2;         // jobs running at once
  int max_queued = 16;     // jobs waiting for a worker
  int max_finished = 256;  // finished jobs kept for Get and Watch, newest
  // The longest any job may run; a request's own timeout may only shorten it.
  absl::Duration max_duration = absl::InfiniteDuration();
};

class JobManager {
 public:
  // The work of one job: its outcome, with events logged on the job as it goes.
  using Work = std::function<absl::Status(Job& job)>;

  explicit JobManager(JobLimits limits);
  ~JobManager();  // Shutdown(zero grace) unless done already

  struct Submitted {
    std::shared_ptr<Job> job;
    bool joined = false;  // an identical job (same `dedup_key`) was already in flight
  };
  // Queues `work` as a new job described by `description` (kind, model, targets, tenant).
  // `timeout` bounds the job from now (capped by JobLimits::max_duration). A job still
  // queued or running with the same nonempty `dedup_key` is returned instead, joined.
  // RESOURCE_EXHAUSTED when every worker is busy and the queue is full; UNAVAILABLE once
  // shutting down.
  absl::StatusOr<Submitted> Submit(v1::Job description, const std::string& dedup_key,
                                   absl::Duration timeout, Work work);

  // Runs quick work (a compile whose targets are all cached) at once on the calling thread,
  // as a job like any other but outside the workers and the queue: a cache hit never waits
  // behind compilations. UNAVAILABLE once shutting down.
  absl::StatusOr<std::shared_ptr<Job>> RunNow(v1::Job description, Work work);

  // NOT_FOUND naming the id when no such job is known (never was, or forgotten).
  absl::StatusOr<std::shared_ptr<Job>> Find(const std::string& id) const;
  // Unfinished jobs first, then finished ones; each group oldest first.
  std::vector<v1::Job> List() const;

  int running() const;  // on the workers and through RunNow
  int queued() const;

  // Called with each job's final state once it finished (for metrics). Set before jobs run.
  void OnFinished(std::function<void(const v1::Job&)> observer) {
    on_finished_ = std::move(observer);
  }

  // Refuses new jobs, lets queued and running ones finish within `grace`, then cancels the
  // rest (UNAVAILABLE) and waits for the workers to return. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  struct Queued {
    std::shared_ptr<Job> job;
    Work work;
    std::string dedup_key;
  };
  void WorkerLoop();
  void Execute(const Queued& next, bool on_worker);
  void Forget(const Queued& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NewId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobLimits limits_;
  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;      // on the workers: what admission counts
  int running_now_ ABSL_GUARDED_BY(mu_) = 0;  // RunNow's, on their callers' threads
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  const std::string id_prefix_;  // differs per server start, so ids of old runs never match
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> in_flight_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> finished_ ABSL_GUARDED_BY(mu_);  // ids, oldest first
  std::function<void(const v1::Job&)> on_finished_;
  std::vector<std::thread> workers_;
};

}  // namespace kiln::server
