#include "client/tensor_io.h"

#include <bit>
#include <charconv>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/files.h"
#include "kiln/runtime.h"
#include "onnx/onnx_pb.h"

namespace kiln::client {
namespace {

// Both formats store little-endian data, which is copied as is.
static_assert(std::endian::native == std::endian::little, "tensor files assume little-endian");

constexpr absl::string_view kNpyMagic = "\x93NUMPY";

// absl here predates std::string_view aliasing; the public API takes std::string_view.
absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }

bool SameDType(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

std::string DTypeText(DLDataType dtype) {
  const char* name = kiln_dtype_name(dtype);
  return name ? name : absl::StrCat("dtype(code=", dtype.code, ", bits=", dtype.bits, ")");
}

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("'", path, "': ", status.message()));
}

// ---- .npy (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html) ----

struct NpyDescr {
  const char* kind_size;  // descr without its byte-order character
  DLDataType dtype;
};

constexpr NpyDescr kNpyDescrs[] = {
    {"f2", {kDLFloat, 16, 1}}, {"f4", {kDLFloat, 32, 1}}, {"f8", {kDLFloat, 64, 1}},    {"i1", {kDLInt, 8, 1}},
    {"i2", {kDLInt, 16, 1}},   {"i4", {kDLInt, 32, 1}},      {"i8", {kDLInt, 64, 1}},
    {"u1", {kDLUInt, 8, 1}},   {"u2", {kDLUInt, 16, 1}},     {"u4", {kDLUInt, 32, 1}},
    {"u8", {kDLUInt, 64, 1}},  {"b1", {KILN_DL_BOOL, 8, 1}},
};

absl::StatusOr<DLDataType> ParseNpyDescr(absl::string_view descr) {
  if (descr.size() < 2) return Invalid(absl::StrCat("unsupported dtype '", descr, "'"));
  char order = descr[0];
  for (const NpyDescr& d : kNpyDescrs) {
    if (descr.substr(1) != d.kind_size) continue;
    bool big = order == '>' && d.dtype.bits > 8;
    if (big) return Invalid(absl::StrCat("big-endian dtype '", descr, "' is not supported"));
    return d.dtype;
  }
  return Invalid(absl::StrCat("unsupported dtype '", descr,
                              "' (supported: f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)"));
}

// The text of `key`'s value in the header, a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
absl::StatusOr<absl::string_view> NpyHeaderValue(absl::string_view header, absl::string_view key) {
  size_t at = header.find(absl::StrCat("'", key, "'"));
  size_t colon = at == absl::string_view::npos ? at : header.find(':', at);
  if (colon == absl::string_view::npos) return Invalid(absl::StrCat("header has no '", key, "'"));
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(colon + 1));
  char open = rest.empty() ? ' ' : rest[0];
  size_t end = open == '('                   ? rest.find(')') + 1
               : open == '\'' || open == '"' ? rest.find(open, 1) + 1
                                             : rest.find_first_of(",}");
  if (end == 0 || end == absl::string_view::npos) {
    return Invalid(absl::StrCat("malformed header value for '", key, "'"));
  }
  return rest.substr(0, end);
}

absl::StatusOr<std::vector<int64_t>> ParseNpyShape(absl::string_view text) {
  std::vector<int64_t> shape;
  text = absl::StripSuffix(absl::StripPrefix(text, "("), ")");
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t dim;
    // Python 2's numpy wrote long integers as "2L".
    if (!absl::SimpleAtoi(absl::StripSuffix(part, "L"), &dim) || dim < 0) {
      return Invalid(absl::StrCat("bad shape dim '", part, "'"));
    }
    shape.push_back(dim);
  }
  return shape;
}

// Splits a .npy file into its header dict and data.
absl::Status SplitNpy(absl::string_view bytes, absl::string_view* header, absl::string_view* data) {
  if (!absl::StartsWith(bytes, kNpyMagic)) return Invalid("not a .npy file (bad magic)");
  if (bytes.size() < 10) return Invalid("truncated .npy header");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3) return Invalid(absl::StrCat("unsupported .npy version ", major));
  // v1 has a 2-byte header length, v2 and v3 a 4-byte one; both little-endian.
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t start = 8 + len_bytes;
  if (bytes.size() < start) return Invalid("truncated .npy header");
  uint32_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    header_len |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  }
  if (bytes.size() - start < header_len) return Invalid("truncated .npy header");
  *header = bytes.substr(start, header_len);
  *data = bytes.substr(start + header_len);
  return absl::OkStatus();
}

std::string NpyShapeText(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

const char* NpyDescrFor(DLDataType dtype) {
  for (const NpyDescr& d : kNpyDescrs) {
    if (SameDType(d.dtype, dtype)) return d.kind_size;
  }
  return nullptr;
}

// ---- TensorProto ----

struct OnnxDType {
  int onnx;  // onnx::TensorProto::DataType
  DLDataType dtype;
};

constexpr OnnxDType kOnnxDTypes[] = {
    {onnx::TensorProto::FLOAT, {kDLFloat, 32, 1}},   {onnx::TensorProto::DOUBLE, {kDLFloat, 64, 1}},
    {onnx::TensorProto::INT8, {kDLInt, 8, 1}},       {onnx::TensorProto::INT16, {kDLInt, 16, 1}},
    {onnx::TensorProto::INT32, {kDLInt, 32, 1}},     {onnx::TensorProto::INT64, {kDLInt, 64, 1}},
    {onnx::TensorProto::UINT8, {kDLUInt, 8, 1}},     {onnx::TensorProto::UINT16, {kDLUInt, 16, 1}},
    {onnx::TensorProto::UINT32, {kDLUInt, 32, 1}},   {onnx::TensorProto::UINT64, {kDLUInt, 64, 1}},
    {onnx::TensorProto::BOOL, {KILN_DL_BOOL, 8, 1}},  {onnx::TensorProto::FLOAT16, {kDLFloat, 16, 1}},
};

// Stores each value of a typed field as the tensor's element type (ONNX keeps small integer
// types and bool in int32_data, uint32 in uint64_data).
template <typename Element, typename Field>
void StoreConverted(const Field& values, Tensor* tensor) {
  for (int i = 0; i < values.size(); ++i) {
    Element element = static_cast<Element>(values[i]);
    std::memcpy(tensor->data.data() + i * sizeof(Element), &element, sizeof(Element));
  }
}

template <typename Field>
void StoreField(const Field& values, Tensor* tensor) {
  DLDataType t = tensor->dtype;
  if (t.code == kDLFloat && t.bits == 16) {
    StoreConverted<uint16_t>(values, tensor);  // int32_data holds each half's bits
  } else if (t.code == kDLFloat) {
    t.bits == 32 ? StoreConverted<float>(values, tensor) : StoreConverted<double>(values, tensor);
  } else if (t.code == kDLInt) {
    if (t.bits == 8) StoreConverted<int8_t>(values, tensor);
    if (t.bits == 16) StoreConverted<int16_t>(values, tensor);
    if (t.bits == 32) StoreConverted<int32_t>(values, tensor);
    if (t.bits == 64) StoreConverted<int64_t>(values, tensor);
  } else if (t.code == kDLUInt) {
    if (t.bits == 8) StoreConverted<uint8_t>(values, tensor);
    if (t.bits == 16) StoreConverted<uint16_t>(values, tensor);
    if (t.bits == 32) StoreConverted<uint32_t>(values, tensor);
    if (t.bits == 64) StoreConverted<uint64_t>(values, tensor);
  } else {
    StoreConverted<uint8_t>(values, tensor);  // bool: one byte, 0 or 1
  }
}

// Builds the tensor from the typed field that holds its values, after checking their count
// (before allocating, so that corrupt dims cannot ask for huge memory).
template <typename Field>
absl::StatusOr<Tensor> FromField(const Field& values, const char* field_name, DLDataType dtype,
                                 std::vector<int64_t> shape) {
  absl::StatusOr<int64_t> bytes = TensorBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  if (values.size() != *bytes / DTypeBytes(dtype)) {
    return Invalid(absl::StrCat(field_name, " has ", values.size(), " values, expected ",
                                *bytes / DTypeBytes(dtype)));
  }
  absl::StatusOr<Tensor> tensor = MakeTensor(dtype, std::move(shape));
  if (tensor.ok()) StoreField(values, &*tensor);
  return tensor;
}

absl::StatusOr<Tensor> FromTypedData(const onnx::TensorProto& proto, DLDataType dtype,
                                     std::vector<int64_t> shape) {
  switch (proto.data_type()) {
    case onnx::TensorProto::FLOAT:
      return FromField(proto.float_data(), "float_data", dtype, std::move(shape));
    case onnx::TensorProto::DOUBLE:
      return FromField(proto.double_data(), "double_data", dtype, std::move(shape));
    case onnx::TensorProto::INT64:
      return FromField(proto.int64_data(), "int64_data", dtype, std::move(shape));
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      return FromField(proto.uint64_data(), "uint64_data", dtype, std::move(shape));
    default:
      return FromField(proto.int32_data(), "int32_data", dtype, std::move(shape));
  }
}

// Builds a tensor from little-endian bytes, checking their size before allocating.
absl::StatusOr<Tensor> FromRawBytes(absl::string_view data, const char* what, DLDataType dtype,
                                    std::vector<int64_t> shape) {
  absl::StatusOr<int64_t> bytes = TensorBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  if (static_cast<int64_t>(data.size()) != *bytes) {
    return Invalid(absl::StrCat(what, " has ", data.size(), " bytes, expected ", *bytes));
  }
  absl::StatusOr<Tensor> tensor = MakeTensor(dtype, std::move(shape));
  // memcpy must not see the null pointers of empty buffers.
  if (tensor.ok() && !data.empty()) std::memcpy(tensor->data.data(), data.data(), data.size());
  return tensor;
}

}  // namespace

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

DLTensor Tensor::View() {
  DLTensor view{};
  view.data = data.data();
  view.device = {kDLCPU, 0};
  view.ndim = static_cast<int>(shape.size());
  view.dtype = dtype;
  view.shape = shape.data();
  return view;
}

int64_t DTypeBytes(DLDataType dtype) {
  return kiln_dtype_name(dtype) == nullptr ? 0 : dtype.bits / 8;
}

absl::StatusOr<int64_t> TensorBytes(DLDataType dtype, const std::vector<int64_t>& shape) {
  int64_t bytes = DTypeBytes(dtype);
  if (bytes == 0) return Invalid(absl::StrCat("unsupported dtype ", DTypeText(dtype)));
  for (int64_t d : shape) {
    // Checked: a corrupt file must not turn into a wrapped-around size.
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) {
      return Invalid(absl::StrCat("bad tensor shape [", absl::StrJoin(shape, ", "), "]"));
    }
  }
  return bytes;
}

absl::StatusOr<Tensor> MakeTensor(DLDataType dtype, std::vector<int64_t> shape) {
  absl::StatusOr<int64_t> bytes = TensorBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  try {
    tensor.data.resize(static_cast<size_t>(*bytes));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", *bytes, " bytes"));
  }
  return tensor;
}

absl::StatusOr<Tensor> ParseNpy(std::string_view bytes) {
  absl::string_view header, data;
  absl::Status split = SplitNpy(AsAbsl(bytes), &header, &data);
  if (!split.ok()) return split;
  absl::StatusOr<absl::string_view> descr = NpyHeaderValue(header, "descr");
  absl::StatusOr<absl::string_view> fortran = NpyHeaderValue(header, "fortran_order");
  absl::StatusOr<absl::string_view> shape_text = NpyHeaderValue(header, "shape");
  for (const auto* value : {&descr, &fortran, &shape_text}) {
    if (!value->ok()) return value->status();
  }
  if (*fortran != "False") return Invalid("Fortran-order arrays are not supported");
  absl::StatusOr<DLDataType> dtype = ParseNpyDescr(descr->substr(1, descr->size() - 2));
  if (!dtype.ok()) return dtype.status();
  absl::StatusOr<std::vector<int64_t>> shape = ParseNpyShape(*shape_text);
  if (!shape.ok()) return shape.status();
  return FromRawBytes(data, "data", *dtype, *std::move(shape));
}

absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor) {
  const char* descr = NpyDescrFor(tensor.dtype);
  if (descr == nullptr) return Invalid(absl::StrCat("unsupported dtype ", DTypeText(tensor.dtype)));
  char order = tensor.dtype.bits == 8 ? '|' : '<';
  std::string header =
      absl::StrCat("{'descr': '", std::string(1, order), descr,
                   "', 'fortran_order': False, 'shape': ", NpyShapeText(tensor.shape), ", }");
  // Version 1 unless the header outgrows its 2-byte length; data starts 64-byte aligned.
  size_t prefix = header.size() + 1 > 65535 - 64 ? 12 : 10;
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header.push_back('\n');
  std::string out(kNpyMagic);
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<char>(header.size() >> (8 * i)));
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size());
  return out;
}

absl::StatusOr<Tensor> ParseTensorProto(std::string_view bytes) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Invalid("not a valid ONNX TensorProto");
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return Invalid("TensorProto with external data is not supported");
  }
  const OnnxDType* found = nullptr;
  for (const OnnxDType& d : kOnnxDTypes) {
    if (d.onnx == proto.data_type()) found = &d;
  }
  if (found == nullptr) {
    return Invalid(absl::StrCat("unsupported TensorProto data type ",
                                onnx::TensorProto::DataType_Name(proto.data_type()), " (",
                                proto.data_type(), ")"));
  }
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  if (proto.has_raw_data()) return FromRawBytes(proto.raw_data(), "raw_data", found->dtype, shape);
  return FromTypedData(proto, found->dtype, std::move(shape));
}

absl::StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<Tensor> tensor;
  if (absl::StartsWith(*bytes, kNpyMagic) || absl::EndsWith(path, ".npy")) {
    tensor = ParseNpy(*bytes);
  } else if (absl::EndsWith(path, ".pb")) {
    tensor = ParseTensorProto(*bytes);
  } else {
    tensor = Invalid("unknown tensor file format (expected .npy or an ONNX TensorProto .pb)");
  }
  if (!tensor.ok()) return WithPath(path, tensor.status());
  return tensor;
}

absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor) {
  absl::StatusOr<std::string> bytes = SerializeNpy(tensor);
  if (!bytes.ok()) return WithPath(path, bytes.status());
  return WriteFile(path, *bytes);
}

}  // namespace kiln::client
