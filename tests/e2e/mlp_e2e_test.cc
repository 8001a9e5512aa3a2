// End to end through the real binaries: kilnd on a free loopback port with a fresh data
// directory, `kiln compile` against it, `kiln run` on the artifact, and outputs compared with
// an MLP computed here in double precision.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "tests/support/npy.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::NpyF32;
using testing::OnnxBuilder;

constexpr int kIn = 784, kHidden = 64, kOut = 10;

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

std::string Quote(const std::string& s) { return "'" + s + "'"; }

CommandResult RunCommand(const std::string& command, const fs::path& dir) {
  fs::path log = dir / "command.log";
  int status = std::system((command + " > " + Quote(log) + " 2>&1").c_str());
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// The MLP's weights, kept to compute the expected outputs.
struct Mlp {
  std::vector<float> w1, b1, w2, b2;  // w1: [hidden, in] (Gemm transB), w2: [hidden, out]

  static Mlp Random(std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 0.05f);
    Mlp m;
    for (int i = 0; i < kHidden * kIn; ++i) m.w1.push_back(normal(rng));
    for (int i = 0; i < kHidden; ++i) m.b1.push_back(normal(rng));
    for (int i = 0; i < kHidden * kOut; ++i) m.w2.push_back(normal(rng));
    for (int i = 0; i < kOut; ++i) m.b2.push_back(normal(rng));
    return m;
  }

  // x: [batch, 784] -> Gemm(transB) -> Relu -> MatMul -> Add -> Softmax: [batch, 10].
  std::string Onnx() const {
    OnnxBuilder b;
    b.Input("x", {"batch", kIn});
    b.FloatInitializer("w1", {kHidden, kIn}, w1);
    b.FloatInitializer("b1", {kHidden}, b1);
    b.FloatInitializer("w2", {kHidden, kOut}, w2);
    b.FloatInitializer("b2", {kOut}, b2);
    OnnxBuilder::IntAttr(b.Node("Gemm", {"x", "w1", "b1"}, {"h"}, "fc1"), "transB", 1);
    b.Node("Relu", {"h"}, {"r"}, "relu1");
    b.Node("MatMul", {"r", "w2"}, {"m"}, "fc2");
    b.Node("Add", {"m", "b2"}, {"logits"}, "bias2");
    b.Node("Softmax", {"logits"}, {"y"}, "softmax");
    b.Output("y", {"batch", kOut});
    return b.Serialize();
  }

  std::vector<double> Forward(const std::vector<float>& x, int batch) const {
    std::vector<double> y(batch * kOut);
    for (int n = 0; n < batch; ++n) {
      std::vector<double> h(kHidden), logits(kOut);
      for (int j = 0; j < kHidden; ++j) {
        double s = b1[j];
        for (int i = 0; i < kIn; ++i) s += double(x[n * kIn + i]) * w1[j * kIn + i];
        h[j] = std::max(s, 0.0);
      }
      double max_logit = -INFINITY;
      for (int k = 0; k < kOut; ++k) {
        double s = b2[k];
        for (int j = 0; j < kHidden; ++j) s += h[j] * w2[j * kOut + k];
        logits[k] = s;
        max_logit = std::max(max_logit, s);
      }
      double sum = 0;
      for (int k = 0; k < kOut; ++k) sum += std::exp(logits[k] - max_logit);
      for (int k = 0; k < kOut; ++k) y[n * kOut + k] = std::exp(logits[k] - max_logit) / sum;
    }
    return y;
  }
};

class E2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln-e2e-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    std::mt19937 rng(1234);
    mlp_ = Mlp::Random(rng);
    WriteFile(dir_ / "mlp.onnx", mlp_.Onnx());
    StartDaemon();
  }

  void TearDown() override {
    if (daemon_pid_ > 0) {
      kill(daemon_pid_, SIGTERM);
      waitpid(daemon_pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  static void WriteFile(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  void StartDaemon() {
    port_ = FreePort();
    daemon_pid_ = fork();
    if (daemon_pid_ == 0) {
      std::string listen = "127.0.0.1:" + std::to_string(port_);
      std::string data = (dir_ / "data").string();
      std::string log = (dir_ / "kilnd.log").string();
      freopen(log.c_str(), "w", stderr);
      freopen(log.c_str(), "a", stdout);
      execl(KILND_PATH, KILND_PATH, "--listen", listen.c_str(), "--data-dir", data.c_str(),
            nullptr);
      _exit(127);
    }
    // Ready when `kiln targets` answers through the server.
    for (int i = 0; i < 100; ++i) {
      if (Kiln("targets --server " + Server()).exit_code == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "kilnd did not start";
  }

  std::string Server() const { return "127.0.0.1:" + std::to_string(port_); }

  // KILN_CUDA_LIBRARY names no driver, so that a CUDA artifact fails the same way on every
  // machine (tests/gpu/run.sh runs them on a GPU).
  CommandResult Kiln(const std::string& args) {
    return RunCommand(
        "KILN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 " + std::string(KILN_PATH) + " " + args, dir_);
  }

  CommandResult Compile(const fs::path& model, const std::string& target, const fs::path& out) {
    return Kiln("compile " + Quote(model) + " --target " + target + " --server " + Server() +
                " --out " + Quote(out));
  }

  // Runs the artifact at one batch size and checks every output against the MLP computed
  // here. `run_target` is an artifact folder, or the model followed by --reference.
  void CheckBatch(const std::string& run_target, int batch) {
    std::mt19937 rng(batch);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    NpyF32 x{{batch, kIn}, {}};
    for (int i = 0; i < batch * kIn; ++i) x.values.push_back(uniform(rng));
    fs::path x_path = dir_ / ("x" + std::to_string(batch) + ".npy");
    testing::WriteNpyF32(x_path, x);
    fs::path out = dir_ / ("y" + std::to_string(batch));
    CommandResult r =
        Kiln("run " + run_target + " --input x=" + Quote(x_path) + " --out " + Quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    NpyF32 y;
    ASSERT_TRUE(testing::ReadNpyF32(out / "y.npy", y)) << "batch " << batch;
    ASSERT_EQ(y.shape, (std::vector<int64_t>{batch, kOut}));
    std::vector<double> want = mlp_.Forward(x.values, batch);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(y.values[i], want[i], 1e-5) << "batch " << batch << " element " << i;
    }
  }

  fs::path dir_;
  Mlp mlp_;
  int port_ = 0;
  pid_t daemon_pid_ = -1;
};

TEST_F(E2ETest, CompileThroughDaemonAndRunAtSeveralBatchSizes) {
  fs::path out = dir_ / "out";
  CommandResult r = Compile(dir_ / "mlp.onnx", "x86_64", out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cache miss"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(out / "x86_64" / "model.so"));
  std::ifstream manifest_file(out / "x86_64" / "manifest.json");
  std::string manifest((std::istreambuf_iterator<char>(manifest_file)), {});
  EXPECT_NE(manifest.find(R"("shape": ["batch", 784])"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find(R"("shape": ["batch", 10])"), std::string::npos) << manifest;
  for (int batch : {1, 7, 64}) CheckBatch(Quote(out / "x86_64"), batch);
}

TEST_F(E2ETest, SecondCompileIsACacheHit) {
  ASSERT_EQ(Compile(dir_ / "mlp.onnx", "x86_64", dir_ / "first").exit_code, 0);
  CommandResult r = Compile(dir_ / "mlp.onnx", "x86_64", dir_ / "second");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cache hit"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("cache miss"), std::string::npos) << r.output;
  CheckBatch(Quote(dir_ / "second" / "x86_64"), 3);
}

// The ELF machine field (e_machine) of a shared object.
int ElfMachine(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char header[20] = {};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  return header[18] | header[19] << 8;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(E2ETest, OneRequestGivesOneArtifactPerTargetEachCachedOnItsOwn) {
  const std::string targets =
      " --target x86_64 --target aarch64 --target riscv64 --target cuda-sm80";
  CommandResult r = Kiln("compile " + Quote(dir_ / "mlp.onnx") + targets + " --server " + Server() +
                         " --out " + Quote(dir_ / "first"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "cache miss"), 4) << r.output;
  // EM_X86_64, EM_AARCH64, EM_RISCV; a CUDA artifact is host code for x86_64 carrying PTX.
  EXPECT_EQ(ElfMachine(dir_ / "first" / "x86_64" / "model.so"), 62);
  EXPECT_EQ(ElfMachine(dir_ / "first" / "aarch64" / "model.so"), 183);
  EXPECT_EQ(ElfMachine(dir_ / "first" / "riscv64" / "model.so"), 243);
  EXPECT_EQ(ElfMachine(dir_ / "first" / "cuda-sm80" / "model.so"), 62);
  std::ifstream manifest_file(dir_ / "first" / "cuda-sm80" / "manifest.json");
  std::string manifest((std::istreambuf_iterator<char>(manifest_file)), {});
  EXPECT_NE(manifest.find(R"("device": "cuda")"), std::string::npos) << manifest;
  CheckBatch(Quote(dir_ / "first" / "x86_64"), 2);
  // Where the NVIDIA driver is missing, running the CUDA artifact says so.
  r = Kiln("run " + Quote(dir_ / "first" / "cuda-sm80") + " --input x=" + Quote(dir_ / "x2.npy") +
           " --out " + Quote(dir_ / "cuda-out"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("runs on a CUDA GPU"), std::string::npos) << r.output;

  r = Kiln("compile " + Quote(dir_ / "mlp.onnx") + " --target riscv64 --target x86_64-v3" +
           " --server " + Server() + " --out " + Quote(dir_ / "second"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "cache hit"), 1) << r.output;   // riscv64
  EXPECT_EQ(Count(r.output, "cache miss"), 1) << r.output;  // x86_64-v3
  EXPECT_EQ(ElfMachine(dir_ / "second" / "riscv64" / "model.so"), 243);
}

// `kiln tune --server`: kilnd tunes on its machine into its own database, the table comes
// back to stdout; a second run finds the records; a compile with a budget then needs no
// tuning, builds from the records, and its artifact still computes the MLP.
TEST_F(E2ETest, TuneThroughDaemonThenCompileFromItsRecords) {
  const std::string tune = "tune " + Quote(dir_ / "mlp.onnx") + " --server " + Server() +
                           " --trials-per-kernel 2 --dim batch=8";
  CommandResult r = Kiln(tune);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tune: kernel 1/"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("speedup"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", 0 had records (GFLOP/s)"), std::string::npos) << r.output;

  r = Kiln(tune);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 tuned now (0 trials, 0 failed)"), std::string::npos) << r.output;

  r = Kiln("compile " + Quote(dir_ / "mlp.onnx") + " --target host --server " + Server() +
           " --tune-trials 4 --out " + Quote(dir_ / "tuned"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("] tune: tuned 0 of"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("] tune: kernel"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tunable kernels from tuning records"), std::string::npos) << r.output;
  CheckBatch(Quote(dir_ / "tuned" / "host"), 8);

  r = Kiln("tune " + Quote(dir_ / "mlp.onnx") + " --server " + Server() + " --target aarch64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("aarch64"), std::string::npos) << r.output;
}

TEST_F(E2ETest, InProcessCompileGivesTheSameResults) {
  fs::path out = dir_ / "local";
  CommandResult r =
      Kiln("compile " + Quote(dir_ / "mlp.onnx") + " --target x86_64 --out " + Quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  CheckBatch(Quote(out / "x86_64"), 5);
}

TEST_F(E2ETest, ReferenceInterpreterRunsTheModelItself) {
  CheckBatch(Quote(dir_ / "mlp.onnx") + " --reference", 4);
}

TEST_F(E2ETest, InspectShowsSymbolicShapesAfterImportAndAfterAPass) {
  CommandResult r = Kiln("inspect " + Quote(dir_ / "mlp.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("def @main(%x: Tensor([batch, 784], f32))"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("%y: Tensor([batch, 10], f32) = softmax("), std::string::npos)
      << r.output;
  r = Kiln("inspect " + Quote(dir_ / "mlp.onnx") + " --after legalize");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prim_func @matmul_0("), std::string::npos) << r.output;
  r = Kiln("inspect " + Quote(dir_ / "mlp.onnx") + " --after no_such_pass");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown pass 'no_such_pass'"), std::string::npos) << r.output;
}

TEST_F(E2ETest, WrongInputShapeNamesInputDimensionAndValues) {
  ASSERT_EQ(Compile(dir_ / "mlp.onnx", "x86_64", dir_ / "out").exit_code, 0);
  NpyF32 x{{2, 100}, std::vector<float>(200, 0.5f)};
  testing::WriteNpyF32(dir_ / "bad.npy", x);
  CommandResult r =
      Kiln("run " + Quote(dir_ / "out" / "x86_64") + " --input x=" + Quote(dir_ / "bad.npy") +
           " --out " + Quote(dir_ / "bad_out"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("input 'x' dimension 1: expected 784, got 100"), std::string::npos)
      << r.output;
}

TEST_F(E2ETest, BadRequestsGetClearErrorsAndTheDaemonKeepsServing) {
  WriteFile(dir_ / "garbage.onnx", "definitely not an onnx model \x01\x02\x03");
  CommandResult r = Compile(dir_ / "garbage.onnx", "x86_64", dir_ / "g");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("INVALID_ARGUMENT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not an ONNX model"), std::string::npos) << r.output;

  OnnxBuilder b;
  b.Input("x", {"n", 4});
  b.Node("Relu", {"x"}, {"r"}, "ok_relu");
  b.Node("NotARealOp", {"r"}, {"y"}, "weird_node");
  b.Output("y", {"n", 4});
  WriteFile(dir_ / "unsupported.onnx", b.Serialize());
  r = Compile(dir_ / "unsupported.onnx", "x86_64", dir_ / "u");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("INVALID_ARGUMENT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node 1 'weird_node' (op NotARealOp): unsupported operator"),
            std::string::npos)
      << r.output;

  r = Compile(dir_ / "mlp.onnx", "sparc64", dir_ / "t");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown target 'sparc64'"), std::string::npos) << r.output;

  // Still serving: a good compile works after all of that.
  r = Compile(dir_ / "mlp.onnx", "x86_64", dir_ / "after");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  CheckBatch(Quote(dir_ / "after" / "x86_64"), 2);
}

}  // namespace
}  // namespace kiln
