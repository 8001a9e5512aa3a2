// A wasm32-simd artifact in a real browser: headless Chromium loads tests/wasm/browser/index.html
// from a local server (serve.mjs), the page imports runtime/js/kiln.mjs, runs model.wasm on
// inputs.json and shows the output in the DOM; the shown numbers must match the reference
// interpreter.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"
#include "tests/wasm/wasm_support.h"

extern char** environ;

namespace kiln::testing {
namespace {

// serve.mjs over some roots, killed when this goes out of scope.
class Server {
 public:
  explicit Server(const std::vector<std::string>& roots) {
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<std::string> argv = {KILN_NODE, KILN_SOURCE_DIR "/tests/wasm/serve.mjs"};
    argv.insert(argv.end(), roots.begin(), roots.end());
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    // The first line is the port; reading blocks until the server listens (or exits).
    FILE* stream = fdopen(out[0], "r");
    char line[32] = {};
    if (stream != nullptr && std::fgets(line, sizeof(line), stream) != nullptr) {
      port_ = std::atoi(line);
    }
    if (stream != nullptr) std::fclose(stream);
  }
  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// The text of <pre id="result">...</pre> in Chromium's dump of the page's DOM.
std::string ResultText(const std::string& dom) {
  const std::string open = "<pre id=\"result\">";
  size_t begin = dom.find(open);
  if (begin == std::string::npos) return "";
  begin += open.size();
  return dom.substr(begin, dom.find("</pre>", begin) - begin);
}

// The numbers of the JSON array that follows `"key":` in `text`.
std::vector<double> JsonNumbers(const std::string& text, const std::string& key) {
  std::vector<double> values;
  size_t at = text.find("\"" + key + "\":[");
  if (at == std::string::npos) return values;
  const char* p = text.c_str() + at + key.size() + 4;
  while (*p != ']' && *p != '\0') {
    char* end = nullptr;
    values.push_back(std::strtod(p, &end));
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  return values;
}

// How many times the page is loaded while it still shows "pending".
constexpr int kPageLoads = 3;

std::string MatmulModel() {
  OnnxBuilder b;
  b.Input("x", {"batch", 64});
  b.Output("y", {"batch", 24});
  std::vector<float> w(64 * 24), bias(24);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.2f * std::sin(0.37f * i + 0.1f);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.5f * std::cos(0.9f * i);
  b.FloatInitializer("w", {64, 24}, w);
  b.FloatInitializer("b", {24}, bias);
  b.Node("MatMul", {"x", "w"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"xwb"});
  b.Node("Sigmoid", {"xwb"}, {"y"});
  return b.Serialize();
}

TEST(WasmBrowser, ChromiumShowsTheReferenceOutput) {
  const std::string onnx = MatmulModel();
  auto wasm = CompileForWasm(onnx, "wasm32-simd");
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  // Inputs k/8 - 4: exact in JSON and in f32.
  std::vector<float> x(3 * 64);
  std::string data;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(static_cast<int>(i * 7 % 64)) / 8.0f - 4.0f;
    data += (i ? "," : "") + std::to_string(x[i]);
  }
  auto expected = ImportAndRun(onnx, {F32({3, 64}, x)});
  ASSERT_TRUE(expected.ok()) << expected.status();

  ScratchDir dir("browser");
  WriteFile(dir / "model.wasm", *wasm);
  WriteFile(dir / "inputs.json", "[{\"dtype\":\"f32\",\"shape\":[3,64],\"data\":[" + data + "]}]");
  Server server(
      {dir.string(), KILN_SOURCE_DIR "/tests/wasm/browser", KILN_SOURCE_DIR "/runtime/js"});
  ASSERT_GT(server.port(), 0) << "serve.mjs did not start (node: " << KILN_NODE << ")";

  std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/index.html";
  std::string command = Quote(KILN_CHROMIUM) +
                        " --headless --no-sandbox --disable-gpu --no-first-run"
                        " --disable-background-networking --disable-component-update"
                        " --disable-sync --user-data-dir=" +
                        Quote(dir / "profile") + " --virtual-time-budget=30000 --dump-dom " +
                        Quote(url) + " > " + Quote(dir / "dom.html") + " 2> " +
                        Quote(dir / "chromium.log");
  // On a loaded machine Chromium can dump the page before its asynchronous work (the fetches,
  // the WebAssembly compile) has finished, while it still shows "pending": once in a CI run,
  // alongside other tests. That says nothing about the result, so the page is loaded again, a
  // few times at most. "ok" or "error" is final.
  std::string shown;
  for (int attempt = 0; attempt < kPageLoads && (attempt == 0 || shown == "pending"); ++attempt) {
    int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "chromium (" << KILN_CHROMIUM << ") failed: " << ReadFile(dir / "chromium.log");
    shown = ResultText(ReadFile(dir / "dom.html"));
  }
  ASSERT_EQ(shown.substr(0, 3), "ok ") << "the page shows: '" << shown << "'";
  EXPECT_EQ(JsonNumbers(shown, "shape"), (std::vector<double>{3, 24}));
  std::vector<double> values = JsonNumbers(shown, "data");
  const ir::NDArray& y = (*expected)[0];
  ASSERT_EQ(static_cast<int64_t>(values.size()), y.num_elements()) << shown;
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    EXPECT_NEAR(values[i], y.GetDouble(i), 1e-5) << "element " << i;
  }
}

}  // namespace
}  // namespace kiln::testing
