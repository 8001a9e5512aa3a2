// .npy and TensorProto files as `kiln run` reads and writes them.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/runtime.h"

// kiln_client links onnx_proto privately; its headers need these.
#define ONNX_ML 1
#define ONNX_NAMESPACE onnx
#include "onnx/onnx_pb.h"

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kOnnxNodeTests = "/usr/share/libonnx-testdata/data/node/";

DLDataType DType(const char* name) {
  DLDataType dtype{};
  EXPECT_EQ(kiln_dtype_parse(name, &dtype), 0) << name;
  return dtype;
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> values(tensor.data.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

template <typename T>
Tensor MakeFilled(const char* dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  absl::StatusOr<Tensor> tensor = MakeTensor(DType(dtype), std::move(shape));
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->data.size(), values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(tensor->data.data(), values.data(), tensor->data.size());
  return *std::move(tensor);
}

// A .npy file as numpy 1.24 writes it: v1, the header padded with spaces to 64 bytes.
std::string NumpyBytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string ErrorOf(const absl::StatusOr<Tensor>& result) {
  EXPECT_FALSE(result.ok());
  return std::string(result.status().message());
}

class TempDir : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(Path(name), std::ios::binary) << bytes;
  }
  std::filesystem::path dir_ = std::filesystem::path(::testing::TempDir()) /
                               ::testing::UnitTest::GetInstance()->current_test_info()->name();
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
};

TEST(NpyTest, WritesExactlyWhatNumpyWrites) {
  Tensor tensor = MakeFilled<float>("f32", {2, 3}, {0, 1, 2, 3, 4, 5});
  absl::StatusOr<std::string> bytes = SerializeNpy(tensor);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::string data(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size());
  EXPECT_EQ(*bytes,
            NumpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data));
  EXPECT_EQ(bytes->size(), 128u + 24u);  // data starts 64-byte aligned
}

TEST(NpyTest, RoundTripsEveryDType) {
  std::vector<uint8_t> pattern = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0};
  for (const char* name :
       {"f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}) {
    absl::StatusOr<Tensor> tensor = MakeTensor(DType(name), {2, 1});
    ASSERT_TRUE(tensor.ok()) << name;
    std::memcpy(tensor->data.data(), pattern.data(), tensor->data.size());
    absl::StatusOr<std::string> bytes = SerializeNpy(*tensor);
    ASSERT_TRUE(bytes.ok()) << name << ": " << bytes.status();
    absl::StatusOr<Tensor> back = ParseNpy(*bytes);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_STREQ(kiln_dtype_name(back->dtype), name);
    EXPECT_THAT(back->shape, ElementsAre(2, 1)) << name;
    EXPECT_EQ(back->data, tensor->data) << name;
  }
}

TEST(NpyTest, RoundTripsScalarsAndEmptyTensors) {
  Tensor scalar = MakeFilled<int64_t>("i64", {}, {7});
  absl::StatusOr<Tensor> back = ParseNpy(*SerializeNpy(scalar));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->shape.empty());
  EXPECT_THAT(Values<int64_t>(*back), ElementsAre(7));

  Tensor empty = MakeFilled<float>("f32", {0, 4}, {});
  back = ParseNpy(*SerializeNpy(empty));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->shape, ElementsAre(0, 4));
  EXPECT_TRUE(back->data.empty());
}

TEST(NpyTest, ReadsNumpyOutput) {
  absl::StatusOr<Tensor> bools = ParseNpy(NumpyBytes(
      "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x00\x01", 3)));
  ASSERT_TRUE(bools.ok()) << bools.status();
  EXPECT_EQ(bools->dtype.code, KILN_DL_BOOL);
  EXPECT_THAT(bools->shape, ElementsAre(3));
  EXPECT_THAT(Values<uint8_t>(*bools), ElementsAre(1, 0, 1));

  absl::StatusOr<Tensor> u16 =
      ParseNpy(NumpyBytes("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
                          std::string("\x01\x00\xff\xff", 4)));
  ASSERT_TRUE(u16.ok()) << u16.status();
  EXPECT_THAT(Values<uint16_t>(*u16), ElementsAre(1, 65535));
}

TEST(NpyTest, ReadsPython2LongDims) {
  std::string data(16, '\0');
  absl::StatusOr<Tensor> tensor =
      ParseNpy(NumpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2L,), }", data));
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_THAT(tensor->shape, ElementsAre(2));
}

TEST(NpyTest, ReadsVersion2Headers) {
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n";
  std::string bytes("\x93NUMPY\x02\x00", 8);
  bytes += std::string(1, static_cast<char>(header.size())) + std::string(3, '\0');
  bytes += header + std::string("\x2a\x00\x00\x00", 4);
  absl::StatusOr<Tensor> tensor = ParseNpy(bytes);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_THAT(Values<int32_t>(*tensor), ElementsAre(42));
}

TEST(NpyTest, BadFilesGiveClearErrors) {
  const std::string f32x2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(ErrorOf(ParseNpy("PK\x03\x04 zip")), "not a .npy file (bad magic)");
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes(f32x2, "").substr(0, 30))), "truncated .npy header");
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes(f32x2, "1234"))), "data has 4 bytes, expected 8");
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes(f32x2, "123456789"))), "data has 9 bytes, expected 8");
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                                        "12345678"))),
            "big-endian dtype '>f4' is not supported");
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
                                        "12345678"))),
            "Fortran-order arrays are not supported");
  EXPECT_THAT(ErrorOf(ParseNpy(NumpyBytes(
                  "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "12345678"))),
              HasSubstr("unsupported dtype '<c8'"));
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes("{'descr': '<f4', 'fortran_order': False, }", ""))),
            "header has no 'shape'");
  EXPECT_EQ(ErrorOf(ParseNpy(
                NumpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", ""))),
            "bad shape dim '-1'");
}

TEST(NpyTest, HugeShapesFailWithoutAllocating) {
  EXPECT_EQ(
      ErrorOf(ParseNpy(NumpyBytes(
          "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""))),
      "bad tensor shape [4294967296, 4294967296]");
  EXPECT_EQ(ErrorOf(ParseNpy(NumpyBytes(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", ""))),
            "data has 0 bytes, expected 8000000000000");
}

TEST(TensorProtoTest, ReadsOnnxTestDataWithRawData) {
  absl::StatusOr<Tensor> x =
      ReadTensorFile(kOnnxNodeTests + "test_relu/test_data_set_0/input_0.pb");
  absl::StatusOr<Tensor> y =
      ReadTensorFile(kOnnxNodeTests + "test_relu/test_data_set_0/output_0.pb");
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_STREQ(kiln_dtype_name(x->dtype), "f32");
  EXPECT_THAT(x->shape, ElementsAre(3, 4, 5));
  // The suite's expected output is relu of its input: the bytes were read in the right order.
  std::vector<float> in = Values<float>(*x), out = Values<float>(*y);
  ASSERT_EQ(in.size(), 60u);
  ASSERT_EQ(out.size(), 60u);
  int negatives = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i], std::max(in[i], 0.0f)) << i;
    negatives += in[i] < 0;
  }
  EXPECT_GT(negatives, 0);
}

TEST(TensorProtoTest, ReadsIntegerAndBoolTestData) {
  absl::StatusOr<Tensor> u8 =
      ReadTensorFile(kOnnxNodeTests + "test_add_uint8/test_data_set_0/input_0.pb");
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_STREQ(kiln_dtype_name(u8->dtype), "u8");
  EXPECT_EQ(u8->data.size(), 60u);
  absl::StatusOr<Tensor> b =
      ReadTensorFile(kOnnxNodeTests + "test_and2d/test_data_set_0/input_0.pb");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_STREQ(kiln_dtype_name(b->dtype), "bool");
  EXPECT_THAT(b->shape, ElementsAre(3, 4));
}

TEST(TensorProtoTest, ReadsTypedFields) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(2);
  proto.add_float_data(1.5f);
  proto.add_float_data(-2.0f);
  absl::StatusOr<Tensor> f = ParseTensorProto(proto.SerializeAsString());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(Values<float>(*f), ElementsAre(1.5f, -2.0f));

  // Small integer types and bool live in int32_data.
  proto.Clear();
  proto.set_data_type(onnx::TensorProto::INT8);
  proto.add_dims(3);
  for (int v : {-128, 0, 127}) proto.add_int32_data(v);
  absl::StatusOr<Tensor> i8 = ParseTensorProto(proto.SerializeAsString());
  ASSERT_TRUE(i8.ok()) << i8.status();
  EXPECT_THAT(Values<int8_t>(*i8), ElementsAre(-128, 0, 127));

  proto.Clear();
  proto.set_data_type(onnx::TensorProto::UINT32);
  proto.add_dims(1);
  proto.add_uint64_data(4000000000u);
  absl::StatusOr<Tensor> u32 = ParseTensorProto(proto.SerializeAsString());
  ASSERT_TRUE(u32.ok()) << u32.status();
  EXPECT_THAT(Values<uint32_t>(*u32), ElementsAre(4000000000u));

  proto.Clear();
  proto.set_data_type(onnx::TensorProto::INT64);
  proto.add_int64_data(-5);  // no dims: a scalar
  absl::StatusOr<Tensor> i64 = ParseTensorProto(proto.SerializeAsString());
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_TRUE(i64->shape.empty());
  EXPECT_THAT(Values<int64_t>(*i64), ElementsAre(-5));
}

TEST(TensorProtoTest, BadProtosGiveClearErrors) {
  EXPECT_EQ(ErrorOf(ParseTensorProto("\xff\xff\xff\xff")), "not a valid ONNX TensorProto");
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::DOUBLE);
  proto.add_dims(3);
  proto.add_double_data(1.0);
  EXPECT_EQ(ErrorOf(ParseTensorProto(proto.SerializeAsString())),
            "double_data has 1 values, expected 3");
  proto.set_raw_data(std::string(8, '\0'));
  EXPECT_EQ(ErrorOf(ParseTensorProto(proto.SerializeAsString())),
            "raw_data has 8 bytes, expected 24");
  proto.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(ErrorOf(ParseTensorProto(proto.SerializeAsString())),
            "TensorProto with external data is not supported");
  EXPECT_EQ(ErrorOf(ReadTensorFile(kOnnxNodeTests +
                                   "test_cast_STRING_to_FLOAT/test_data_set_0/input_0.pb")),
            "'" + kOnnxNodeTests +
                "test_cast_STRING_to_FLOAT/test_data_set_0/input_0.pb': unsupported TensorProto "
                "data type STRING (8)");
}

TEST_F(TempDir, FilesRoundTripAndErrorsNameTheFile) {
  Tensor tensor = MakeFilled<int32_t>("i32", {2}, {3, -4});
  ASSERT_TRUE(WriteNpyFile(Path("sub/t.npy"), tensor).ok());
  absl::StatusOr<Tensor> back = ReadTensorFile(Path("sub/t.npy"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(Values<int32_t>(*back), ElementsAre(3, -4));

  EXPECT_EQ(ErrorOf(ReadTensorFile(Path("missing.npy"))),
            "cannot open '" + Path("missing.npy") + "': No such file or directory");
  Write("t.txt", "1 2 3");
  EXPECT_EQ(ErrorOf(ReadTensorFile(Path("t.txt"))),
            "'" + Path("t.txt") +
                "': unknown tensor file format (expected .npy or an ONNX TensorProto .pb)");
  Write("bad.npy", "not numpy");
  EXPECT_EQ(ErrorOf(ReadTensorFile(Path("bad.npy"))),
            "'" + Path("bad.npy") + "': not a .npy file (bad magic)");
}

TEST(TensorTest, ViewAndAlignment) {
  Tensor tensor = MakeFilled<double>("f64", {1, 2}, {1.0, 2.0});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.data.data()) % 64, 0u);
  DLTensor view = tensor.View();
  EXPECT_EQ(view.ndim, 2);
  EXPECT_EQ(view.shape[1], 2);
  EXPECT_EQ(view.device.device_type, kDLCPU);
  EXPECT_EQ(static_cast<double*>(view.data)[1], 2.0);
  EXPECT_EQ(view.strides, nullptr);
}

TEST(TensorTest, MakeTensorRejectsBadShapes) {
  EXPECT_FALSE(MakeTensor(DType("f32"), {2, -1}).ok());
  EXPECT_FALSE(MakeTensor(DLDataType{kDLBfloat, 16, 1}, {2}).ok());
  EXPECT_EQ(TensorBytes(DType("u16"), {3, 5}).value(), 30);
}

}  // namespace
}  // namespace kiln::client
