// The generated matmul against OpenBLAS's cblas_sgemm, one thread each: C[M, N] = A[M, K] @
// B[K, N] for M in {1, 16, 128, 1024} and N = K in {1024, 4096}, for each target given (default:
// host and x86_64-v3). The matmul goes through the real compiler (driver::CompileModel on an
// ONNX MatMul with symbolic M and B as an input) and runs through the runtime. The two
// candidates alternate, and each reports the median of its runs; results are checked against
// each other.
//
//   matmul_bench [--tune TRIALS | --cache DIR] [--offset BYTES] [TARGET...]
//   matmul_bench --write-model PATH   (the N = K = 1024 model, to inspect with `kiln`)
//
// --tune: the matmul is first tuned (driver::TuneModel, TRIALS per bucket) at M = 1, 16, 128
// and 1024 into a fresh tuning database, and compiled from it: one kernel that dispatches on
// M to the schedule tuned for its bucket. --cache: compiled from the records of the tuning
// database in DIR instead (one an earlier --tune run left in /tmp/kiln-matmul-tuning-*), so
// that the same kernels can be timed again.
// A, B and C start on 64-byte lines, as the runtime's own tensors do; --offset moves each
// that many bytes past a line (16: where glibc's malloc puts a large std::vector).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/tuning_db.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/tuning.h"
#include "kiln/runtime.hpp"
#include "tests/support/onnx_builder.h"

extern "C" {
// cblas.h, declared here: which cblas.h the system's alternatives pick varies.
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int num_threads);
}

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111;

std::string MatmulModel(int64_t k, int64_t n) {
  kiln::testing::OnnxBuilder b;
  b.Input("a", {"m", k});
  b.Input("b", {k, n});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {"m", n});
  return b.Serialize();
}

constexpr int64_t kRows[] = {1, 16, 128, 1024};

// Tunes the model's matmul per bucket of M into `db`; false on failure.
bool Tune(const std::string& onnx, const kiln::ir::Target& target, int trials,
          kiln::cache::TuningDb& db) {
  kiln::driver::TuneModelOptions options;
  options.tune.trials_per_kernel = trials;
  options.tune.bucket_values.assign(std::begin(kRows), std::end(kRows));
  auto start = std::chrono::steady_clock::now();
  auto summary = kiln::driver::TuneModel(onnx, target, {}, options, db, nullptr);
  if (!summary.ok()) {
    std::fprintf(stderr, "tune: %s\n", std::string(summary.status().message()).c_str());
    return false;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "tuned %s: %d buckets, %d trials (%d failed) in %.0f s\n",
               target.preset.c_str(), static_cast<int>(summary->results.size()), summary->trials,
               summary->failed_trials, seconds);
  return true;
}

// Compiles the model for `target` into a temporary file and loads it: from the tuning records
// of `db`, if given, first tuned into it where `tune_trials` > 0.
std::unique_ptr<kiln::runtime::Model> CompileAndLoad(const std::string& onnx,
                                                     const std::string& target, int tune_trials,
                                                     kiln::cache::TuningDb* db) {
  auto t = kiln::driver::ResolveTarget(target);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", std::string(t.status().message()).c_str());
    return nullptr;
  }
  kiln::driver::CompileOptions options;
  if (tune_trials > 0 && !Tune(onnx, *t, tune_trials, *db)) return nullptr;
  options.tuning_db = db;
  auto artifact = kiln::driver::CompileModel(onnx, *t, options, nullptr);
  if (!artifact.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(artifact.status().message()).c_str());
    return nullptr;
  }
  char path[] = "/tmp/kiln-matmul-bench-XXXXXX.so";
  int fd = mkstemps(path, 3);
  if (fd < 0 || write(fd, artifact->bytes.data(), artifact->bytes.size()) !=
                    static_cast<ssize_t>(artifact->bytes.size())) {
    std::perror("write artifact");
    return nullptr;
  }
  close(fd);
  std::string error;
  auto model = kiln::runtime::Model::Load(path, &error);
  unlink(path);
  if (!model) std::fprintf(stderr, "load: %s\n", error.c_str());
  if (model && !model->SetNumThreads(1, &error)) std::fprintf(stderr, "%s\n", error.c_str());
  return model;
}

DLTensor F32(float* data, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape.data();
  return t;
}

// n floats starting `offset` bytes past a 64-byte line (a multiple of 4 below 64).
class Floats {
 public:
  Floats(int64_t n, int64_t offset)
      : storage_(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 64 + 63) / 64 * 64))),
        data_(storage_.get() + offset / 4),
        size_(n) {}
  float* data() { return data_; }
  float& operator[](int64_t i) { return data_[i]; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> storage_;
  float* data_;
  int64_t size_;
};

double Seconds(const std::function<void()>& fn) {
  auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string target;
  int64_t m, n, k;
  double kiln_gflops, blas_gflops, max_rel_error;
};

Row Measure(kiln::runtime::Model& model, const std::string& target, int64_t m, int64_t n, int64_t k,
            int64_t offset) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  Floats a(m * k, offset), b(k * n, offset), c_kiln(m * n, offset), c_blas(m * n, offset);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  std::vector<int64_t> a_shape = {m, k}, b_shape = {k, n}, c_shape = {m, n};
  std::vector<DLTensor> inputs = {F32(a.data(), a_shape), F32(b.data(), b_shape)};
  std::vector<DLTensor> outputs = {F32(c_kiln.data(), c_shape)};
  std::string error;
  auto run_kiln = [&] {
    if (!model.Run(inputs, &outputs, &error)) std::fprintf(stderr, "run: %s\n", error.c_str());
  };
  auto run_blas = [&] {
    cblas_sgemm(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1, a.data(), k, b.data(), n, 0,
                c_blas.data(), n);
  };
  run_kiln();  // warm-up, and the values to check
  run_blas();
  double flops = 2.0 * m * n * k;
  // At least 5 runs each and about a second of both together, at most 25.
  int runs = std::clamp(static_cast<int>(1.0 / (flops / 30e9)), 5, 25);
  std::vector<double> kiln_times, blas_times;
  for (int r = 0; r < runs; ++r) {
    kiln_times.push_back(Seconds(run_kiln));
    blas_times.push_back(Seconds(run_blas));
  }
  double max_error = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    double scale = std::max(1.0, std::fabs(static_cast<double>(c_blas[i])));
    max_error = std::max(max_error, std::fabs(c_kiln[i] - c_blas[i]) / scale);
  }
  return {target,   m, n, k, flops / Median(kiln_times) / 1e9, flops / Median(blas_times) / 1e9,
          max_error};
}

}  // namespace

// The tuning database in `dir` (its kiln.db), or nullptr after saying why.
std::unique_ptr<kiln::cache::TuningDb> OpenDb(const std::string& dir) {
  auto opened = kiln::cache::TuningDb::Open(dir + "/kiln.db");
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", std::string(opened.status().message()).c_str());
    return nullptr;
  }
  return *std::move(opened);
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--write-model") {
    std::ofstream(args[1], std::ios::binary) << MatmulModel(1024, 1024);
    return 0;
  }
  int tune_trials = 0;
  int64_t offset = 0;
  std::string cache;
  std::vector<std::string> targets;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--tune" && has_value) {
      tune_trials = std::atoi(args[++i].c_str());
    } else if (args[i] == "--cache" && has_value) {
      cache = args[++i];
    } else if (args[i] == "--offset" && has_value) {
      offset = std::atoll(args[++i].c_str());
    } else {
      targets.push_back(args[i]);
    }
  }
  if (offset < 0 || offset >= 64 || offset % 4 != 0) {
    std::fprintf(stderr, "--offset %ld: a multiple of 4 below 64\n", offset);
    return 1;
  }
  if (tune_trials > 0 && !cache.empty()) {
    std::fprintf(stderr, "--tune and --cache: one or the other\n");
    return 1;
  }
  std::unique_ptr<kiln::cache::TuningDb> db;
  if (tune_trials > 0) {
    char dir[] = "/tmp/kiln-matmul-tuning-XXXXXX";
    db = OpenDb(mkdtemp(dir));
  } else if (!cache.empty()) {
    db = OpenDb(cache);
  }
  if ((tune_trials > 0 || !cache.empty()) && !db) return 1;
  if (targets.empty()) targets = {"host", "x86_64-v3"};
  openblas_set_num_threads(1);
  std::printf("%-10s %5s %5s %5s %12s %12s %7s %10s\n", "target", "M", "N", "K", "kiln GF/s",
              "blas GF/s", "ratio", "max err");
  for (const std::string& target : targets) {
    for (int64_t nk : {1024, 4096}) {
      auto model = CompileAndLoad(MatmulModel(nk, nk), target, tune_trials, db.get());
      if (!model) return 1;
      for (int64_t m : kRows) {
        Row r = Measure(*model, target, m, nk, nk, offset);
        std::printf("%-10s %5ld %5ld %5ld %12.1f %12.1f %6.0f%% %10.1e\n", r.target.c_str(), r.m,
                    r.n, r.k, r.kiln_gflops, r.blas_gflops, 100 * r.kiln_gflops / r.blas_gflops,
                    r.max_rel_error);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
