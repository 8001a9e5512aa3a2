// The float math intrinsics of PrimExpr calls (exp, log, tanh, ...), emitted as small internal
// LLVM functions so an artifact never depends on libm: the same code must link for wasm and
// bare-metal targets, where there is no libm to call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen {

class MathLibrary {
 public:
  explicit MathLibrary(llvm::Module& module) : module_(module) {}

  // exp, log, sqrt, tanh, sigmoid, fabs, pow (two arguments), floor, ceil, trunc,
  // round (half to even, as ONNX Round), erf, sin, cos, tan, asin, acos, atan, sinh, cosh,
  // asinh, acosh and atanh.
  static bool IsMathFunction(const std::string& name);
  static int Arity(const std::string& name);

  // Emits `name(args...)` at the builder's position. Every argument must be float or double,
  // all of the same type; the result has that type.
  llvm::Value* Call(llvm::IRBuilder<>& b, const std::string& name,
                    const std::vector<llvm::Value*>& args);

  // float16 storage: the i16 bits of a half <-> an f32. Emitted as integer code rather than
  // LLVM `half` conversions, which lower to compiler-rt calls (__extendhfsf2, __truncsfhf2) on
  // targets without hardware support (x86-64 before F16C, wasm).
  // Exact: every half is an f32.
  llvm::Value* HalfBitsToFloat(llvm::IRBuilder<>& b, llvm::Value* bits);
  // Rounds to nearest, ties to even; overflow gives inf, NaN stays NaN (quiet), signs kept.
  llvm::Value* FloatToHalfBits(llvm::IRBuilder<>& b, llvm::Value* value);

 private:
  llvm::Function* GetOrCreate(const std::string& name, llvm::Type* type);
  llvm::Function* GetOrCreateHalfConversion(bool to_half);

  llvm::Module& module_;
  std::map<std::pair<std::string, llvm::Type*>, llvm::Function*> functions_;
};

}  // namespace kiln::codegen
