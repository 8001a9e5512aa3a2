#include "compiler/frontend/external_data.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/arith/check.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

// Protobuf refuses to serialize or parse a message of 2 GiB or more.
constexpr uint64_t kMaxModelBytes = INT_MAX;

// Calls `visit` on every TensorProto of a model, with words that say where it sits for tensors
// that have no name of their own (a Constant's value usually has none).
class TensorWalker {
 public:
  using Visit = absl::FunctionRef<absl::Status(onnx::TensorProto&, const std::string& where)>;
  explicit TensorWalker(Visit visit) : visit_(visit) {}

  absl::Status Model(onnx::ModelProto& model) {
    KILN_RETURN_IF_ERROR(Graph(*model.mutable_graph()));
    for (onnx::FunctionProto& function : *model.mutable_functions()) {
      for (onnx::NodeProto& node : *function.mutable_node()) KILN_RETURN_IF_ERROR(Node(node));
    }
    for (onnx::TrainingInfoProto& training : *model.mutable_training_info()) {
      KILN_RETURN_IF_ERROR(Graph(*training.mutable_initialization()));
      KILN_RETURN_IF_ERROR(Graph(*training.mutable_algorithm()));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Graph(onnx::GraphProto& graph) {
    std::string where = absl::StrCat("an initializer of graph '", graph.name(), "'");
    for (onnx::TensorProto& tensor : *graph.mutable_initializer()) {
      KILN_RETURN_IF_ERROR(visit_(tensor, where));
    }
    for (onnx::SparseTensorProto& sparse : *graph.mutable_sparse_initializer()) {
      KILN_RETURN_IF_ERROR(Sparse(sparse, where));
    }
    for (onnx::NodeProto& node : *graph.mutable_node()) KILN_RETURN_IF_ERROR(Node(node));
    return absl::OkStatus();
  }

  absl::Status Node(onnx::NodeProto& node) {
    for (onnx::AttributeProto& attr : *node.mutable_attribute()) {
      std::string where = absl::StrCat("attribute '", attr.name(), "' of node '", node.name(), "'");
      if (attr.has_t()) KILN_RETURN_IF_ERROR(visit_(*attr.mutable_t(), where));
      for (onnx::TensorProto& tensor : *attr.mutable_tensors()) {
        KILN_RETURN_IF_ERROR(visit_(tensor, where));
      }
      if (attr.has_sparse_tensor())
        KILN_RETURN_IF_ERROR(Sparse(*attr.mutable_sparse_tensor(), where));
      for (onnx::SparseTensorProto& sparse : *attr.mutable_sparse_tensors()) {
        KILN_RETURN_IF_ERROR(Sparse(sparse, where));
      }
      if (attr.has_g()) KILN_RETURN_IF_ERROR(Graph(*attr.mutable_g()));
      for (onnx::GraphProto& graph : *attr.mutable_graphs()) KILN_RETURN_IF_ERROR(Graph(graph));
    }
    return absl::OkStatus();
  }

  absl::Status Sparse(onnx::SparseTensorProto& sparse, const std::string& where) {
    if (sparse.has_values()) KILN_RETURN_IF_ERROR(visit_(*sparse.mutable_values(), where));
    if (sparse.has_indices()) KILN_RETURN_IF_ERROR(visit_(*sparse.mutable_indices(), where));
    return absl::OkStatus();
  }

  Visit visit_;
};

std::string LocationOf(const onnx::TensorProto& tensor) {
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    if (entry.key() == "location") return entry.value();
  }
  return "";
}

// "tensor 'w' (external data 'w.bin')": every error about a tensor's external data starts so.
std::string TensorLabel(const onnx::TensorProto& tensor, const std::string& where) {
  std::string name = tensor.name().empty() ? absl::StrCat("a tensor in ", where)
                                           : absl::StrCat("tensor '", tensor.name(), "'");
  return absl::StrCat(name, " (external data '", LocationOf(tensor), "')");
}

// The external_data entries ONNX defines; `checksum` is not checked.
struct ExternalRef {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;  // absent: to the end of the file
};

absl::StatusOr<uint64_t> ParseByteCount(const std::string& key, const std::string& value) {
  uint64_t n = 0;
  if (value.empty() || !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(value, &n) || n > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " '", value, "' is not a byte count (0 to 2^63-1)"));
  }
  return n;
}

absl::StatusOr<ExternalRef> ParseExternalRef(const onnx::TensorProto& tensor) {
  ExternalRef ref;
  bool has_location = false;
  bool has_offset = false;
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    const std::string& key = entry.key();
    bool repeated = false;
    if (key == "location") {
      repeated = std::exchange(has_location, true);
      ref.location = entry.value();
    } else if (key == "offset") {
      repeated = std::exchange(has_offset, true);
      KILN_ASSIGN_OR_RETURN(ref.offset, ParseByteCount(key, entry.value()));
    } else if (key == "length") {
      repeated = ref.length.has_value();
      KILN_ASSIGN_OR_RETURN(ref.length, ParseByteCount(key, entry.value()));
    } else if (key != "checksum") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", key, "' (ONNX defines location, offset, length and checksum)"));
    }
    if (repeated) {
      return absl::InvalidArgumentError(absl::StrCat("key '", key, "' is repeated"));
    }
  }
  if (ref.location.empty()) return absl::InvalidArgumentError("no location is given");
  return ref;
}

// Bits per element (4-bit types pack two to a byte); nullopt for STRING, whose size is not
// fixed. Types newer than this ONNX release are named by number.
absl::StatusOr<std::optional<uint64_t>> ElementBits(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case 17:  // FLOAT8E4M3FN
    case 18:  // FLOAT8E4M3FNUZ
    case 19:  // FLOAT8E5M2
    case 20:  // FLOAT8E5M2FNUZ
      return 8;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
      return 16;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 32;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::COMPLEX64:
      return 64;
    case onnx::TensorProto::COMPLEX128:
      return 128;
    case 21:  // UINT4
    case 22:  // INT4
    case 23:  // FLOAT4E2M1
      return 4;
    case onnx::TensorProto::STRING:
      return std::nullopt;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown element type ", data_type));
  }
}

// The byte count the tensor's type and dims call for; nullopt where the size is not fixed.
absl::StatusOr<std::optional<uint64_t>> ExpectedBytes(const onnx::TensorProto& tensor) {
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> element_bits, ElementBits(tensor.data_type()));
  if (!element_bits) return std::nullopt;
  uint64_t bits = *element_bits;
  for (int64_t d : tensor.dims()) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension ", d));
    if (__builtin_mul_overflow(bits, static_cast<uint64_t>(d), &bits)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dims [", absl::StrJoin(tensor.dims(), ", "), "] are too large"));
    }
  }
  return bits / 8 + (bits % 8 != 0);
}

// Both canonical; the folder itself counts as inside (it is then refused as no regular file).
bool IsInside(const fs::path& path, const fs::path& dir) {
  return std::mismatch(dir.begin(), dir.end(), path.begin(), path.end()).first == dir.end();
}

// The file the location names, checked to lie inside `dir` (canonical) after every link is
// followed, and to be a regular file.
absl::StatusOr<fs::path> ResolveLocation(const std::string& location, const fs::path& dir) {
  if (location.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("the location contains a NUL character");
  }
  fs::path relative(location);
  if (relative.has_root_path()) {
    return absl::InvalidArgumentError(
        "the location is absolute; it must be relative to the model's folder");
  }
  for (const fs::path& part : relative) {
    if (part == "..") {
      return absl::InvalidArgumentError(
          "the location contains '..'; it must stay inside the model's folder");
    }
  }
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(dir / relative, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("the location cannot be resolved: ", ec.message()));
  }
  if (!IsInside(resolved, dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the location resolves through a link to '", resolved.string(),
                     "', outside the model's folder '", dir.string(), "'"));
  }
  fs::file_status status = fs::status(resolved, ec);
  if (!fs::exists(status)) return absl::InvalidArgumentError("no such file");
  if (!fs::is_regular_file(status)) {
    return absl::InvalidArgumentError("the location is not a regular file");
  }
  return resolved;
}

// Reads one tensor's external data into raw_data. `model_bytes` is the model's serialized size
// so far, kept under protobuf's limit.
absl::Status InlineTensor(onnx::TensorProto& tensor, const fs::path& dir, uint64_t& model_bytes) {
  KILN_ASSIGN_OR_RETURN(ExternalRef ref, ParseExternalRef(tensor));
  KILN_ASSIGN_OR_RETURN(fs::path file, ResolveLocation(ref.location, dir));
  std::error_code ec;
  uint64_t size = fs::file_size(file, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot read the file: ", ec.message()));
  if (ref.offset > size) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset ", ref.offset, " is past the end of the file (", size, " bytes)"));
  }
  if (ref.length && *ref.length > size - ref.offset) {
    return absl::InvalidArgumentError(absl::StrCat("offset ", ref.offset, " + length ", *ref.length,
                                                   " is past the end of the file (", size,
                                                   " bytes)"));
  }
  uint64_t length = ref.length.value_or(size - ref.offset);
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> expected, ExpectedBytes(tensor));
  if (expected && *expected != length) {
    auto type = static_cast<onnx::TensorProto::DataType>(tensor.data_type());
    return absl::InvalidArgumentError(absl::StrCat(
        length, " bytes of external data, but a ", onnx::TensorProto::DataType_Name(type),
        " tensor of dims [", absl::StrJoin(tensor.dims(), ", "), "] has ", *expected));
  }
  if (length > kMaxModelBytes - std::min(model_bytes, kMaxModelBytes)) {
    return absl::ResourceExhaustedError(
        "with its external data inlined, the model would pass protobuf's 2 GiB limit");
  }
  std::string data(length, '\0');
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(ref.offset));
  in.read(data.data(), static_cast<std::streamsize>(length));
  if (!in || static_cast<uint64_t>(in.gcount()) != length) {
    return absl::DataLossError(
        absl::StrCat("could not read ", length, " bytes at offset ", ref.offset));
  }
  model_bytes += length;
  tensor.set_raw_data(std::move(data));
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::DEFAULT);
  return absl::OkStatus();
}

bool HasExternalData(onnx::ModelProto& model) {
  bool found = false;
  TensorWalker([&](onnx::TensorProto& tensor, const std::string&) {
    found = found || tensor.data_location() == onnx::TensorProto::EXTERNAL;
    return absl::OkStatus();
  })
      .Model(model)
      .IgnoreError();
  return found;
}

}  // namespace

absl::Status InlineExternalData(onnx::ModelProto& model, const fs::path& model_dir) {
  std::error_code ec;
  fs::path dir = fs::canonical(model_dir.empty() ? fs::path(".") : model_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("model folder '", model_dir.string(), "': ", ec.message()));
  }
  uint64_t model_bytes = model.ByteSizeLong();
  return TensorWalker([&](onnx::TensorProto& tensor, const std::string& where) {
           if (tensor.data_location() != onnx::TensorProto::EXTERNAL) return absl::OkStatus();
           std::string label = TensorLabel(tensor, where);
           absl::Status status = InlineTensor(tensor, dir, model_bytes);
           if (status.ok()) return status;
           return absl::Status(status.code(), absl::StrCat(label, ": ", status.message()));
         })
      .Model(model);
}

absl::StatusOr<std::string> InlineExternalDataOfModelFile(std::string model_bytes,
                                                          const fs::path& model_path) {
  onnx::ModelProto model;
  if (model_bytes.size() > kMaxModelBytes ||
      !model.ParseFromArray(model_bytes.data(), static_cast<int>(model_bytes.size())) ||
      !HasExternalData(model)) {
    return model_bytes;
  }
  absl::Status status = InlineExternalData(model, model_path.parent_path());
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("model '", model_path.string(), "': ", status.message()));
  }
  if (model.ByteSizeLong() > kMaxModelBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("model '", model_path.string(), "': with its external data inlined it has ",
                     model.ByteSizeLong(), " bytes, past protobuf's 2 GiB limit"));
  }
  std::string inlined;
  if (!model.SerializeToString(&inlined)) {
    return absl::InternalError(
        absl::StrCat("model '", model_path.string(), "': serializing the inlined model failed"));
  }
  return inlined;
}

absl::Status ExternalDataNotInlined(const onnx::TensorProto& tensor) {
  return absl::InvalidArgumentError(absl::StrCat(
      "external data '", LocationOf(tensor),
      "' must be inlined by the client (the kiln CLI does this when it reads the model); kilnd "
      "never reads files that a model names"));
}

}  // namespace kiln::frontend
