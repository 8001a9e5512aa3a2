// The threads one model's runs share. ParallelFor splits [0, num_tasks) into one contiguous
// range per thread; the calling thread takes the first range itself, so a pool of one thread
// starts no workers at all.
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

  // Runs task over [0, num_tasks) and returns 0, or the first nonzero result of a range.
  // Runs serially on the calling thread when called from inside a task (nested parallel
  // loops) or while another run holds the pool (concurrent kiln_model_run calls).
  int32_t ParallelFor(int64_t num_tasks, TaskFn task, void* closure);

 private:
  struct Job {
    int64_t num_tasks = 0;
    TaskFn task = nullptr;
    void* closure = nullptr;
    int32_t num_ranges = 0;
  };
  void WorkerLoop(int32_t worker);
  int32_t RunRange(const Job& job, int32_t range);

  std::mutex busy_;  // held by the one ParallelFor that uses the workers
  std::mutex mu_;
  std::condition_variable start_, done_;
  Job job_;
  // Written under mu_; atomic so that a thread may spin on them without it.
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<int32_t> pending_ = 0;
  int32_t result_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kiln::runtime
