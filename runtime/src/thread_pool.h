// The threads one model's runs share. ParallelFor splits [0, num_tasks) into one contiguous
// range per thread; the calling thread takes the first range itself, so a pool of one thread
// starts no workers at all. A thread runs its range in chunks and then takes chunks of the
// ranges not finished yet, so one that starts late (waking takes tens of microseconds) or got
// slower tasks does not hold up the others, while each thread still walks mostly contiguous
// tasks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

// KilnEnv::parallel_for's task: runs indices [begin, end); nonzero means failure.
using TaskFn = int32_t (*)(void* closure, int64_t begin, int64_t end);

class ThreadPool {
 public:
  explicit ThreadPool(int32_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t num_threads() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Runs task over [0, num_tasks), every index once, and returns 0, or the first nonzero
  // result of a chunk. Runs serially on the calling thread when called from inside a task
  // (nested parallel loops) or while another run holds the pool (concurrent kiln_model_run
  // calls).
  int32_t ParallelFor(int64_t num_tasks, TaskFn task, void* closure);

 private:
  struct Job {
    int64_t num_tasks = 0;
    int64_t chunk = 1;  // tasks per take from a range
    TaskFn task = nullptr;
    void* closure = nullptr;
  };
  // Thread r's share of the job: the tasks [next, end) nobody has taken yet.
  struct alignas(64) Range {
    std::atomic<int64_t> next = 0;
    int64_t end = 0;
  };
  void WorkerLoop(int32_t worker);
  // Takes chunks of range `own` and then of the others until none is left; records the first
  // failure in result_.
  void RunChunks(const Job& job, int32_t own);

  std::mutex busy_;  // held by the one ParallelFor that uses the workers
  std::mutex mu_;
  std::condition_variable start_, done_;
  Job job_;
  // Written under mu_; atomic so that a thread may spin on them without it.
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<int32_t> pending_ = 0;
  std::vector<Range> ranges_;        // one per thread; set under mu_ before a job starts
  std::atomic<int32_t> result_ = 0;  // the job's first failure, set by whichever thread had it
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kiln::runtime
