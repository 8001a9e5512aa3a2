// GPU kernels as PTX (codegen.h, EmitPtx): the module's kernels, scheduled over blocks and
// threads, emitted by the same FunctionEmitter as for a CPU into an NVPTX module.
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/function_emitter.h"
#include "compiler/codegen/target_machine.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::codegen {
namespace {

// `void name(ptr env, ptr noalias buffers..., scalars...)`, marked a kernel (an `.entry` the
// host can launch) the way LLVM 19's NVPTX backend reads it: nvvm.annotations.
llvm::Function* DeclareKernel(llvm::Module& module, const std::string& name,
                              const ir::PrimFunc& func) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  std::vector<llvm::Type*> params(func.buffers.size() + 1, ptr);
  for (const PrimExpr& s : func.scalars) params.push_back(RegisterType(ctx, s->dtype));
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  auto* fn = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, name, module);
  for (size_t i = 0; i < func.buffers.size(); ++i) {
    fn->addParamAttr(i + 1, llvm::Attribute::NoAlias);
  }
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Metadata* kernel[] = {
      llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, "kernel"),
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1))};
  module.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(ctx, kernel));
  return fn;
}

}  // namespace

absl::StatusOr<DeviceCode> EmitPtx(const ir::IRModule& ir, const ir::Target& target) {
  KILN_CHECK(target.IsGpu()) << "EmitPtx for " << target.preset;
  llvm::LLVMContext ctx;
  std::string errors;
  CollectDiagnostics(ctx, &errors);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> machine, CreateTargetMachine(target));
  llvm::Module module("kiln", ctx);
  module.setTargetTriple(machine->getTargetTriple().str());
  module.setDataLayout(machine->createDataLayout());
  ModuleState state(module, ir);
  state.gpu = true;
  for (const auto& [name, func] : ir.prim_funcs) {
    if (!func.is_host) state.functions[name] = DeclareKernel(module, name, func);
  }
  for (const auto& [name, func] : ir.prim_funcs) {
    if (!func.is_host) FunctionEmitter(state, func, state.functions.at(name)).Emit();
  }
  for (llvm::Function& fn : module) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", machine->getTargetCPU());
    fn.addFnAttr("target-features", machine->getTargetFeatureString());
  }
  std::string invalid;
  llvm::raw_string_ostream stream(invalid);
  if (llvm::verifyModule(module, &stream)) {
    return absl::InternalError("LLVM verifier rejected the GPU module: " + stream.str());
  }
  OptimizeModule(module, *machine);
  DeviceCode device;
  device.kind = DeviceCode::Kind::kCuda;
  KILN_ASSIGN_OR_RETURN(device.ptx, EmitAssembly(module, *machine));
  if (!errors.empty()) return absl::InternalError("LLVM reported errors: " + errors);
  device.error_ops = state.gpu_error_ops;
  return device;
}

}  // namespace kiln::codegen
