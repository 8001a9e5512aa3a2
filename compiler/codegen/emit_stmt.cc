// Stmt -> LLVM control flow: counted loops, stores, lets, conditionals, kernel-local scratch
// buffers and host-function assertions.
#include "compiler/arith/check.h"
#include "compiler/codegen/function_emitter.h"
#include "compiler/ir/stmt_functor.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/MDBuilder.h"

namespace kiln::codegen {

using ir::StmtKind;

// Kernel-local buffers live on the stack; anything bigger belongs in the workspace.
constexpr int64_t kMaxStackBufferBytes = int64_t{1} << 20;
// Workspace pointers are 64-byte aligned (KilnEnv::alloc); local buffers match.
constexpr uint64_t kBufferAlignment = 64;

namespace {

// One alias scope per buffer of kernel `func` (see AliasTags).
auto KernelAliasTags(llvm::LLVMContext& ctx, const ir::PrimFunc& func) {
  std::vector<const arith::BufferNode*> buffers;
  for (const Buffer& buffer : func.buffers) buffers.push_back(buffer.get());
  if (func.body) {
    ir::VisitStmts(func.body, [&](const StmtNode& s) {
      if (s.kind == ir::StmtKind::kAllocate) buffers.push_back(s.buffer.get());
    });
  }
  llvm::MDBuilder md(ctx);
  llvm::MDNode* domain = md.createAnonymousAliasScopeDomain(func.name);
  std::vector<llvm::Metadata*> scopes;
  for (const arith::BufferNode* buffer : buffers) {
    scopes.push_back(md.createAnonymousAliasScope(domain, buffer->name));
  }
  auto tags = std::make_shared<BufferAliasTags>();
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::vector<llvm::Metadata*> others = scopes;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    (*tags)[buffers[i]] = {llvm::MDNode::get(ctx, {scopes[i]}), llvm::MDNode::get(ctx, others)};
  }
  return tags;
}

}  // namespace

FunctionEmitter::FunctionEmitter(ModuleState& state, const ir::PrimFunc& func, llvm::Function* fn)
    : state_(state), func_(func), fn_(fn), b_(fn->getContext()) {
  if (!func.is_host) alias_tags_ = KernelAliasTags(fn->getContext(), func);
}

void FunctionEmitter::TagAccess(llvm::Instruction* access, const arith::BufferNode* buffer) {
  if (!alias_tags_) return;
  auto it = alias_tags_->find(buffer);
  if (it == alias_tags_->end()) return;
  access->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second.scope);
  access->setMetadata(llvm::LLVMContext::MD_noalias, it->second.others);
}

// Whether a kernel's blocks run in phases: several gpu_thread loops, one after another.
static bool HasPhases(const Stmt& body) {
  int thread_loops = 0;
  ir::VisitStmts(body, [&](const StmtNode& s) {
    if (s.kind == ir::StmtKind::kFor && s.for_kind == ir::ForKind::kGpuThread) ++thread_loops;
  });
  return thread_loops > 1;
}

void FunctionEmitter::Emit() {
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx(), "entry", fn_));
  auto arg = fn_->arg_begin();
  if (func_.is_host) {
    env_ = arg++;
    inputs_ = arg++;
    outputs_ = arg++;
  } else {
    env_ = arg++;
    for (const Buffer& buffer : func_.buffers) buffers_.Set(buffer.get(), arg++);
    for (const PrimExpr& scalar : func_.scalars) vars_.Set(scalar.get(), arg++);
    if (state_.emulated_device) block_ = arg++;
  }
  phased_ = state_.gpu && func_.body && HasPhases(func_.body);
  if (func_.body) EmitStmt(func_.body);
  EmitReturn(0);
}

// Host functions and outlined parallel bodies return i32, kernels void.
void FunctionEmitter::EmitReturn(int32_t code) {
  if (func_.is_host || in_parallel_) {
    b_.CreateRet(b_.getInt32(code));
  } else {
    b_.CreateRetVoid();
  }
}

void FunctionEmitter::EmitStmt(const Stmt& s) {
  KILN_CHECK(s) << "null statement in " << func_.name;
  switch (s->kind) {
    case StmtKind::kFor:
      return EmitFor(*s);
    case StmtKind::kStore:
      return EmitStore(*s);
    case StmtKind::kLet: {
      ScopedVar bind(*this, s->var, EmitExprAs(s->value, s->var->dtype));
      return EmitStmt(s->body);
    }
    case StmtKind::kIfThenElse:
      return EmitIfThenElse(*s);
    case StmtKind::kAllocate:
      return EmitAllocate(*s);
    case StmtKind::kEvaluate:
      EmitExpr(s->value);
      return;
    case StmtKind::kSeq:
      for (const Stmt& child : s->seq) EmitStmt(child);
      return;
    case StmtKind::kAssert:
      return EmitAssert(*s);
  }
  KILN_CHECK(false) << "unknown statement kind " << static_cast<int>(s->kind);
}

// Vectorized loops up to this many iterations are unrolled after vectorization: a handful of
// vector steps.
constexpr int64_t kMaxUnrolledVectorizedExtent = 64;

static bool IsShortConstant(const PrimExpr& extent) {
  return extent->kind == arith::ExprKind::kIntImm &&
         extent->int_value <= kMaxUnrolledVectorizedExtent;
}

// Loop hints for the optimizer: vectorized loops ask the loop vectorizer, unrolled loops the
// unroller.
static void AddLoopMetadata(llvm::BranchInst* latch, const StmtNode& s) {
  llvm::LLVMContext& ctx = latch->getContext();
  std::vector<llvm::Metadata*> ops = {nullptr};  // operand 0 is the loop id itself
  if (s.for_kind == ir::ForKind::kVectorized) {
    ops.push_back(
        llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
                                llvm::ConstantAsMetadata::get(llvm::ConstantInt::getTrue(ctx))}));
    // Not unrolled into scalars before the vectorizer sees it.
    ops.push_back(llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.disable")}));
    if (IsShortConstant(s.extent)) {
      // ...but unrolled once vectorized, so the few vector iterations have constant indices
      // and a kernel-local buffer they update (a matmul tile) can live in registers.
      llvm::MDNode* unroll =
          llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.full")});
      ops.push_back(llvm::MDNode::get(
          ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.followup_vectorized"), unroll}));
    }
  } else if (s.for_kind == ir::ForKind::kUnrolled) {
    bool constant = s.extent->kind == arith::ExprKind::kIntImm;
    ops.push_back(
        llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, constant ? "llvm.loop.unroll.full"
                                                                  : "llvm.loop.unroll.enable")}));
  } else {
    return;
  }
  llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx, ops);
  loop->replaceOperandWith(0, loop);
  latch->setMetadata(llvm::LLVMContext::MD_loop, loop);
}

void FunctionEmitter::EmitFor(const StmtNode& s) {
  // On a CPU, gpu_block and gpu_thread loops are serial loops.
  const bool gpu_loop =
      s.for_kind == ir::ForKind::kGpuBlock || s.for_kind == ir::ForKind::kGpuThread;
  if (gpu_loop && state_.gpu) return EmitGpuIndex(s);
  if (s.for_kind == ir::ForKind::kGpuBlock && state_.emulated_device) {
    ScopedVar bind(*this, s.var, Convert(block_, DataType::Int(64), s.var->dtype));
    return EmitStmt(s.body);
  }
  if (s.for_kind == ir::ForKind::kParallel && !in_parallel_ && !func_.is_host && !state_.gpu) {
    return EmitParallelFor(s);
  }
  DataType dtype = s.var->dtype;
  llvm::Value* min = EmitExprAs(s.min, dtype);
  EmitLoop(s, min, b_.CreateAdd(min, EmitExprAs(s.extent, dtype), "", false, true));
}

// A launch covers every block and thread, so the loop variable is this thread's block or
// thread index (ctaid.x, tid.x) and the body runs once.
void FunctionEmitter::EmitGpuIndex(const StmtNode& s) {
  auto id = s.for_kind == ir::ForKind::kGpuBlock ? llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x
                                                 : llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x;
  llvm::Value* index =
      b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), RegisterType(ctx(), s.var->dtype));
  const bool block = s.for_kind == ir::ForKind::kGpuBlock;
  int& depth = block ? gpu_block_depth_ : gpu_thread_depth_;
  ++depth;
  {
    ScopedVar bind(*this, s.var, index);
    EmitStmt(s.body);
  }
  --depth;
  // The next phase may read what this one wrote to shared memory, or overwrite what it read.
  if (!block && phased_) b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
}

// for (var = begin; var < end; ++var) s.body
void FunctionEmitter::EmitLoop(const StmtNode& s, llvm::Value* begin, llvm::Value* end) {
  llvm::BasicBlock* preheader = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx(), "for." + s.var->name, fn_);
  auto* body = llvm::BasicBlock::Create(ctx(), "for.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx(), "for.end", fn_);
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(RegisterType(ctx(), s.var->dtype), 2, s.var->name);
  i->addIncoming(begin, preheader);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);

  b_.SetInsertPoint(body);
  {
    ScopedVar bind(*this, s.var, i);
    EmitStmt(s.body);
  }
  llvm::Value* next = b_.CreateAdd(i, llvm::ConstantInt::get(i->getType(), 1), "", false, true);
  llvm::BranchInst* latch = b_.CreateBr(header);
  i->addIncoming(next, b_.GetInsertBlock());
  AddLoopMetadata(latch, s);
  b_.SetInsertPoint(exit);
}

// A parallel loop: its body becomes a function of (closure, begin, end) that runs iterations
// [min + begin, min + end), and env->parallel_for hands it ranges of [0, extent). The closure
// is a struct of every value in scope (env, buffers, variables); the optimizer drops the
// fields the body does not read only within the outlined function, which is cheap.
void FunctionEmitter::EmitParallelFor(const StmtNode& s) {
  Captured captured;
  std::vector<llvm::Value*> values = {env_};
  for (const auto& [buffer, value] : buffers_) {
    captured.buffers.push_back(buffer);
    values.push_back(value);
  }
  for (const auto& [var, value] : vars_) {
    captured.vars.push_back(var);
    values.push_back(value);
  }
  std::vector<llvm::Type*> types;
  for (llvm::Value* v : values) types.push_back(v->getType());
  auto* closure_type = llvm::StructType::get(ctx(), types);
  llvm::Function* task = OutlineParallelBody(s, closure_type, captured);

  llvm::AllocaInst* closure = CreateEntryAlloca(closure_type, 1, "closure");
  for (size_t f = 0; f < values.size(); ++f) {
    b_.CreateStore(values[f], b_.CreateStructGEP(closure_type, closure, f));
  }
  EmitParallelForCall(EmitExprAs(s.extent, DataType::Int(64)), task, closure);
}

// `i32 kernel.parallelN(ptr closure, i64 begin, i64 end)`: unpacks the closure into a fresh
// emitter's scope (field 0 is env, then the buffers, then the variables) and runs the loop
// serially.
llvm::Function* FunctionEmitter::OutlineParallelBody(const StmtNode& s,
                                                     llvm::StructType* closure_type,
                                                     const Captured& captured) {
  auto* type = llvm::FunctionType::get(b_.getInt32Ty(),
                                       {b_.getPtrTy(), b_.getInt64Ty(), b_.getInt64Ty()}, false);
  std::string name = fn_->getName().str() + ".parallel" + std::to_string(state_.num_outlined++);
  auto* task =
      llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, state_.module);
  task->addFnAttr(llvm::Attribute::NoUnwind);
  FunctionEmitter body(state_, func_, task);
  body.in_parallel_ = true;
  body.alias_tags_ = alias_tags_;
  body.b_.SetInsertPoint(llvm::BasicBlock::Create(ctx(), "entry", task));
  llvm::Value* closure = task->getArg(0);
  auto field = [&](size_t f) {
    return body.b_.CreateLoad(closure_type->getElementType(f),
                              body.b_.CreateStructGEP(closure_type, closure, f));
  };
  size_t f = 0;
  body.env_ = field(f++);
  for (const arith::BufferNode* buffer : captured.buffers) body.buffers_.Set(buffer, field(f++));
  for (const ExprNode* var : captured.vars) body.vars_.Set(var, field(f++));
  DataType dtype = s.var->dtype;
  llvm::Value* min = body.EmitExprAs(s.min, dtype);
  auto offset = [&](llvm::Value* v) {
    llvm::Value* cast = body.b_.CreateSExtOrTrunc(v, RegisterType(ctx(), dtype));
    return body.b_.CreateAdd(min, cast, "", false, true);
  };
  body.EmitLoop(s, offset(task->getArg(1)), offset(task->getArg(2)));
  body.b_.CreateRet(body.b_.getInt32(0));
  return task;
}

void FunctionEmitter::EmitStore(const StmtNode& s) {
  llvm::Value* address = ElementAddress(s.buffer, s.indices);
  llvm::Value* value = EmitExprAs(s.value, s.buffer->dtype);
  llvm::Type* type = MemoryType(ctx(), s.buffer->dtype);
  if (s.buffer->dtype.code == DataType::kBool) value = b_.CreateZExt(value, type);
  if (type->isIntegerTy(16) && s.buffer->dtype.is_float()) {
    value = state_.math.FloatToHalfBits(b_, value);  // f16 storage: see emit_expr.cc
  }
  TagAccess(
      b_.CreateAlignedStore(value, address, state_.module.getDataLayout().getABITypeAlign(type)),
      s.buffer.get());
}

void FunctionEmitter::EmitIfThenElse(const StmtNode& s) {
  llvm::Value* cond = EmitExprAs(s.condition, DataType::Bool());
  auto* then_block = llvm::BasicBlock::Create(ctx(), "if.then", fn_);
  auto* else_block = s.else_case ? llvm::BasicBlock::Create(ctx(), "if.else", fn_) : nullptr;
  auto* merge = llvm::BasicBlock::Create(ctx(), "if.end", fn_);
  b_.CreateCondBr(cond, then_block, else_block ? else_block : merge);
  b_.SetInsertPoint(then_block);
  EmitStmt(s.then_case);
  b_.CreateBr(merge);
  if (else_block) {
    b_.SetInsertPoint(else_block);
    EmitStmt(s.else_case);
    b_.CreateBr(merge);
  }
  b_.SetInsertPoint(merge);
}

llvm::AllocaInst* FunctionEmitter::CreateEntryAlloca(llvm::Type* type, uint64_t count,
                                                     const std::string& name) {
  // In the entry block, so a buffer allocated inside a loop takes its stack once.
  llvm::BasicBlock& entry = fn_->getEntryBlock();
  llvm::IRBuilder<> b(&entry, entry.getFirstInsertionPt());
  llvm::AllocaInst* alloca = b.CreateAlloca(llvm::ArrayType::get(type, count), nullptr, name);
  alloca->setAlignment(llvm::Align(kBufferAlignment));
  return alloca;
}

void FunctionEmitter::EmitAllocate(const StmtNode& s) {
  const Buffer& buffer = s.buffer;
  int64_t count = 1;
  for (const PrimExpr& dim : buffer->shape) {
    KILN_CHECK(dim->kind == arith::ExprKind::kIntImm && dim->int_value >= 0)
        << "Allocate of " << buffer->name << " in " << func_.name
        << " needs a constant size; dimension is " << arith::ToString(dim);
    count *= dim->int_value;
  }
  KILN_CHECK(count * buffer->dtype.bytes() <= kMaxStackBufferBytes)
      << "Allocate of " << buffer->name << " in " << func_.name << " is " << count
      << " elements, more than a kernel-local buffer may hold";
  KILN_CHECK(buffers_.Get(buffer.get()) == nullptr)
      << "buffer " << buffer->name << " allocated twice in " << func_.name;
  llvm::Type* type = MemoryType(ctx(), buffer->dtype);
  const bool shared = state_.gpu && gpu_block_depth_ > 0 && gpu_thread_depth_ == 0;
  buffers_.Set(buffer.get(), shared ? SharedArray(type, count, buffer->name)
                                    : CreateEntryAlloca(type, count, buffer->name));
  EmitStmt(s.body);
  buffers_.Erase(buffer.get());
}

// A block's buffer, outside its phases, is shared by its threads: a static array in the
// GPU's shared memory (address space 3), used through a generic pointer that LLVM's
// address-space inference turns back into shared loads and stores.
llvm::Value* FunctionEmitter::SharedArray(llvm::Type* type, int64_t count,
                                          const std::string& name) {
  auto* array = llvm::ArrayType::get(type, count);
  auto* global = new llvm::GlobalVariable(
      state_.module, array, /*isConstant=*/false, llvm::GlobalValue::InternalLinkage,
      llvm::UndefValue::get(array), "kiln.shared." + func_.name + "." + name, nullptr,
      llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/3);
  global->setAlignment(llvm::Align(16));
  return b_.CreateAddrSpaceCast(global, b_.getPtrTy());
}

void FunctionEmitter::EmitAssert(const StmtNode& s) {
  llvm::Value* cond = EmitExprAs(s.condition, DataType::Bool());
  auto* ok = llvm::BasicBlock::Create(ctx(), "assert.ok", fn_);
  auto* fail = llvm::BasicBlock::Create(ctx(), "assert.fail", fn_);
  b_.CreateCondBr(cond, ok, fail, llvm::MDBuilder(ctx()).createLikelyBranchWeights());
  b_.SetInsertPoint(fail);
  if (s.on_fail) EmitExpr(s.on_fail);
  EmitReturn(1);
  b_.SetInsertPoint(ok);
}

}  // namespace kiln::codegen
