// Gathers and scatters whose addresses are a pointer plus a vector index that is a splat plus
// constants (a vectorized loop's lane reaching across planes, rows or channels) get the splat
// moved into the pointer, leaving constant offsets.
//
// The loop vectorizer writes such an address as `gep p, splat(s) + <c0, c1, ...>` in i64. The
// X86 backend narrows a gather's index to i32 only when it is constant (or a sign extension),
// so the i64 index of 16 lanes fills two registers: two 8-lane vgatherqps and a blend instead of
// one 16-lane vgatherdps, and the index vector recomputed for every access. As
// `gep (gep p, s), <c0, c1, ...>` the index is constant and one vgatherdps does it.
#pragma once

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln::codegen {

// Rewrites every vector GEP of the form above in `module`; the addresses stay the same.
// Returns how many it rewrote.
int MoveGatherSplatsToBase(llvm::Module& module);

}  // namespace kiln::codegen
