#include "compiler/codegen/jit.h"

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/function_emitter.h"
#include "compiler/codegen/target_machine.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/Support/Error.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::codegen {

namespace {

constexpr char kEntryName[] = "kiln_jit_entry";

// `void kiln_jit_entry(ptr env, ptr buffers, ptr scalars)`: calls `kernel` with env,
// buffers[i] for each buffer and scalars[i] (an i64, converted to the scalar's type) for
// each scalar.
void EmitEntry(llvm::Module& module, llvm::Function* kernel, const ir::PrimFunc& func) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* type =
      llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getPtrTy(), b.getPtrTy()}, false);
  auto* entry =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, kEntryName, module);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  std::vector<llvm::Value*> args = {entry->getArg(0)};
  for (size_t i = 0; i < func.buffers.size(); ++i) {
    args.push_back(
        b.CreateLoad(b.getPtrTy(), b.CreateConstGEP1_64(b.getPtrTy(), entry->getArg(1), i)));
  }
  for (size_t i = 0; i < func.scalars.size(); ++i) {
    llvm::Value* value =
        b.CreateLoad(b.getInt64Ty(), b.CreateConstGEP1_64(b.getInt64Ty(), entry->getArg(2), i));
    llvm::Type* param = kernel->getFunctionType()->getParamType(args.size());
    if (param->isIntegerTy()) {
      value = b.CreateSExtOrTrunc(value, param);
    } else if (param->isFloatingPointTy()) {
      value = b.CreateSIToFP(value, param);
    }
    args.push_back(value);
  }
  b.CreateCall(kernel, args);
  b.CreateRetVoid();
}

absl::Status Check(llvm::Error error, const std::string& what) {
  if (!error) return absl::OkStatus();
  return absl::InternalError(what + ": " + llvm::toString(std::move(error)));
}

}  // namespace

JitKernel::JitKernel(std::unique_ptr<llvm::orc::LLJIT> jit, Entry entry)
    : jit_(std::move(jit)), entry_(entry) {}

JitKernel::~JitKernel() = default;

absl::StatusOr<std::unique_ptr<JitKernel>> JitCompileKernel(const ir::IRModule& module,
                                                            const std::string& kernel_name,
                                                            const ir::Target& target) {
  llvm::Triple host(llvm::sys::getProcessTriple());
  llvm::Triple triple(target.triple);
  if (triple.getArch() != host.getArch() || !triple.isOSBinFormatELF()) {
    return absl::InvalidArgumentError(absl::StrCat("target ", target.preset, " (", target.triple,
                                                   ") cannot run on this machine (", host.str(),
                                                   "); the JIT needs the host's"));
  }
  auto it = module.prim_funcs.find(kernel_name);
  if (it == module.prim_funcs.end() || it->second.is_host) {
    return absl::InvalidArgumentError("the module has no kernel named " + kernel_name);
  }
  const ir::PrimFunc& func = it->second;

  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::string errors;
  CollectDiagnostics(*ctx, &errors);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> machine, CreateTargetMachine(target));
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<llvm::Module> llvm_module,
      BuildKernelModule(*ctx, module, {kernel_name}, target, *machine,
                        [&](llvm::Module& m, const std::map<std::string, llvm::Function*>& fns) {
                          EmitEntry(m, fns.at(kernel_name), func);
                        }));
  if (!errors.empty()) return absl::InternalError("LLVM reported errors: " + errors);
  // The context outlives `errors`; LLVM's own handler takes over.
  ctx->setDiagnosticHandler(std::make_unique<llvm::DiagnosticHandler>());

  // Machine code for the same cpu and features at the same optimization level as artifacts.
  llvm::orc::JITTargetMachineBuilder machine_builder(machine->getTargetTriple());
  machine_builder.setCPU(machine->getTargetCPU().str());
  for (llvm::StringRef feature : llvm::split(machine->getTargetFeatureString(), ',')) {
    if (!feature.empty()) machine_builder.getFeatures().AddFeature(feature);
  }
  machine_builder.setCodeGenOptLevel(machine->getOptLevel());
  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(std::move(machine_builder));
  builder.setDataLayout(llvm_module->getDataLayout());
  auto jit = builder.create();
  if (!jit) return Check(jit.takeError(), "cannot create the JIT");
  // Library functions the kernel calls resolve in the library, loaded into this process as
  // the dynamic loader loads it for an artifact.
  for (const std::string& name : LibrariesCalled(module)) {
    for (const ir::ExternLibrary& library : ir::ExternLibraries()) {
      if (name != library.name) continue;
      auto generator = llvm::orc::DynamicLibrarySearchGenerator::Load(
          library.soname, (*jit)->getDataLayout().getGlobalPrefix());
      if (!generator) {
        return absl::FailedPreconditionError(absl::StrCat(
            "kernel ", kernel_name, " calls library ", name, ", which cannot be loaded (",
            library.soname, "): ", llvm::toString(generator.takeError())));
      }
      (*jit)->getMainJITDylib().addGenerator(std::move(*generator));
    }
  }
  KILN_RETURN_IF_ERROR(Check(
      (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(llvm_module), std::move(ctx))),
      "cannot add the kernel to the JIT"));
  auto address = (*jit)->lookup(kEntryName);
  if (!address) return Check(address.takeError(), "cannot compile kernel " + kernel_name);
  auto entry = address->toPtr<JitKernel::Entry>();
  return std::make_unique<JitKernel>(std::move(*jit), entry);
}

}  // namespace kiln::codegen
