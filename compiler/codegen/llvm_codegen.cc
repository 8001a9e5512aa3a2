// IRModule -> LLVM module -> optimized object -> shared object (or wasm module). Every call gets
// its own LLVMContext and TargetMachine, so the daemon may compile several jobs at once.
#include <set>

#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/function_emitter.h"
#include "compiler/codegen/shared_object.h"
#include "compiler/codegen/target_machine.h"
#include "compiler/codegen/wasm_module.h"
#include "compiler/ir/stmt_functor.h"
#include "kiln/artifact_abi.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::codegen {

ModuleState::ModuleState(llvm::Module& module, const ir::IRModule& ir)
    : module(module), ir(ir), constants(ir.constants.size(), nullptr), math(module) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  auto* i8 = llvm::Type::getInt8Ty(ctx);
  auto* i16 = llvm::Type::getInt16Ty(ctx);
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  // dlpack 0.6: data, device {type, id}, ndim, dtype {code, bits, lanes}, shape, strides,
  // byte_offset. The target's data layout gives the offsets (pointers are 4 bytes on wasm32).
  dl_tensor = llvm::StructType::create(ctx,
                                       {ptr, llvm::StructType::get(ctx, {i32, i32}), i32,
                                        llvm::StructType::get(ctx, {i8, i8, i16}), ptr, ptr, i64},
                                       "DLTensor");
  // self, alloc, free, shape_error, parallel_for, index_error; device_alloc, device_free, copy,
  // device_constant, launch (ABI 4).
  env = llvm::StructType::create(ctx, std::vector<llvm::Type*>(11, ptr), "KilnEnv");
}

namespace {

// Kernels: internal `void name(ptr env, ptr noalias buffers..., scalars...)`, kept out of line
// so each stays one function in profiles; env (the caller's KilnEnv) runs parallel loops. Host
// functions: exported `i32 name(ptr env, ptr inputs, ptr outputs)`.
llvm::Function* DeclareFunction(llvm::Module& module, const std::string& name,
                                const ir::PrimFunc& func, bool emulated_device) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Function* fn;
  if (func.is_host) {
    auto* type = llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx), {ptr, ptr, ptr}, false);
    fn = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, name, module);
    const char* names[] = {"env", "inputs", "outputs"};
    for (int i = 0; i < 3; ++i) fn->getArg(i)->setName(names[i]);
  } else {
    std::vector<llvm::Type*> params(func.buffers.size() + 1, ptr);
    for (const PrimExpr& s : func.scalars) params.push_back(RegisterType(ctx, s->dtype));
    if (emulated_device) params.push_back(llvm::Type::getInt64Ty(ctx));  // the block
    auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
    fn = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, module);
    fn->getArg(0)->setName("env");
    for (size_t i = 0; i < func.buffers.size(); ++i) {
      fn->addParamAttr(i + 1, llvm::Attribute::NoAlias);
      fn->getArg(i + 1)->setName(func.buffers[i]->name);
    }
    for (size_t i = 0; i < func.scalars.size(); ++i) {
      fn->getArg(func.buffers.size() + 1 + i)->setName(func.scalars[i]->name);
    }
    fn->addFnAttr(llvm::Attribute::NoInline);
  }
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fn;
}

// `i32 kiln_abi_version()`, `ptr kiln_signature()`, and `i32 kiln_default_threads()` when the
// target asks for more than one thread.
void EmitMetadataFunctions(llvm::Module& module, const std::string& signature, int threads,
                           bool device) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* version =
      llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), false),
                             llvm::GlobalValue::ExternalLinkage, KILN_SYMBOL_ABI_VERSION, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", version));
  b.CreateRet(b.getInt32(device ? KILN_ABI_VERSION : KILN_ABI_VERSION_CPU));

  auto* text = llvm::ConstantDataArray::getString(ctx, signature, /*AddNull=*/true);
  auto* global =
      new llvm::GlobalVariable(module, text->getType(), true, llvm::GlobalValue::PrivateLinkage,
                               text, "kiln.signature.text");
  global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  auto* get =
      llvm::Function::Create(llvm::FunctionType::get(b.getPtrTy(), false),
                             llvm::GlobalValue::ExternalLinkage, KILN_SYMBOL_SIGNATURE, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", get));
  b.CreateRet(global);
  for (llvm::Function* fn : {version, get}) fn->addFnAttr(llvm::Attribute::NoUnwind);
  if (threads <= 1) return;
  auto* default_threads = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), false),
                                                 llvm::GlobalValue::ExternalLinkage,
                                                 KILN_SYMBOL_DEFAULT_THREADS, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", default_threads));
  b.CreateRet(b.getInt32(threads));
  default_threads->addFnAttr(llvm::Attribute::NoUnwind);
}

// Lets the backend fuse `x + a * b` in kernels into one FMA instruction (one rounding instead
// of two), as C compilers do by default (-ffp-contract=on): it is what makes the matmul
// micro-kernel one vector FMA per step. Only fadd: `a - q * b` (floormod) stays exact as
// written. Outlined parallel loop bodies are covered through their callers' names.
void AllowMultiplyAddContraction(llvm::Function& kernel) {
  llvm::Module& module = *kernel.getParent();
  for (llvm::Function& fn : module) {
    if (&fn != &kernel && !fn.getName().starts_with((kernel.getName() + ".parallel").str())) {
      continue;
    }
    for (llvm::Instruction& inst : llvm::instructions(fn)) {
      if (inst.getOpcode() != llvm::Instruction::FAdd) continue;
      for (llvm::Value* operand : inst.operands()) {
        auto* mul = llvm::dyn_cast<llvm::Instruction>(operand);
        if (!mul || mul->getOpcode() != llvm::Instruction::FMul || !mul->hasOneUse()) continue;
        mul->setHasAllowContract(true);
        inst.setHasAllowContract(true);
      }
    }
  }
}

// Gives every defined function of `module` the target's cpu, features and vector width, and
// runs LLVM's verifier.
absl::Status FinishModule(llvm::Module& module, llvm::TargetMachine& machine,
                          const ir::Target& target) {
  for (llvm::Function& fn : module) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", machine.getTargetCPU());
    // The schedule sized its tiles for the target's vectors; LLVM otherwise prefers 256 bits
    // on AVX-512 CPUs.
    fn.addFnAttr("prefer-vector-width", std::to_string(target.vector_bits));
    if (!machine.getTargetFeatureString().empty()) {
      fn.addFnAttr("target-features", machine.getTargetFeatureString());
    }
  }
  std::string errors;
  llvm::raw_string_ostream stream(errors);
  if (llvm::verifyModule(module, &stream)) {
    return absl::InternalError("LLVM verifier rejected the generated module: " + stream.str());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<llvm::Module>> BuildModule(
    llvm::LLVMContext& ctx, const ir::IRModule& ir, const std::string& signature,
    llvm::TargetMachine& machine, const ir::Target& target, const DeviceCode* device) {
  for (const char* reserved :
       {KILN_SYMBOL_ABI_VERSION, KILN_SYMBOL_SIGNATURE, KILN_SYMBOL_DEFAULT_THREADS,
        "kiln_wasm_env", KILN_SYMBOL_GPU_KERNELS, KILN_SYMBOL_GPU_ERROR_OPS, KILN_SYMBOL_GPU_PTX,
        KILN_SYMBOL_GPU_EMULATED_KERNELS}) {
    if (ir.prim_funcs.count(reserved)) {
      return absl::InternalError(std::string("a PrimFunc is named ") + reserved +
                                 ", which the artifact ABI reserves");
    }
  }
  auto module = std::make_unique<llvm::Module>("kiln", ctx);
  module->setTargetTriple(machine.getTargetTriple().str());
  module->setDataLayout(machine.createDataLayout());
  const bool wasm = machine.getTargetTriple().isWasm();
  // A wasm module is linked whole, never loaded at an unknown address.
  if (!wasm) module->setPICLevel(llvm::PICLevel::BigPIC);
  ModuleState state(*module, ir);
  state.emulated_device = device && device->kind == DeviceCode::Kind::kEmulated;
  // CUDA: the kernels are in the PTX; the host object has only the host functions.
  auto emitted = [&](const ir::PrimFunc& func) {
    return func.is_host || !device || state.emulated_device;
  };
  for (const auto& [name, func] : ir.prim_funcs) {
    if (device && !func.is_host) {
      state.kernel_index.emplace(name, static_cast<int32_t>(state.kernel_index.size()));
    }
    if (emitted(func)) {
      state.functions[name] = DeclareFunction(*module, name, func, state.emulated_device);
    }
  }
  for (const auto& [name, func] : ir.prim_funcs) {
    if (emitted(func)) FunctionEmitter(state, func, state.functions.at(name)).Emit();
  }
  EmitMetadataFunctions(*module, signature, target.threads, device != nullptr);
  if (device) EmitDeviceExports(state, *device);
  if (wasm) EmitWasmEnv(*module);
  for (const auto& [name, func] : ir.prim_funcs) {
    if (!func.is_host && emitted(func)) AllowMultiplyAddContraction(*state.functions.at(name));
  }
  KILN_RETURN_IF_ERROR(FinishModule(*module, machine, target));
  return module;
}

// The optimized LLVM module for `ir`, with the machine it was optimized for.
struct OptimizedModule {
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<llvm::Module> module;
};

absl::StatusOr<OptimizedModule> Optimize(llvm::LLVMContext& ctx, const ir::IRModule& ir,
                                         const std::string& signature, const ir::Target& target,
                                         const DeviceCode* device) {
  OptimizedModule result;
  KILN_ASSIGN_OR_RETURN(result.machine, CreateTargetMachine(target));
  KILN_ASSIGN_OR_RETURN(result.module,
                        BuildModule(ctx, ir, signature, *result.machine, target, device));
  OptimizeModule(*result.module, *result.machine);
  return result;
}

// An object for `machine`'s target defining each function of `library` as an empty body: what
// the artifact is linked against in place of the library (LinkSharedObject).
absl::StatusOr<std::string> LibraryStubObject(const ir::ExternLibrary& library,
                                              llvm::TargetMachine& machine) {
  llvm::LLVMContext ctx;
  llvm::Module module(library.soname, ctx);
  module.setTargetTriple(machine.getTargetTriple().str());
  module.setDataLayout(machine.createDataLayout());
  module.setPICLevel(llvm::PICLevel::BigPIC);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {}, false);
  for (const ir::ExternFunction& fn : library.functions) {
    auto* stub = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, fn.name, module);
    llvm::ReturnInst::Create(ctx, llvm::BasicBlock::Create(ctx, "entry", stub));
  }
  return EmitObjectFile(module, machine);
}

absl::Status CheckDiagnostics(const std::string& errors) {
  if (errors.empty()) return absl::OkStatus();
  return absl::InternalError("LLVM reported errors: " + errors);
}

}  // namespace

absl::StatusOr<std::unique_ptr<llvm::Module>> BuildKernelModule(
    llvm::LLVMContext& ctx, const ir::IRModule& ir, const std::vector<std::string>& kernels,
    const ir::Target& target, llvm::TargetMachine& machine, const AddExportsFn& add_exports) {
  auto module = std::make_unique<llvm::Module>("kiln", ctx);
  module->setTargetTriple(machine.getTargetTriple().str());
  module->setDataLayout(machine.createDataLayout());
  module->setPICLevel(llvm::PICLevel::BigPIC);
  ModuleState state(*module, ir);
  for (const std::string& name : kernels) {
    auto it = ir.prim_funcs.find(name);
    if (it == ir.prim_funcs.end() || it->second.is_host) {
      return absl::InvalidArgumentError("the module has no kernel named " + name);
    }
    state.functions[name] = DeclareFunction(*module, name, it->second, false);
  }
  for (const std::string& name : kernels) {
    FunctionEmitter(state, ir.prim_funcs.at(name), state.functions.at(name)).Emit();
  }
  for (const std::string& name : kernels) AllowMultiplyAddContraction(*state.functions.at(name));
  add_exports(*module, state.functions);
  KILN_RETURN_IF_ERROR(FinishModule(*module, machine, target));
  OptimizeModule(*module, machine);
  return module;
}

absl::StatusOr<std::string> BuildSharedObject(const ir::IRModule& module,
                                              const std::string& signature,
                                              const ir::Target& target, const DeviceCode* device) {
  llvm::Triple triple(target.triple);
  if (!triple.isOSBinFormatELF() && !triple.isOSBinFormatWasm()) {
    return absl::UnimplementedError("target " + target.preset + " (" + target.triple +
                                    "): only ELF shared objects and wasm modules can be linked");
  }
  llvm::LLVMContext ctx;
  std::string errors;
  CollectDiagnostics(ctx, &errors);
  KILN_ASSIGN_OR_RETURN(OptimizedModule optimized,
                        Optimize(ctx, module, signature, target, device));
  KILN_ASSIGN_OR_RETURN(std::string object, EmitObjectFile(*optimized.module, *optimized.machine));
  KILN_RETURN_IF_ERROR(CheckDiagnostics(errors));
  if (triple.isOSBinFormatWasm()) return LinkWasmModule(object);
  std::vector<NeededLibrary> needed;
  for (const std::string& name : LibrariesCalled(module)) {
    for (const ir::ExternLibrary& library : ir::ExternLibraries()) {
      if (name != library.name) continue;
      KILN_ASSIGN_OR_RETURN(std::string stub, LibraryStubObject(library, *optimized.machine));
      needed.push_back({library.soname, std::move(stub)});
    }
  }
  return LinkSharedObject(object, target.artifact_file.empty() ? "model.so" : target.artifact_file,
                          needed);
}

std::vector<std::string> LibrariesCalled(const ir::IRModule& module) {
  std::set<std::string> names;
  for (const auto& [name, func] : module.prim_funcs) {
    if (!func.body) continue;
    ir::VisitExprs(func.body, [&](const PrimExpr& e) {
      if (e->kind != arith::ExprKind::kCall) return;
      if (const ir::ExternLibrary* library = ir::LibraryOfFunction(e->name)) {
        names.insert(library->name);
      }
    });
  }
  return {names.begin(), names.end()};
}

absl::StatusOr<std::string> EmitLLVMText(const ir::IRModule& module, const std::string& signature,
                                         const ir::Target& target, const DeviceCode* device) {
  llvm::LLVMContext ctx;
  std::string errors;
  CollectDiagnostics(ctx, &errors);
  KILN_ASSIGN_OR_RETURN(OptimizedModule optimized,
                        Optimize(ctx, module, signature, target, device));
  KILN_RETURN_IF_ERROR(CheckDiagnostics(errors));
  std::string text;
  llvm::raw_string_ostream stream(text);
  optimized.module->print(stream, nullptr);
  return stream.str();
}

}  // namespace kiln::codegen
