#include "compiler/codegen/wasm_module.h"

#include <string>
#include <vector>

#include "llvm/IR/IRBuilder.h"

namespace kiln::codegen {
namespace {

// `name` imported from module "kiln" (wasm-ld lets such symbols stay undefined).
llvm::Function* DeclareImport(llvm::Module& module, const std::string& name,
                              llvm::FunctionType* type) {
  auto* fn =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, "kiln.host." + name, module);
  fn->addFnAttr("wasm-import-module", "kiln");
  fn->addFnAttr("wasm-import-name", name);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fn;
}

// An internal function of `type` (a KilnEnv member) whose body is `body(builder, fn)`.
template <typename Body>
llvm::Function* DefineThunk(llvm::Module& module, const std::string& name, llvm::FunctionType* type,
                            Body body) {
  auto* fn =
      llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, "kiln.wasm." + name, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(module.getContext(), "entry", fn));
  body(b, fn);
  return fn;
}

// A thunk with KilnEnv's signature (`self` first) that calls the import without `self`.
llvm::Function* ForwardingThunk(llvm::Module& module, const std::string& name,
                                llvm::FunctionType* env_type) {
  std::vector<llvm::Type*> params(env_type->param_begin() + 1, env_type->param_end());
  auto* import_type = llvm::FunctionType::get(env_type->getReturnType(), params, false);
  llvm::Function* import = DeclareImport(module, name, import_type);
  return DefineThunk(module, name, env_type, [&](llvm::IRBuilder<>& b, llvm::Function* fn) {
    std::vector<llvm::Value*> args;
    for (unsigned i = 1; i < fn->arg_size(); ++i) args.push_back(fn->getArg(i));
    llvm::Value* result = b.CreateCall(import, args);
    if (env_type->getReturnType()->isVoidTy()) {
      b.CreateRetVoid();
    } else {
      b.CreateRet(result);
    }
  });
}

// parallel_for(self, num_tasks, task, closure): task(closure, 0, num_tasks), or 0 when there
// is nothing to do. wasm runs one thread.
llvm::Function* SerialParallelFor(llvm::Module& module) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  auto* task_type = llvm::FunctionType::get(i32, {ptr, i64, i64}, false);
  auto* type = llvm::FunctionType::get(i32, {ptr, i64, ptr, ptr}, false);
  return DefineThunk(module, "parallel_for", type, [&](llvm::IRBuilder<>& b, llvm::Function* fn) {
    auto* run = llvm::BasicBlock::Create(ctx, "run", fn);
    auto* none = llvm::BasicBlock::Create(ctx, "none", fn);
    llvm::Value* num_tasks = fn->getArg(1);
    b.CreateCondBr(b.CreateICmpSGT(num_tasks, b.getInt64(0)), run, none);
    b.SetInsertPoint(run);
    b.CreateRet(b.CreateCall(task_type, fn->getArg(2), {fn->getArg(3), b.getInt64(0), num_tasks}));
    b.SetInsertPoint(none);
    b.CreateRet(b.getInt32(0));
  });
}

}  // namespace

void EmitWasmEnv(llvm::Module& module) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  auto* void_type = llvm::Type::getVoidTy(ctx);
  // KilnEnv: self, alloc, free, shape_error, parallel_for, index_error (kiln/artifact_abi.h).
  std::vector<llvm::Constant*> members = {
      llvm::ConstantPointerNull::get(ptr),
      ForwardingThunk(module, "alloc", llvm::FunctionType::get(ptr, {ptr, i64}, false)),
      ForwardingThunk(module, "free", llvm::FunctionType::get(void_type, {ptr, ptr}, false)),
      ForwardingThunk(module, "shape_error",
                      llvm::FunctionType::get(void_type, {ptr, i32, i32, i32, i64, i64}, false)),
      SerialParallelFor(module),
      ForwardingThunk(module, "index_error",
                      llvm::FunctionType::get(void_type, {ptr, i32, i32, i64, i64, ptr}, false)),
  };
  auto* type = llvm::StructType::get(ctx, std::vector<llvm::Type*>(members.size(), ptr));
  auto* env = new llvm::GlobalVariable(module, type, /*isConstant=*/true,
                                       llvm::GlobalValue::InternalLinkage,
                                       llvm::ConstantStruct::get(type, members), "kiln.wasm.env");
  auto* get = llvm::Function::Create(llvm::FunctionType::get(ptr, false),
                                     llvm::GlobalValue::ExternalLinkage, "kiln_wasm_env", module);
  get->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", get));
  b.CreateRet(env);
}

}  // namespace kiln::codegen
