// Stmt -> LLVM control flow: counted loops, stores, lets, conditionals, kernel-local scratch
// buffers and host-function assertions.
#include "compiler/arith/check.h"
#include "compiler/codegen/function_emitter.h"
#include "llvm/IR/MDBuilder.h"

namespace kiln::codegen {

using ir::StmtKind;

// Kernel-local buffers live on the stack; anything bigger belongs in the workspace.
constexpr int64_t kMaxStackBufferBytes = int64_t{1} << 20;
// Workspace pointers are 64-byte aligned (KilnEnv::alloc); local buffers match.
constexpr uint64_t kBufferAlignment = 64;

FunctionEmitter::FunctionEmitter(ModuleState& state, const ir::PrimFunc& func, llvm::Function* fn)
    : state_(state), func_(func), fn_(fn), b_(fn->getContext()) {}

void FunctionEmitter::Emit() {
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx(), "entry", fn_));
  auto arg = fn_->arg_begin();
  if (func_.is_host) {
    env_ = arg++;
    inputs_ = arg++;
    outputs_ = arg++;
  } else {
    for (const Buffer& buffer : func_.buffers) buffers_[buffer.get()] = arg++;
    for (const PrimExpr& scalar : func_.scalars) vars_[scalar.get()] = arg++;
  }
  if (func_.body) EmitStmt(func_.body);
  EmitReturn(0);
}

void FunctionEmitter::EmitReturn(int32_t code) {
  if (func_.is_host) {
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

// Loop hints for the optimizer: vectorized loops ask the loop vectorizer, unrolled loops the
// unroller. Parallel loops run serially until the runtime has a thread pool.
static void AddLoopMetadata(llvm::BranchInst* latch, const StmtNode& s) {
  llvm::LLVMContext& ctx = latch->getContext();
  std::vector<llvm::Metadata*> ops = {nullptr};  // operand 0 is the loop id itself
  if (s.for_kind == ir::ForKind::kVectorized) {
    ops.push_back(
        llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
                                llvm::ConstantAsMetadata::get(llvm::ConstantInt::getTrue(ctx))}));
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
  DataType dtype = s.var->dtype;
  llvm::Value* min = EmitExprAs(s.min, dtype);
  llvm::Value* end = b_.CreateAdd(min, EmitExprAs(s.extent, dtype), "", false, true);
  llvm::BasicBlock* preheader = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx(), "for." + s.var->name, fn_);
  auto* body = llvm::BasicBlock::Create(ctx(), "for.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx(), "for.end", fn_);
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(RegisterType(ctx(), dtype), 2, s.var->name);
  i->addIncoming(min, preheader);
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

void FunctionEmitter::EmitStore(const StmtNode& s) {
  llvm::Value* address = ElementAddress(s.buffer, s.indices);
  llvm::Value* value = EmitExprAs(s.value, s.buffer->dtype);
  llvm::Type* type = MemoryType(ctx(), s.buffer->dtype);
  if (s.buffer->dtype.code == DataType::kBool) value = b_.CreateZExt(value, type);
  b_.CreateAlignedStore(value, address, state_.module.getDataLayout().getABITypeAlign(type));
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
  auto [slot, inserted] = buffers_.emplace(buffer.get(), nullptr);
  KILN_CHECK(inserted) << "buffer " << buffer->name << " allocated twice in " << func_.name;
  slot->second = CreateEntryAlloca(MemoryType(ctx(), buffer->dtype), count, buffer->name);
  EmitStmt(s.body);
  buffers_.erase(buffer.get());
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
