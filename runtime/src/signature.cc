#include "runtime/src/signature.h"

#include <charconv>
#include <sstream>

#include "kiln/runtime.h"

namespace kiln::runtime {
namespace {

struct NamedDType {
  const char* name;
  DLDataType dtype;
};

constexpr NamedDType kDTypes[] = {
    {"f16", {kDLFloat, 16, 1}}, {"f32", {kDLFloat, 32, 1}}, {"f64", {kDLFloat, 64, 1}},
    {"i8", {kDLInt, 8, 1}},     {"i16", {kDLInt, 16, 1}},   {"i32", {kDLInt, 32, 1}},
    {"i64", {kDLInt, 64, 1}},   {"u8", {kDLUInt, 8, 1}},    {"u16", {kDLUInt, 16, 1}},
    {"u32", {kDLUInt, 32, 1}},  {"u64", {kDLUInt, 64, 1}},  {"bool", {KILN_DL_BOOL, 8, 1}},
};

// A dim is static when the whole text is a non-negative decimal integer.
int64_t StaticValue(std::string_view dim) {
  int64_t value = -1;
  auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), value);
  if (ec != std::errc() || end != dim.data() + dim.size() || value < 0) return -1;
  return value;
}

// Parses "input|output <name> <dtype> <ndim> <dim>..." into *spec; returns "" or the problem.
std::string ParseTensorLine(std::istringstream& words, TensorSpec* spec) {
  std::string dtype, ndim_text;
  if (!(words >> spec->name >> dtype >> ndim_text)) return "expected '<name> <dtype> <ndim>'";
  if (!ParseDType(dtype, &spec->dtype)) return "unknown dtype '" + dtype + "'";
  int64_t ndim = StaticValue(ndim_text);
  if (ndim < 0) return "bad rank '" + ndim_text + "'";
  std::string dim;
  while (words >> dim) {
    spec->dims.push_back(dim);
    spec->static_dims.push_back(StaticValue(dim));
  }
  if (static_cast<int64_t>(spec->dims.size()) != ndim) {
    return "tensor '" + spec->name + "' has rank " + ndim_text + " but " +
           std::to_string(spec->dims.size()) + " dims";
  }
  return "";
}

}  // namespace

bool ParseDType(std::string_view name, DLDataType* out) {
  for (const NamedDType& d : kDTypes) {
    if (name == d.name) {
      *out = d.dtype;
      return true;
    }
  }
  return false;
}

const char* DTypeName(DLDataType dtype) {
  for (const NamedDType& d : kDTypes) {
    if (d.dtype.code == dtype.code && d.dtype.bits == dtype.bits && d.dtype.lanes == dtype.lanes) {
      return d.name;
    }
  }
  return nullptr;
}

std::string ParseSignature(std::string_view text, Signature* out) {
  std::istringstream lines{std::string(text)};
  std::string line;
  if (!std::getline(lines, line) || line != "kiln-signature 1") {
    return "line 1: expected 'kiln-signature 1', got '" + line + "'";
  }
  for (int number = 2; std::getline(lines, line); ++number) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;  // blank lines (a trailing newline) carry nothing
    if (kind != "input" && kind != "output") {
      return "line " + std::to_string(number) + ": expected 'input' or 'output', got '" + kind +
             "'";
    }
    TensorSpec spec;
    std::string error = ParseTensorLine(words, &spec);
    if (!error.empty()) return "line " + std::to_string(number) + ": " + error;
    (kind == "input" ? out->inputs : out->outputs).push_back(std::move(spec));
  }
  return "";
}

}  // namespace kiln::runtime
