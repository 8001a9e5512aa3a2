#include "compiler/ir/parser.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/ir/printer.h"

namespace kiln::ir {
namespace {

using arith::ExprKind;

// ---------------------------------------------------------------------------------------
// Lexer

enum class Tok : uint8_t { kIdent, kVar, kGlobal, kInt, kFloat, kHex, kString, kPunct, kEnd };

struct Token {
  Tok kind;
  std::string text;  // decoded: names without their sigil, strings without quotes
  int line, col;
};

// Recursive descent reads best with errors as exceptions; they never leave this file
// (ParseModule turns them into a Status).
struct ParseError {
  std::string message;
};

[[noreturn]] void Fail(int line, int col, const std::string& message) {
  throw ParseError{absl::StrCat(line, ":", col, ": ", message)};
}

std::string Describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd:
      return "end of input";
    case Tok::kVar:
      return "'%" + t.text + "'";
    case Tok::kGlobal:
      return "'@" + t.text + "'";
    case Tok::kString:
      return text::QuoteString(t.text);
    case Tok::kHex:
      return "'0x" + t.text + "'";
    default:
      return "'" + t.text + "'";
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> Run() {
    std::vector<Token> out;
    for (SkipSpace(); i_ < src_.size(); SkipSpace()) out.push_back(Next());
    out.push_back({Tok::kEnd, "", line_, col_});
    return out;
  }

 private:
  char At(size_t k = 0) const { return i_ + k < src_.size() ? src_[i_ + k] : '\0'; }
  void Advance() {
    if (src_[i_++] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
  }
  void SkipSpace() {
    while (i_ < src_.size()) {
      if (std::isspace(static_cast<unsigned char>(At()))) {
        Advance();
      } else if (At() == '/' && At(1) == '/') {
        while (i_ < src_.size() && At() != '\n') Advance();
      } else {
        return;
      }
    }
  }
  static bool IsNameChar(char c, bool dots) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dots && c == '.');
  }
  std::string TakeWhile(bool (*pred)(char)) {
    size_t start = i_;
    while (i_ < src_.size() && pred(At())) Advance();
    return std::string(src_.substr(start, i_ - start));
  }
  std::string Name(bool dots) {
    size_t start = i_;
    while (i_ < src_.size() && IsNameChar(At(), dots)) Advance();
    return std::string(src_.substr(start, i_ - start));
  }
  std::string QuotedString();
  Token Number(int line, int col);
  Token Next();

  std::string_view src_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

std::string Lexer::QuotedString() {
  int line = line_, col = col_;
  Advance();  // the opening quote
  std::string out;
  while (true) {
    if (i_ >= src_.size() || At() == '\n') Fail(line, col, "unterminated string");
    char c = At();
    Advance();
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = At();
    Advance();
    if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'x' && std::isxdigit(static_cast<unsigned char>(At())) &&
               std::isxdigit(static_cast<unsigned char>(At(1)))) {
      out += static_cast<char>(std::stoi(std::string(src_.substr(i_, 2)), nullptr, 16));
      Advance();
      Advance();
    } else if (e == '"' || e == '\\') {
      out += e;
    } else {
      Fail(line_, col_ - 1, absl::StrCat("unknown escape '\\", std::string(1, e), "'"));
    }
  }
}

Token Lexer::Number(int line, int col) {
  auto digits = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (At() == '0' && At(1) == 'x') {
    Advance();
    Advance();
    std::string hex =
        TakeWhile([](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    return {Tok::kHex, hex, line, col};
  }
  std::string text = TakeWhile(digits);
  bool is_float = false;
  if (At() == '.' && std::isdigit(static_cast<unsigned char>(At(1)))) {
    Advance();
    text += "." + TakeWhile(digits);
    is_float = true;
  }
  bool exp_sign = At(1) == '+' || At(1) == '-';
  if ((At() == 'e' || At() == 'E') &&
      std::isdigit(static_cast<unsigned char>(At(exp_sign ? 2 : 1)))) {
    text += At();
    Advance();
    if (exp_sign) {
      text += At();
      Advance();
    }
    text += TakeWhile(digits);
    is_float = true;
  }
  return {is_float ? Tok::kFloat : Tok::kInt, text, line, col};
}

Token Lexer::Next() {
  int line = line_, col = col_;
  char c = At();
  if (c == '%' || c == '@') {
    Advance();
    Tok kind = c == '%' ? Tok::kVar : Tok::kGlobal;
    if (At() == '"') return {kind, QuotedString(), line, col};
    std::string name = Name(c == '@');
    if (name.empty())
      Fail(line, col, absl::StrCat("expected a name after '", std::string(1, c), "'"));
    return {kind, name, line, col};
  }
  if (c == '"') return {Tok::kString, QuotedString(), line, col};
  if (std::isdigit(static_cast<unsigned char>(c))) return Number(line, col);
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_')
    return {Tok::kIdent, Name(true), line, col};
  static const char* const kTwo[] = {"->", "==", "!=", "<=", ">=", "&&", "||"};
  for (const char* p : kTwo) {
    if (c == p[0] && At(1) == p[1]) {
      Advance();
      Advance();
      return {Tok::kPunct, p, line, col};
    }
  }
  if (std::string_view("()[]{},:=<>+-*/!.").find(c) != std::string_view::npos) {
    Advance();
    return {Tok::kPunct, std::string(1, c), line, col};
  }
  Fail(line, col, absl::StrCat("unexpected character '", std::string(1, c), "'"));
}

// ---------------------------------------------------------------------------------------
// Parser

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  IRModule Module();

 private:
  // Tokens.
  const Token& Peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool IsPunct(const char* p, size_t k = 0) const {
    return Peek(k).kind == Tok::kPunct && Peek(k).text == p;
  }
  bool IsWord(const char* w, size_t k = 0) const {
    return Peek(k).kind == Tok::kIdent && Peek(k).text == w;
  }
  const Token& Take() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  [[noreturn]] void Expected(const std::string& what) const {
    Fail(Peek().line, Peek().col, absl::StrCat("expected ", what, ", found ", Describe(Peek())));
  }
  void Expect(const char* p) {
    if (!IsPunct(p)) Expected(absl::StrCat("'", p, "'"));
    Take();
  }
  void ExpectWord(const char* w) {
    if (!IsWord(w)) Expected(absl::StrCat("'", w, "'"));
    Take();
  }
  bool Accept(const char* p) {
    if (!IsPunct(p)) return false;
    Take();
    return true;
  }
  std::string Ident(const char* what) {
    if (Peek().kind != Tok::kIdent) Expected(what);
    return Take().text;
  }
  int64_t Int(const char* what);
  DataType Dtype();
  // Runs `item` for each element of a comma-separated list up to `close`.
  template <typename Fn>
  void List(const char* close, Fn item) {
    while (!Accept(close)) {
      item();
      if (!IsPunct(close)) Expect(",");
    }
  }

  // Module level.
  void Constants();
  std::vector<uint8_t> ConstantBytes(const NDArray& shape_only);
  void Def();
  void PrimFuncDecl();

  // Graph level.
  Function FunctionRest(std::string name);
  void FunctionNames(Function* func);
  void BindingBlocks(Function* func);
  Binding ParseBinding();
  StructInfo Info();
  Expr ParseExpr(const StructInfo* bound_info);
  Expr Primary(const StructInfo* bound_info);
  Expr CallExpr(const StructInfo* bound_info);
  AttrValue Attr();
  double FloatValue();

  // Loop level.
  PrimExpr Prim(int min_precedence = 1);
  PrimExpr Unary();
  PrimExpr NamedPrim();
  std::vector<PrimExpr> Prims(const char* close);
  PrimExpr LookupVar(const std::string& name);
  Buffer LookupBuffer(const Token& name);
  Buffer BufferDecl();
  Stmt Block();
  Stmt StmtsUntilBrace();
  Stmt ScopedBody();
  Stmt ParseStmt(bool* ends_block);
  void DeclareScalars();
  // Runs `body` with `name` bound to `value` in `scope`, then restores the outer binding.
  template <typename T, typename Fn>
  Stmt Scoped(std::map<std::string, T>* scope, const std::string& name, T value, Fn body) {
    std::optional<T> outer;
    if (auto it = scope->find(name); it != scope->end()) outer = it->second;
    (*scope)[name] = std::move(value);
    Stmt stmt = body();
    if (outer) {
      (*scope)[name] = *outer;
    } else {
      scope->erase(name);
    }
    return stmt;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  IRModule module_;
  std::vector<std::shared_ptr<const NDArray>> consts_;
  // Scopes: the graph variables and symbolic variables of one def, or the variables and
  // buffers of one PrimFunc. A binding site replaces the name's entry.
  std::map<std::string, Expr> graph_vars_;
  std::map<std::string, PrimExpr> vars_;
  std::map<std::string, Buffer> buffers_;
};

int64_t Parser::Int(const char* what) {
  bool negative = Accept("-");
  if (Peek().kind != Tok::kInt) Expected(what);
  const Token& t = Take();
  errno = 0;
  unsigned long long magnitude = std::strtoull(t.text.c_str(), nullptr, 10);
  if (errno == ERANGE || magnitude > (negative ? (1ull << 63) : (1ull << 63) - 1)) {
    Fail(t.line, t.col, "integer out of range");
  }
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

DataType Parser::Dtype() {
  if (Peek().kind != Tok::kIdent) Expected("a dtype");
  absl::StatusOr<DataType> dtype = DataType::Parse(Peek().text);
  if (!dtype.ok()) Expected("a dtype (i64, f32, bool, ...)");
  Take();
  return *dtype;
}

// ---- Module level ----------------------------------------------------------------------

IRModule Parser::Module() {
  // Expressions refer to constants by index, and the section comes last: read it first.
  size_t section_start = toks_.size(), section_end = toks_.size();
  int depth = 0;
  for (size_t i = 0; i < toks_.size(); ++i) {
    const Token& t = toks_[i];
    if (t.kind == Tok::kPunct && (t.text == "{" || t.text == "(" || t.text == "[")) ++depth;
    if (t.kind == Tok::kPunct && (t.text == "}" || t.text == ")" || t.text == "]")) --depth;
    if (depth == 0 && t.kind == Tok::kIdent && t.text == "constants") {
      pos_ = section_start = i;
      Constants();
      section_end = pos_;
      break;
    }
  }
  pos_ = 0;
  while (Peek().kind != Tok::kEnd) {
    if (pos_ == section_start) {
      pos_ = section_end;
    } else if (IsWord("def")) {
      Def();
    } else if (IsWord("prim_func") || IsWord("host_func")) {
      PrimFuncDecl();
    } else {
      Expected("'def', 'prim_func', 'host_func' or 'constants'");
    }
  }
  return std::move(module_);
}

void Parser::Constants() {
  ExpectWord("constants");
  Expect("{");
  while (!Accept("}")) {
    bool host = IsWord("host");
    if (host) {
      Take();
      if (module_.constants.size() != consts_.size()) {
        Expected("host constants before the others");
      }
    }
    ExpectWord("const");
    Expect("[");
    const Token& at = Peek();
    if (Int("a constant index") != static_cast<int64_t>(consts_.size())) {
      Fail(at.line, at.col, absl::StrCat("expected constant index ", consts_.size()));
    }
    Expect("]");
    Expect(":");
    NDArray a;
    a.dtype = Dtype();
    Expect("[");
    List("]", [&] {
      const Token& dim = Peek();
      a.shape.push_back(Int("a dimension"));
      // Bounded so that the element count cannot overflow; data that large would not parse.
      if (a.shape.back() < 0 || a.shape.back() > (int64_t{1} << 40) ||
          ShapeProduct(a.shape) > (int64_t{1} << 40)) {
        Fail(dim.line, dim.col, "dimension out of range");
      }
    });
    Expect("=");
    a.bytes = ConstantBytes(a);
    auto shared = std::make_shared<const NDArray>(std::move(a));
    consts_.push_back(shared);
    if (host) module_.constants.push_back(shared);
  }
}

// The bytes as hex (what the printer writes), or a list of element values (handy in tests).
std::vector<uint8_t> Parser::ConstantBytes(const NDArray& shape_only) {
  const Token& at = Peek();
  size_t size = ShapeProduct(shape_only.shape) * shape_only.dtype.bytes();
  if (Peek().kind == Tok::kHex) {
    const std::string& hex = Take().text;
    if (hex.size() != 2 * size) {
      Fail(at.line, at.col,
           absl::StrCat("expected ", size, " bytes of data, found ", hex.size() / 2.0));
    }
    std::vector<uint8_t> bytes(size);
    auto nibble = [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10;
    };
    for (size_t i = 0; i < size; ++i) {
      bytes[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    }
    return bytes;
  }
  NDArray a = NDArray::Zeros(shape_only.dtype, shape_only.shape);
  DataType t = a.dtype;
  bool supported =
      t.code == DataType::kBool || (t.is_float() && t.bits >= 16) || (t.is_int() && t.bits >= 8);
  if (!supported) Fail(at.line, at.col, "write " + t.ToString() + " constants in hex");
  int64_t i = 0;
  Expect("[");
  List("]", [&] {
    const Token& value = Peek();
    if (i >= a.num_elements()) Fail(value.line, value.col, "too many values");
    if (t.is_float()) {
      a.SetDouble(i++, FloatValue());
    } else {
      a.SetInt(i++, Int("an integer"));
    }
  });
  if (i != a.num_elements()) {
    Fail(at.line, at.col, absl::StrCat("expected ", a.num_elements(), " values, found ", i));
  }
  return a.bytes;
}

void Parser::Def() {
  ExpectWord("def");
  if (Peek().kind != Tok::kGlobal) Expected("a function name '@name'");
  const Token& name = Take();
  if (module_.functions.count(name.text)) {
    Fail(name.line, name.col, "function @" + name.text + " is defined twice");
  }
  graph_vars_.clear();
  vars_.clear();
  buffers_.clear();
  module_.functions[name.text] = FunctionRest(name.text);
}

void Parser::PrimFuncDecl() {
  PrimFunc func;
  func.is_host = Take().text == "host_func";
  if (Peek().kind != Tok::kGlobal) Expected("a function name '@name'");
  const Token& name = Take();
  if (module_.prim_funcs.count(name.text)) {
    Fail(name.line, name.col, "prim_func @" + name.text + " is defined twice");
  }
  func.name = name.text;
  vars_.clear();
  buffers_.clear();
  Expect("(");
  DeclareScalars();
  List(")", [&] {
    if (IsPunct("[", 3)) {
      func.buffers.push_back(BufferDecl());
      return;
    }
    const Token& name = Peek();
    std::string scalar = Ident("a parameter");
    Expect(":");
    DataType dtype = Dtype();
    auto it = vars_.find(scalar);
    if (it == vars_.end() || it->second->dtype != dtype) {
      Fail(name.line, name.col, "expected a buffer 'name: dtype[dims]' or a scalar 'name: dtype'");
    }
    func.scalars.push_back(it->second);
  });
  func.body = Block();
  module_.prim_funcs[func.name] = std::move(func);
}

// Buffer shapes name the scalar parameters, which come after the buffers: declare them
// first. A scalar is `name: dtype` followed by ',' or ')'.
void Parser::DeclareScalars() {
  int depth = 0;
  for (size_t k = 0; Peek(k).kind != Tok::kEnd; ++k) {
    if (IsPunct("(", k) || IsPunct("[", k)) ++depth;
    if ((IsPunct(")", k) || IsPunct("]", k)) && --depth < 0) return;
    if (depth != 0 || Peek(k).kind != Tok::kIdent || !IsPunct(":", k + 1) ||
        Peek(k + 2).kind != Tok::kIdent || !(IsPunct(",", k + 3) || IsPunct(")", k + 3))) {
      continue;
    }
    absl::StatusOr<DataType> dtype = DataType::Parse(Peek(k + 2).text);
    if (dtype.ok()) vars_[Peek(k).text] = arith::MakeVar(Peek(k).text, *dtype);
  }
}

// ---- Graph level -------------------------------------------------------------------------

Function Parser::FunctionRest(std::string name) {
  Function func;
  func.name = std::move(name);
  Expect("(");
  List(")", [&] {
    if (Peek().kind != Tok::kVar) Expected("a parameter '%name'");
    std::string var = Take().text;
    Expect(":");
    Expr param = MakeVar(var, Info());
    graph_vars_[var] = param;
    func.params.push_back(param);
  });
  if (IsWord("attrs")) FunctionNames(&func);
  Expect("{");
  BindingBlocks(&func);
  ExpectWord("return");
  func.result = ParseExpr(nullptr);
  Expect("}");
  return func;
}

void Parser::FunctionNames(Function* func) {
  ExpectWord("attrs");
  Expect("(");
  List(")", [&] {
    const Token& key = Peek();
    std::string name = Ident("'input_names' or 'output_names'");
    Expect("=");
    AttrValue value = Attr();
    auto* names = std::get_if<std::vector<std::string>>(&value);
    if (!names || (name != "input_names" && name != "output_names")) {
      Fail(key.line, key.col, "expected input_names or output_names, a list of strings");
    }
    (name == "input_names" ? func->input_names : func->output_names) = std::move(*names);
  });
}

void Parser::BindingBlocks(Function* func) {
  bool bare = false;  // the last block holds bindings written outside any block
  while (!IsWord("return")) {
    if (Peek().kind == Tok::kVar) {
      if (!bare) func->blocks.push_back({.dataflow = false});
      bare = true;
      func->blocks.back().bindings.push_back(ParseBinding());
      continue;
    }
    bare = false;
    BindingBlock block;
    if (IsWord("dataflow") || IsWord("block")) {
      block.dataflow = Take().text == "dataflow";
    } else {
      Expected("'dataflow', 'block', a binding or 'return'");
    }
    Expect("{");
    while (!Accept("}")) {
      if (Peek().kind != Tok::kVar) Expected("a binding '%name: ... = ...' or '}'");
      block.bindings.push_back(ParseBinding());
    }
    func->blocks.push_back(std::move(block));
  }
}

Binding Parser::ParseBinding() {
  std::string name = Take().text;
  Expect(":");
  StructInfo info = Info();
  Expect("=");
  Binding b;
  if (IsWord("match_cast") && IsPunct("(", 1)) {
    Take();
    Take();
    b.match_cast = true;
    b.value = ParseExpr(nullptr);
    Expect(")");
  } else {
    b.value = ParseExpr(&info);
  }
  b.var = MakeVar(name, std::move(info));
  graph_vars_[name] = b.var;
  return b;
}

StructInfo Parser::Info() {
  const Token& head = Peek();
  const char* expected = "struct info (Tensor, Shape, Tuple, Prim or Object)";
  std::string kind = Ident(expected);
  if (kind == "Object") return StructInfo();
  if (kind != "Prim" && kind != "Tuple" && kind != "Shape" && kind != "Tensor") {
    Fail(head.line, head.col, absl::StrCat("expected ", expected, ", found '", kind, "'"));
  }
  Expect("(");
  StructInfo info;
  if (kind == "Prim") {
    info = StructInfo::Prim(Dtype());
  } else if (kind == "Tuple") {
    std::vector<StructInfo> fields;
    List(")", [&] { fields.push_back(Info()); });
    return StructInfo::Tuple(std::move(fields));
  } else {
    info.kind = kind == "Shape" ? StructInfo::Kind::kShape : StructInfo::Kind::kTensor;
    bool has_rank = true;
    if (Accept("[")) {
      info.shape = Prims("]");
      info.ndim = static_cast<int>(info.shape->size());
    } else if (IsWord("ndim")) {
      Take();
      Expect("=");
      info.ndim = static_cast<int>(Int("a rank"));
    } else {
      has_rank = false;
    }
    if (kind == "Tensor") {
      if (has_rank) Expect(",");
      info.dtype = Dtype();
    }
  }
  Expect(")");
  return info;
}

Expr Parser::ParseExpr(const StructInfo* bound_info) {
  Expr e = Primary(bound_info);
  while (Accept("[")) {
    int64_t index = Int("a tuple index");
    Expect("]");
    const StructInfo& t = e->struct_info;
    ExprNode node{.kind = ir::ExprKind::kTupleGetItem, .args = {e}};
    node.index = static_cast<int>(index);
    // An index out of range is the verifier's to report; the value is then opaque.
    if (t.kind == StructInfo::Kind::kTuple && index >= 0 &&
        index < static_cast<int64_t>(t.fields.size())) {
      node.struct_info = t.fields[index];
    }
    e = std::make_shared<const ExprNode>(std::move(node));
  }
  return e;
}

Expr Parser::Primary(const StructInfo* bound_info) {
  const Token& t = Peek();
  if (t.kind == Tok::kVar) {
    auto it = graph_vars_.find(t.text);
    if (it == graph_vars_.end()) Fail(t.line, t.col, "undefined variable %" + t.text);
    Take();
    return it->second;
  }
  if (IsWord("const") && IsPunct("[", 1)) {
    Take();
    Take();
    int64_t k = Int("a constant index");
    if (k < 0 || k >= static_cast<int64_t>(consts_.size())) {
      Fail(t.line, t.col, absl::StrCat("no constant ", k, " in the constants section"));
    }
    Expect("]");
    const std::shared_ptr<const NDArray>& data = consts_[k];
    std::vector<PrimExpr> shape;
    for (int64_t d : data->shape) shape.push_back(arith::IntImm(d));
    ExprNode node{.kind = ir::ExprKind::kConstant,
                  .struct_info = StructInfo::Tensor(std::move(shape), data->dtype),
                  .data = data};
    return std::make_shared<const ExprNode>(std::move(node));
  }
  if (Accept("(")) {
    std::vector<Expr> fields;
    while (!Accept(")")) {
      fields.push_back(ParseExpr(nullptr));
      if (!IsPunct(")")) Expect(",");
    }
    return MakeTuple(std::move(fields));
  }
  if (IsWord("shape") && IsPunct("(", 1) && IsPunct("[", 2)) {
    Take();
    Take();
    Take();
    Expr shape = MakeShapeExpr(Prims("]"));
    Expect(")");
    return shape;
  }
  if ((t.kind == Tok::kIdent || t.kind == Tok::kString) && IsPunct("(", 1)) {
    return CallExpr(bound_info);
  }
  Expected("an expression");
}

Expr Parser::CallExpr(const StructInfo* bound_info) {
  const Token& name = Take();
  ExprNode call{.kind = name.kind == Tok::kIdent && name.text == "if" ? ir::ExprKind::kIf
                                                                      : ir::ExprKind::kCall,
                .name = name.text};
  if (call.kind == ir::ExprKind::kIf) call.name.clear();
  if (bound_info) call.struct_info = *bound_info;
  Expect("(");
  List(")", [&] {
    const Token& t = Peek();
    if (t.kind == Tok::kGlobal) {
      if (!call.callee.empty()) Fail(t.line, t.col, "a call has one callee");
      call.callee = Take().text;
    } else if (IsWord("fn") && (IsPunct("(", 1) || Peek(1).kind == Tok::kGlobal)) {
      Take();
      std::string sub_name = Peek().kind == Tok::kGlobal ? Take().text : "";
      call.subgraphs.push_back(std::make_shared<const Function>(FunctionRest(sub_name)));
    } else if ((t.kind == Tok::kIdent || t.kind == Tok::kString) && IsPunct("=", 1)) {
      std::string key = Take().text;
      Take();
      if (call.attrs.count(key)) Fail(t.line, t.col, "attribute " + key + " given twice");
      call.attrs[key] = Attr();
    } else {
      call.args.push_back(ParseExpr(nullptr));
    }
  });
  if (Accept("->")) call.struct_info = Info();
  return std::make_shared<const ExprNode>(std::move(call));
}

double Parser::FloatValue() {
  bool negative = Accept("-");
  const Token& t = Peek();
  double v;
  if (t.kind == Tok::kInt || t.kind == Tok::kFloat) {
    v = std::strtod(t.text.c_str(), nullptr);
  } else if (IsWord("inf")) {
    v = INFINITY;
  } else if (IsWord("nan")) {
    v = NAN;
  } else {
    Expected("a number");
  }
  Take();
  return negative ? -v : v;
}

AttrValue Parser::Attr() {
  const Token& t = Peek();
  if (t.kind == Tok::kString) return Take().text;
  if (t.kind == Tok::kInt || (IsPunct("-") && Peek(1).kind == Tok::kInt)) return Int("");
  if (!IsPunct("[")) return FloatValue();
  Take();
  std::vector<AttrValue> items;
  List("]", [&] { items.push_back(Attr()); });
  std::string type;
  if (Accept(":")) type = Ident("a list type (i64, f64 or str)");
  if (type.empty() && items.empty()) Expected("':' and the type of an empty list");
  size_t strings = 0, floats = 0;
  for (const AttrValue& item : items) {
    strings += std::holds_alternative<std::string>(item);
    floats += std::holds_alternative<double>(item);
    if (item.index() > 2) Fail(t.line, t.col, "attribute lists do not nest");
  }
  if (strings != 0 && strings != items.size()) {
    Fail(t.line, t.col, "a list holds numbers or strings, not both");
  }
  bool any_string = strings > 0, any_float = floats > 0;
  if (type.empty()) type = any_string ? "str" : any_float ? "f64" : "i64";
  if (type == "str" && (items.empty() || any_string)) {
    std::vector<std::string> out;
    for (AttrValue& item : items) out.push_back(std::get<std::string>(std::move(item)));
    return out;
  }
  if (type == "f64" && !any_string) {
    std::vector<double> out;
    for (const AttrValue& item : items) {
      out.push_back(item.index() == 0 ? std::get<int64_t>(item) : std::get<double>(item));
    }
    return out;
  }
  if (type == "i64" && !any_string && !any_float) {
    std::vector<int64_t> out;
    for (const AttrValue& item : items) out.push_back(std::get<int64_t>(item));
    return out;
  }
  Fail(t.line, t.col, "list elements do not match its type " + type);
}

// ---- PrimExprs -----------------------------------------------------------------------------

struct BinaryOp {
  const char* text;
  ExprKind kind;
  int precedence;
};
constexpr BinaryOp kBinaryOps[] = {
    {"||", ExprKind::kOr, 1}, {"&&", ExprKind::kAnd, 2}, {"==", ExprKind::kEQ, 3},
    {"!=", ExprKind::kNE, 3}, {"<", ExprKind::kLT, 4},   {"<=", ExprKind::kLE, 4},
    {">", ExprKind::kGT, 4},  {">=", ExprKind::kGE, 4},  {"+", ExprKind::kAdd, 5},
    {"-", ExprKind::kSub, 5}, {"*", ExprKind::kMul, 6},  {"/", ExprKind::kDiv, 6},
};

// Precedence climbing; operators are left-associative, as the printer assumes.
PrimExpr Parser::Prim(int min_precedence) {
  PrimExpr lhs = Unary();
  while (true) {
    const BinaryOp* op = nullptr;
    for (const BinaryOp& candidate : kBinaryOps) {
      if (IsPunct(candidate.text) && candidate.precedence >= min_precedence) op = &candidate;
    }
    if (!op) return lhs;
    Take();
    lhs = arith::Binary(op->kind, lhs, Prim(op->precedence + 1));
  }
}

std::vector<PrimExpr> Parser::Prims(const char* close) {
  std::vector<PrimExpr> out;
  List(close, [&] { out.push_back(Prim()); });
  return out;
}

PrimExpr Parser::Unary() {
  if (Accept("!")) return arith::Not(Unary());
  if (Accept("(")) {
    PrimExpr e = Prim();
    Expect(")");
    return e;
  }
  const Token& t = Peek();
  if (t.kind == Tok::kInt || (IsPunct("-") && Peek(1).kind == Tok::kInt)) {
    int64_t v = Int("an integer");
    return arith::IntImm(v, Accept(":") ? Dtype() : DataType::Int());
  }
  if (IsPunct("-") || t.kind == Tok::kFloat || IsWord("inf") || IsWord("nan")) {
    double v = FloatValue();
    return arith::FloatImm(v, Accept(":") ? Dtype() : DataType::Float());
  }
  if (t.kind == Tok::kIdent) return NamedPrim();
  Expected("an expression");
}

PrimExpr Parser::NamedPrim() {
  const Token& name = Take();
  const std::string& n = name.text;
  if (n == "cast" && Accept("<")) {
    DataType dtype = Dtype();
    Expect(">");
    Expect("(");
    PrimExpr value = Prim();
    Expect(")");
    return arith::Cast(dtype, value);
  }
  if (IsPunct("[")) {
    Buffer buffer = LookupBuffer(name);
    Take();
    // Built directly, not with arith::Load: a wrong index count is the verifier's to report.
    DataType dtype = buffer->dtype;
    return std::make_shared<const arith::ExprNode>(arith::ExprNode{
        .kind = ExprKind::kLoad, .dtype = dtype, .args = Prims("]"), .buffer = buffer});
  }
  std::optional<DataType> call_type;
  if (IsPunct(":") && Peek(1).kind == Tok::kIdent && IsPunct("(", 2)) {
    Take();
    call_type = Dtype();
  }
  if (!Accept("(")) return LookupVar(n);
  std::vector<PrimExpr> args = Prims(")");
  static const std::map<std::string, ExprKind> kFunctions = {{"floordiv", ExprKind::kFloorDiv},
                                                             {"floormod", ExprKind::kFloorMod},
                                                             {"min", ExprKind::kMin},
                                                             {"max", ExprKind::kMax}};
  auto fn = kFunctions.find(n);
  if (!call_type && fn != kFunctions.end()) {
    if (args.size() != 2) Fail(name.line, name.col, n + " takes 2 operands");
    return arith::Binary(fn->second, args[0], args[1]);
  }
  if (!call_type && n == "select") {
    if (args.size() != 3) Fail(name.line, name.col, "select takes 3 operands");
    return arith::Select(args[0], args[1], args[2]);
  }
  DataType dtype = call_type ? *call_type : text::DefaultCallType(n, args);
  return arith::Call(dtype, n, std::move(args));
}

// Names not declared in the scope are symbolic variables (i64), created on first use.
PrimExpr Parser::LookupVar(const std::string& name) {
  auto [it, inserted] = vars_.try_emplace(name);
  if (inserted) it->second = arith::MakeVar(name);
  return it->second;
}

Buffer Parser::LookupBuffer(const Token& name) {
  auto it = buffers_.find(name.text);
  if (it == buffers_.end()) Fail(name.line, name.col, "undefined buffer " + name.text);
  return it->second;
}

// ---- Statements ------------------------------------------------------------------------------

Buffer Parser::BufferDecl() {
  std::string name = Ident("a buffer name");
  Expect(":");
  DataType dtype = Dtype();
  Expect("[");
  Buffer b = arith::MakeBuffer(name, dtype, Prims("]"));
  buffers_[name] = b;
  return b;
}

Stmt Parser::Block() {
  Expect("{");
  Stmt body = StmtsUntilBrace();
  Expect("}");
  return body;
}

Stmt Parser::StmtsUntilBrace() {
  std::vector<Stmt> stmts;
  bool ends_block = false;
  while (!ends_block && !IsPunct("}")) stmts.push_back(ParseStmt(&ends_block));
  return ir::Seq(std::move(stmts));
}

// A let's or alloc's body: a braced block, or else the rest of the enclosing block.
Stmt Parser::ScopedBody() { return IsPunct("{") ? Block() : StmtsUntilBrace(); }

Stmt Parser::ParseStmt(bool* ends_block) {
  const Token& head = Peek();
  if (IsWord("for")) {
    Take();
    std::string name = Ident("a loop variable");
    DataType dtype = DataType::Int();
    if (Accept(":")) dtype = Dtype();
    ExpectWord("in");
    ExpectWord("range");
    Expect("(");
    PrimExpr min = Prim();
    Expect(",");
    PrimExpr extent = Prim();
    Expect(")");
    const Token& kind_token = Peek();
    std::string kind =
        Ident("a loop kind (serial, parallel, vectorized, unrolled, gpu_block, gpu_thread)");
    ForKind for_kind = ForKind::kSerial;
    for (ForKind k : kAllForKinds) {
      if (kind == ForKindName(k)) for_kind = k;
    }
    if (kind != ForKindName(for_kind))
      Fail(kind_token.line, kind_token.col, "unknown loop kind " + kind);
    PrimExpr var = arith::MakeVar(name, dtype);
    return Scoped(&vars_, name, var, [&] { return ir::For(var, min, extent, for_kind, Block()); });
  }
  if (IsWord("let")) {
    Take();
    std::string name = Ident("a variable");
    Expect(":");
    DataType dtype = Dtype();
    Expect("=");
    PrimExpr value = Prim();
    PrimExpr var = arith::MakeVar(name, dtype);
    *ends_block = !IsPunct("{");
    return Scoped(&vars_, name, var, [&] { return ir::Let(var, value, ScopedBody()); });
  }
  if (IsWord("if")) {
    Take();
    PrimExpr cond = Prim();
    Stmt then_case = Block();
    if (!IsWord("else")) return ir::IfThenElse(cond, then_case);
    Take();
    return ir::IfThenElse(cond, then_case, Block());
  }
  if (IsWord("alloc")) {
    Take();
    std::map<std::string, Buffer> outer = buffers_;
    Buffer buffer = BufferDecl();
    *ends_block = !IsPunct("{");
    Stmt alloc = ir::Allocate(buffer, ScopedBody());
    buffers_ = std::move(outer);
    return alloc;
  }
  if (IsWord("assert")) {
    Take();
    PrimExpr cond = Prim();
    ExpectWord("else");
    return ir::Assert(cond, Prim());
  }
  PrimExpr e = Prim();
  if (!Accept("=")) return ir::Evaluate(e);
  if (e->kind != ExprKind::kLoad)
    Fail(head.line, head.col, "expected a buffer element to store to");
  return std::make_shared<const StmtNode>(
      StmtNode{.kind = StmtKind::kStore, .value = Prim(), .buffer = e->buffer, .indices = e->args});
}

}  // namespace

absl::StatusOr<IRModule> ParseModule(std::string_view text) {
  try {
    return Parser(Lexer(text).Run()).Module();
  } catch (const ParseError& e) {
    return absl::InvalidArgumentError(e.message);
  }
}

}  // namespace kiln::ir
