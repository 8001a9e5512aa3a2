#include "compiler/driver/driver.h"

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/driver/tuning.h"
#include "compiler/frontend/onnx_importer.h"

namespace kiln::driver {
namespace {

void Report(const EventSink& events, CompileEvent::Kind kind, std::string name,
            std::string message) {
  if (events) events({kind, std::move(name), std::move(message)});
}

}  // namespace

const char* CompilerVersion() { return "kiln-0.2.0"; }

std::string CompileOptions::Canonical() const {
  std::string out = "dim_bounds=";
  bool first = true;
  for (const auto& [name, bound] : dim_bounds) {
    absl::StrAppend(&out, first ? "" : ",", name, ":", bound);
    first = false;
  }
  if (schedule_as) absl::StrAppend(&out, ";schedule_as=", schedule_as->Canonical());
  return out;
}

absl::StatusOr<ir::Target> ResolveTarget(std::string_view text) {
  if (text == "host") return codegen::HostTarget();
  KILN_ASSIGN_OR_RETURN(ir::Target target, ir::ParseTarget(text));
  KILN_RETURN_IF_ERROR(codegen::CheckTarget(target));
  return target;
}

std::vector<ir::Target> ListTargets() {
  std::vector<ir::Target> targets = ir::ListPresetTargets();
  if (absl::StatusOr<ir::Target> host = codegen::HostTarget(); host.ok()) {
    targets.push_back(*std::move(host));
  }
  return targets;
}

absl::StatusOr<ir::IRModule> ImportModel(std::string_view onnx_bytes) {
  return frontend::ImportOnnx(onnx_bytes);
}

absl::StatusOr<std::string> CompilePtx(std::string_view onnx_bytes, const ir::Target& target,
                                       const CompileOptions& options) {
  if (!target.IsGpu()) {
    return absl::InvalidArgumentError("target " + target.preset + " is not a GPU; PTX is for " +
                                      "nvptx64 targets (cuda-sm80, cuda-sm90)");
  }
  KILN_RETURN_IF_ERROR(codegen::CheckTarget(target));
  KILN_ASSIGN_OR_RETURN(ir::IRModule module, ImportModel(onnx_bytes));
  ir::PassContext context;
  context.target = target;
  context.dim_bounds = options.dim_bounds;
  KILN_ASSIGN_OR_RETURN(module, RunPipeline(std::move(module), nullptr, "", context));
  KILN_ASSIGN_OR_RETURN(codegen::DeviceCode device, codegen::EmitPtx(module, target));
  return device.ptx;
}

namespace {

// The artifact of a lowered module: for a GPU its host code for the server beside the GPU
// (x86_64) with the kernels' PTX; for a CPU target scheduled as a GPU, the same host code
// with the kernels compiled for the CPU, for an emulated device; else a CPU artifact.
absl::StatusOr<std::string> BuildArtifact(const ir::IRModule& module, const std::string& signature,
                                          const ir::Target& target,
                                          const ir::PassContext& context) {
  if (target.IsGpu()) {
    KILN_ASSIGN_OR_RETURN(codegen::DeviceCode device, codegen::EmitPtx(module, target));
    KILN_ASSIGN_OR_RETURN(ir::Target host, ir::ParseTarget("x86_64"));
    return codegen::BuildSharedObject(module, signature, host, &device);
  }
  if (context.schedule_target && context.schedule_target->IsGpu()) {
    codegen::DeviceCode emulated;
    return codegen::BuildSharedObject(module, signature, target, &emulated);
  }
  return codegen::BuildSharedObject(module, signature, target);
}

std::string DeviceName(const ir::Target& target, const ir::PassContext& context) {
  if (target.IsGpu()) return "cuda";
  if (context.schedule_target && context.schedule_target->IsGpu()) return "emulated";
  return "";
}

}  // namespace

absl::StatusOr<Artifact> CompileModel(std::string_view onnx_bytes, const ir::Target& target,
                                      const CompileOptions& options, const EventSink& events) {
  using Kind = CompileEvent::Kind;
  // Before anything is compiled: LLVM would only warn about an unknown cpu or feature.
  KILN_RETURN_IF_ERROR(codegen::CheckTarget(target));
  Report(events, Kind::kStage, "import", absl::StrCat("importing ", onnx_bytes.size(), " bytes"));
  KILN_ASSIGN_OR_RETURN(ir::IRModule module, ImportModel(onnx_bytes));
  // The signature and manifest describe the model as imported: names, dtypes, symbolic dims.
  const ir::Function main = module.functions.at("main");
  Report(events, Kind::kStage, "lower", "graph to loops and host code");
  auto after_pass = [&](const std::string& name, const ir::IRModule& m) {
    Report(events, Kind::kPass, name, absl::StrCat(m.prim_funcs.size(), " loop-level functions"));
  };
  ir::PassContext context;
  context.target = target;
  context.dim_bounds = options.dim_bounds;
  context.schedule_target = options.schedule_as;
  context.interrupted = options.interrupted;
  if (options.tuning_db) {
    const ir::Target schedule_target = options.schedule_as.value_or(target);
    context.tuned_traces = [&options, schedule_target](const std::string& workload) {
      return TunedTraces(*options.tuning_db, workload, schedule_target);
    };
  }
  KILN_ASSIGN_OR_RETURN(module, RunPipeline(std::move(module), after_pass, "", context));
  if (options.tuning_db) {
    Report(events, Kind::kInfo, "schedule",
           absl::StrCat(context.tuned_kernels, " of ", context.tunable_kernels,
                        " tunable kernels from tuning records"));
  }
  if (options.interrupted) KILN_RETURN_IF_ERROR(options.interrupted());
  Report(events, Kind::kStage, "codegen",
         absl::StrCat("LLVM for ", target.triple, " (", target.cpu, ")"));
  std::string signature = SignatureText(main);
  KILN_ASSIGN_OR_RETURN(std::string so, BuildArtifact(module, signature, target, context));
  Artifact artifact;
  artifact.target = target.Canonical();
  artifact.file_name = target.artifact_file;
  artifact.manifest_json = ManifestJson(
      main, target,
      {target.artifact_file, cache::Sha256Digest(so), options.Canonical(), context.workspace_bytes,
       context.no_reuse_bytes, DeviceName(target, context), codegen::LibrariesCalled(module)});
  artifact.bytes = std::move(so);
  Report(events, Kind::kInfo, "done", absl::StrCat(artifact.bytes.size(), " bytes"));
  return artifact;
}

}  // namespace kiln::driver
