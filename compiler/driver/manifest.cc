#include "compiler/driver/manifest.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "compiler/driver/driver.h"
#include "runtime/include/kiln/artifact_abi.h"

namespace kiln::driver {
namespace {

struct TensorDesc {
  std::string name;
  const ir::StructInfo* info;
};

std::vector<TensorDesc> Inputs(const ir::Function& main) {
  std::vector<TensorDesc> out;
  for (size_t i = 0; i < main.params.size(); ++i) {
    out.push_back({main.input_names[i], &main.params[i]->struct_info});
  }
  return out;
}

std::vector<TensorDesc> Outputs(const ir::Function& main) {
  std::vector<TensorDesc> out;
  bool tuple = main.result->kind == ir::ExprKind::kTuple;
  for (size_t i = 0; i < main.output_names.size(); ++i) {
    const ir::Expr& value = tuple ? main.result->args[i] : main.result;
    out.push_back({main.output_names[i], &value->struct_info});
  }
  return out;
}

// Names in the signature are whitespace-separated tokens.
std::string Token(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (std::isspace(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

std::string DimText(const arith::PrimExpr& dim) {
  return absl::StrReplaceAll(arith::ToString(dim), {{" ", ""}});
}

// The dims of a tensor as imported; "?" each where only its rank is known (a loop-carried
// value whose shape the importer could not state; compiled code checks it at run time).
std::vector<std::string> DimTexts(const ir::StructInfo& info) {
  if (!info.shape) return std::vector<std::string>(std::max(info.ndim, 0), "?");
  std::vector<std::string> dims;
  for (const arith::PrimExpr& d : *info.shape) dims.push_back(DimText(d));
  return dims;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrCat("\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonDims(const ir::StructInfo& info) {
  std::vector<std::string> dims;
  for (const std::string& d : DimTexts(info)) {
    bool number = !d.empty() && std::all_of(d.begin(), d.end(), ::isdigit);
    dims.push_back(number ? d : JsonString(d));
  }
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::string JsonTensors(const std::vector<TensorDesc>& tensors) {
  std::vector<std::string> items;
  for (const TensorDesc& t : tensors) {
    items.push_back(absl::StrCat("    {\"name\": ", JsonString(t.name), ", \"dtype\": \"",
                                 t.info->dtype.ToString(), "\", \"shape\": ", JsonDims(*t.info),
                                 "}"));
  }
  return absl::StrCat("[\n", absl::StrJoin(items, ",\n"), "\n  ]");
}

std::vector<std::string> SymbolNames(const ir::Function& main) {
  std::vector<std::string> names;
  std::set<const arith::ExprNode*> seen;
  for (const ir::Expr& p : main.params) {
    for (const arith::PrimExpr& d : *p->struct_info.shape) {
      for (const arith::PrimExpr& v : arith::FreeVars(d)) {
        if (seen.insert(v.get()).second) names.push_back(JsonString(v->name));
      }
    }
  }
  return names;
}

}  // namespace

std::string SignatureText(const ir::Function& main) {
  std::string out = "kiln-signature 1\n";
  auto add = [&](const char* kind, const std::vector<TensorDesc>& tensors) {
    for (const TensorDesc& t : tensors) {
      absl::StrAppend(&out, kind, " ", Token(t.name), " ", t.info->dtype.ToString(), " ",
                      t.info->ndim);
      for (const std::string& d : DimTexts(*t.info)) absl::StrAppend(&out, " ", d);
      out += "\n";
    }
  };
  add("input", Inputs(main));
  add("output", Outputs(main));
  return out;
}

// A byte count: a number when constant (no symbolic dims, or all bounded), else its formula
// in the inputs' symbolic dims as a string ("256*batch").
static std::string JsonSize(const arith::PrimExpr& bytes) {
  if (!bytes) return "0";
  if (bytes->kind == arith::ExprKind::kIntImm) return absl::StrCat(bytes->int_value);
  return JsonString(DimText(bytes));
}

std::string ManifestJson(const ir::Function& main, const ir::Target& target,
                         const ManifestInfo& info) {
  std::string device =
      info.device.empty() ? "" : absl::StrCat(",\n  \"device\": ", JsonString(info.device));
  // Only artifacts that call a library say so: the machine that loads them must have it.
  std::vector<std::string> names;
  for (const std::string& library : info.libraries) names.push_back(JsonString(library));
  std::string libraries =
      names.empty() ? "" : absl::StrCat(",\n  \"libraries\": [", absl::StrJoin(names, ", "), "]");
  return absl::StrCat("{\n  \"format\": \"kiln-artifact\",\n  \"abi_version\": ",
                      info.device.empty() ? KILN_ABI_VERSION_CPU : KILN_ABI_VERSION, device,
                      ",\n  \"artifact\": ", JsonString(info.artifact_file),
                      ",\n  \"artifact_sha256\": ", JsonString(info.artifact_sha256),
                      ",\n  \"target\": ", JsonString(target.preset),
                      ",\n  \"target_canonical\": ", JsonString(target.Canonical()),
                      ",\n  \"compiler_version\": ", JsonString(CompilerVersion()),
                      ",\n  \"options\": ", JsonString(info.options),
                      ",\n  \"workspace_bytes\": ", JsonSize(info.workspace_bytes),
                      ",\n  \"workspace_bytes_without_reuse\": ", JsonSize(info.no_reuse_bytes),
                      ",\n  \"symbols\": [", absl::StrJoin(SymbolNames(main), ", "), "]", libraries,
                      ",\n  \"inputs\": ", JsonTensors(Inputs(main)),
                      ",\n  \"outputs\": ", JsonTensors(Outputs(main)), "\n}\n");
}

}  // namespace kiln::driver
