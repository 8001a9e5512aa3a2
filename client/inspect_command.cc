// `kiln inspect`: the module in the IR text format, so a user sees every value's symbolic
// shape after import or after any pass, or the optimized LLVM IR the target's code comes from;
// with --cache, the kernels as the tuning records there schedule them.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/tuning_db.h"
#include "client/commands.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/driver/tuning.h"

namespace kiln::client {

namespace {
// After every pass: the optimized LLVM module, or for a GPU target its kernels' PTX.
constexpr char kAfterLLVM[] = "llvm";
constexpr char kAfterPtx[] = "ptx";
}  // namespace

absl::Status Inspect(const InspectArgs& args, Console console) {
  absl::StatusOr<std::string> bytes = ReadModelFile(args.model_path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(*bytes);
  if (!module.ok()) return module.status();
  if (args.after.empty() || args.after == "import") {
    console.out << ir::ToString(*module);
    return absl::OkStatus();
  }
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(args.target);
  if (!target.ok()) return target.status();
  if (args.after == kAfterPtx) {
    absl::StatusOr<std::string> ptx = driver::CompilePtx(*bytes, *target, {});
    if (!ptx.ok()) return ptx.status();
    console.out << *ptx;
    return absl::OkStatus();
  }
  bool llvm = args.after == kAfterLLVM;
  std::vector<std::string> names = {"import"};
  bool known = llvm;
  for (const driver::Pass& pass : driver::Pipeline()) {
    names.push_back(pass.name);
    known = known || pass.name == args.after;
  }
  if (!known) {
    names.push_back(kAfterLLVM);
    names.push_back(kAfterPtx);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown pass '", args.after, "'; passes: ", absl::StrJoin(names, ", ")));
  }
  std::unique_ptr<cache::TuningDb> db;
  if (!args.cache_dir.empty()) {
    absl::StatusOr<std::unique_ptr<cache::TuningDb>> opened = OpenTuningDb(args.cache_dir, false);
    if (!opened.ok()) return opened.status();
    db = *std::move(opened);
  }
  ir::PassContext context;
  context.target = *target;
  if (db) {
    context.tuned_traces = [&](const std::string& workload) {
      return driver::TunedTraces(*db, workload, *target);
    };
  }
  bool scheduled = false;  // the passes run reached the schedule pass, which reads the records
  auto after_pass = [&](const std::string& pass, const ir::IRModule&) {
    scheduled = scheduled || pass == "schedule";
  };
  absl::StatusOr<ir::IRModule> lowered =
      driver::RunPipeline(*std::move(module), after_pass, llvm ? "" : args.after, context);
  if (!lowered.ok()) return lowered.status();
  if (db && scheduled) {
    console.err << context.tuned_kernels << " of " << context.tunable_kernels
                << " tunable kernels from tuning records\n";
  }
  if (!llvm) {
    console.out << ir::ToString(*lowered);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> text = codegen::EmitLLVMText(*lowered, "", *target);
  if (!text.ok()) return text.status();
  console.out << *text;
  return absl::OkStatus();
}

}  // namespace kiln::client
