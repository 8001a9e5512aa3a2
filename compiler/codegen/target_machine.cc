#include "compiler/codegen/target_machine.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/gather_base.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::codegen {

namespace {

class DiagnosticCollector : public llvm::DiagnosticHandler {
 public:
  explicit DiagnosticCollector(std::string* errors) : errors_(errors) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    if (info.getSeverity() != llvm::DS_Error) return true;
    llvm::raw_string_ostream stream(*errors_);
    llvm::DiagnosticPrinterRawOStream printer(stream);
    info.print(printer);
    stream << "\n";
    return true;
  }

 private:
  std::string* errors_;
};

}  // namespace

void CollectDiagnostics(llvm::LLVMContext& ctx, std::string* errors) {
  ctx.setDiagnosticHandler(std::make_unique<DiagnosticCollector>(errors));
}

static void InitializeTargetsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

absl::Status CheckTarget(const ir::Target& target) {
  InitializeTargetsOnce();
  const std::string normalized = llvm::Triple::normalize(target.triple);
  if (normalized != target.triple) {
    return absl::InvalidArgumentError(absl::StrCat("target ", target.preset, ": triple '",
                                                   target.triple, "' is written '", normalized,
                                                   "' in LLVM's normal form; use that"));
  }
  llvm::Triple triple(normalized);
  std::string error;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(triple.str(), error);
  if (!llvm_target) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target ", target.preset, ": LLVM has no target for '", target.triple, "': ", error));
  }
  if (!triple.isOSBinFormatELF() && !triple.isOSBinFormatWasm()) {
    return absl::InvalidArgumentError(absl::StrCat("target ", target.preset, ": triple '",
                                                   target.triple,
                                                   "' does not use ELF or wasm object files; "
                                                   "only those are supported"));
  }
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      llvm_target->createMCSubtargetInfo(triple.str(), "", ""));
  if (!info) {
    return absl::InternalError(absl::StrCat("LLVM has no subtarget info for ", triple.str()));
  }
  const std::string cpu = target.cpu.empty() ? "generic" : target.cpu;
  if (!info->isCPUStringValid(cpu)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown cpu '", cpu, "' for ", triple.str()));
  }
  llvm::ArrayRef<llvm::SubtargetFeatureKV> known = info->getAllProcessorFeatures();
  std::vector<std::string> features = absl::StrSplit(target.features, ',', absl::SkipEmpty());
  for (const std::string& feature : features) {
    std::string name = feature.substr(feature[0] == '+' || feature[0] == '-' ? 1 : 0);
    bool found = std::any_of(known.begin(), known.end(),
                             [&](const llvm::SubtargetFeatureKV& kv) { return name == kv.Key; });
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown feature '", name, "' for ", triple.str()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::Target> HostTarget() {
  InitializeTargetsOnce();
  std::vector<std::string> features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
    features.push_back(absl::StrCat(feature.getValue() ? "+" : "-", feature.getKey().str()));
  }
  std::string description = absl::StrCat(
      "triple=", llvm::Triple::normalize(llvm::sys::getProcessTriple()),
      ";cpu=", llvm::sys::getHostCPUName().str(), ";features=", absl::StrJoin(features, ","));
  absl::StatusOr<ir::Target> target = ir::ParseTarget(description);
  if (!target.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("this machine is not a supported target: ", target.status().message()));
  }
  target->preset = "host";
  KILN_RETURN_IF_ERROR(CheckTarget(*target));
  return target;
}

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const ir::Target& target) {
  InitializeTargetsOnce();
  llvm::Triple triple(llvm::Triple::normalize(target.triple));
  std::string error;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(triple.str(), error);
  if (!llvm_target) {
    return absl::InvalidArgumentError("target " + target.preset + ": LLVM has no target for '" +
                                      target.triple + "': " + error);
  }
  std::string cpu = target.cpu.empty() ? "generic" : target.cpu;
  llvm::TargetOptions options;
  // Linux on riscv64 passes floats in FP registers (lp64d); glibc refuses to load a shared
  // object built for another float ABI.
  if (triple.isRISCV64()) options.MCOptions.ABIName = "lp64d";
  std::unique_ptr<llvm::TargetMachine> machine(llvm_target->createTargetMachine(
      triple.str(), cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine) {
    return absl::InvalidArgumentError("target " + target.preset + ": cannot create a machine for " +
                                      triple.str() + " cpu " + cpu);
  }
  return machine;
}

// Library info with every function unavailable: nothing may be called that the artifact does
// not define itself.
static llvm::TargetLibraryInfoImpl NoLibraryInfo(const llvm::Module& module) {
  llvm::TargetLibraryInfoImpl info(llvm::Triple(module.getTargetTriple()));
  info.disableAllFunctions();
  return info;
}

void OptimizeModule(llvm::Module& module, llvm::TargetMachine& machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopUnrolling = true;
  llvm::PassBuilder builder(&machine, tuning);
  llvm::TargetLibraryInfoImpl library = NoLibraryInfo(module);
  // Registered first, so the builder's default library info does not replace it.
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library); });
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes =
      builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  passes.run(module, mam);
  MoveGatherSplatsToBase(module);
}

static absl::StatusOr<std::string> EmitFile(llvm::Module& module, llvm::TargetMachine& machine,
                                            llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  passes.add(new llvm::TargetLibraryInfoWrapperPass(NoLibraryInfo(module)));
  if (machine.addPassesToEmitFile(passes, stream, nullptr, type)) {
    return absl::InternalError("LLVM cannot emit code for " + machine.getTargetTriple().str());
  }
  passes.run(module);
  return std::string(buffer.data(), buffer.size());
}

absl::StatusOr<std::string> EmitObjectFile(llvm::Module& module, llvm::TargetMachine& machine) {
  return EmitFile(module, machine, llvm::CodeGenFileType::ObjectFile);
}

absl::StatusOr<std::string> EmitAssembly(llvm::Module& module, llvm::TargetMachine& machine) {
  return EmitFile(module, machine, llvm::CodeGenFileType::AssemblyFile);
}

}  // namespace kiln::codegen
