// ONNX external data: the client inlines it from files inside the model's folder and refuses
// locations that leave it; the importer (kilnd's) refuses any that is left and opens no file.
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "compiler/driver/driver.h"
#include "compiler/frontend/external_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::OnnxBuilder;

// y = (x + w) * b + c, with w and b initializers and c a Constant node's value.
OnnxBuilder AddMulAdd() {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.Output("y", {2, 3});
  b.FloatInitializer("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.FloatInitializer("b", {3}, {0.5f, -1, 2});
  onnx::NodeProto& constant = b.Node("Constant", {}, {"c"}, "const");
  onnx::AttributeProto* value = constant.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(3);
  std::vector<float> c = {10, 20, 30};
  value->mutable_t()->set_raw_data(std::string(reinterpret_cast<const char*>(c.data()), 12));
  b.Node("Add", {"x", "w"}, {"s"});
  b.Node("Mul", {"s", "b"}, {"m"});
  b.Node("Add", {"m", "c"}, {"y"});
  return b;
}

onnx::TensorProto& Initializer(onnx::ModelProto& model, const std::string& name) {
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.name() == name) return t;
  }
  ADD_FAILURE() << "no initializer " << name;
  return *model.mutable_graph()->mutable_initializer(0);
}

onnx::TensorProto& ConstantValue(onnx::ModelProto& model) {
  return *model.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t();
}

// Moves the tensor's bytes out (returned) and points it at `location` with the given entries.
std::string MakeExternal(onnx::TensorProto& t, const std::string& location,
                         std::optional<std::string> offset = std::nullopt,
                         std::optional<std::string> length = std::nullopt) {
  std::string bytes = t.raw_data();
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* e = t.add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  add("location", location);
  if (offset) add("offset", *offset);
  if (length) add("length", *length);
  return bytes;
}

class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(root_);
    fs::create_directories(dir_);
    fs::create_directories(root_ / "outside");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Write(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }

  // The model with its external data inlined, as the CLI reads it from dir_/model.onnx.
  absl::StatusOr<std::string> Inline(const onnx::ModelProto& model) {
    Write(dir_ / "model.onnx", model.SerializeAsString());
    return InlineExternalDataOfModelFile(model.SerializeAsString(), dir_ / "model.onnx");
  }

  // Points w at `location` (its bytes written to `file` unless empty) and inlines.
  absl::Status InlineW(const std::string& location, const fs::path& file = {},
                       std::optional<std::string> offset = std::nullopt,
                       std::optional<std::string> length = std::nullopt) {
    OnnxBuilder b = AddMulAdd();
    std::string bytes = MakeExternal(Initializer(b.model(), "w"), location, offset, length);
    if (!file.empty()) Write(file, bytes);
    return Inline(b.model()).status();
  }

  fs::path root_ = fs::path(::testing::TempDir()) /
                   ("kiln_external_data_" +
                    std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::path dir_ = root_ / "model";
};

MATCHER_P2(InvalidArgumentNaming, tensor, problem, "") {
  if (arg.code() != absl::StatusCode::kInvalidArgument) {
    *result_listener << "code " << arg.ToString();
    return false;
  }
  std::string message(arg.message());
  *result_listener << "message: " << message;
  return message.find(tensor) != std::string::npos && message.find(problem) != std::string::npos;
}

TEST_F(ExternalDataTest, InlinedModelComputesWhatTheInlineModelDoes) {
  OnnxBuilder reference = AddMulAdd();
  OnnxBuilder b = AddMulAdd();
  // w and b share one file at different offsets; c has a file to itself, read to its end.
  std::string w = MakeExternal(Initializer(b.model(), "w"), "weights.bin", "0", "24");
  std::string bias = MakeExternal(Initializer(b.model(), "b"), "weights.bin", "32", "12");
  std::string c = MakeExternal(ConstantValue(b.model()), "data/c.bin");
  Write(dir_ / "weights.bin", w + std::string(8, '\xff') + bias + "trailing");
  Write(dir_ / "data/c.bin", c);

  absl::StatusOr<std::string> inlined = Inline(b.model());
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*inlined));
  for (onnx::TensorProto* t :
       {&Initializer(model, "w"), &Initializer(model, "b"), &ConstantValue(model)}) {
    EXPECT_EQ(t->data_location(), onnx::TensorProto::DEFAULT) << t->name();
    EXPECT_EQ(t->external_data_size(), 0) << t->name();
  }
  EXPECT_EQ(Initializer(model, "w").raw_data(), w);
  EXPECT_EQ(Initializer(model, "b").raw_data(), bias);
  EXPECT_EQ(ConstantValue(model).raw_data(), c);

  ir::NDArray x = testing::F32({2, 3}, {1, 1, 1, -1, -1, -1});
  auto expected = testing::ImportAndRun(reference, {x});
  auto got = testing::ImportAndRun(*inlined, {x});
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(testing::Values<float>((*got)[0]), testing::Values<float>((*expected)[0]));
  EXPECT_EQ(testing::Values<float>((*got)[0]), (std::vector<float>{11, 17, 38, 11.5f, 16, 40}));
}

TEST_F(ExternalDataTest, ModelWithoutExternalDataKeepsItsBytes) {
  std::string bytes = AddMulAdd().Serialize();
  EXPECT_EQ(*InlineExternalDataOfModelFile(bytes, dir_ / "model.onnx"), bytes);
  // Bytes that are no model are the importer's to report.
  EXPECT_EQ(*InlineExternalDataOfModelFile("not a model", dir_ / "model.onnx"), "not a model");
}

TEST_F(ExternalDataTest, AbsoluteLocationIsRefused) {
  fs::path file = dir_ / "w.bin";
  EXPECT_THAT(InlineW(file.string(), file),
              InvalidArgumentNaming("tensor 'w' (external data '" + file.string() + "')",
                                    "the location is absolute"));
}

TEST_F(ExternalDataTest, DotDotIsRefused) {
  EXPECT_THAT(InlineW("../w.bin", root_ / "w.bin"),
              InvalidArgumentNaming("tensor 'w' (external data '../w.bin')", "contains '..'"));
  EXPECT_THAT(
      InlineW("sub/../../w.bin", root_ / "w.bin"),
      InvalidArgumentNaming("tensor 'w' (external data 'sub/../../w.bin')", "contains '..'"));
  // Even a ".." that stays inside the folder: a location names no parent.
  EXPECT_THAT(InlineW("sub/../w.bin", dir_ / "w.bin"),
              InvalidArgumentNaming("tensor 'w'", "contains '..'"));
}

TEST_F(ExternalDataTest, LinkToAFileOutsideIsRefused) {
  Write(root_ / "outside/secret", std::string(24, 'x'));
  fs::create_symlink(root_ / "outside/secret", dir_ / "w.bin");
  EXPECT_THAT(InlineW("w.bin"), InvalidArgumentNaming("tensor 'w' (external data 'w.bin')",
                                                      "outside the model's folder"));
}

TEST_F(ExternalDataTest, LinkToAFolderOutsideIsRefused) {
  Write(root_ / "outside/w.bin", std::string(24, 'x'));
  fs::create_directory_symlink(root_ / "outside", dir_ / "weights");
  EXPECT_THAT(InlineW("weights/w.bin"),
              InvalidArgumentNaming("tensor 'w' (external data 'weights/w.bin')",
                                    "outside the model's folder"));
}

TEST_F(ExternalDataTest, LinkInsideTheFolderIsFollowed) {
  OnnxBuilder b = AddMulAdd();
  std::string w = MakeExternal(Initializer(b.model(), "w"), "link.bin");
  Write(dir_ / "data/w.bin", w);
  fs::create_symlink("data/w.bin", dir_ / "link.bin");
  absl::StatusOr<std::string> inlined = Inline(b.model());
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*inlined));
  EXPECT_EQ(Initializer(model, "w").raw_data(), w);
}

TEST_F(ExternalDataTest, MissingFileAndFolderAreRefused) {
  EXPECT_THAT(InlineW("missing.bin"),
              InvalidArgumentNaming("tensor 'w' (external data 'missing.bin')", "no such file"));
  fs::create_directories(dir_ / "folder");
  EXPECT_THAT(InlineW("folder"),
              InvalidArgumentNaming("tensor 'w' (external data 'folder')", "not a regular file"));
  EXPECT_THAT(InlineW("."),
              InvalidArgumentNaming("tensor 'w' (external data '.')", "not a regular file"));
  EXPECT_THAT(InlineW(""), InvalidArgumentNaming("tensor 'w'", "no location is given"));
}

TEST_F(ExternalDataTest, RangePastTheEndIsRefused) {
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "25"),
              InvalidArgumentNaming("tensor 'w' (external data 'w.bin')",
                                    "offset 25 is past the end of the file (24 bytes)"));
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "4", "24"),
              InvalidArgumentNaming("tensor 'w' (external data 'w.bin')",
                                    "offset 4 + length 24 is past the end of the file (24 bytes)"));
  // offset + length would overflow a 64-bit sum.
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "10", "9223372036854775807"),
              InvalidArgumentNaming("tensor 'w'",
                                    "offset 10 + length 9223372036854775807 is past "
                                    "the end of the file (24 bytes)"));
}

TEST_F(ExternalDataTest, BadNumbersAreRefused) {
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "abc"),
              InvalidArgumentNaming("tensor 'w' (external data 'w.bin')",
                                    "offset 'abc' is not a byte count"));
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "-4"),
              InvalidArgumentNaming("tensor 'w'", "offset '-4' is not a byte count"));
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "0", "99999999999999999999"),
              InvalidArgumentNaming("tensor 'w'", "length '99999999999999999999' is not a byte"));
}

TEST_F(ExternalDataTest, ByteCountMustFitTypeAndDims) {
  EXPECT_THAT(InlineW("w.bin", dir_ / "w.bin", "4"),
              InvalidArgumentNaming("tensor 'w' (external data 'w.bin')",
                                    "20 bytes of external data, but a FLOAT tensor of dims [2, 3] "
                                    "has 24"));
}

TEST_F(ExternalDataTest, UnknownKeyIsRefusedOnUnnamedTensors) {
  OnnxBuilder b = AddMulAdd();
  onnx::TensorProto& c = ConstantValue(b.model());
  Write(dir_ / "c.bin", MakeExternal(c, "c.bin"));
  onnx::StringStringEntryProto* e = c.add_external_data();
  e->set_key("basepath");
  e->set_value("/etc");
  EXPECT_THAT(Inline(b.model()).status(),
              InvalidArgumentNaming("a tensor in attribute 'value' of node 'const' (external "
                                    "data 'c.bin')",
                                    "unknown key 'basepath'"));
}

TEST_F(ExternalDataTest, ImporterRefusesExternalDataWithoutOpeningIt) {
  // The file exists and is readable, and the location is plain: still no.
  OnnxBuilder b = AddMulAdd();
  fs::path file = dir_ / "w.bin";
  Write(file, MakeExternal(Initializer(b.model(), "w"), file.string()));
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(b.Serialize());
  EXPECT_THAT(module.status(),
              InvalidArgumentNaming("initializer 'w': external data '" + file.string() + "'",
                                    "must be inlined by the client"));

  OnnxBuilder constant = AddMulAdd();
  MakeExternal(ConstantValue(constant.model()), "c.bin");
  EXPECT_THAT(driver::ImportModel(constant.Serialize()).status(),
              InvalidArgumentNaming("node 0 'const' (op Constant): external data 'c.bin'",
                                    "must be inlined by the client"));
}

TEST_F(ExternalDataTest, SubgraphTensorsAreInlined) {
  OnnxBuilder branch;
  branch.Output("k", {3});
  branch.FloatInitializer("k", {3}, {7, 8, 9});
  onnx::GraphProto graph = branch.graph();
  std::string k = MakeExternal(*graph.mutable_initializer(0), "k.bin");
  Write(dir_ / "k.bin", k);
  OnnxBuilder b = AddMulAdd();
  OnnxBuilder::GraphAttr(b.Node("If", {"cond"}, {"z"}, "if"), "then_branch", graph);
  absl::StatusOr<std::string> inlined = Inline(b.model());
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*inlined));
  const onnx::TensorProto& t = model.graph().node(4).attribute(0).g().initializer(0);
  EXPECT_EQ(t.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(t.raw_data(), k);
}

TEST_F(ExternalDataTest, ModelPastTwoGibibytesIsResourceExhausted) {
  // 3 GiB of float32 in a sparse file: refused before a byte of it is read.
  OnnxBuilder b;
  b.Input("x", {1});
  b.Output("y", {1});
  b.FloatInitializer("big", {3 << 28}, {});
  b.Node("Identity", {"x"}, {"y"});
  MakeExternal(*b.model().mutable_graph()->mutable_initializer(0), "big.bin");
  Write(dir_ / "big.bin", "");
  fs::resize_file(dir_ / "big.bin", uint64_t{3} << 30);
  absl::Status status = Inline(b.model()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("tensor 'big' (external data 'big.bin')"));
  EXPECT_THAT(status.message(), HasSubstr("2 GiB"));
}

}  // namespace
}  // namespace kiln::frontend
