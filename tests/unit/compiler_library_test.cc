// The library rule: matmul kernels as calls to OpenBLAS's cblas_sgemm for a target with
// libraries=openblas, chosen the way the tuner chooses a trace. Artifacts are compared with the
// reference interpreter, on one and several threads; they need libopenblas.so.0 and say so
// (DT_NEEDED, manifest). A target without the library never offers the rule.
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/shared_object.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/schedule.h"
#include "compiler/tune/measure.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kTarget[] = "triple=x86_64-linux-gnu;libraries=openblas";

ir::NDArray Random(std::vector<int64_t> shape, int seed) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.SetDouble(i, dist(rng));
  return a;
}

// The tuner's choice of the library form for every kernel that offers it.
std::optional<schedule::Trace> ChooseOpenBlas(const schedule::TunableKernel& kernel) {
  for (const schedule::SearchSpace& space : kernel.spaces) {
    if (space.rule == "openblas") return space.Default();
  }
  return std::nullopt;
}

// The pipeline's passes with the schedule pass choosing traces by `choose`, checked by the
// verifier after each.
absl::StatusOr<ir::IRModule> Lower(const std::string& onnx, const ir::Target& target,
                                   const schedule::ChooseTrace& choose,
                                   const std::string& stop_after = "") {
  KILN_ASSIGN_OR_RETURN(ir::IRModule module, driver::ImportModel(onnx));
  ir::PassContext context;
  context.target = target;
  for (const driver::Pass& pass : driver::Pipeline()) {
    if (pass.name == "schedule") {
      KILN_ASSIGN_OR_RETURN(module, schedule::Schedule(std::move(module), target, choose));
    } else {
      KILN_ASSIGN_OR_RETURN(module, pass.run(std::move(module), context));
    }
    KILN_RETURN_IF_ERROR(ir::VerifyModule(module));
    if (pass.name == stop_after) break;
  }
  return module;
}

struct LibraryArtifact {
  std::string kernels;  // the scheduled kernels, printed
  driver::Artifact artifact;
};

// `onnx` compiled for kTarget with the library form chosen, as CompileModel builds it.
LibraryArtifact CompileWithOpenBlas(const std::string& onnx) {
  LibraryArtifact out;
  ir::Target target = *ir::ParseTarget(kTarget);
  absl::StatusOr<ir::IRModule> imported = driver::ImportModel(onnx);
  absl::StatusOr<ir::IRModule> module = Lower(onnx, target, ChooseOpenBlas);
  EXPECT_TRUE(imported.ok() && module.ok()) << module.status();
  if (!imported.ok() || !module.ok()) return out;
  out.kernels = ir::ToString(*module);
  const ir::Function& main = imported->functions.at("main");
  absl::StatusOr<std::string> so =
      codegen::BuildSharedObject(*module, driver::SignatureText(main), target);
  EXPECT_TRUE(so.ok()) << so.status();
  if (!so.ok()) return out;
  out.artifact.file_name = "model.so";
  out.artifact.bytes = *so;
  driver::ManifestInfo info;
  info.artifact_file = "model.so";
  info.libraries = codegen::LibrariesCalled(*module);
  out.artifact.manifest_json = driver::ManifestJson(main, target, info);
  return out;
}

// The DT_NEEDED entries of an ELF64 shared object.
std::vector<std::string> NeededLibraries(const std::string& so) {
  const char* base = so.data();
  Elf64_Ehdr header;
  std::memcpy(&header, base, sizeof header);
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  std::memcpy(segments.data(), base + header.e_phoff, header.e_phnum * sizeof(Elf64_Phdr));
  // Addresses in the dynamic section are virtual; the loadable segments map them to offsets.
  auto offset_of = [&](uint64_t address) -> uint64_t {
    for (const Elf64_Phdr& s : segments) {
      if (s.p_type == PT_LOAD && address >= s.p_vaddr && address < s.p_vaddr + s.p_filesz) {
        return address - s.p_vaddr + s.p_offset;
      }
    }
    return 0;
  };
  std::vector<uint64_t> needed;
  uint64_t strtab = 0;
  for (const Elf64_Phdr& s : segments) {
    if (s.p_type != PT_DYNAMIC) continue;
    for (uint64_t at = s.p_offset; at + sizeof(Elf64_Dyn) <= s.p_offset + s.p_filesz;
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      std::memcpy(&entry, base + at, sizeof entry);
      if (entry.d_tag == DT_NEEDED) needed.push_back(entry.d_un.d_val);
      if (entry.d_tag == DT_STRTAB) strtab = entry.d_un.d_ptr;
    }
  }
  std::vector<std::string> names;
  for (uint64_t name : needed) names.push_back(base + offset_of(strtab) + name);
  return names;
}

// Compiles `onnx` with the library form, checks that sgemm is called as `call` says, and
// compares the artifact with the interpreter for each input set, on 1 and 3 threads.
void ExpectMatchesInterpreter(const std::string& onnx, const std::string& call,
                              const std::vector<std::vector<ir::NDArray>>& input_sets,
                              const std::vector<std::vector<int64_t>>& out_shapes) {
  LibraryArtifact compiled = CompileWithOpenBlas(onnx);
  EXPECT_THAT(compiled.kernels, HasSubstr(call)) << compiled.kernels;
  EXPECT_THAT(compiled.kernels, Not(HasSubstr("packed_b"))) << compiled.kernels;
#ifndef KILN_HAVE_OPENBLAS
  GTEST_SKIP() << "OpenBLAS is not installed (scripts/install-deps.sh): artifacts not run";
#endif
  std::unique_ptr<runtime::Model> model = LoadArtifact(compiled.artifact);
  ASSERT_NE(model, nullptr);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  for (size_t s = 0; s < input_sets.size(); ++s) {
    auto expected = interp::Run(*module, input_sets[s]);
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), out_shapes[s]);
      std::string error;
      ASSERT_TRUE(model->SetNumThreads(threads, &error)) << error;
      out = RunModel(*model, input_sets[s], {out})[0];
      ExpectClose(out, (*expected)[0],
                  "set " + std::to_string(s) + " threads=" + std::to_string(threads));
    }
  }
}

std::string MatmulModel(std::vector<Dim> a, std::vector<Dim> b, std::vector<Dim> y) {
  OnnxBuilder builder;
  builder.Input("a", a);
  builder.Input("b", b);
  builder.Node("MatMul", {"a", "b"}, {"y"});
  builder.Output("y", y);
  return builder.Serialize();
}

// 150 rows are three tasks of up to 64 rows.
TEST(LibraryRuleTest, StaticShapesMatchTheInterpreter) {
  ExpectMatchesInterpreter(MatmulModel({150, 300}, {300, 70}, {150, 70}),
                           "cblas_sgemm(101, 111, 111",
                           {{Random({150, 300}, 1), Random({300, 70}, 2)}}, {{150, 70}});
}

TEST(LibraryRuleTest, SymbolicRowsMatchTheInterpreter) {
  std::vector<std::vector<ir::NDArray>> inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t m : {1, 13, 64, 130}) {
    inputs.push_back({Random({m, 45}, 3), Random({45, 19}, 4)});
    shapes.push_back({m, 19});
  }
  ExpectMatchesInterpreter(MatmulModel({"m", 45}, {45, 19}, {"m", 19}), "cblas_sgemm(", inputs,
                           shapes);
}

TEST(LibraryRuleTest, BatchedMatmulsMatchTheInterpreter) {
  // Both operands batched, and a shared B broadcast over A's batch.
  ExpectMatchesInterpreter(MatmulModel({3, "m", 7}, {3, 7, 11}, {3, "m", 11}), "cblas_sgemm(",
                           {{Random({3, 70, 7}, 5), Random({3, 7, 11}, 6)}}, {{3, 70, 11}});
  ExpectMatchesInterpreter(MatmulModel({2, "m", 5}, {5, 19}, {2, "m", 19}), "cblas_sgemm(",
                           {{Random({2, 9, 5}, 7), Random({5, 19}, 8)}}, {{2, 9, 19}});
}

// No ONNX op legalizes to a matmul reading B as [j, k] in place (Gemm's transB becomes a
// transpose kernel first), so the kernel is written out, and the JIT compares the library
// form with the generated one on random inputs.
TEST(LibraryRuleTest, TransposedBMatchesTheGeneratedKernel) {
#ifndef KILN_HAVE_OPENBLAS
  GTEST_SKIP() << "OpenBLAS is not installed (scripts/install-deps.sh)";
#endif
  absl::StatusOr<ir::IRModule> module = ir::ParseModule(
      "prim_func @mm(A: f32[m, 30], B: f32[20, 30], C: f32[m, 20], m: i64) {\n"
      "  for i in range(0, m) serial {\n"
      "    for j in range(0, 20) serial {\n"
      "      C[i, j] = 0.0\n"
      "      for k in range(0, 30) serial {\n"
      "        C[i, j] = C[i, j] + A[i, k] * B[j, k]\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  ASSERT_TRUE(module.ok()) << module.status();
  ir::Target target = *ir::ParseTarget(kTarget);
  auto library = schedule::Schedule(*module, target, ChooseOpenBlas);
  auto reference = schedule::Schedule(*module, target);
  ASSERT_TRUE(library.ok() && reference.ok());
  EXPECT_THAT(ir::ToString(*library), HasSubstr("cblas_sgemm(101, 111, 112"));
  tune::MeasureOptions options;
  options.target = target;
  auto measured = tune::MeasureKernel(*library, *reference, "mm", {{"m", 70}}, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_TRUE(measured->ok) << measured->failure;
}

TEST(LibraryRuleTest, FusedBiasAndReluMatchTheInterpreter) {
  OnnxBuilder b;
  b.Input("a", {"m", 40});
  b.Input("w", {40, 24});
  b.Input("bias", {24});
  b.Node("MatMul", {"a", "w"}, {"mm"});
  b.Node("Add", {"mm", "bias"}, {"biased"});
  b.Node("Relu", {"biased"}, {"y"});
  b.Output("y", {"m", 24});
  std::string onnx = b.Serialize();
  EXPECT_THAT(CompileWithOpenBlas(onnx).kernels, HasSubstr("fused_matmul_add_relu"));
  ExpectMatchesInterpreter(onnx, "cblas_sgemm(",
                           {{Random({70, 40}, 11), Random({40, 24}, 12), Random({24}, 13)}},
                           {{70, 24}});
}

TEST(LibraryRuleTest, ArtifactNeedsOpenBlasAndItsManifestSaysSo) {
  LibraryArtifact compiled = CompileWithOpenBlas(MatmulModel({"m", 8}, {8, 8}, {"m", 8}));
  EXPECT_THAT(compiled.artifact.manifest_json, HasSubstr("\"libraries\": [\"openblas\"]"));
  EXPECT_THAT(NeededLibraries(compiled.artifact.bytes), ::testing::Contains("libopenblas.so.0"));
  auto symbols = codegen::ListDynamicSymbols(compiled.artifact.bytes);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  bool imports_sgemm = false;
  for (const codegen::DynamicSymbol& s : *symbols) imports_sgemm |= s.name == "cblas_sgemm";
  EXPECT_TRUE(imports_sgemm);
  // The default schedule calls no library, and its artifact neither needs nor names one.
  auto target = driver::ResolveTarget(kTarget);
  ASSERT_TRUE(target.ok()) << target.status();
  auto plain = driver::CompileModel(MatmulModel({"m", 8}, {8, 8}, {"m", 8}), *target, {}, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->manifest_json, Not(HasSubstr("\"libraries\": [")));
  EXPECT_THAT(NeededLibraries(plain->bytes), Not(::testing::Contains("libopenblas.so.0")));
}

TEST(LibraryRuleTest, OnlyTargetsWithTheLibraryOfferIt) {
  std::string onnx = MatmulModel({"m", 8}, {8, 8}, {"m", 8});
  for (const char* text : {"x86_64", "x86_64-v3", kTarget}) {
    ir::Target target = *ir::ParseTarget(text);
    auto fused = Lower(onnx, target, nullptr, "fuse_ops");
    ASSERT_TRUE(fused.ok()) << fused.status();
    std::vector<schedule::TunableKernel> kernels = schedule::TunableKernels(*fused, target);
    ASSERT_EQ(kernels.size(), 1u) << text;
    const bool library = target.HasLibrary("openblas");
    ASSERT_EQ(kernels[0].spaces.size(), library ? 2u : 1u) << text;
    EXPECT_EQ(kernels[0].spaces[0].rule, "matmul") << "the default stays first";
    if (library) EXPECT_EQ(kernels[0].spaces[1].rule, "openblas");
  }
}

TEST(LibraryRuleTest, UnknownOrUnavailableLibrariesAreUserErrors) {
  auto unknown = driver::ResolveTarget("triple=x86_64-linux-gnu;libraries=cublas");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown library 'cublas'"));
  auto wasm = driver::ResolveTarget("triple=wasm32;libraries=openblas");
  EXPECT_EQ(wasm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wasm.status().message(), HasSubstr("not available for wasm32"));
}

// The tuner's measurement: the library form against the default form, in the JIT.
TEST(LibraryRuleTest, TheJitMeasuresTheLibraryForm) {
#ifndef KILN_HAVE_OPENBLAS
  GTEST_SKIP() << "OpenBLAS is not installed (scripts/install-deps.sh)";
#endif
  std::string onnx = MatmulModel({"m", 96}, {96, 40}, {"m", 40});
  ir::Target target = *ir::ParseTarget(kTarget);
  auto library = Lower(onnx, target, ChooseOpenBlas, "schedule");
  auto reference = Lower(onnx, target, nullptr, "schedule");
  ASSERT_TRUE(library.ok() && reference.ok()) << library.status() << reference.status();
  std::string kernel;
  std::map<std::string, int64_t> scalars;
  for (const auto& [name, func] : library->prim_funcs) {
    if (func.is_host || name.rfind("matmul", 0) != 0) continue;
    kernel = name;
    for (const arith::PrimExpr& s : func.scalars) scalars[s->name] = 77;
  }
  ASSERT_FALSE(kernel.empty()) << ir::ToString(*library);
  tune::MeasureOptions options;
  options.target = target;
  auto measured = tune::MeasureKernel(*library, *reference, kernel, scalars, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_TRUE(measured->ok) << measured->failure;
  EXPECT_GT(measured->median_ns, 0);
}

}  // namespace
}  // namespace kiln::testing
