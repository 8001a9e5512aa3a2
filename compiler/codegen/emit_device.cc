// The host side of device artifacts (kiln/artifact_abi.h, "Device artifacts"): the kiln.*
// intrinsics of device memory and launches become calls of KilnEnv's device services, and the
// artifact exports its kernels' names with their PTX, or with the same kernels compiled for
// this CPU behind thunks an emulated device calls.
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/function_emitter.h"
#include "kiln/artifact_abi.h"
#include "llvm/IR/MDBuilder.h"

namespace kiln::codegen {

namespace intrinsic = ir::intrinsic;

// Field numbers of KilnEnv's device services in ModuleState::env.
enum DeviceField {
  kDeviceAllocFn = 6,
  kDeviceFreeFn = 7,
  kCopyFn = 8,
  kDeviceConstantFn = 9,
  kLaunchFn = 10
};

// env->field(env->self, args...).
llvm::Value* FunctionEmitter::CallEnvService(int field, llvm::Type* result,
                                             std::vector<llvm::Value*> args) {
  args.insert(args.begin(), EnvField(0, b_.getPtrTy()));
  std::vector<llvm::Type*> params;
  for (llvm::Value* arg : args) params.push_back(arg->getType());
  auto* type = llvm::FunctionType::get(result, params, false);
  return b_.CreateCall(type, EnvField(field, b_.getPtrTy()), args);
}

// The service reported why it failed; the host function only returns.
void FunctionEmitter::ReturnOneIf(llvm::Value* failed) {
  auto* fail = llvm::BasicBlock::Create(ctx(), "device.fail", fn_);
  auto* ok = llvm::BasicBlock::Create(ctx(), "device.ok", fn_);
  b_.CreateCondBr(failed, fail, ok, llvm::MDBuilder(ctx()).createUnlikelyBranchWeights());
  b_.SetInsertPoint(fail);
  EmitReturn(1);
  b_.SetInsertPoint(ok);
}

llvm::Value* FunctionEmitter::EmitCopy(llvm::Value* dst, llvm::Value* src, llvm::Value* bytes,
                                       int kind) {
  llvm::Value* status =
      CallEnvService(kCopyFn, b_.getInt32Ty(), {dst, src, bytes, b_.getInt32(kind)});
  ReturnOneIf(b_.CreateICmpNE(status, b_.getInt32(0)));
  return status;
}

llvm::Value* FunctionEmitter::EmitDeviceIntrinsic(const ExprNode& e) {
  const std::string& name = e.name;
  auto arg = [&](size_t i, DataType dtype) { return EmitExprAs(e.args[i], dtype); };
  const llvm::DataLayout& layout = state_.module.getDataLayout();
  if (name == intrinsic::kDeviceAlloc) {
    llvm::Value* ptr = CallEnvService(kDeviceAllocFn, b_.getPtrTy(), {arg(0, DataType::Int(64))});
    ReturnOneIf(b_.CreateIsNull(ptr));
    return ptr;
  }
  if (name == intrinsic::kDeviceFree) {
    CallEnvService(kDeviceFreeFn, b_.getVoidTy(), {arg(0, DataType::Handle())});
    return b_.getInt32(0);
  }
  if (name == intrinsic::kDeviceConstant) {
    const ir::NDArray& array = *state_.ir.constants.at(e.args[0]->int_value);
    llvm::Value* ptr = CallEnvService(kDeviceConstantFn, b_.getPtrTy(),
                                      {arg(0, DataType::Int(32)), ConstantAddress(e.args[0]),
                                       b_.getInt64(static_cast<int64_t>(array.bytes.size()))});
    ReturnOneIf(b_.CreateIsNull(ptr));
    return ptr;
  }
  if (name == intrinsic::kCopy) {
    KILN_CHECK(e.args[3]->kind == arith::ExprKind::kIntImm) << name << " kind in " << func_.name;
    return EmitCopy(arg(0, DataType::Handle()), arg(1, DataType::Handle()),
                    arg(2, DataType::Int(64)), static_cast<int>(e.args[3]->int_value));
  }
  if (name == intrinsic::kReadDeviceElement) {
    llvm::Type* type = MemoryType(ctx(), e.dtype);
    llvm::Value* address =
        b_.CreateInBoundsGEP(type, arg(0, DataType::Handle()), arg(1, DataType::Int(64)));
    llvm::Value* slot = CreateEntryAlloca(type, 1, "element");
    EmitCopy(slot, address, b_.getInt64(layout.getTypeStoreSize(type)), intrinsic::kCopyToHost);
    return b_.CreateLoad(type, slot);
  }
  if (name == intrinsic::kWriteDeviceElement) {
    DataType dtype = e.args[1]->dtype;
    llvm::Type* type = MemoryType(ctx(), dtype);
    llvm::Value* slot = CreateEntryAlloca(type, 1, "element");
    b_.CreateStore(arg(1, dtype), slot);
    return EmitCopy(arg(0, DataType::Handle()), slot, b_.getInt64(layout.getTypeStoreSize(type)),
                    intrinsic::kCopyToDevice);
  }
  if (name == intrinsic::kLaunch) return EmitLaunch(e);
  return nullptr;
}

// if (blocks > 0) env->launch(env->self, index, blocks, threads, args): args[i] points at a
// stack slot holding the kernel's i-th parameter (env, buffers, scalars), as
// cuLaunchKernel's kernelParams do.
llvm::Value* FunctionEmitter::EmitLaunch(const ExprNode& e) {
  const ExprNode& call = *e.args[2];
  const ir::PrimFunc& kernel = state_.ir.prim_funcs.at(call.name);
  auto index = state_.kernel_index.find(call.name);
  KILN_CHECK(index != state_.kernel_index.end())
      << "launch of " << call.name << " in a module without device kernels";
  llvm::Value* blocks = EmitExprAs(e.args[0], DataType::Int(64));
  auto* launch = llvm::BasicBlock::Create(ctx(), "launch." + call.name, fn_);
  auto* done = llvm::BasicBlock::Create(ctx(), "launched." + call.name, fn_);
  b_.CreateCondBr(b_.CreateICmpSGT(blocks, b_.getInt64(0)), launch, done);
  b_.SetInsertPoint(launch);
  size_t count = 1 + call.args.size();
  llvm::Value* params = CreateEntryAlloca(b_.getPtrTy(), count, "launch.params");
  auto set_param = [&](size_t i, llvm::Value* value, const std::string& name) {
    llvm::Value* slot = CreateEntryAlloca(value->getType(), 1, name);
    b_.CreateStore(value, slot);
    b_.CreateStore(slot, b_.CreateConstInBoundsGEP2_32(llvm::ArrayType::get(b_.getPtrTy(), count),
                                                       params, 0, i));
  };
  set_param(0, env_, "launch.env");
  for (size_t i = 0; i < call.args.size(); ++i) {
    DataType dtype = i < kernel.buffers.size() ? DataType::Handle()
                                               : kernel.scalars[i - kernel.buffers.size()]->dtype;
    set_param(i + 1, EmitExprAs(call.args[i], dtype), "launch.arg");
  }
  llvm::Value* status = CallEnvService(
      kLaunchFn, b_.getInt32Ty(),
      {b_.getInt32(index->second), blocks, EmitExprAs(e.args[1], DataType::Int(32)), params});
  ReturnOneIf(b_.CreateICmpNE(status, b_.getInt32(0)));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  return b_.getInt32(0);
}

namespace {

// `const char* name(void)` returning `text`.
void EmitTextFunction(llvm::Module& module, const char* name, const std::string& text) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* data = llvm::ConstantDataArray::getString(ctx, text, /*AddNull=*/true);
  auto* global =
      new llvm::GlobalVariable(module, data->getType(), true, llvm::GlobalValue::PrivateLinkage,
                               data, std::string(name) + ".text");
  global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(b.getPtrTy(), false),
                                    llvm::GlobalValue::ExternalLinkage, name, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateRet(global);
}

std::string Lines(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += name + "\n";
  return text;
}

// `void thunk(ptr args, i64 block)`: loads each parameter from where args[i] points and calls
// the kernel (compiled with a trailing block index) for that one block.
llvm::Function* EmitThunk(llvm::Module& module, llvm::Function* kernel) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getInt64Ty()}, false);
  auto* thunk = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage,
                                       "kiln.thunk." + kernel->getName(), module);
  thunk->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", thunk));
  std::vector<llvm::Value*> args;
  size_t params = kernel->arg_size() - 1;  // the last is the block
  for (size_t i = 0; i < params; ++i) {
    llvm::Value* slot =
        b.CreateLoad(b.getPtrTy(), b.CreateConstInBoundsGEP1_64(b.getPtrTy(), thunk->getArg(0), i));
    args.push_back(b.CreateLoad(kernel->getArg(i)->getType(), slot));
  }
  args.push_back(thunk->getArg(1));
  b.CreateCall(kernel, args);
  b.CreateRetVoid();
  return thunk;
}

}  // namespace

void EmitDeviceExports(ModuleState& state, const DeviceCode& device) {
  llvm::Module& module = state.module;
  std::vector<std::string> names(state.kernel_index.size());
  for (const auto& [name, index] : state.kernel_index) names[index] = name;
  EmitTextFunction(module, KILN_SYMBOL_GPU_KERNELS, Lines(names));
  EmitTextFunction(module, KILN_SYMBOL_GPU_ERROR_OPS, Lines(device.error_ops));
  if (device.kind == DeviceCode::Kind::kCuda) {
    EmitTextFunction(module, KILN_SYMBOL_GPU_PTX, device.ptx);
    return;
  }
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  std::vector<llvm::Constant*> thunks;
  for (const std::string& name : names)
    thunks.push_back(EmitThunk(module, state.functions.at(name)));
  thunks.push_back(llvm::ConstantPointerNull::get(ptr));  // the end, checked by the runtime
  auto* table_type = llvm::ArrayType::get(ptr, thunks.size());
  auto* table = new llvm::GlobalVariable(
      module, table_type, true, llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantArray::get(table_type, thunks), "kiln.emulated_kernels");
  llvm::IRBuilder<> b(ctx);
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(ptr, false),
                                    llvm::GlobalValue::ExternalLinkage,
                                    KILN_SYMBOL_GPU_EMULATED_KERNELS, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateRet(table);
}

}  // namespace kiln::codegen
