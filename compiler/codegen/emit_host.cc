// The host side of the artifact ABI (runtime/include/kiln/artifact_abi.h): the kiln.*
// intrinsics read and write DLTensor fields and call back into KilnEnv; a call naming a kernel
// passes its buffers and scalars.
#include <algorithm>

#include "compiler/arith/check.h"
#include "compiler/codegen/function_emitter.h"
#include "llvm/IR/MDBuilder.h"

namespace kiln::codegen {

namespace intrinsic = ir::intrinsic;

// Field numbers of the LLVM struct types built in ModuleState (DLTensor, KilnEnv).
enum TensorField { kData = 0, kShape = 4, kByteOffset = 6 };
enum EnvField {
  kSelf = 0,
  kAlloc = 1,
  kFree = 2,
  kShapeErrorFn = 3,
  kParallelForFn = 4,
  kIndexErrorFn = 5
};

static llvm::Value* Zero(llvm::LLVMContext& ctx, DataType dtype) {
  return llvm::Constant::getNullValue(RegisterType(ctx, dtype));
}

llvm::Value* FunctionEmitter::EmitHostIntrinsic(const ExprNode& e) {
  const std::string& name = e.name;
  auto expect_args = [&](size_t n) {
    KILN_CHECK_EQ(e.args.size(), n) << "arguments of " << name << " in " << func_.name;
  };
  if (llvm::Value* device = EmitDeviceIntrinsic(e)) return device;
  if (name == intrinsic::kInputShape || name == intrinsic::kOutputShape) {
    expect_args(2);
    llvm::Value* tensors = name == intrinsic::kInputShape ? inputs_ : outputs_;
    llvm::Value* dim =
        b_.CreateAlignedLoad(b_.getInt64Ty(), ShapeElement(tensors, e), llvm::Align(8), name);
    return Convert(dim, DataType::Int(64), e.dtype);
  }
  if (name == intrinsic::kSetOutputShape) {
    expect_args(3);
    llvm::Value* value = EmitExprAs(e.args[2], DataType::Int(64));
    b_.CreateAlignedStore(value, ShapeElement(outputs_, e), llvm::Align(8));
    return Zero(ctx(), e.dtype);
  }
  if (name == intrinsic::kInputData || name == intrinsic::kOutputData) {
    expect_args(1);
    return TensorData(name == intrinsic::kInputData ? inputs_ : outputs_, e.args[0]);
  }
  if (name == intrinsic::kConstant) {
    expect_args(1);
    return ConstantAddress(e.args[0]);
  }
  if (name == intrinsic::kAlloc) {
    expect_args(1);
    return EmitAlloc(e.args[0]);
  }
  if (name == intrinsic::kFree) {
    expect_args(1);
    auto* type = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), b_.getPtrTy()}, false);
    b_.CreateCall(type, EnvField(kFree, b_.getPtrTy()),
                  {EnvField(kSelf, b_.getPtrTy()), EmitExprAs(e.args[0], DataType::Handle())});
    return Zero(ctx(), e.dtype);
  }
  if (name == intrinsic::kOffset) {
    expect_args(2);
    return b_.CreateInBoundsGEP(b_.getInt8Ty(), EmitExprAs(e.args[0], DataType::Handle()),
                                EmitExprAs(e.args[1], DataType::Int(64)));
  }
  if (name == intrinsic::kReadElement) {
    expect_args(2);
    llvm::Type* type = MemoryType(ctx(), e.dtype);
    llvm::Value* address = b_.CreateInBoundsGEP(type, EmitExprAs(e.args[0], DataType::Handle()),
                                                EmitExprAs(e.args[1], DataType::Int(64)));
    return b_.CreateLoad(type, address);
  }
  if (name == intrinsic::kShapeError) {
    expect_args(5);
    return EmitShapeError(e);
  }
  KILN_CHECK(false) << "unknown intrinsic " << name << " in " << func_.name;
  return nullptr;
}

// Address of field `field` of tensors[index].
llvm::Value* FunctionEmitter::TensorField(llvm::Value* tensors, const PrimExpr& index, int field) {
  llvm::Value* i = EmitExprAs(index, DataType::Int(64));
  return b_.CreateInBoundsGEP(state_.dl_tensor, tensors, {i, b_.getInt32(field)});
}

// Address of tensors[e.args[0]].shape[e.args[1]].
llvm::Value* FunctionEmitter::ShapeElement(llvm::Value* tensors, const ExprNode& e) {
  llvm::Value* shape = b_.CreateLoad(b_.getPtrTy(), TensorField(tensors, e.args[0], kShape));
  llvm::Value* dim = EmitExprAs(e.args[1], DataType::Int(64));
  return b_.CreateInBoundsGEP(b_.getInt64Ty(), shape, dim);
}

// tensors[index].data + byte_offset.
llvm::Value* FunctionEmitter::TensorData(llvm::Value* tensors, const PrimExpr& index) {
  llvm::Value* data = b_.CreateLoad(b_.getPtrTy(), TensorField(tensors, index, kData));
  llvm::Value* offset = b_.CreateLoad(b_.getInt64Ty(), TensorField(tensors, index, kByteOffset));
  return b_.CreateInBoundsGEP(b_.getInt8Ty(), data, offset);
}

// Constant k lives in a private, read-only, 64-byte aligned global.
llvm::Value* FunctionEmitter::ConstantAddress(const PrimExpr& index) {
  KILN_CHECK(index->kind == arith::ExprKind::kIntImm)
      << intrinsic::kConstant << " needs a constant index in " << func_.name;
  int64_t k = index->int_value;
  KILN_CHECK(k >= 0 && k < static_cast<int64_t>(state_.ir.constants.size()))
      << "constant " << k << " of " << state_.ir.constants.size() << " in " << func_.name;
  llvm::GlobalVariable*& global = state_.constants[k];
  if (global) return global;
  const ir::NDArray& array = *state_.ir.constants[k];
  llvm::StringRef bytes(reinterpret_cast<const char*>(array.bytes.data()), array.bytes.size());
  auto* init = llvm::ConstantDataArray::getRaw(bytes, bytes.size(), b_.getInt8Ty());
  global = new llvm::GlobalVariable(state_.module, init->getType(), /*isConstant=*/true,
                                    llvm::GlobalValue::PrivateLinkage, init,
                                    "kiln.constant." + std::to_string(k));
  global->setAlignment(llvm::Align(64));
  global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return global;
}

llvm::Value* FunctionEmitter::EnvField(int field, llvm::Type* type) {
  return b_.CreateLoad(type, b_.CreateStructGEP(state_.env, env_, field));
}

// env->alloc(env->self, bytes); a null result makes the host function return 1 at once.
llvm::Value* FunctionEmitter::EmitAlloc(const PrimExpr& bytes) {
  auto* type = llvm::FunctionType::get(b_.getPtrTy(), {b_.getPtrTy(), b_.getInt64Ty()}, false);
  llvm::Value* size = EmitExprAs(bytes, DataType::Int(64));
  llvm::Value* ptr = b_.CreateCall(type, EnvField(kAlloc, b_.getPtrTy()),
                                   {EnvField(kSelf, b_.getPtrTy()), size}, "workspace");
  auto* fail = llvm::BasicBlock::Create(ctx(), "alloc.fail", fn_);
  auto* ok = llvm::BasicBlock::Create(ctx(), "alloc.ok", fn_);
  b_.CreateCondBr(b_.CreateIsNull(ptr), fail, ok,
                  llvm::MDBuilder(ctx()).createUnlikelyBranchWeights());
  b_.SetInsertPoint(fail);
  EmitReturn(1);
  b_.SetInsertPoint(ok);
  return ptr;
}

// env->shape_error(env->self, kind, index, dim, expected, actual).
llvm::Value* FunctionEmitter::EmitShapeError(const ExprNode& e) {
  auto* i32 = b_.getInt32Ty();
  auto* i64 = b_.getInt64Ty();
  auto* type =
      llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), i32, i32, i32, i64, i64}, false);
  std::vector<llvm::Value*> args = {EnvField(kSelf, b_.getPtrTy())};
  for (int i = 0; i < 3; ++i) args.push_back(EmitExprAs(e.args[i], DataType::Int(32)));
  for (int i = 3; i < 5; ++i) args.push_back(EmitExprAs(e.args[i], DataType::Int(64)));
  b_.CreateCall(type, EnvField(kShapeErrorFn, b_.getPtrTy()), args);
  return Zero(ctx(), e.dtype);
}

// kiln.check_index.<op>(index, size, input, dim, wrap): one unsigned compare of the
// (wrapped) index against size; out of range, env->index_error(env->self, input, dim, index,
// size, "<op>") and return, so no access at that index ever happens.
llvm::Value* FunctionEmitter::EmitCheckIndex(const ExprNode& e) {
  KILN_CHECK_EQ(e.args.size(), 5u) << "arguments of " << e.name << " in " << func_.name;
  llvm::Value* index = EmitExprAs(e.args[0], DataType::Int(64));
  llvm::Value* size = EmitExprAs(e.args[1], DataType::Int(64));
  llvm::Value* at = index;
  if (!e.args[4]->is_const_int(0)) {
    llvm::Value* negative = b_.CreateICmpSLT(index, b_.getInt64(0));
    llvm::Value* wrapped = b_.CreateSelect(negative, b_.CreateAdd(index, size), index);
    at = b_.CreateSelect(EmitExprAs(e.args[4], DataType::Bool()), wrapped, index);
  }
  auto* fail = llvm::BasicBlock::Create(ctx(), "index.fail", fn_);
  auto* ok = llvm::BasicBlock::Create(ctx(), "index.ok", fn_);
  // size >= 0, so a negative index compares as a huge unsigned one.
  b_.CreateCondBr(b_.CreateICmpUGE(at, size), fail, ok,
                  llvm::MDBuilder(ctx()).createUnlikelyBranchWeights());
  b_.SetInsertPoint(fail);
  if (state_.gpu) {
    EmitGpuIndexError(e, index, size);
    EmitReturn(1);
    b_.SetInsertPoint(ok);
    return Convert(at, DataType::Int(64), e.dtype);
  }
  auto* i32 = b_.getInt32Ty();
  auto* i64 = b_.getInt64Ty();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(),
                                       {b_.getPtrTy(), i32, i32, i64, i64, b_.getPtrTy()}, false);
  std::string op = e.name.substr(std::string(intrinsic::kCheckIndex).size() + 1);
  b_.CreateCall(type, EnvField(kIndexErrorFn, b_.getPtrTy()),
                {EnvField(kSelf, b_.getPtrTy()), EmitExprAs(e.args[2], DataType::Int(32)),
                 EmitExprAs(e.args[3], DataType::Int(32)), index, size,
                 b_.CreateGlobalString(op, "kiln.op." + op)});
  EmitReturn(1);
  b_.SetInsertPoint(ok);
  return Convert(at, DataType::Int(64), e.dtype);
}

// A GPU thread cannot call the host: the first thread to fail claims the device global
// `kiln_gpu_index_error` (i64 [claimed, input, dim, op id, index, size]; op ids index
// state_.gpu_error_ops) and writes its report there for the host to read after the launch.
void FunctionEmitter::EmitGpuIndexError(const ExprNode& e, llvm::Value* index, llvm::Value* size) {
  llvm::Module& module = state_.module;
  auto* type = llvm::ArrayType::get(b_.getInt64Ty(), 6);
  llvm::GlobalVariable* record = module.getGlobalVariable("kiln_gpu_index_error");
  if (!record) {
    record =
        new llvm::GlobalVariable(module, type, false, llvm::GlobalValue::ExternalLinkage,
                                 llvm::ConstantAggregateZero::get(type), "kiln_gpu_index_error",
                                 nullptr, llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/1);
  }
  std::string op = e.name.substr(std::string(intrinsic::kCheckIndex).size() + 1);
  auto& ops = state_.gpu_error_ops;
  auto found = std::find(ops.begin(), ops.end(), op);
  int64_t op_id = found - ops.begin();
  if (found == ops.end()) ops.push_back(op);
  auto field = [&](int i) { return b_.CreateConstInBoundsGEP2_32(type, record, 0, i); };
  llvm::Value* claimed =
      b_.CreateAtomicCmpXchg(field(0), b_.getInt64(0), b_.getInt64(1), llvm::MaybeAlign(8),
                             llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
  auto* write = llvm::BasicBlock::Create(ctx(), "index.report", fn_);
  auto* done = llvm::BasicBlock::Create(ctx(), "index.reported", fn_);
  b_.CreateCondBr(b_.CreateICmpEQ(b_.CreateExtractValue(claimed, 0), b_.getInt64(0)), write, done);
  b_.SetInsertPoint(write);
  llvm::Value* values[] = {EmitExprAs(e.args[2], DataType::Int(64)),
                           EmitExprAs(e.args[3], DataType::Int(64)), b_.getInt64(op_id), index,
                           size};
  for (int i = 0; i < 5; ++i) b_.CreateStore(values[i], field(i + 1));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

// A call to another PrimFunc: the KilnEnv, buffers as pointers, then scalars, as the callee
// declares them.
llvm::Value* FunctionEmitter::EmitKernelCall(const ExprNode& e, llvm::Function* callee) {
  const ir::PrimFunc& kernel = state_.ir.prim_funcs.at(e.name);
  KILN_CHECK(!kernel.is_host) << func_.name << " calls host function " << e.name;
  KILN_CHECK_EQ(e.args.size(), kernel.buffers.size() + kernel.scalars.size())
      << "arguments of the call to " << e.name << " in " << func_.name;
  std::vector<llvm::Value*> args = {env_};
  for (size_t i = 0; i < e.args.size(); ++i) {
    DataType dtype = i < kernel.buffers.size() ? DataType::Handle()
                                               : kernel.scalars[i - kernel.buffers.size()]->dtype;
    args.push_back(EmitExprAs(e.args[i], dtype));
  }
  b_.CreateCall(callee, args);
  return Zero(ctx(), e.dtype);
}

// env->parallel_for(env->self, num_tasks, task, closure); the result is dropped: kernels
// cannot fail.
void FunctionEmitter::EmitParallelForCall(llvm::Value* num_tasks, llvm::Function* task,
                                          llvm::Value* closure) {
  auto* type = llvm::FunctionType::get(
      b_.getInt32Ty(), {b_.getPtrTy(), b_.getInt64Ty(), b_.getPtrTy(), b_.getPtrTy()}, false);
  b_.CreateCall(type, EnvField(kParallelForFn, b_.getPtrTy()),
                {EnvField(kSelf, b_.getPtrTy()), num_tasks, task, closure});
}

}  // namespace kiln::codegen
