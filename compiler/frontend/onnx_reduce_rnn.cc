// ONNX RNN, GRU and LSTM: every attribute made explicit (direction, layout, hidden_size,
// one lower-case activation with its alpha and beta per function and direction).
#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_reduce_internal.h"

namespace kiln::frontend {
namespace {

struct ActivationDefaults {
  const char* name;
  bool uses_alpha, uses_beta;
  double alpha, beta;
};

// The activations ONNX recurrent ops accept, with their operators' default parameters.
const ActivationDefaults kActivations[] = {
    {"relu", false, false, 0, 0},         {"tanh", false, false, 0, 0},
    {"sigmoid", false, false, 0, 0},      {"affine", true, true, 1.0, 0.0},
    {"leakyrelu", true, false, 0.01, 0},  {"thresholdedrelu", true, false, 1.0, 0},
    {"scaledtanh", true, true, 1.0, 1.0}, {"hardsigmoid", true, true, 0.2, 0.5},
    {"elu", true, false, 1.0, 0},         {"softsign", false, false, 0, 0},
    {"softplus", false, false, 0, 0},
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Activation names with explicit alpha and beta. The ONNX lists of alphas and betas are
// consumed in order by the activations that take one.
absl::Status AddActivations(const ImportContext& ctx, std::vector<std::string> defaults,
                            int64_t dirs, ir::Attrs& attrs) {
  std::vector<std::string> names = ctx.StringsAttr("activations");
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == defaults.size() && dirs == 2) {
    names.insert(names.end(), names.begin(), names.end());
  }
  if (names.size() != defaults.size() * dirs) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", defaults.size() * dirs, " activations, got ", names.size()));
  }
  std::vector<float> alphas = ctx.FloatsAttr("activation_alpha");
  std::vector<float> betas = ctx.FloatsAttr("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<double> alpha, beta;
  for (std::string& name : names) {
    name = Lower(name);
    const ActivationDefaults* def = nullptr;
    for (const ActivationDefaults& a : kActivations) {
      if (name == a.name) def = &a;
    }
    if (!def) return absl::InvalidArgumentError(absl::StrCat("unknown activation '", name, "'"));
    alpha.push_back(def->uses_alpha && next_alpha < alphas.size() ? alphas[next_alpha++]
                                                                  : def->alpha);
    beta.push_back(def->uses_beta && next_beta < betas.size() ? betas[next_beta++] : def->beta);
  }
  attrs["activations"] = names;
  attrs["activation_alpha"] = alpha;
  attrs["activation_beta"] = beta;
  return absl::OkStatus();
}

absl::Status ConvertRecurrent(const std::string& op, ImportContext& ctx) {
  int num_args = op == "lstm" ? 8 : 6;
  std::vector<ir::Expr> args;
  for (int i = 0; i < num_args; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr arg, i < 3 ? ctx.Input(i) : ctx.OptionalInput(i));
    args.push_back(arg);
  }
  std::string direction = ctx.StringAttr("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return absl::InvalidArgumentError(absl::StrCat("unknown direction '", direction, "'"));
  }
  int64_t hidden = ctx.IntAttr("hidden_size", -1);
  const ir::StructInfo& r = args[2]->struct_info;
  if (hidden < 0 && r.shape && r.ndim == 3 && (*r.shape)[2]->kind == arith::ExprKind::kIntImm) {
    hidden = (*r.shape)[2]->int_value;  // R is [num_directions, gates * hidden, hidden]
  }
  if (hidden <= 0) return absl::InvalidArgumentError("hidden_size must be given and positive");
  ir::Attrs attrs = {
      {"hidden_size", hidden}, {"direction", direction}, {"layout", ctx.IntAttr("layout", 0)}};
  if (ctx.Attr("clip")) attrs["clip"] = static_cast<double>(ctx.FloatAttr("clip", 0));
  std::vector<std::string> defaults = {"tanh"};
  if (op == "gru") {
    defaults = {"sigmoid", "tanh"};
    attrs["linear_before_reset"] = ctx.IntAttr("linear_before_reset", 0);
  } else if (op == "lstm") {
    defaults = {"sigmoid", "tanh", "tanh"};
    attrs["input_forget"] = ctx.IntAttr("input_forget", 0);
  }
  KILN_RETURN_IF_ERROR(AddActivations(ctx, defaults, direction == "bidirectional" ? 2 : 1, attrs));
  return ctx.EmitTupleOutputs(op, std::move(args), std::move(attrs));
}

}  // namespace

void RegisterRecurrentConverters(ConverterTable& table) {
  table["RNN"] = [](ImportContext& ctx) { return ConvertRecurrent("rnn", ctx); };
  table["GRU"] = [](ImportContext& ctx) { return ConvertRecurrent("gru", ctx); };
  table["LSTM"] = [](ImportContext& ctx) { return ConvertRecurrent("lstm", ctx); };
}

}  // namespace kiln::frontend
