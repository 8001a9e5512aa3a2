#include "compiler/codegen/gather_base.h"

#include <vector>

#include "llvm/Analysis/VectorUtils.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/Local.h"

namespace kiln::codegen {
namespace {

// For `splat(s) + C` (either order, C constant): s and C.
bool SplitSplatPlusConstant(llvm::Value* index, llvm::Value*& splat, llvm::Constant*& offsets) {
  auto* add = llvm::dyn_cast<llvm::BinaryOperator>(index);
  if (add == nullptr || add->getOpcode() != llvm::Instruction::Add) return false;
  for (int i = 0; i < 2; ++i) {
    llvm::Value* scalar = llvm::getSplatValue(add->getOperand(i));
    auto* constant = llvm::dyn_cast<llvm::Constant>(add->getOperand(1 - i));
    if (scalar != nullptr && constant != nullptr) {
      splat = scalar;
      offsets = constant;
      return true;
    }
  }
  return false;
}

// A GEP of a scalar pointer and one vector index that is a splat plus constants.
bool Rewritable(const llvm::GetElementPtrInst& gep) {
  return gep.getType()->isVectorTy() && !gep.getPointerOperandType()->isVectorTy() &&
         gep.getNumIndices() == 1;
}

}  // namespace

int MoveGatherSplatsToBase(llvm::Module& module) {
  std::vector<llvm::GetElementPtrInst*> geps;
  for (llvm::Function& function : module) {
    for (llvm::BasicBlock& block : function) {
      for (llvm::Instruction& instruction : block) {
        auto* gep = llvm::dyn_cast<llvm::GetElementPtrInst>(&instruction);
        if (gep != nullptr && Rewritable(*gep)) geps.push_back(gep);
      }
    }
  }
  int rewritten = 0;
  for (llvm::GetElementPtrInst* gep : geps) {
    llvm::Value* splat = nullptr;
    llvm::Constant* offsets = nullptr;
    if (!SplitSplatPlusConstant(gep->getOperand(1), splat, offsets)) continue;
    // Without inbounds: p + s need not be an address the access reaches (no lane's offset may
    // be 0), and plain GEPs wrap as the i64 sum did.
    llvm::IRBuilder<> builder(gep);
    llvm::Type* element = gep->getSourceElementType();
    llvm::Value* base = builder.CreateGEP(element, gep->getPointerOperand(), splat);
    llvm::Value* lanes = builder.CreateGEP(element, base, offsets);
    lanes->takeName(gep);
    llvm::Value* index = gep->getOperand(1);
    gep->replaceAllUsesWith(lanes);
    gep->eraseFromParent();
    llvm::RecursivelyDeleteTriviallyDeadInstructions(index);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::codegen
