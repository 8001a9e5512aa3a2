// Lowers one PrimFunc (kernel or host function) to the body of an LLVM function. The emitter is
// split by concern: emit_expr.cc (PrimExpr -> value), emit_stmt.cc (Stmt -> control flow),
// emit_host.cc (the kiln.* intrinsics of host functions and kernels' index checks, and calls
// to kernels).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/codegen/math_library.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

using arith::Buffer;
using arith::DataType;
using arith::ExprNode;
using arith::PrimExpr;
using ir::Stmt;
using ir::StmtNode;

// The LLVM type of a `dtype` value in registers (bool is i1, handle is ptr) and in memory
// (bool is i8).
llvm::Type* RegisterType(llvm::LLVMContext& ctx, DataType dtype);
llvm::Type* MemoryType(llvm::LLVMContext& ctx, DataType dtype);

// What all functions of one LLVM module share.
struct ModuleState {
  ModuleState(llvm::Module& module, const ir::IRModule& ir);

  llvm::Module& module;
  const ir::IRModule& ir;
  // Every PrimFunc of `ir`, declared before any body is emitted so calls resolve in any order.
  std::map<std::string, llvm::Function*> functions;
  // kiln.constant(k): created on first use, so unused weights cost nothing.
  std::vector<llvm::GlobalVariable*> constants;
  MathLibrary math;
  llvm::StructType* dl_tensor;  // DLTensor (dlpack 0.6)
  llvm::StructType* env;        // KilnEnv
  // Outlined parallel loop bodies, for unique names.
  int num_outlined = 0;
  // A GPU module (nvptx.cc): gpu_block and gpu_thread loops read the block and thread index,
  // parallel loops run serially in their thread, index errors are recorded in device memory.
  bool gpu = false;
  // GPU: the ops named by index errors, in the order of their ids.
  std::vector<std::string> gpu_error_ops;
  // Device artifacts: each kernel's launch index (kiln_gpu_kernels order). Emulated: kernels
  // are compiled for this CPU with a trailing i64 block index, the one block they run.
  std::map<std::string, int32_t> kernel_index;
  bool emulated_device = false;
};

// The LLVM module of only the kernels `kernels` of `ir`, each emitted and optimized as
// BuildSharedObject emits it (internal, noinline), with no host functions or metadata
// exports. Internal functions nobody calls are optimized away, so `add_exports` adds what
// calls them (it gets every kernel's declaration by name) before the optimization. For the
// JIT (jit.cc). INVALID_ARGUMENT when a name is not a kernel of `ir`. (llvm_codegen.cc)
using AddExportsFn =
    std::function<void(llvm::Module&, const std::map<std::string, llvm::Function*>&)>;
absl::StatusOr<std::unique_ptr<llvm::Module>> BuildKernelModule(
    llvm::LLVMContext& ctx, const ir::IRModule& ir, const std::vector<std::string>& kernels,
    const ir::Target& target, llvm::TargetMachine& machine, const AddExportsFn& add_exports);

struct DeviceCode;
// The exports of a device artifact (emit_device.cc): kernel names, error ops, and the PTX or
// the emulated kernels' thunks.
void EmitDeviceExports(ModuleState& state, const DeviceCode& device);

// A kernel's buffers never overlap (its parameters are noalias). Saying so with scoped alias
// metadata keeps that knowledge in outlined parallel bodies, which get the buffers through a
// closure: without it, LLVM guards vector loops with run-time overlap checks and cannot keep a
// register tile (a kernel-local buffer) in registers.
struct AliasTags {
  llvm::MDNode* scope;   // the buffer's own scope
  llvm::MDNode* others;  // every other buffer's
};
using BufferAliasTags = std::unordered_map<const arith::BufferNode*, AliasTags>;

// The values bound to IR nodes in scope. Iteration follows the order the keys were bound, not
// their addresses (which differ from one process to the next), so what is emitted from it (a
// parallel loop's closure) is the same in every process: equal cache keys, equal artifacts.
template <typename Key>
class Bindings {
 public:
  // Null when unbound.
  llvm::Value* Get(Key key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : entries_[it->second].second;
  }
  // A new key goes last; a bound one keeps its place.
  void Set(Key key, llvm::Value* value) {
    auto [it, inserted] = index_.emplace(key, entries_.size());
    if (inserted) {
      entries_.emplace_back(key, value);
    } else {
      entries_[it->second].second = value;
    }
  }
  void Erase(Key key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    const size_t position = it->second;
    index_.erase(it);
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(position));
    for (auto& [other, index] : index_) index -= index > position ? 1 : 0;
  }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  std::vector<std::pair<Key, llvm::Value*>> entries_;
  std::unordered_map<Key, size_t> index_;
};

class FunctionEmitter {
 public:
  FunctionEmitter(ModuleState& state, const ir::PrimFunc& func, llvm::Function* fn);
  // Emits the whole body; kernels return void, host functions return 0 at the end.
  void Emit();

 private:
  friend class ScopedVar;

  // emit_expr.cc
  llvm::Value* EmitExpr(const PrimExpr& e);
  llvm::Value* EmitExprAs(const PrimExpr& e, DataType dtype);
  llvm::Value* EmitArithmetic(const ExprNode& e);
  llvm::Value* EmitIntArithmetic(arith::ExprKind kind, DataType dtype, llvm::Value* a,
                                 llvm::Value* b);
  llvm::Value* EmitFloatArithmetic(arith::ExprKind kind, llvm::Value* a, llvm::Value* b);
  llvm::Value* EmitCompare(const ExprNode& e);
  llvm::Value* EmitCall(const ExprNode& e);
  llvm::Value* EmitExternCall(const ExprNode& e, const ir::ExternFunction& fn);
  llvm::Value* EmitPrefetch(const ExprNode& e);
  llvm::Value* EmitTranspose(const ExprNode& e);
  llvm::Value* Convert(llvm::Value* v, DataType from, DataType to);
  llvm::Value* HalfConstant(double value);
  // The address of buffer[indices]; with in_bounds false, of an element that may lie past the
  // buffer (a prefetch's).
  llvm::Value* ElementAddress(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                              bool in_bounds = true);
  llvm::Value* EmitLoad(const ExprNode& e);

  // emit_stmt.cc
  void EmitStmt(const Stmt& s);
  void EmitFor(const StmtNode& s);
  void EmitLoop(const StmtNode& s, llvm::Value* begin, llvm::Value* end);
  void EmitGpuIndex(const StmtNode& s);
  void EmitParallelFor(const StmtNode& s);
  // What a parallel loop body sees of its enclosing scope, in closure order.
  struct Captured {
    std::vector<const arith::BufferNode*> buffers;
    std::vector<const ExprNode*> vars;
  };
  llvm::Function* OutlineParallelBody(const StmtNode& s, llvm::StructType* closure_type,
                                      const Captured& captured);
  void EmitStore(const StmtNode& s);
  void EmitIfThenElse(const StmtNode& s);
  void EmitAllocate(const StmtNode& s);
  void EmitAssert(const StmtNode& s);
  void EmitReturn(int32_t code);
  llvm::AllocaInst* CreateEntryAlloca(llvm::Type* type, uint64_t count, const std::string& name);
  llvm::Value* SharedArray(llvm::Type* type, int64_t count, const std::string& name);

  // emit_host.cc
  llvm::Value* EmitHostIntrinsic(const ExprNode& e);
  llvm::Value* EmitKernelCall(const ExprNode& e, llvm::Function* callee);
  llvm::Value* TensorField(llvm::Value* tensors, const PrimExpr& index, int field);
  llvm::Value* ShapeElement(llvm::Value* tensors, const ExprNode& e);
  llvm::Value* TensorData(llvm::Value* tensors, const PrimExpr& index);
  llvm::Value* ConstantAddress(const PrimExpr& index);
  llvm::Value* EnvField(int field, llvm::Type* type);
  llvm::Value* EmitAlloc(const PrimExpr& bytes);
  llvm::Value* EmitShapeError(const ExprNode& e);
  llvm::Value* EmitCheckIndex(const ExprNode& e);
  void EmitGpuIndexError(const ExprNode& e, llvm::Value* index, llvm::Value* size);
  void EmitParallelForCall(llvm::Value* num_tasks, llvm::Function* task, llvm::Value* closure);

  // emit_warp.cc
  llvm::Value* EmitWarpFold(const ExprNode& e);

  // emit_device.cc
  llvm::Value* EmitDeviceIntrinsic(const ExprNode& e);  // null: not a device intrinsic
  llvm::Value* EmitLaunch(const ExprNode& e);
  llvm::Value* EmitCopy(llvm::Value* dst, llvm::Value* src, llvm::Value* bytes, int kind);
  llvm::Value* CallEnvService(int field, llvm::Type* result, std::vector<llvm::Value*> args);
  void ReturnOneIf(llvm::Value* failed);

  llvm::LLVMContext& ctx() { return fn_->getContext(); }
  // Kernels: tags a load or store of `buffer` with its alias scope.
  void TagAccess(llvm::Instruction* access, const arith::BufferNode* buffer);

  ModuleState& state_;
  const ir::PrimFunc& func_;
  llvm::Function* fn_;
  llvm::IRBuilder<> b_;
  // Variables and buffers are identified by node address, as the IR identifies them.
  Bindings<const ExprNode*> vars_;
  Bindings<const arith::BufferNode*> buffers_;
  // Host functions: the three ABI parameters; kernels get env_ as a hidden first parameter.
  llvm::Value* env_ = nullptr;
  llvm::Value* inputs_ = nullptr;
  llvm::Value* outputs_ = nullptr;
  // Emulated device kernels: the block this call runs.
  llvm::Value* block_ = nullptr;
  // GPU kernels: the gpu_block and gpu_thread loops being emitted, and whether blocks run in
  // phases (a barrier after each gpu_thread loop).
  int gpu_block_depth_ = 0, gpu_thread_depth_ = 0;
  bool phased_ = false;
  // Inside an outlined parallel loop body: nested parallel loops run serially.
  bool in_parallel_ = false;
  // Kernels: per buffer (parameter or allocation), its scope and the scopes of all others.
  std::shared_ptr<const BufferAliasTags> alias_tags_;
};

// Binds a variable for the extent of a scope (Let, For), restoring any outer binding.
class ScopedVar {
 public:
  ScopedVar(FunctionEmitter& emitter, const PrimExpr& var, llvm::Value* value);
  ~ScopedVar();

 private:
  FunctionEmitter& emitter_;
  const ExprNode* var_;
  llvm::Value* saved_;
};

}  // namespace kiln::codegen
