// kiln.warp_fold (ir/loop.h): a fold over the 32 threads of a warp. On a GPU, five shuffles
// down, in registers; emulated on a CPU, where a block's threads run one after another, the
// same tree over the 32 elements the warp's threads load, read from the buffer (every
// thread's element is there: an earlier phase wrote them).
#include "compiler/arith/check.h"
#include "compiler/codegen/function_emitter.h"
#include "llvm/IR/IntrinsicsNVPTX.h"

namespace kiln::codegen {

namespace {

constexpr int kWarp = 32;

arith::ExprKind FoldKind(const std::string& op) {
  return op == "add"   ? arith::ExprKind::kAdd
         : op == "max" ? arith::ExprKind::kMax
                       : arith::ExprKind::kMin;
}

}  // namespace

llvm::Value* FunctionEmitter::EmitWarpFold(const ExprNode& e) {
  // The kernels' own float add, max and min (max and min propagate NaN).
  const arith::ExprKind op =
      FoldKind(e.name.substr(std::string(ir::intrinsic::kWarpFold).size() + 1));
  const ExprNode& load = *e.args[0];
  if (state_.gpu) {
    llvm::Value* value = EmitExpr(e.args[0]);
    for (int delta = kWarp / 2; delta >= 1; delta /= 2) {
      llvm::Value* other = b_.CreateIntrinsic(
          llvm::Intrinsic::nvvm_shfl_sync_down_f32, {},
          {b_.getInt32(0xffffffff), value, b_.getInt32(delta), b_.getInt32(kWarp - 1)});
      value = EmitFloatArithmetic(op, value, other);
    }
    return value;
  }
  // Emulated: values[i] = buffer[base + i], then values[i] op= values[i + delta].
  llvm::Type* f32 = b_.getFloatTy();
  llvm::Value* t = EmitExprAs(load.args[0], DataType::Int(64));
  llvm::Value* base = b_.CreateAnd(t, b_.getInt64(~int64_t{kWarp - 1}));
  llvm::Value* data = buffers_.Get(load.buffer.get());
  KILN_CHECK(data != nullptr) << "warp shuffle of unbound buffer " << load.buffer->name;
  std::vector<llvm::Value*> values;
  for (int i = 0; i < kWarp; ++i) {
    llvm::Value* at = b_.CreateAdd(base, b_.getInt64(i));
    values.push_back(b_.CreateLoad(f32, b_.CreateInBoundsGEP(f32, data, at)));
  }
  for (int delta = kWarp / 2; delta >= 1; delta /= 2) {
    for (int i = 0; i < delta; ++i)
      values[i] = EmitFloatArithmetic(op, values[i], values[i + delta]);
  }
  return values[0];
}

}  // namespace kiln::codegen
