// PrimExpr -> LLVM value. Integers are two's complement of their width (i64 for shapes and
// indices), floor division and modulo round toward negative infinity, comparisons give i1.
// float16 is a storage type: its values live in f32 registers (loads extend, stores and casts
// to f16 round to nearest even), so f16 arithmetic is f32 arithmetic rounded at the end.
#include "compiler/arith/check.h"
#include "compiler/codegen/function_emitter.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::codegen {

using arith::ExprKind;

static bool IsHalf(DataType dtype) { return dtype.code == DataType::kFloat && dtype.bits == 16; }

llvm::Type* RegisterType(llvm::LLVMContext& ctx, DataType dtype) {
  switch (dtype.code) {
    case DataType::kBool:
      return llvm::Type::getInt1Ty(ctx);
    case DataType::kInt:
    case DataType::kUInt:
      return llvm::IntegerType::get(ctx, dtype.bits);
    case DataType::kFloat:
      if (dtype.bits == 16 || dtype.bits == 32) return llvm::Type::getFloatTy(ctx);
      if (dtype.bits == 64) return llvm::Type::getDoubleTy(ctx);
      break;
    case DataType::kHandle:
      return llvm::PointerType::getUnqual(ctx);
  }
  KILN_CHECK(false) << "the LLVM backend has no type for " << dtype.ToString();
  return nullptr;
}

llvm::Type* MemoryType(llvm::LLVMContext& ctx, DataType dtype) {
  if (dtype.code == DataType::kBool) return llvm::Type::getInt8Ty(ctx);
  if (IsHalf(dtype)) return llvm::Type::getInt16Ty(ctx);  // the half's bits
  return RegisterType(ctx, dtype);
}

ScopedVar::ScopedVar(FunctionEmitter& emitter, const PrimExpr& var, llvm::Value* value)
    : emitter_(emitter), var_(var.get()) {
  saved_ = emitter_.vars_.Get(var_);
  emitter_.vars_.Set(var_, value);
}

ScopedVar::~ScopedVar() {
  if (saved_) {
    emitter_.vars_.Set(var_, saved_);
  } else {
    emitter_.vars_.Erase(var_);
  }
}

llvm::Value* FunctionEmitter::EmitExpr(const PrimExpr& e) {
  KILN_CHECK(e) << "null expression in " << func_.name;
  switch (e->kind) {
    case ExprKind::kIntImm:
      if (e->dtype.code == DataType::kHandle) {
        KILN_CHECK(e->int_value == 0) << "integer handle constant in " << func_.name;
        return llvm::ConstantPointerNull::get(b_.getPtrTy());
      }
      if (e->dtype.code == DataType::kBool) return b_.getInt1(e->int_value != 0);
      return llvm::ConstantInt::get(RegisterType(ctx(), e->dtype), e->int_value, true);
    case ExprKind::kFloatImm:
      if (IsHalf(e->dtype)) return HalfConstant(e->float_value);
      return llvm::ConstantFP::get(RegisterType(ctx(), e->dtype), e->float_value);
    case ExprKind::kVar: {
      llvm::Value* value = vars_.Get(e.get());
      KILN_CHECK(value != nullptr) << "unbound variable " << e->name << " in " << func_.name;
      return value;
    }
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
    case ExprKind::kMin:
    case ExprKind::kMax:
      return EmitArithmetic(*e);
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return EmitCompare(*e);
    // Both operands are evaluated (no short circuit): expressions have no side effects.
    case ExprKind::kAnd:
      return b_.CreateAnd(EmitExprAs(e->args[0], DataType::Bool()),
                          EmitExprAs(e->args[1], DataType::Bool()));
    case ExprKind::kOr:
      return b_.CreateOr(EmitExprAs(e->args[0], DataType::Bool()),
                         EmitExprAs(e->args[1], DataType::Bool()));
    case ExprKind::kNot:
      return b_.CreateNot(EmitExprAs(e->args[0], DataType::Bool()));
    case ExprKind::kSelect: {
      llvm::Value* cond = EmitExprAs(e->args[0], DataType::Bool());
      llvm::Value* t = EmitExprAs(e->args[1], e->dtype);
      llvm::Value* f = EmitExprAs(e->args[2], e->dtype);
      return b_.CreateSelect(cond, t, f);
    }
    case ExprKind::kCast:
      return EmitExprAs(e->args[0], e->dtype);
    case ExprKind::kCall:
      return EmitCall(*e);
    case ExprKind::kLoad:
      return EmitLoad(*e);
  }
  KILN_CHECK(false) << "unknown expression kind " << static_cast<int>(e->kind);
  return nullptr;
}

llvm::Value* FunctionEmitter::EmitExprAs(const PrimExpr& e, DataType dtype) {
  return Convert(EmitExpr(e), e->dtype, dtype);
}

// An f16 constant in its f32 register form: the value rounded to the nearest half.
llvm::Value* FunctionEmitter::HalfConstant(double value) {
  llvm::APFloat half(value);
  bool lost = false;
  half.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &lost);
  half.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return llvm::ConstantFP::get(ctx(), half);
}

// Conversions as C does them, except float -> int saturates (nan -> 0) instead of being
// undefined out of range, and anything -> bool tests against zero.
llvm::Value* FunctionEmitter::Convert(llvm::Value* v, DataType from, DataType to) {
  if (from == to) return v;
  // An f16 value is an f32 in registers; one that becomes f16 is rounded to a half and back.
  // (From f64 this rounds twice, which can differ from one rounding in the last place.)
  if (IsHalf(from)) from = DataType::Float(32);
  if (IsHalf(to)) {
    llvm::Value* f = Convert(v, from, DataType::Float(32));
    return state_.math.HalfBitsToFloat(b_, state_.math.FloatToHalfBits(b_, f));
  }
  if (from == to) return v;
  llvm::Type* dst = RegisterType(ctx(), to);
  if (to.code == DataType::kBool) {
    if (from.is_float()) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    if (from.code == DataType::kHandle) return b_.CreateIsNotNull(v);
    return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  bool from_signed = from.code == DataType::kInt;
  if (from.code == DataType::kHandle) {
    KILN_CHECK(to.is_int()) << "cannot convert a handle to " << to.ToString();
    return b_.CreatePtrToInt(v, dst);
  }
  if (to.code == DataType::kHandle) {
    KILN_CHECK(from.is_int()) << "cannot convert " << from.ToString() << " to a handle";
    return b_.CreateIntToPtr(v, dst);
  }
  if (from.is_float() && to.is_float()) return b_.CreateFPCast(v, dst);
  if (from.is_float()) {
    auto id = to.code == DataType::kInt ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
    return b_.CreateIntrinsic(id, {dst, v->getType()}, {v});
  }
  // From an integer or a bool (i1, unsigned).
  if (to.is_float()) return from_signed ? b_.CreateSIToFP(v, dst) : b_.CreateUIToFP(v, dst);
  return b_.CreateIntCast(v, dst, from_signed);
}

llvm::Value* FunctionEmitter::EmitArithmetic(const ExprNode& e) {
  llvm::Value* a = EmitExprAs(e.args[0], e.dtype);
  llvm::Value* b = EmitExprAs(e.args[1], e.dtype);
  if (e.dtype.is_float()) return EmitFloatArithmetic(e.kind, a, b);
  KILN_CHECK(e.dtype.is_int()) << ExprKindName(e.kind) << " on " << e.dtype.ToString() << " in "
                               << func_.name;
  return EmitIntArithmetic(e.kind, e.dtype, a, b);
}

llvm::Value* FunctionEmitter::EmitIntArithmetic(ExprKind kind, DataType dtype, llvm::Value* a,
                                                llvm::Value* b) {
  bool is_signed = dtype.code == DataType::kInt;
  switch (kind) {
    case ExprKind::kAdd:
      return b_.CreateAdd(a, b);
    case ExprKind::kSub:
      return b_.CreateSub(a, b);
    case ExprKind::kMul:
      return b_.CreateMul(a, b);
    case ExprKind::kMin:
      return b_.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a,
                                      b);
    case ExprKind::kMax:
      return b_.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a,
                                      b);
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod: {
      bool div = kind == ExprKind::kFloorDiv;
      if (!is_signed) return div ? b_.CreateUDiv(a, b) : b_.CreateURem(a, b);
      // C truncates; floor differs when the remainder is nonzero and its sign differs from b's.
      llvm::Value* q = b_.CreateSDiv(a, b);
      llvm::Value* r = b_.CreateSRem(a, b);
      llvm::Value* zero = llvm::ConstantInt::get(a->getType(), 0);
      llvm::Value* adjust =
          b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
      if (div) return b_.CreateSub(q, b_.CreateZExt(adjust, a->getType()));
      return b_.CreateSelect(adjust, b_.CreateAdd(r, b), r);
    }
    default:
      break;
  }
  KILN_CHECK(false) << ExprKindName(kind) << " is float division; integers use floordiv (in "
                    << func_.name << ")";
  return nullptr;
}

llvm::Value* FunctionEmitter::EmitFloatArithmetic(ExprKind kind, llvm::Value* a, llvm::Value* b) {
  switch (kind) {
    case ExprKind::kAdd:
      return b_.CreateFAdd(a, b);
    case ExprKind::kSub:
      return b_.CreateFSub(a, b);
    case ExprKind::kMul:
      return b_.CreateFMul(a, b);
    case ExprKind::kDiv:
      return b_.CreateFDiv(a, b);
    case ExprKind::kFloorDiv:
      return state_.math.Call(b_, "floor", {b_.CreateFDiv(a, b)});
    case ExprKind::kFloorMod: {
      llvm::Value* q = state_.math.Call(b_, "floor", {b_.CreateFDiv(a, b)});
      return b_.CreateFSub(a, b_.CreateFMul(q, b));
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      // NaN-propagating, as ONNX Min/Max are, and with plain compares so that no target needs
      // a libm fmin/fmax: pick `a` if it wins or is NaN, else `b` (NaN if b is).
      llvm::Value* wins = kind == ExprKind::kMin ? b_.CreateFCmpOLT(a, b) : b_.CreateFCmpOGT(a, b);
      return b_.CreateSelect(b_.CreateOr(wins, b_.CreateFCmpUNO(a, a)), a, b);
    }
    default:
      break;
  }
  KILN_CHECK(false) << "unexpected float operator " << ExprKindName(kind);
  return nullptr;
}

// The type both operands of a comparison are converted to: float over int, wider over narrower.
static DataType CommonType(DataType a, DataType b) {
  if (a == b) return a;
  if (a.is_float() != b.is_float()) return a.is_float() ? a : b;
  if (a.code == DataType::kBool) return b;
  if (b.code == DataType::kBool) return a;
  return a.bits >= b.bits ? a : b;
}

llvm::Value* FunctionEmitter::EmitCompare(const ExprNode& e) {
  DataType dtype = CommonType(e.args[0]->dtype, e.args[1]->dtype);
  // f16 values are f32 in registers: compare there, without rounding an integer operand.
  if (IsHalf(dtype)) dtype = DataType::Float(32);
  llvm::Value* a = EmitExprAs(e.args[0], dtype);
  llvm::Value* b = EmitExprAs(e.args[1], dtype);
  using P = llvm::CmpInst::Predicate;
  int k = static_cast<int>(e.kind) - static_cast<int>(ExprKind::kEQ);  // EQ NE LT LE GT GE
  static const P kFloat[] = {P::FCMP_OEQ, P::FCMP_UNE, P::FCMP_OLT,
                             P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE};
  static const P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,
                              P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE};
  static const P kUnsigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_ULT,
                                P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE};
  if (dtype.is_float()) return b_.CreateFCmp(kFloat[k], a, b);
  if (dtype.code == DataType::kInt) return b_.CreateICmp(kSigned[k], a, b);
  return b_.CreateICmp(kUnsigned[k], a, b);  // unsigned, bool, handle
}

llvm::Value* FunctionEmitter::EmitCall(const ExprNode& e) {
  if (ir::intrinsic::IsCheckIndex(e.name)) {
    KILN_CHECK(!func_.is_host) << e.name << " is only valid in kernels, not in " << func_.name;
    return EmitCheckIndex(e);
  }
  if (ir::intrinsic::IsWarpFold(e.name)) return EmitWarpFold(e);
  if (e.name == ir::intrinsic::kPrefetch) return EmitPrefetch(e);
  if (e.name == ir::intrinsic::kTranspose) return EmitTranspose(e);
  if (e.name.rfind("kiln.", 0) == 0) {
    KILN_CHECK(func_.is_host) << e.name << " is only valid in host functions, not in kernel "
                              << func_.name;
    return EmitHostIntrinsic(e);
  }
  if (MathLibrary::IsMathFunction(e.name)) {
    KILN_CHECK(e.dtype.is_float())
        << e.name << " of " << e.dtype.ToString() << " in " << func_.name;
    std::vector<llvm::Value*> args;
    for (const PrimExpr& a : e.args) args.push_back(EmitExprAs(a, e.dtype));
    return state_.math.Call(b_, e.name, args);
  }
  if (const ir::ExternFunction* library_fn = ir::FindExternFunction(e.name)) {
    return EmitExternCall(e, *library_fn);
  }
  auto it = state_.functions.find(e.name);
  KILN_CHECK(it != state_.functions.end())
      << "call to unknown function " << e.name << " in " << func_.name;
  return EmitKernelCall(e, it->second);
}

// llvm.prefetch(address, read, locality 3: keep in every level, data): a hint that targets
// without a prefetch instruction drop.
llvm::Value* FunctionEmitter::EmitPrefetch(const ExprNode& e) {
  const PrimExpr& load = e.args[0];
  // The element may lie past the buffer (ir::intrinsic::kPrefetch): plain address arithmetic,
  // which an out-of-bounds offset leaves defined, where an in-bounds GEP would make it poison.
  llvm::Value* address = ElementAddress(load->buffer, load->args, /*in_bounds=*/false);
  b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {address->getType()},
                     {address, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
  return b_.getInt32(0);
}

// The n rows of src loaded as vectors, transposed by log2(n) rounds of interleaving: each
// round pairs row i with row i + n/2 and puts their first halves' elements interleaved at 2i,
// their second halves' at 2i + 1; after the last round row r holds column r. Each interleave
// is one two-source shuffle (vpermt2ps on AVX-512).
llvm::Value* FunctionEmitter::EmitTranspose(const ExprNode& e) {
  const PrimExpr& dst = e.args[0];
  const PrimExpr& src = e.args[1];
  const int64_t n = e.args[2]->int_value;
  llvm::Value* dst_row = EmitExprAs(e.args[3], DataType::Int(64));
  llvm::Value* src_row = EmitExprAs(e.args[4], DataType::Int(64));
  llvm::Type* f32 = b_.getFloatTy();
  auto* row_type = llvm::FixedVectorType::get(f32, static_cast<unsigned>(n));
  const llvm::Align align = state_.module.getDataLayout().getABITypeAlign(f32);
  llvm::Value* from = ElementAddress(src->buffer, src->args);
  std::vector<llvm::Value*> rows;
  for (int64_t r = 0; r < n; ++r) {
    llvm::Value* at = b_.CreateInBoundsGEP(f32, from, b_.CreateMul(b_.getInt64(r), src_row));
    llvm::LoadInst* load = b_.CreateAlignedLoad(row_type, at, align);
    TagAccess(load, src->buffer.get());
    rows.push_back(load);
  }
  const int64_t half = n / 2;
  std::vector<int> low, high;
  for (int64_t k = 0; k < half; ++k) {
    low.insert(low.end(), {static_cast<int>(k), static_cast<int>(n + k)});
    high.insert(high.end(), {static_cast<int>(half + k), static_cast<int>(n + half + k)});
  }
  for (int64_t round = 1; round < n; round *= 2) {
    std::vector<llvm::Value*> next(rows.size());
    for (int64_t i = 0; i < half; ++i) {
      next[2 * i] = b_.CreateShuffleVector(rows[i], rows[i + half], low);
      next[2 * i + 1] = b_.CreateShuffleVector(rows[i], rows[i + half], high);
    }
    rows = std::move(next);
  }
  llvm::Value* to = ElementAddress(dst->buffer, dst->args);
  for (int64_t r = 0; r < n; ++r) {
    llvm::Value* at = b_.CreateInBoundsGEP(f32, to, b_.CreateMul(b_.getInt64(r), dst_row));
    TagAccess(b_.CreateAlignedStore(rows[r], at, align), dst->buffer.get());
  }
  return b_.getInt32(0);
}

// A library function (ir::ExternFunction), declared external: the artifact links against its
// library, the JIT loads it. Arguments as the function's params say; a pointer is the
// address of the element its load names.
llvm::Value* FunctionEmitter::EmitExternCall(const ExprNode& e, const ir::ExternFunction& fn) {
  const std::string_view params = fn.params;
  KILN_CHECK_EQ(e.args.size(), params.size()) << "arguments of " << e.name << " in " << func_.name;
  std::vector<llvm::Value*> args;
  std::vector<llvm::Type*> types;
  for (size_t i = 0; i < params.size(); ++i) {
    const PrimExpr& arg = e.args[i];
    if (params[i] == 'p') {
      KILN_CHECK(arg->kind == ExprKind::kLoad)
          << "argument " << i << " of " << e.name << " in " << func_.name
          << " is a pointer, written as a load of the element it points to";
      args.push_back(ElementAddress(arg->buffer, arg->args));
    } else {
      DataType type = params[i] == 'c'   ? DataType::Int(8)
                      : params[i] == 'i' ? DataType::Int(32)
                      : params[i] == 'l' ? DataType::Int(64)
                                         : DataType::Float(32);
      KILN_CHECK(params[i] == 'f' || type.is_int()) << "parameter kind of " << e.name;
      args.push_back(EmitExprAs(arg, type));
    }
    types.push_back(args.back()->getType());
  }
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), types, false);
  b_.CreateCall(state_.module.getOrInsertFunction(fn.name, type), args);
  return llvm::Constant::getNullValue(RegisterType(ctx(), e.dtype));
}

// Row-major: offset = ((i0 * d1 + i1) * d2 + i2) ...; the first extent is never needed.
llvm::Value* FunctionEmitter::ElementAddress(const Buffer& buffer,
                                             const std::vector<PrimExpr>& indices, bool in_bounds) {
  llvm::Value* data = buffers_.Get(buffer.get());
  KILN_CHECK(data != nullptr) << "buffer " << buffer->name << " is not a parameter or "
                              << "allocation of " << func_.name;
  KILN_CHECK_EQ(indices.size(), buffer->shape.size()) << "indices of " << buffer->name;
  llvm::Value* offset = b_.getInt64(0);
  for (size_t d = 0; d < indices.size(); ++d) {
    llvm::Value* index = EmitExprAs(indices[d], DataType::Int(64));
    if (d == 0) {
      offset = index;
      continue;
    }
    llvm::Value* extent = EmitExprAs(buffer->shape[d], DataType::Int(64));
    // In-bounds offsets cannot overflow i64; saying so helps vectorization.
    offset = b_.CreateAdd(b_.CreateMul(offset, extent, "", false, in_bounds), index, "", false,
                          in_bounds);
  }
  llvm::Type* type = MemoryType(ctx(), buffer->dtype);
  return in_bounds ? b_.CreateInBoundsGEP(type, data, offset) : b_.CreateGEP(type, data, offset);
}

llvm::Value* FunctionEmitter::EmitLoad(const ExprNode& e) {
  llvm::Type* type = MemoryType(ctx(), e.buffer->dtype);
  llvm::Value* address = ElementAddress(e.buffer, e.args);
  llvm::Align align = state_.module.getDataLayout().getABITypeAlign(type);
  llvm::LoadInst* load = b_.CreateAlignedLoad(type, address, align);
  TagAccess(load, e.buffer.get());
  llvm::Value* v = load;
  if (e.buffer->dtype.code == DataType::kBool) v = b_.CreateICmpNE(v, b_.getInt8(0));
  if (IsHalf(e.buffer->dtype)) v = state_.math.HalfBitsToFloat(b_, v);
  return Convert(v, e.buffer->dtype, e.dtype);
}

}  // namespace kiln::codegen
