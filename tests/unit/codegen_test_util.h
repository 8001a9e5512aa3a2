// Helpers for the codegen tests: build PrimFuncs by hand, compile a module to a shared object,
// dlopen it and call its entry points with a hand-made KilnEnv and DLTensors.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/loop.h"
#include "gtest/gtest.h"
#include "kiln/artifact_abi.h"

namespace kiln::codegen::testing {

using arith::Buffer;
using arith::DataType;
using arith::PrimExpr;
using ir::Stmt;

inline ir::Target HostTarget() { return *ir::ParseTarget("x86_64"); }

inline PrimExpr I64(int64_t v) { return arith::IntImm(v); }
inline PrimExpr Intrinsic(DataType dtype, const char* name, std::vector<PrimExpr> args) {
  return arith::Call(dtype, name, std::move(args));
}
inline PrimExpr InputShape(int i, int d) {
  return Intrinsic(DataType::Int(), ir::intrinsic::kInputShape, {I64(i), I64(d)});
}
inline PrimExpr InputData(int i) {
  return Intrinsic(DataType::Handle(), ir::intrinsic::kInputData, {I64(i)});
}
inline PrimExpr OutputData(int i) {
  return Intrinsic(DataType::Handle(), ir::intrinsic::kOutputData, {I64(i)});
}
inline Stmt SetOutputShape(int i, int d, PrimExpr v) {
  return ir::Evaluate(
      Intrinsic(DataType::Int(32), ir::intrinsic::kSetOutputShape, {I64(i), I64(d), v}));
}
inline Stmt CallKernel(const std::string& kernel, std::vector<PrimExpr> args) {
  return ir::Evaluate(arith::Call(DataType::Int(32), kernel, std::move(args)));
}

// A dense tensor owning its data and shape, viewable as a DLTensor.
template <typename T>
struct Tensor {
  std::vector<T> data;
  std::vector<int64_t> shape;

  DLTensor dl(DLDataTypeCode code) {
    DLTensor t{};
    t.data = data.empty() ? nullptr : data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = {static_cast<uint8_t>(code), static_cast<uint8_t>(sizeof(T) * 8), 1};
    t.shape = shape.data();
    return t;
  }
};

// A KilnEnv that records what generated code asks of it.
struct TestEnv {
  struct ShapeError {
    int32_t is_output, index, dim;
    int64_t expected, actual;
  };
  KilnEnv env{};
  bool fail_alloc = false;
  int allocs = 0, frees = 0;
  std::vector<ShapeError> shape_errors;
  struct IndexError {
    int32_t input, dim;
    int64_t index, size;
    std::string op;
  };
  std::vector<IndexError> index_errors;
  // parallel_for splits its tasks into this many ranges, each on its own std::thread.
  int threads = 1;
  std::atomic<int> parallel_calls{0};

  TestEnv() {
    env.self = this;
    env.alloc = [](void* self, int64_t bytes) -> void* {
      auto* t = static_cast<TestEnv*>(self);
      if (t->fail_alloc) return nullptr;
      ++t->allocs;
      return std::aligned_alloc(64, (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64);
    };
    env.free = [](void* self, void* ptr) {
      ++static_cast<TestEnv*>(self)->frees;
      std::free(ptr);
    };
    env.shape_error = [](void* self, int32_t is_output, int32_t index, int32_t dim,
                         int64_t expected, int64_t actual) {
      static_cast<TestEnv*>(self)->shape_errors.push_back(
          {is_output, index, dim, expected, actual});
    };
    env.index_error = [](void* self, int32_t input, int32_t dim, int64_t index, int64_t size,
                         const char* op) {
      static_cast<TestEnv*>(self)->index_errors.push_back({input, dim, index, size, op});
    };
    env.parallel_for = [](void* self, int64_t n, int32_t (*task)(void*, int64_t, int64_t),
                          void* closure) -> int32_t {
      auto* t = static_cast<TestEnv*>(self);
      ++t->parallel_calls;
      std::vector<std::thread> workers;
      std::atomic<int32_t> result{0};
      for (int64_t r = 0; r < t->threads; ++r) {
        int64_t begin = n * r / t->threads, end = n * (r + 1) / t->threads;
        if (begin < end) {
          workers.emplace_back([=, &result] {
            if (int32_t code = task(closure, begin, end)) result = code;
          });
        }
      }
      for (std::thread& w : workers) w.join();
      return result;
    };
  }
};

// A compiled module, dlopened from a temporary file.
class Artifact {
 public:
  static std::unique_ptr<Artifact> Build(const ir::IRModule& module,
                                         const std::string& signature = "kiln-signature 1\n") {
    auto so = BuildSharedObject(module, signature, HostTarget());
    EXPECT_TRUE(so.ok()) << so.status();
    if (!so.ok()) return nullptr;
    auto artifact = std::unique_ptr<Artifact>(new Artifact);
    artifact->bytes = *so;
    char path[] = "/tmp/kiln-codegen-test-XXXXXX.so";
    int fd = mkstemps(path, 3);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, so->data(), so->size()), static_cast<ssize_t>(so->size()));
    close(fd);
    artifact->path_ = path;
    artifact->handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(artifact->handle_, nullptr) << dlerror();
    if (!artifact->handle_) return nullptr;
    return artifact;
  }
  ~Artifact() {
    if (handle_) dlclose(handle_);
    unlink(path_.c_str());
  }

  void* Symbol(const char* name) const { return dlsym(handle_, name); }
  KilnRunFn Entry(const char* name) const { return reinterpret_cast<KilnRunFn>(Symbol(name)); }

  std::string bytes;

 private:
  Artifact() = default;
  std::string path_;
  void* handle_ = nullptr;
};

// Adds an elementwise kernel `kernel_name`: out[i] = fn(in_0[i], in_1[i], ...) over n elements,
// and a host function `host_name` that passes it input k and output 0 (n from input 0's shape).
inline void AddElementwise(ir::IRModule& module, const std::string& host_name,
                           const std::string& kernel_name, const std::vector<DataType>& inputs,
                           DataType output,
                           const std::function<PrimExpr(std::vector<PrimExpr>)>& fn,
                           ir::ForKind kind = ir::ForKind::kVectorized) {
  PrimExpr n = arith::MakeVar("n");
  PrimExpr i = arith::MakeVar("i");
  ir::PrimFunc kernel{.name = kernel_name};
  std::vector<PrimExpr> loads;
  for (size_t k = 0; k < inputs.size(); ++k) {
    kernel.buffers.push_back(arith::MakeBuffer("in" + std::to_string(k), inputs[k], {n}));
    loads.push_back(arith::Load(kernel.buffers.back(), {i}));
  }
  Buffer out = arith::MakeBuffer("out", output, {n});
  kernel.buffers.push_back(out);
  kernel.scalars = {n};
  kernel.body = ir::For(i, I64(0), n, kind, ir::Store(out, {i}, fn(loads)));

  PrimExpr hn = arith::MakeVar("n");
  std::vector<PrimExpr> args;
  for (size_t k = 0; k < inputs.size(); ++k) args.push_back(InputData(static_cast<int>(k)));
  args.push_back(OutputData(0));
  args.push_back(hn);
  ir::PrimFunc host{.name = host_name, .is_host = true};
  host.body = ir::Let(hn, InputShape(0, 0), CallKernel(kernel_name, args));
  module.prim_funcs[kernel.name] = kernel;
  module.prim_funcs[host.name] = host;
}

// A module with one elementwise kernel ("elementwise") run by `kiln_run`.
inline ir::IRModule ElementwiseModule(const std::vector<DataType>& inputs, DataType output,
                                      const std::function<PrimExpr(std::vector<PrimExpr>)>& fn,
                                      ir::ForKind kind = ir::ForKind::kVectorized) {
  ir::IRModule module;
  AddElementwise(module, KILN_SYMBOL_RUN, "elementwise", inputs, output, fn, kind);
  return module;
}

inline DLTensor View(void* data, DLDataTypeCode code, size_t element_bytes,
                     std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {static_cast<uint8_t>(code), static_cast<uint8_t>(element_bytes * 8), 1};
  t.shape = shape.data();
  return t;
}

// Runs host function `entry` of an AddElementwise module over `inputs` (all of one length);
// expects success.
template <typename Out, typename... In>
std::vector<Out> RunEntry(const Artifact& artifact, const char* entry, DLDataTypeCode out_code,
                          std::pair<std::vector<In>, DLDataTypeCode>... inputs) {
  size_t n = std::get<0>(std::forward_as_tuple(inputs...)).first.size();
  std::vector<int64_t> shape = {static_cast<int64_t>(n)};
  std::vector<DLTensor> in = {View(inputs.first.data(), inputs.second, sizeof(In), shape)...};
  std::vector<Out> out(n);
  DLTensor out_dl = View(out.data(), out_code, sizeof(Out), shape);
  TestEnv env;
  KilnRunFn run = artifact.Entry(entry);
  EXPECT_NE(run, nullptr) << entry;
  if (run) {
    EXPECT_EQ(run(&env.env, in.data(), &out_dl), 0);
  }
  return out;
}

template <typename Out, typename... In>
std::vector<Out> RunElementwise(const Artifact& artifact, DLDataTypeCode out_code,
                                std::pair<std::vector<In>, DLDataTypeCode>... inputs) {
  return RunEntry<Out>(artifact, KILN_SYMBOL_RUN, out_code, std::move(inputs)...);
}

}  // namespace kiln::codegen::testing
