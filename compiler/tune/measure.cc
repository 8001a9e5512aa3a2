#include "compiler/tune/measure.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/jit.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/tune/host_buffer.h"
#include "thread_pool.h"  // runtime/src: the artifact's own pool

namespace kiln::tune {

namespace {

using arith::DataType;

// A KilnEnv for one kernel: parallel loops run on the runtime's thread pool (as the
// artifact's would) or serially for one thread, workspace comes from aligned malloc, index
// errors are kept for the measurement to report.
struct MeasureEnv {
  KilnEnv env{};
  std::mutex mu;  // index errors may come from several threads
  std::string index_error;
  std::unique_ptr<runtime::ThreadPool> pool;  // null: one thread

  explicit MeasureEnv(int threads) {
    if (threads > 1) pool = std::make_unique<runtime::ThreadPool>(threads);
    env.self = this;
    env.alloc = [](void*, int64_t bytes) -> void* {
      return std::aligned_alloc(64, std::max<int64_t>(64, (bytes + 63) / 64 * 64));
    };
    env.free = [](void*, void* ptr) { std::free(ptr); };
    env.parallel_for = [](void* self, int64_t num_tasks, int32_t (*task)(void*, int64_t, int64_t),
                          void* closure) {
      auto* me = static_cast<MeasureEnv*>(self);
      return me->pool ? me->pool->ParallelFor(num_tasks, task, closure)
                      : task(closure, 0, num_tasks);
    };
    env.index_error = [](void* self, int32_t input, int32_t dim, int64_t index, int64_t size,
                         const char* op) {
      auto* me = static_cast<MeasureEnv*>(self);
      std::lock_guard<std::mutex> lock(me->mu);
      if (!me->index_error.empty()) return;
      me->index_error =
          absl::StrCat("index error in ", op, ": index ", index, " out of range for dimension ",
                       dim, " of size ", size, " (input ", input, ")");
    };
  }
};

// IEEE half <-> float, for f16 buffers (the values are the few exact ones FillRandom makes
// and whatever a kernel computes from them).
float HalfToFloat(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -value : value;
}

uint16_t EighthsToHalf(int eighths) {  // eighths / 8, for |eighths| <= 8
  if (eighths == 0) return 0;
  const uint16_t sign = eighths < 0 ? 0x8000 : 0;
  int m = std::abs(eighths), e = -3;  // value = m * 2^e
  while (m < 0x400) m <<= 1, --e;
  return sign | static_cast<uint16_t>(((e + 25) << 10) | (m & 0x3ff));
}

void FillRandom(HostBuffer& buffer, std::mt19937_64& random) {
  std::uniform_real_distribution<double> real(-1, 1);
  std::uniform_int_distribution<int> small(-4, 4), eighths(-8, 8), bit(0, 1);
  for (int64_t i = 0; i < buffer.elements; ++i) {
    const DataType t = buffer.dtype;
    char* at = static_cast<char*>(buffer.data()) + i * t.bytes();
    if (t.is_float() && t.bits == 32) {
      float v = real(random);
      std::memcpy(at, &v, 4);
    } else if (t.is_float() && t.bits == 64) {
      double v = real(random);
      std::memcpy(at, &v, 8);
    } else if (t.is_float() && t.bits == 16) {
      uint16_t v = EighthsToHalf(eighths(random));
      std::memcpy(at, &v, 2);
    } else {
      int64_t v = t.code == DataType::kBool   ? bit(random)
                  : t.code == DataType::kUInt ? std::abs(small(random))
                                              : small(random);
      std::memcpy(at, &v, t.bytes());  // little endian: the low bytes
    }
  }
}

double FloatElement(const HostBuffer& buffer, int64_t i) {
  const char* at = static_cast<const char*>(buffer.data()) + i * buffer.dtype.bytes();
  if (buffer.dtype.bits == 64) {
    double v;
    std::memcpy(&v, at, 8);
    return v;
  }
  if (buffer.dtype.bits == 16) {
    uint16_t v;
    std::memcpy(&v, at, 2);
    return HalfToFloat(v);
  }
  float v;
  std::memcpy(&v, at, 4);
  return v;
}

}  // namespace

bool FloatsAgree(double actual, double expected, double scale) {
  if (actual == expected || (std::isnan(actual) && std::isnan(expected))) return true;
  if (!std::isfinite(actual) || !std::isfinite(expected)) return false;
  return std::fabs(actual - expected) <= 1e-5 + 1e-4 * (std::fabs(expected) + scale);
}

namespace {

// The largest finite magnitude of a float buffer: FloatsAgree's scale.
double FloatScale(const HostBuffer& buffer) {
  double scale = 0;
  for (int64_t i = 0; i < buffer.elements; ++i) {
    double v = std::fabs(FloatElement(buffer, i));
    if (std::isfinite(v)) scale = std::max(scale, v);
  }
  return scale;
}

// "" when `actual` matches `expected`, else the first differing element.
std::string Compare(const HostBuffer& actual, const HostBuffer& expected) {
  const int bytes = expected.dtype.bytes();
  const double scale = expected.dtype.is_float() ? FloatScale(expected) : 0;
  for (int64_t i = 0; i < expected.elements; ++i) {
    if (expected.dtype.is_float()) {
      double a = FloatElement(actual, i), e = FloatElement(expected, i);
      if (FloatsAgree(a, e, scale)) continue;
      return absl::StrCat("buffer ", expected.name, " differs at element ", i, ": ", a,
                          ", expected ", e, " (largest magnitude ", scale, ")");
    }
    const char* a = static_cast<const char*>(actual.data()) + i * bytes;
    const char* e = static_cast<const char*>(expected.data()) + i * bytes;
    if (std::memcmp(a, e, bytes) == 0) continue;
    int64_t av = 0, ev = 0;
    std::memcpy(&av, a, bytes);
    std::memcpy(&ev, e, bytes);
    return absl::StrCat("buffer ", expected.name, " differs at element ", i, ": ", av,
                        ", expected ", ev);
  }
  return "";
}

absl::StatusOr<const ir::PrimFunc*> FindKernel(const ir::IRModule& module,
                                               const std::string& kernel, const char* which) {
  auto it = module.prim_funcs.find(kernel);
  if (it == module.prim_funcs.end() || it->second.is_host) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", which, " module has no kernel named ", kernel));
  }
  return &it->second;
}

using ConstantArgs = std::map<size_t, const ir::NDArray*>;

}  // namespace

ConstantArgs ConstantArguments(const ir::IRModule& module, const std::string& kernel) {
  ConstantArgs constants;
  for (const auto& [name, func] : module.functions) {
    for (const ir::BindingBlock& block : func.blocks) {
      for (const ir::Binding& b : block.bindings) {
        const ir::Expr& call = b.value;
        if (call->kind != ir::ExprKind::kCall || call->name != "call_tir" ||
            call->callee != kernel) {
          continue;
        }
        for (size_t i = 0; i < call->args.size(); ++i) {
          if (call->args[i]->kind == ir::ExprKind::kConstant) {
            constants[i] = call->args[i]->data.get();
          }
        }
        return constants;
      }
    }
  }
  return constants;
}

int64_t WeightBytes(const ir::IRModule& module) {
  std::set<const ir::NDArray*> weights;
  for (const auto& [name, func] : module.functions) {
    for (const ir::BindingBlock& block : func.blocks) {
      for (const ir::Binding& b : block.bindings) {
        if (b.value->kind != ir::ExprKind::kCall || b.value->name != "call_tir") continue;
        for (const ir::Expr& arg : b.value->args) {
          if (arg->kind == ir::ExprKind::kConstant) weights.insert(arg->data.get());
        }
      }
    }
  }
  int64_t bytes = 0;
  for (const ir::NDArray* weight : weights) bytes += static_cast<int64_t>(weight->bytes.size());
  return bytes;
}

int64_t LastLevelCacheBytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return bytes;
  }
  return int64_t{32} << 20;
}

bool EvictsWeightsBefore(WeightCache weights, int run) {
  switch (weights) {
    case WeightCache::kWarm:
      return false;
    case WeightCache::kEvicted:
      return true;
    case WeightCache::kAlternating:
      return run % 2 == 0;
  }
  return true;
}

std::vector<CacheStep> CacheStepsBefore(WeightCache weights, int run) {
  if (!EvictsWeightsBefore(weights, run)) return {CacheStep::kLoadActivations};
  return {CacheStep::kEvictWeights, CacheStep::kLoadActivations};
}

namespace {

// The buffers of `func` with their shapes at `values`, filled from `seed` or, for a
// parameter in `constants`, with that constant.
absl::StatusOr<std::vector<HostBuffer>> AllocateBuffers(
    const ir::PrimFunc& func, const std::map<std::string, int64_t>& values, uint64_t seed,
    const ConstantArgs& constants) {
  auto lookup = [&](const arith::ExprNode& var) -> std::optional<int64_t> {
    auto it = values.find(var.name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
  std::vector<HostBuffer> buffers;
  for (const arith::Buffer& b : func.buffers) {
    // A stream per buffer: a packed constant's other size must not shift the next buffers.
    std::mt19937_64 random(seed + 0x9e3779b97f4a7c15 * (buffers.size() + 1));
    HostBuffer buffer{b->name, b->dtype};
    buffer.elements = 1;
    for (const arith::PrimExpr& dim : b->shape) {
      absl::StatusOr<int64_t> extent = arith::EvaluateInt(dim, lookup);
      if (!extent.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("kernel ", func.name, ": shape of buffer ",
                                                       b->name, ": ", extent.status().message()));
      }
      if (*extent < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", func.name, ": buffer ", b->name, " has a negative extent"));
      }
      buffer.elements *= *extent;
    }
    if (!buffer.Allocate()) {
      return absl::ResourceExhaustedError(absl::StrCat("kernel ", func.name, ": no memory for the ",
                                                       buffer.elements, " elements of buffer ",
                                                       b->name));
    }
    auto constant = constants.find(buffers.size());
    if (constant == constants.end()) {
      FillRandom(buffer, random);
    } else {
      const ir::NDArray& data = *constant->second;
      if (data.dtype != b->dtype || data.num_elements() != buffer.elements) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel ", func.name, ": the constant passed as ", b->name, " does not fit it"));
      }
      std::memcpy(buffer.data(), data.bytes.data(), data.bytes.size());
    }
    buffers.push_back(std::move(buffer));
  }
  return buffers;
}

// The indices of the buffers `func` stores to.
std::set<size_t> WrittenBuffers(const ir::PrimFunc& func) {
  std::set<std::string> names;
  ir::VisitStmts(func.body, [&](const ir::StmtNode& s) {
    if (s.kind == ir::StmtKind::kStore) names.insert(s.buffer->name);
  });
  std::set<size_t> written;
  for (size_t i = 0; i < func.buffers.size(); ++i) {
    if (names.count(func.buffers[i]->name)) written.insert(i);
  }
  return written;
}

// A parameter bound to a constant may differ in shape: a schedule may pack weights.
absl::Status CheckSameSignature(const ir::PrimFunc& candidate, const ir::PrimFunc& reference,
                                const ConstantArgs& constants) {
  bool same = candidate.buffers.size() == reference.buffers.size() &&
              candidate.scalars.size() == reference.scalars.size();
  for (size_t i = 0; same && i < reference.buffers.size(); ++i) {
    same = candidate.buffers[i]->dtype == reference.buffers[i]->dtype &&
           (constants.count(i) ||
            candidate.buffers[i]->shape.size() == reference.buffers[i]->shape.size());
  }
  for (size_t i = 0; same && i < reference.scalars.size(); ++i) {
    same = candidate.scalars[i]->name == reference.scalars[i]->name;
  }
  if (same) return absl::OkStatus();
  return absl::InvalidArgumentError("kernel " + reference.name +
                                    ": the candidate takes other buffers or scalars than the "
                                    "reference");
}

// Puts the caches in the state a kernel meets in a model before each timed run: its
// activations (the other buffers) just written by the kernel before it and, where
// options.weights says so, its weights (the constant arguments) evicted by the other kernels'
// weights. A model too large for the cache streams each kernel's weights from memory, which
// decode steps' matrix-vector products are bound by; timed from warm caches only, Llama's
// decode step chose library calls that ran twice as slow. Timed evicted only, BERT's records
// ran 10% slower on one VM. Model tuning alternates the two (WeightCache::kAlternating): on
// a VM that reports a 480 MiB L3, resnet18's records timed warm put a Winograd conv on
// 7 x 7 planes, 1.3 ms alone, 3.9 ms in the model, where its 16 MiB of transformed
// weights came from memory.
class CacheState {
 public:
  // Takes `steps` (CacheStepsBefore) in order: evicting the constants, loading every buffer
  // not evicted.
  void Prepare(const std::vector<HostBuffer>& buffers, const ConstantArgs& constants,
               const std::vector<CacheStep>& steps) {
    const ConstantArgs none;
    const ConstantArgs* evicted = &none;
    for (CacheStep step : steps) {
      if (step == CacheStep::kEvictWeights && !constants.empty()) {
        EvictConstants(buffers, constants);
        evicted = &constants;
      }
      if (step == CacheStep::kLoadActivations) LoadOthers(buffers, *evicted);
    }
  }

 private:
  static size_t Bytes(const HostBuffer& b) { return b.bytes; }

  void LoadOthers(const std::vector<HostBuffer>& buffers, const ConstantArgs& evicted) {
    uint64_t sum = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (evicted.count(i)) continue;
      const char* bytes = static_cast<const char*>(buffers[i].data());
      for (size_t at = 0; at < Bytes(buffers[i]); at += 64) {
        sum += static_cast<unsigned char>(bytes[at]);
      }
    }
    // Keeps the reads: nothing else looks at them.
    asm volatile("" : : "r"(sum) : "memory");
  }

  // Where the ISA flushes a cache line by address, the weights are flushed; elsewhere the
  // whole cache is overwritten: twice the last-level cache (32 MiB where the system does not
  // say), about 100 ms where a VM reports its host's 260 MiB L3. Then kOtherWeightBytes of a
  // buffer of the tuner's own are read, a load a line, as the kernels before this one read
  // theirs. Flushed alone, resnet18's conv on 7 x 7 planes over 512 channels (16.8 MB of
  // transformed weights, read twice) took 0.7-1.05 ms a run, in the model 1.5; with the read,
  // 1.4-1.6 (bench/RESULTS.md, thirty-first round). Writing the bytes instead (memset, which
  // may store around the caches) changed nothing.
  void EvictConstants(const std::vector<HostBuffer>& buffers, const ConstantArgs& constants) {
#if defined(__x86_64__) || defined(__aarch64__)
    for (const auto& constant : constants) {
      const HostBuffer& buffer = buffers[constant.first];
      const char* bytes = static_cast<const char*>(buffer.data());
      // 64 bytes is the shortest line either has; a longer line is flushed more than once.
      for (size_t at = 0; at < Bytes(buffer); at += 64) {
#if defined(__x86_64__)
        _mm_clflush(bytes + at);
#else
        asm volatile("dc civac, %0" : : "r"(bytes + at) : "memory");
#endif
      }
    }
#if defined(__x86_64__)
    _mm_mfence();
#else
    asm volatile("dsb ish" : : : "memory");
#endif
#else
    if (evict_.empty()) evict_.resize(2 * static_cast<size_t>(LastLevelCacheBytes()));
    std::memset(evict_.data(), ++pass_, evict_.size());
    asm volatile("" : : "r"(evict_.data()) : "memory");
#endif
    ReadOtherWeights();
  }

  void ReadOtherWeights() {
    constexpr size_t kOtherWeightBytes = size_t{64} << 20;
    if (other_weights_.empty()) other_weights_.assign(kOtherWeightBytes, 1);
    uint64_t sum = 0;
    for (size_t at = 0; at < other_weights_.size(); at += 64) sum += other_weights_[at];
    // Keeps the reads: nothing else looks at them.
    asm volatile("" : : "r"(sum) : "memory");
  }

  std::vector<char> evict_;
  std::vector<char> other_weights_;
  char pass_ = 0;
};

// The median and the minimum of m.times_ns (not empty).
void Summarize(Measurement& m) {
  std::vector<int64_t> sorted = m.times_ns;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  m.median_ns = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  m.min_ns = sorted.front();
}

// The threads a kernel for `target` runs on: the thread count the target names, else one.
int ThreadsOf(const ir::Target& target) { return std::max(1, target.threads); }

// Runs `kernel` once on `buffers`; the index error it reported, if any.
std::string RunOnce(const codegen::JitKernel& kernel, std::vector<HostBuffer>& buffers,
                    const std::vector<int64_t>& scalars, int threads) {
  std::vector<void*> data;
  for (HostBuffer& b : buffers) data.push_back(b.data());
  MeasureEnv env(threads);
  kernel.Run(&env.env, data.data(), scalars.data());
  return env.index_error;
}

// The reference's buffers as a ReferenceResult gave them, in place of running it.
absl::Status UseReferenceResult(const ReferenceResult& result, const std::string& kernel,
                                std::vector<HostBuffer>& expected) {
  if (result.buffers.size() != expected.size()) {
    return absl::InvalidArgumentError("the reference result of kernel " + kernel +
                                      " has another number of buffers");
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string& bytes = result.buffers[i];
    if (bytes.size() != static_cast<size_t>(expected[i].elements * expected[i].dtype.bytes())) {
      return absl::InvalidArgumentError(absl::StrCat("the reference result of kernel ", kernel,
                                                     " has another size for buffer ",
                                                     expected[i].name));
    }
    std::memcpy(expected[i].data(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

// The machine the kernels are compiled for: options.target, else this one.
absl::StatusOr<ir::Target> TargetOf(const MeasureOptions& options) {
  if (options.target) return *options.target;
  return codegen::HostTarget();
}

// The values of `func`'s scalar parameters, in order.
absl::StatusOr<std::vector<int64_t>> ScalarArgs(const ir::PrimFunc& func,
                                                const std::map<std::string, int64_t>& values) {
  std::vector<int64_t> scalars;
  for (const arith::PrimExpr& s : func.scalars) {
    auto it = values.find(s->name);
    if (it == values.end()) {
      return absl::InvalidArgumentError("kernel " + func.name + ": no value for scalar " + s->name);
    }
    scalars.push_back(it->second);
  }
  return scalars;
}

// Runs `kernel` options.warmup times, then options.repeats times into m.times_ns, each run
// from the cache state a model gives it; false, with m.failure, when a run reports an index
// error.
bool TimeRuns(const codegen::JitKernel& kernel, std::vector<HostBuffer>& buffers,
              const std::vector<int64_t>& scalars, const ConstantArgs& constants,
              const MeasureOptions& options, MeasureEnv& env, CacheState& cache, Measurement& m) {
  std::vector<void*> data;
  for (HostBuffer& b : buffers) data.push_back(b.data());
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    cache.Prepare(buffers, constants, CacheStepsBefore(options.weights, i));
    auto start = std::chrono::steady_clock::now();
    kernel.Run(&env.env, data.data(), scalars.data());
    auto end = std::chrono::steady_clock::now();
    if (!env.index_error.empty()) {
      m.failure = env.index_error;
      return false;
    }
    if (i < options.warmup) continue;
    m.times_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
  }
  return true;
}

}  // namespace

absl::StatusOr<Measurement> MeasureKernel(const ir::IRModule& candidate,
                                          const ir::IRModule& reference, const std::string& kernel,
                                          const std::map<std::string, int64_t>& scalar_values,
                                          const MeasureOptions& options,
                                          const ReferenceResult* reference_result,
                                          const std::function<void()>& on_compiled) {
  KILN_ASSIGN_OR_RETURN(const ir::Target target, TargetOf(options));
  KILN_ASSIGN_OR_RETURN(const ir::PrimFunc* reference_func,
                        FindKernel(reference, kernel, "reference"));
  KILN_ASSIGN_OR_RETURN(const ir::PrimFunc* candidate_func,
                        FindKernel(candidate, kernel, "candidate"));
  const ConstantArgs reference_constants = ConstantArguments(reference, kernel);
  const ConstantArgs candidate_constants = ConstantArguments(candidate, kernel);
  KILN_RETURN_IF_ERROR(CheckSameSignature(*candidate_func, *reference_func, candidate_constants));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> scalars,
                        ScalarArgs(*reference_func, scalar_values));
  KILN_ASSIGN_OR_RETURN(
      std::vector<HostBuffer> expected,
      AllocateBuffers(*reference_func, scalar_values, options.seed, reference_constants));
  KILN_ASSIGN_OR_RETURN(
      std::vector<HostBuffer> actual,
      AllocateBuffers(*candidate_func, scalar_values, options.seed, candidate_constants));
  for (size_t i = 0; i < expected.size(); ++i) {
    if (actual[i].elements != expected[i].elements && !candidate_constants.count(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel ", kernel, ": buffer ", expected[i].name, " has ", actual[i].elements,
          " elements in the candidate and ", expected[i].elements, " in the reference"));
    }
  }

  std::unique_ptr<codegen::JitKernel> reference_kernel;
  if (reference_result) {
    KILN_RETURN_IF_ERROR(UseReferenceResult(*reference_result, kernel, expected));
  } else {
    KILN_ASSIGN_OR_RETURN(reference_kernel, codegen::JitCompileKernel(reference, kernel, target));
  }
  Measurement m;
  absl::StatusOr<std::unique_ptr<codegen::JitKernel>> compiled =
      codegen::JitCompileKernel(candidate, kernel, target);
  if (!compiled.ok()) {
    m.failure = absl::StrCat("the candidate does not compile: ", compiled.status().message());
    return m;
  }
  if (on_compiled) on_compiled();
  if (reference_kernel) {
    if (std::string error = RunOnce(*reference_kernel, expected, scalars, 1); !error.empty()) {
      return absl::FailedPreconditionError("the reference kernel " + kernel + " failed: " + error);
    }
  }
  if (std::string error = RunOnce(**compiled, actual, scalars, ThreadsOf(target)); !error.empty()) {
    m.failure = error;
    return m;
  }
  std::set<size_t> written = WrittenBuffers(*reference_func);
  written.merge(WrittenBuffers(*candidate_func));
  for (size_t i : written) {
    if (std::string diff = Compare(actual[i], expected[i]); !diff.empty()) {
      m.failure = diff;
      return m;
    }
  }

  MeasureEnv env(ThreadsOf(target));
  CacheState cache;
  if (!TimeRuns(**compiled, actual, scalars, candidate_constants, options, env, cache, m)) {
    return m;
  }
  if (m.times_ns.empty()) {
    m.failure = "no repeats asked for";
    return m;
  }
  Summarize(m);
  m.ok = true;
  return m;
}

absl::StatusOr<std::vector<Measurement>> CompareKernels(
    const std::vector<ir::IRModule>& candidates, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options, int rounds,
    const std::function<void()>& on_compiled) {
  KILN_ASSIGN_OR_RETURN(const ir::Target target, TargetOf(options));
  struct Entry {
    std::unique_ptr<codegen::JitKernel> compiled;
    ConstantArgs constants;
    std::vector<HostBuffer> buffers;
    std::vector<int64_t> scalars;
    Measurement m;
  };
  std::vector<Entry> entries(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    Entry& e = entries[c];
    KILN_ASSIGN_OR_RETURN(const ir::PrimFunc* func, FindKernel(candidates[c], kernel, "candidate"));
    KILN_ASSIGN_OR_RETURN(e.scalars, ScalarArgs(*func, scalar_values));
    e.constants = ConstantArguments(candidates[c], kernel);
    KILN_ASSIGN_OR_RETURN(e.buffers,
                          AllocateBuffers(*func, scalar_values, options.seed, e.constants));
    absl::StatusOr<std::unique_ptr<codegen::JitKernel>> compiled =
        codegen::JitCompileKernel(candidates[c], kernel, target);
    if (compiled.ok()) {
      e.compiled = *std::move(compiled);
    } else {
      e.m.failure = absl::StrCat("the candidate does not compile: ", compiled.status().message());
    }
  }
  if (on_compiled) on_compiled();
  MeasureEnv env(ThreadsOf(target));
  CacheState cache;
  for (int round = 0; round < rounds; ++round) {
    for (Entry& e : entries) {
      if (e.compiled && e.m.failure.empty()) {
        TimeRuns(*e.compiled, e.buffers, e.scalars, e.constants, options, env, cache, e.m);
      }
    }
  }
  std::vector<Measurement> measurements;
  for (Entry& e : entries) {
    e.m.ok = e.m.failure.empty() && !e.m.times_ns.empty();
    if (e.m.failure.empty() && e.m.times_ns.empty()) e.m.failure = "no repeats asked for";
    if (!e.m.times_ns.empty()) Summarize(e.m);
    measurements.push_back(std::move(e.m));
  }
  return measurements;
}

namespace {

// The child's answer, a line per field: "code N", "message TEXT" (an error status), or "ok
// 0|1", "failure TEXT", "times T1 T2 ..."; TEXT has its newlines and backslashes escaped.
std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Unescape(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      out += text[++i] == 'n' ? '\n' : text[i];
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string Serialize(const absl::StatusOr<Measurement>& result) {
  if (!result.ok()) {
    return absl::StrCat("code ", static_cast<int>(result.status().code()), "\nmessage ",
                        Escape(result.status().message()), "\n");
  }
  return absl::StrCat("ok ", result->ok ? 1 : 0, "\nfailure ", Escape(result->failure), "\ntimes ",
                      absl::StrJoin(result->times_ns, " "), "\nend\n");
}

absl::StatusOr<Measurement> Deserialize(const std::string& text) {
  Measurement m;
  int code = 0;
  std::string message;
  bool complete = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (kv.first == "code") {
      code = std::atoi(std::string(kv.second).c_str());
    } else if (kv.first == "message") {
      message = Unescape(kv.second);
    } else if (kv.first == "ok") {
      m.ok = kv.second == "1";
    } else if (kv.first == "failure") {
      m.failure = Unescape(kv.second);
    } else if (kv.first == "times") {
      for (absl::string_view t : absl::StrSplit(kv.second, ' ', absl::SkipEmpty())) {
        m.times_ns.push_back(std::atoll(std::string(t).c_str()));
      }
    } else if (kv.first == "end") {
      complete = true;
    }
  }
  if (code != 0) return absl::Status(static_cast<absl::StatusCode>(code), message);
  if (!complete) return absl::InternalError("the measuring process answered garbage: " + text);
  if (!m.times_ns.empty()) Summarize(m);
  return m;
}

// Several measurements: their answers in turn, each ending with its "end" line.
std::string SerializeAll(const absl::StatusOr<std::vector<Measurement>>& result) {
  if (!result.ok()) return Serialize(result.status());
  std::string out;
  for (const Measurement& m : *result) out += Serialize(m);
  return out;
}

absl::StatusOr<std::vector<Measurement>> DeserializeAll(const std::string& text, size_t count) {
  const std::string end_line = "\nend\n";
  std::vector<Measurement> measurements;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(end_line, at);
    end = end == std::string::npos ? text.size() : end + end_line.size();
    KILN_ASSIGN_OR_RETURN(Measurement m, Deserialize(text.substr(at, end - at)));
    measurements.push_back(std::move(m));
    at = end;
  }
  if (measurements.size() != count) {
    return absl::InternalError(absl::StrCat("the measuring process answered ", measurements.size(),
                                            " measurements for ", count, " candidates"));
  }
  return measurements;
}

Measurement Failed(std::string failure) {
  Measurement m;
  m.failure = std::move(failure);
  return m;
}

}  // namespace

namespace {

// What a child process answered, or how it failed (crashed, timed out, exited badly).
struct ChildOutcome {
  std::string answer;
  std::string failure;  // empty: it answered
};

// Runs `work` in a forked child; its return value comes back through a pipe. The child is
// killed when it takes longer than `compile_timeout` before `work` calls its argument (once
// it has compiled), or longer than `timeout` after. The JIT runs in children only, so the
// caller's process never forks LLVM's threads.
//
// The child writes kCompiledMark when it has compiled, then kAnswerMark and its answer.
constexpr char kCompiledMark = 'C';
constexpr char kAnswerMark = 'A';
ChildOutcome RunInChild(const std::function<std::string(const std::function<void()>&)>& work,
                        std::chrono::milliseconds compile_timeout,
                        std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe(fds) != 0) return {"", absl::StrCat("pipe: ", strerror(errno))};
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {"", absl::StrCat("fork: ", strerror(errno))};
  }
  if (pid == 0) {
    close(fds[0]);
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // a crash should not spend the timeout dumping core
    auto write_mark = [&] {
      if (write(fds[1], &kCompiledMark, 1) != 1) _exit(2);
    };
    std::string answer = kAnswerMark + work(write_mark);
    for (size_t done = 0; done < answer.size();) {
      ssize_t n = write(fds[1], answer.data() + done, answer.size() - done);
      if (n <= 0) _exit(2);
      done += n;
    }
    _exit(0);
  }
  close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + compile_timeout;
  bool compiled = false;
  std::string answer;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // timeout: the loop sees it
    char chunk[65536];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: it has answered or died
    answer.append(chunk, n);
    if (!compiled && answer[0] == kCompiledMark) {
      compiled = true;
      answer.erase(0, 1);
      deadline = std::chrono::steady_clock::now() + timeout;
    }
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out && !compiled) {
    return {"", absl::StrCat("did not compile within ", compile_timeout.count() / 1000.0,
                             " s and was killed")};
  }
  if (timed_out) {
    return {"", absl::StrCat("timed out after ", timeout.count() / 1000.0, " s and was killed")};
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return {"", absl::StrCat("crashed: killed by signal ", sig, " (", strsignal(sig), ")")};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return {"", absl::StrCat("the measuring process exited with status ", WEXITSTATUS(status))};
  }
  if (answer.empty() || answer[0] != kAnswerMark) {
    return {"", "the measuring process answered garbage"};
  }
  return {answer.substr(1), ""};
}

// A ReferenceResult as bytes: "N\n", then per buffer its size, "\n" and its bytes; or
// "error CODE MESSAGE".
std::string SerializeReference(const absl::StatusOr<ReferenceResult>& result) {
  if (!result.ok()) {
    return absl::StrCat("error ", static_cast<int>(result.status().code()), " ",
                        result.status().message());
  }
  std::string out = absl::StrCat(result->buffers.size(), "\n");
  for (const std::string& b : result->buffers) absl::StrAppend(&out, b.size(), "\n", b);
  return out;
}

absl::StatusOr<ReferenceResult> DeserializeReference(absl::string_view text) {
  if (absl::ConsumePrefix(&text, "error ")) {
    size_t space = text.find(' ');
    int code = std::atoi(std::string(text.substr(0, space)).c_str());
    return absl::Status(static_cast<absl::StatusCode>(code),
                        space == absl::string_view::npos ? "" : text.substr(space + 1));
  }
  auto number = [&]() -> std::optional<size_t> {
    size_t newline = text.find('\n');
    size_t n = 0;
    if (newline == absl::string_view::npos || !absl::SimpleAtoi(text.substr(0, newline), &n)) {
      return std::nullopt;
    }
    text.remove_prefix(newline + 1);
    return n;
  };
  auto garbage = absl::InternalError("the reference process answered garbage");
  std::optional<size_t> count = number();
  if (!count) return garbage;
  ReferenceResult result;
  for (size_t i = 0; i < *count; ++i) {
    std::optional<size_t> size = number();
    if (!size || *size > text.size()) return garbage;
    result.buffers.emplace_back(text.substr(0, *size));
    text.remove_prefix(*size);
  }
  return result;
}

}  // namespace

absl::StatusOr<ReferenceResult> RunReference(const ir::IRModule& reference,
                                             const std::string& kernel,
                                             const std::map<std::string, int64_t>& scalar_values,
                                             const MeasureOptions& options,
                                             const std::function<void()>& on_compiled) {
  KILN_ASSIGN_OR_RETURN(const ir::Target target, TargetOf(options));
  KILN_ASSIGN_OR_RETURN(const ir::PrimFunc* func, FindKernel(reference, kernel, "reference"));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> scalars, ScalarArgs(*func, scalar_values));
  KILN_ASSIGN_OR_RETURN(
      std::vector<HostBuffer> buffers,
      AllocateBuffers(*func, scalar_values, options.seed, ConstantArguments(reference, kernel)));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<codegen::JitKernel> compiled,
                        codegen::JitCompileKernel(reference, kernel, target));
  if (on_compiled) on_compiled();
  if (std::string error = RunOnce(*compiled, buffers, scalars, 1); !error.empty()) {
    return absl::FailedPreconditionError("the reference kernel " + kernel + " failed: " + error);
  }
  ReferenceResult result;
  for (const HostBuffer& b : buffers) {
    result.buffers.emplace_back(static_cast<const char*>(b.data()), b.elements * b.dtype.bytes());
  }
  return result;
}

absl::StatusOr<ReferenceResult> RunReferenceIsolated(
    const ir::IRModule& reference, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options) {
  ChildOutcome outcome = RunInChild(
      [&](const std::function<void()>& compiled) {
        return SerializeReference(
            RunReference(reference, kernel, scalar_values, options, compiled));
      },
      options.compile_timeout, options.timeout);
  if (!outcome.failure.empty()) {
    return absl::FailedPreconditionError("the reference kernel " + kernel + " " + outcome.failure);
  }
  return DeserializeReference(outcome.answer);
}

absl::StatusOr<Measurement> MeasureKernelIsolated(
    const ir::IRModule& candidate, const ir::IRModule& reference, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options,
    const ReferenceResult* reference_result) {
  ChildOutcome outcome = RunInChild(
      [&](const std::function<void()>& compiled) {
        return Serialize(MeasureKernel(candidate, reference, kernel, scalar_values, options,
                                       reference_result, compiled));
      },
      options.compile_timeout, options.timeout);
  if (!outcome.failure.empty()) return Failed(outcome.failure);
  return Deserialize(outcome.answer);
}

absl::StatusOr<std::vector<Measurement>> CompareKernelsIsolated(
    const std::vector<ir::IRModule>& candidates, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options,
    int rounds) {
  const int runs = static_cast<int>(candidates.size()) * std::max(rounds, 1);
  ChildOutcome outcome = RunInChild(
      [&](const std::function<void()>& compiled) {
        return SerializeAll(
            CompareKernels(candidates, kernel, scalar_values, options, rounds, compiled));
      },
      options.compile_timeout * static_cast<int>(candidates.size()), options.timeout * runs);
  if (!outcome.failure.empty()) {
    return absl::FailedPreconditionError("comparing candidates of kernel " + kernel + ": " +
                                         outcome.failure);
  }
  return DeserializeAll(outcome.answer, candidates.size());
}

}  // namespace kiln::tune
