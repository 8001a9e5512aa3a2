// The machine's peak f32 multiply-add throughput, the ceiling every matmul and conv of the
// model benchmarks runs under: independent FMA chains in registers, no memory traffic, on 1 to
// N threads, with 256-bit (AVX2 + FMA) and, where the CPU has it, 512-bit (AVX-512F) vectors.
// A model's FLOP count divided by this rate is the least time any implementation can take.
//
//   peak_flops [--threads N] [--seconds S]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// Chains per thread: more than an FMA's latency times the FMA units (4 x 2 on current x86), so
// the units never wait on a result.
constexpr int kChains = 12;
constexpr long kStepsPerRound = 1 << 20;

__attribute__((target("avx2,fma"))) float Fma256(long steps) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + c * 1e-3f);
  const __m256 scale = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 12  // the accumulators must live in registers
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], scale, add);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0];
}

__attribute__((target("avx512f"))) float Fma512(long steps) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + c * 1e-3f);
  const __m512 scale = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], scale, add);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

using Kernel = float (*)(long);

// GFLOP/s of `kernel` on `threads` threads, each running rounds for about `seconds`; the
// median of the per-round rates of thread 0 times the thread count.
double Measure(Kernel kernel, int lanes, int threads, double seconds) {
  std::vector<std::vector<double>> rates(threads);
  std::vector<float> sinks(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      kernel(kStepsPerRound / 8);  // warm-up: clocks and the upper vector halves wake up
      auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
      while (std::chrono::steady_clock::now() < end) {
        auto start = std::chrono::steady_clock::now();
        sinks[t] += kernel(kStepsPerRound);
        double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        rates[t].push_back(2.0 * lanes * kChains * kStepsPerRound / elapsed * 1e-9);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  double total = 0;
  for (std::vector<double>& r : rates) {
    std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
    total += r[r.size() / 2];
  }
  if (sinks[0] == 12345.f) std::printf(" ");  // keeps the results alive
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double seconds = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) {
      max_threads = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: peak_flops [--threads N] [--seconds S]\n");
      return 2;
    }
  }
  if (max_threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "peak_flops: --threads and --seconds must be positive\n");
    return 2;
  }
  __builtin_cpu_init();
  std::printf("%-10s %8s %12s\n", "vectors", "threads", "GFLOP/s");
  for (int threads = 1; threads <= max_threads; ++threads) {
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      std::printf("%-10s %8d %12.1f\n", "avx2+fma", threads, Measure(Fma256, 8, threads, seconds));
    }
    if (__builtin_cpu_supports("avx512f")) {
      std::printf("%-10s %8d %12.1f\n", "avx512f", threads, Measure(Fma512, 16, threads, seconds));
    }
  }
  return 0;
}
