// The default rules Schedule applies, one per kernel class, and what they share.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/loop.h"
#include "compiler/ir/target.h"
#include "compiler/ir/tensor.h"
#include "compiler/schedule/trace.h"

namespace kiln::schedule {

// Weights packed at compile time: the kernel reads parameter `packed` where it had `weights`,
// and its caller passes `data` in place of the weight constant.
struct PackedWeights {
  arith::Buffer weights, packed;
  ir::NDArray data;
};

// A rule's kernel body, with the weights it packed at compile time, if any.
struct ScheduledKernel {
  ir::Stmt body;
  std::optional<PackedWeights> packed;
};

// The constant a kernel parameter is bound to at the kernel's only call site, or null.
using ConstantOf = std::function<const ir::NDArray*(const arith::Buffer&)>;

// The generic rule: outer data-parallel loops become parallel, contiguous innermost loops
// vectorized. Loops that carry a dependence (a reduction into one element) stay serial.
ir::Stmt ScheduleLoopNests(const ir::Stmt& body);

// A loop of a kernel: its variable and extent.
struct Axis {
  arith::PrimExpr var, extent;
};

// C[b.., i, j] = sum over k < depth of A[.., i, k] * B[.., k, j], as the matmul rule reads it
// off legalize's matmul kernel (or another rule builds it: a pointwise conv is one).
struct Matmul {
  std::vector<Axis> batch;
  Axis i, j;
  arith::PrimExpr k, depth;  // reduction variable and extent
  arith::Buffer c;
  // Zero indices between C's row and column: a pointwise conv's output [n, m, H, W] is
  // indexed [n, i, 0, j] with j over the whole plane (row-major, so the same element).
  int64_t c_flat_dims = 0;
  arith::PrimExpr a_load, b_load;  // A[.., i, k] and B[.., k, j]; A free of j, B free of i
  // Stores fusion appended after the sum, each C[b.., i, j] = f(C[b.., i, j], other loads).
  std::vector<ir::Stmt> epilogue;
  // B packed at compile time (TileMatmul sets it): panels of NR columns, packed[p, k, jj] is
  // B[k, p * NR + jj], zero past N.
  arith::Buffer b_packed;
  // A packed at compile time (TileMatmul sets it): row tiles of MR rows, packed[t, k, ii] is
  // A[min(t * MR + ii, M - 1), k], then one tile of zeros.
  arith::Buffer a_packed;
  // Whether the tiled form reads B's rows in place unless its trace says to pack them (the
  // pack_b knob): B is a pointwise conv's input plane.
  bool reads_b_in_place = false;
};

// The matmul legalize makes (C = A @ B over f32, any batch dims, maybe with an element-wise
// epilogue), read off a kernel body; nullopt for any other kernel.
std::optional<Matmul> MatchMatmul(const ir::Stmt& body);

// C[b.., row, col] = value, then the epilogue's stores on that element.
ir::Stmt StoreAndFinish(const Matmul& m, const arith::PrimExpr& row, const arith::PrimExpr& col,
                        arith::PrimExpr value);

// The matmul rule, for a kernel that is exactly legalize's matmul (C = A @ B over f32, any
// batch dims): a tiled, packed form; a constant B is packed at compile time. `trace` decides
// the knobs of MatmulSpace; those it leaves out take their defaults. nullopt for any other
// kernel.
std::optional<ScheduledKernel> ScheduleMatmul(const ir::Stmt& body, const ir::Target& target,
                                              const ConstantOf& constant_of = nullptr,
                                              const Trace& trace = {});

// The tiled form of `m` (with its batch loops); a constant B (`constant_of` its buffer), or
// else a constant A when the knobs pack A, is packed at compile time.
ScheduledKernel TileMatmul(const Matmul& m, const ir::Target& target,
                           const ConstantOf& constant_of = nullptr, const Trace& trace = {});

// The matmul rule's knobs for `target`: register tile rows and vectors, reduction block,
// columns per task, row tiles per task, whether A is packed; with `matvec_reads_b` (the
// kernel may have one row and B is not a constant packed at compile time) also the one-row
// form's panel width; with `reads_b_in_place` (Matmul::reads_b_in_place) also whether B is
// packed, reading it in place the first choice. `constant_rows`: M, where it is a constant
// (the default tile rows waste least of it: DefaultTileRows); `constant_depth`: K, where it
// is a constant (the default columns per task: DefaultBlockCols).
SearchSpace MatmulSpace(const ir::Target& target, bool matvec_reads_b = false,
                        bool reads_b_in_place = false,
                        std::optional<int64_t> constant_rows = std::nullopt,
                        std::optional<int64_t> constant_depth = std::nullopt);

// The most register tile rows (MR) the matmul rule gives tiles of `vectors` vectors a row on
// `target`: MR x `vectors` sums, the row's `vectors` of B and one broadcast of A fit the
// vector registers (14 rows of 2 vectors, 9 of 3 or 6 of 4 in AVX-512's 32).
int64_t MaxTileRows(const ir::Target& target, int64_t vectors);

// The matmul rule's default register tile rows (MR) on `target` for M = `rows`, in tiles of
// `vectors` vectors a row.
int64_t DefaultTileRows(const ir::Target& target, std::optional<int64_t> rows, int64_t vectors = 2);

// The matmul rule's default columns per task for K = `depth`: 128, or up to 512 for a
// shallow product, so that a block of B holds about as many floats.
int64_t DefaultBlockCols(std::optional<int64_t> depth);

// The GPU rules, for every kernel of a GPU target (gpu_rule.cc). A block's gpu_thread loops
// run one after another with a barrier between them (phases), so values that pass from one
// phase to the next live in the block's shared memory: allocations inside a gpu_block loop and
// outside its gpu_thread loops.
//  - A matmul, or a conv of one group as an implicit GEMM, is tiled in shared memory
//    (ScheduleMatmulForGpu).
//  - Rows that reduce (sums, softmax, norms) get a block each (ScheduleRowsForGpu).
//  - Otherwise the kernel's outer data-parallel loops, fused into one index, are spread over
//    blocks of target.threads_per_block threads, one iteration per thread (neighbouring threads
//    on neighbouring elements); the rest of the body runs in its thread. A kernel without such
//    a loop (a running sum, loop nests in sequence) runs in one thread of one block.
ir::Stmt ScheduleForGpu(const ir::Stmt& body, const ir::Target& target);

// gpu_matmul_rule.cc: blocks of 64 x 64 elements of C; each k step of 16 loads the A and B
// tiles into shared memory (a phase), then every thread adds their product into its own
// sub-tile of accumulators (a phase); a last phase stores C and the epilogue. Each element
// sums k in order. nullopt where the block size does not divide the tile.
std::optional<ir::Stmt> ScheduleMatmulForGpu(const Matmul& m, const ir::Target& target);

// gpu_reduce_rule.cc: one block per row (an iteration of the kernel's outer data-parallel
// `rows`, starting at `mins`) whose body `row` reduces along a loop: the loop's iterations
// spread over the block's threads, each reduction into a partial per thread, then a tree in
// shared memory; the row's other statements run in thread 0. nullopt where the row has no
// such reduction.
std::optional<ir::Stmt> ScheduleRowsForGpu(const std::vector<Axis>& rows,
                                           const std::vector<arith::PrimExpr>& mins,
                                           const ir::Stmt& row, const ir::Target& target);

// The generic rule's estimates, which the rows rule shares. A symbolic extent counts as
// kSymbolicExtent (shapes are symbolic because they grow); a parallel loop must cover
// kMinParallelWork innermost statements to pay for waking the pool (a few microseconds); a
// loop shorter than kMinVectorExtent is not worth a vector loop's setup.
constexpr int64_t kSymbolicExtent = 64;
constexpr int64_t kMinParallelWork = int64_t{1} << 15;
constexpr int64_t kMinVectorExtent = 4;
int64_t ExtentEstimate(const arith::PrimExpr& extent);
// Innermost statements `s` executes (the longer branch of an if), capped to avoid overflow.
int64_t EstimateWork(const ir::Stmt& s);

// Whether iterations of a loop over `var` with body `body` touch disjoint elements of every
// buffer the body writes, so they may run in any order or at once.
bool IterationsAreIndependent(const arith::PrimExpr& var, const ir::Stmt& body);

// library_rule.cc: a matmul whose A and B are plain row-major (or transposed) matrices per
// batch element, or a conv of one group, as calls to `library`'s sgemm (one of LibraryRules,
// which the target must have): a matmul or a pointwise conv in tasks of up to 64 rows and 512
// columns of one batch element; any other conv in tasks of a block of output positions whose
// input taps are gathered into a task-local buffer (im2col). Tasks run on the runtime's thread
// pool, the library itself single-threaded; then the fused epilogue over the task's outputs.
// nullopt for any other kernel.
std::optional<ScheduledKernel> ScheduleAsLibraryCall(const ir::Stmt& body, const ir::Target& target,
                                                     std::string_view library);

// The libraries the library rule calls, each a rule of that name: "openblas", "dnnl".
const std::vector<std::string>& LibraryRules();

// The library rule's spaces for `body`, one per library of the target that takes it: rule
// named after the library, no knobs.
std::vector<SearchSpace> LibrarySpaces(const ir::Stmt& body, const ir::Target& target);

}  // namespace kiln::schedule
