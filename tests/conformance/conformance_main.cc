// kiln-conformance: runs ONNX backend test directories (model.onnx plus
// test_data_set_*/input_*.pb and output_*.pb) and compares Kiln's outputs with the suite's
// expected ones at the ONNX backend runner's tolerances (rtol 1e-3, atol 1e-7).
//
//   kiln-conformance --suite DIR --mode reference|compiled|ptx [--target T] [--schedule-as T]
//                    [--expected-failures FILE]... [--filter TEXT]
//
// reference runs the reference interpreter; compiled compiles each model for the target
// (x86_64 by default) into an artifact and runs it through the runtime, as a user would: in
// this process for x86_64, through kiln-runner under qemu-user for aarch64 and riscv64, and
// in Node.js for wasm32 (tests/support/remote_runner.h).
//
// --schedule-as T schedules the kernels for T (cuda-sm80, say) while compiling for --target:
// a GPU's blocks and threads then run as serial loops, which checks the GPU schedules on a
// CPU. ptx compiles each model into a CUDA artifact for a GPU target and, when the CUDA
// toolkit's ptxas is installed (PATH or $KILN_PTXAS), assembles the PTX it carries; it says
// when it skipped that.
//
// Every imported model is also verified and round-tripped through the IR text format.
// Prints one line per failure with its reason, then `conformance: P passed, F failed`. With
// expected-failure lists (lines `test_name  reason`, # comments; several lists are read as
// one: a target's own list adds to the x86_64 one), the exit code is nonzero
// when a test fails that is not on the list, or a listed test passes (take it off the list).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/arith/check.h"
#include "compiler/driver/driver.h"
#include "compiler/frontend/onnx_tensor.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/structural.h"
#include "compiler/ir/verifier.h"
#include "kiln/runtime.hpp"
#include "tests/support/ptxas.h"
#include "tests/support/remote_runner.h"

namespace kiln::conformance {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string suite;
  std::string mode = "reference";
  std::string target = "x86_64";
  std::vector<std::string> expected_failures;
  std::string filter;
  std::string schedule_as;  // compiled: schedule for this target (a GPU's, run on the CPU)
  std::string ptxas;        // ptx: the CUDA toolkit's assembler, when installed
};

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::StatusOr<ir::NDArray> ReadTensor(const fs::path& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.filename().string(), " is not a TensorProto"));
  }
  return frontend::NDArrayFromTensorProto(proto);
}

// Files named prefix_0.pb, prefix_1.pb, ... in index order.
std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / absl::StrCat(prefix, "_", i, ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// numpy.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-7): NaNs must match.
absl::Status Compare(const ir::NDArray& actual, const ir::NDArray& expected, size_t index) {
  std::string what = absl::StrCat("output ", index);
  if (actual.dtype != expected.dtype) {
    return absl::InternalError(absl::StrCat(what, ": dtype ", actual.dtype.ToString(),
                                            ", expected ", expected.dtype.ToString()));
  }
  if (actual.shape != expected.shape) {
    return absl::InternalError(absl::StrCat(what, ": shape ", ShapeText(actual.shape),
                                            ", expected ", ShapeText(expected.shape)));
  }
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    bool ok;
    if (expected.dtype.is_float()) {
      double a = actual.GetDouble(i), e = expected.GetDouble(i);
      ok = (std::isnan(a) && std::isnan(e)) || a == e ||
           std::abs(a - e) <= 1e-7 + 1e-3 * std::abs(e);
    } else {
      ok = actual.GetInt(i) == expected.GetInt(i);
    }
    if (!ok) {
      return absl::InternalError(absl::StrCat(what, " element ", i, ": got ", actual.GetDouble(i),
                                              ", expected ", expected.GetDouble(i)));
    }
  }
  return absl::OkStatus();
}

// Runs one data set's inputs through the reference interpreter or a compiled artifact.
using Executor =
    std::function<absl::StatusOr<std::vector<ir::NDArray>>(const std::vector<ir::NDArray>&)>;

DLTensor View(ir::NDArray& a) {
  DLTensor t{};
  t.data = a.bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.shape.size());
  t.dtype = {a.dtype.code, a.dtype.bits, 1};
  t.shape = a.shape.data();
  return t;
}

absl::StatusOr<std::vector<ir::NDArray>> RunArtifact(const runtime::Model& model,
                                                     std::vector<ir::NDArray> inputs) {
  std::vector<DLTensor> in;
  for (ir::NDArray& a : inputs) in.push_back(View(a));
  std::vector<std::vector<int64_t>> shapes;
  std::string error;
  if (!model.OutputShapes(in, &shapes, &error)) return absl::InvalidArgumentError(error);
  std::vector<ir::NDArray> outputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    DLDataType t = model.outputs()[i].dtype;
    outputs.push_back(ir::NDArray::Zeros(
        arith::DataType{static_cast<arith::DataType::Code>(t.code), t.bits}, shapes[i]));
  }
  std::vector<DLTensor> out;
  for (ir::NDArray& a : outputs) out.push_back(View(a));
  if (!model.Run(in, &out, &error)) return absl::InvalidArgumentError(error);
  return outputs;
}

// Compiles the model into an artifact in a private temporary file and loads it: in this
// process for x86_64 and CUDA (on this machine's GPU), else through kiln-runner under
// qemu-user or Node.js.
absl::StatusOr<Executor> CompiledExecutor(const std::string& model, const Options& options) {
  KILN_ASSIGN_OR_RETURN(ir::Target t, driver::ResolveTarget(options.target));
  driver::CompileOptions compile_options;
  if (!options.schedule_as.empty()) {
    KILN_ASSIGN_OR_RETURN(compile_options.schedule_as, driver::ResolveTarget(options.schedule_as));
  }
  KILN_ASSIGN_OR_RETURN(driver::Artifact artifact,
                        driver::CompileModel(model, t, compile_options, nullptr));
  if (t.Arch() != "x86_64" && !t.IsGpu()) {  // a GPU artifact's host code is x86_64
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<testing::RemoteModel> remote,
                          testing::RemoteModel::Start(t, artifact.bytes));
    return Executor(
        [remote](const std::vector<ir::NDArray>& inputs) { return remote->Run(inputs); });
  }
  char path[] = "/tmp/kiln-conformance-XXXXXX.so";
  int fd = mkstemps(path, 3);
  if (fd < 0) return absl::InternalError("cannot create a temporary artifact file");
  close(fd);
  std::ofstream(path, std::ios::binary) << artifact.bytes;
  std::string error;
  std::shared_ptr<runtime::Model> loaded = runtime::Model::Load(path, &error);
  std::remove(path);  // dlopen keeps the mapping
  if (!loaded) return absl::InternalError(error);
  return Executor(
      [loaded](const std::vector<ir::NDArray>& inputs) { return RunArtifact(*loaded, inputs); });
}

absl::Status RunDataSet(const Executor& execute, const fs::path& dir) {
  std::vector<ir::NDArray> inputs, expected;
  for (const fs::path& p : NumberedFiles(dir, "input")) {
    KILN_ASSIGN_OR_RETURN(ir::NDArray t, ReadTensor(p));
    inputs.push_back(std::move(t));
  }
  for (const fs::path& p : NumberedFiles(dir, "output")) {
    KILN_ASSIGN_OR_RETURN(ir::NDArray t, ReadTensor(p));
    expected.push_back(std::move(t));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ir::NDArray> outputs, execute(inputs));
  if (outputs.size() != expected.size()) {
    return absl::InternalError(
        absl::StrCat(outputs.size(), " outputs, expected ", expected.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    KILN_RETURN_IF_ERROR(Compare(outputs[i], expected[i], i));
  return absl::OkStatus();
}

// Every imported model must be well formed and survive the text format: parsing its printed
// form gives a structurally equal module that prints the same.
absl::Status CheckText(const ir::IRModule& module) {
  absl::Status verified = ir::VerifyModule(module);
  if (!verified.ok()) {
    return absl::InternalError(absl::StrCat("imported IR is malformed: ", verified.message()));
  }
  std::string text = ir::ToString(module);
  auto parsed = ir::ParseModule(text);
  if (!parsed.ok()) {
    return absl::InternalError(
        absl::StrCat("printed IR does not parse: ", parsed.status().message()));
  }
  std::string mismatch = ir::StructuralMismatch(module, *parsed);
  if (!mismatch.empty()) return absl::InternalError("text round trip changed the IR: " + mismatch);
  if (ir::ToString(*parsed) != text)
    return absl::InternalError("text round trip prints differently");
  return absl::OkStatus();
}

// ptx: the model compiles to a CUDA artifact for the GPU target (x86_64 host code carrying
// the kernels' PTX), and ptxas (when installed) assembles its PTX for the target's
// architecture.
absl::Status CheckPtx(const std::string& model, const Options& options) {
  KILN_ASSIGN_OR_RETURN(ir::Target target, driver::ResolveTarget(options.target));
  KILN_ASSIGN_OR_RETURN(driver::Artifact artifact,
                        driver::CompileModel(model, target, {}, nullptr));
  KILN_ASSIGN_OR_RETURN(std::string ptx, testing::CudaArtifactPtx(artifact.bytes));
  if (options.ptxas.empty()) return absl::OkStatus();
  return testing::AssemblePtx(options.ptxas, ptx, target.cpu);
}

absl::Status RunTest(const fs::path& dir, const Options& options) {
  KILN_ASSIGN_OR_RETURN(std::string model, ReadFile(dir / "model.onnx"));
  KILN_ASSIGN_OR_RETURN(ir::IRModule module, driver::ImportModel(model));
  KILN_RETURN_IF_ERROR(CheckText(module));
  Executor execute = [&module](const std::vector<ir::NDArray>& inputs) {
    return interp::Run(module, inputs);
  };
  if (options.mode == "ptx") return CheckPtx(model, options);
  if (options.mode == "compiled") {
    KILN_ASSIGN_OR_RETURN(execute, CompiledExecutor(model, options));
  }
  int sets = 0;
  std::vector<fs::path> data_sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
      data_sets.push_back(entry.path());
    }
  }
  std::sort(data_sets.begin(), data_sets.end());
  for (const fs::path& set : data_sets) {
    absl::Status s = RunDataSet(execute, set);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(set.filename().string(), ": ", s.message()));
    }
    ++sets;
  }
  if (sets == 0) return absl::NotFoundError("no test_data_set_* directory");
  return absl::OkStatus();
}

// Adds the entries of one list (lines `test_name  reason`, # comments) to `out`.
absl::Status ReadExpectedFailureList(const std::string& path,
                                     std::map<std::string, std::string>& out) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find_first_of(" \t");
    std::string name = line.substr(0, space);
    std::string reason =
        space == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", space));
    if (reason.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", name, " has no reason"));
    }
    out[name] = reason;
  }
  return absl::OkStatus();
}

// test name -> reason, from every list given.
absl::StatusOr<std::map<std::string, std::string>> ReadExpectedFailures(
    const std::vector<std::string>& paths) {
  std::map<std::string, std::string> out;
  for (const std::string& path : paths) {
    KILN_RETURN_IF_ERROR(ReadExpectedFailureList(path, out));
  }
  return out;
}

absl::StatusOr<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= argc) return absl::InvalidArgumentError(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--suite") {
      KILN_ASSIGN_OR_RETURN(o.suite, value());
    } else if (arg == "--mode") {
      KILN_ASSIGN_OR_RETURN(o.mode, value());
    } else if (arg == "--target") {
      KILN_ASSIGN_OR_RETURN(o.target, value());
    } else if (arg == "--expected-failures") {
      KILN_ASSIGN_OR_RETURN(std::string path, value());
      o.expected_failures.push_back(path);
    } else if (arg == "--filter") {
      KILN_ASSIGN_OR_RETURN(o.filter, value());
    } else if (arg == "--schedule-as") {
      KILN_ASSIGN_OR_RETURN(o.schedule_as, value());
    } else {
      return absl::InvalidArgumentError("unknown flag " + arg);
    }
  }
  if (o.suite.empty()) return absl::InvalidArgumentError("--suite DIR is required");
  if (o.mode != "reference" && o.mode != "compiled" && o.mode != "ptx") {
    return absl::InvalidArgumentError("--mode must be reference, compiled or ptx");
  }
  return o;
}

int Main(int argc, char** argv) {
  auto options = ParseArgs(argc, argv);
  if (!options.ok()) {
    std::cerr << "kiln-conformance: " << options.status().message() << "\n"
              << "usage: kiln-conformance --suite DIR --mode reference|compiled|ptx [--target T] "
                 "[--schedule-as T] [--expected-failures FILE]... [--filter TEXT]\n";
    return 2;
  }
  if (options->mode == "ptx") {
    options->ptxas = testing::FindPtxas();
    std::cout << (options->ptxas.empty()
                      ? "ptxas: not installed, SKIPPED assembling the PTX (LLVM emitted it; "
                        "install the CUDA toolkit or set KILN_PTXAS to check it)\n"
                      : "ptxas: " + options->ptxas + "\n");
  }
  auto expected = ReadExpectedFailures(options->expected_failures);
  if (!expected.ok()) {
    std::cerr << "kiln-conformance: " << expected.status().message() << "\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& entry : fs::directory_iterator(options->suite)) {
    if (fs::exists(entry.path() / "model.onnx") &&
        entry.path().filename().string().find(options->filter) != std::string::npos) {
      tests.push_back(entry.path());
    }
  }
  std::sort(tests.begin(), tests.end());
  int passed = 0, failed = 0, unexpected = 0, fixed = 0;
  for (const fs::path& dir : tests) {
    std::string name = dir.filename().string();
    absl::Status s = RunTest(dir, *options);
    bool listed = expected->count(name) > 0;
    if (s.ok()) {
      ++passed;
      if (listed) {
        ++fixed;
        std::cout << "FIXED " << name << ": passes now; take it off the expected-failure list\n";
      }
      continue;
    }
    ++failed;
    if (!listed) ++unexpected;
    std::cout << (listed ? "XFAIL " : "FAIL ") << name << ": " << absl::StatusCodeToString(s.code())
              << ": " << s.message() << "\n";
  }
  std::cout << "conformance: " << passed << " passed, " << failed << " failed" << std::endl;
  if (!options->expected_failures.empty()) {
    std::cout << "unexpected failures: " << unexpected << ", expected failures that pass: " << fixed
              << std::endl;
    return unexpected || fixed ? 1 : 0;
  }
  return 0;
}

}  // namespace
}  // namespace kiln::conformance

int main(int argc, char** argv) { return kiln::conformance::Main(argc, argv); }
