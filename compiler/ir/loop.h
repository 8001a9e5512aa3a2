// Loop-level IR: PrimFunc kernels and the host function, as statements over PrimExprs.
// Kernels take buffer pointers and the symbolic extents they use; the host function (one
// per artifact entry point) binds shapes, checks them, carves memory and calls kernels.
#pragma once

#include <string>
#include <vector>

#include "compiler/arith/expr.h"

namespace kiln::ir {

using arith::Buffer;
using arith::DataType;
using arith::PrimExpr;

enum class StmtKind : uint8_t {
  kFor,         // for (var = min; var < min + extent; ++var) body
  kStore,       // buffer[indices] = value
  kLet,         // let var = value in body
  kIfThenElse,  // if (condition) then_case else else_case
  kAllocate,    // buffer lives for body; constant size, kernel-local scratch
  kEvaluate,    // value evaluated for its effect (a call)
  kSeq,         // seq in order
  kAssert,      // if (!condition) { evaluate on_fail; return failure }
};
// kGpuBlock and kGpuThread are a GPU launch: `for b in range(0, B) gpu_block { for t in
// range(0, T) gpu_thread { body } }` runs body for every (b, t) at once, b the block index
// (grid of B blocks, B may be symbolic) and t the thread index within a block of T threads
// (a constant). Only a GPU schedule makes them; on a CPU they are serial loops, which is how
// GPU schedules are checked on machines without a GPU.
enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled, kGpuBlock, kGpuThread };
inline constexpr ForKind kAllForKinds[] = {ForKind::kSerial,     ForKind::kParallel,
                                           ForKind::kVectorized, ForKind::kUnrolled,
                                           ForKind::kGpuBlock,   ForKind::kGpuThread};
const char* ForKindName(ForKind kind);

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

struct StmtNode {
  StmtKind kind;
  PrimExpr var;          // kFor, kLet
  PrimExpr min, extent;  // kFor
  ForKind for_kind = ForKind::kSerial;
  PrimExpr value;                 // kStore, kLet, kEvaluate
  PrimExpr condition;             // kIfThenElse, kAssert
  PrimExpr on_fail;               // kAssert: a call that reports the error
  Buffer buffer;                  // kStore, kAllocate
  std::vector<PrimExpr> indices;  // kStore
  Stmt body;                      // kFor, kLet, kAllocate
  Stmt then_case, else_case;      // kIfThenElse (else_case may be null)
  std::vector<Stmt> seq;          // kSeq
};

Stmt For(PrimExpr var, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body);
Stmt Store(Buffer buffer, std::vector<PrimExpr> indices, PrimExpr value);
Stmt Let(PrimExpr var, PrimExpr value, Stmt body);
Stmt IfThenElse(PrimExpr condition, Stmt then_case, Stmt else_case = nullptr);
Stmt Allocate(Buffer buffer, Stmt body);
Stmt Evaluate(PrimExpr value);
Stmt Seq(std::vector<Stmt> stmts);
Stmt Assert(PrimExpr condition, PrimExpr on_fail);

// A kernel: `void name(buffers..., scalars...)`, buffers passed as pointers to their first
// element, scalars as i64. A host function instead has the fixed signature of
// kiln/artifact_abi.h (`int32_t name(KilnEnv*, DLTensor* inputs, DLTensor* outputs)`),
// no buffers and no scalars; it reaches its tensors through the `kiln.*` intrinsics below.
struct PrimFunc {
  std::string name;
  std::vector<Buffer> buffers;
  std::vector<PrimExpr> scalars;
  Stmt body;
  bool is_host = false;
};

// Intrinsics, as the callee name of an arith Call. Math intrinsics work anywhere; `kiln.*`
// only in host functions, except kiln.check_index, kiln.prefetch and kiln.transpose, only in
// kernels. Any other callee names a kernel of the same module, called with (buffer data
// handles..., scalar i64 values...) exactly as the kernel declares them.
namespace intrinsic {
// Math, on floats: exp, log, sqrt, tanh, sigmoid, fabs, pow (two args).
inline constexpr char kInputShape[] = "kiln.input_shape";           // (i, d) -> i64
inline constexpr char kOutputShape[] = "kiln.output_shape";         // (i, d) -> i64
inline constexpr char kSetOutputShape[] = "kiln.set_output_shape";  // (i, d, value) -> i32
inline constexpr char kInputData[] = "kiln.input_data";             // (i) -> handle
inline constexpr char kOutputData[] = "kiln.output_data";           // (i) -> handle
inline constexpr char kConstant[] = "kiln.constant";                // (k) -> handle to constant k
inline constexpr char kAlloc[] = "kiln.alloc";                      // (bytes) -> handle
inline constexpr char kFree[] = "kiln.free";                        // (handle) -> i32
// (handle, i) -> element i of the array at handle, whose element type is the call's dtype.
inline constexpr char kReadElement[] = "kiln.read_element";
inline constexpr char kOffset[] = "kiln.offset";  // (handle, bytes) -> handle `bytes` further on
// Device artifacts (a GPU target's host code, kiln/artifact_abi.h): kernels read and write
// device memory, so everything they touch is copied there, and the host reads their results
// back one element at a time. Each maps to a KilnEnv device service.
inline constexpr char kDeviceAlloc[] = "kiln.device_alloc";        // (bytes) -> handle
inline constexpr char kDeviceFree[] = "kiln.device_free";          // (handle) -> i32
inline constexpr char kDeviceConstant[] = "kiln.device_constant";  // (k) -> device copy
// (dst, src, bytes, kind) -> i32, kind as KILN_COPY_* (host to device 0, back 1, device 2).
inline constexpr char kCopy[] = "kiln.copy";
inline constexpr int kCopyToDevice = 0;
inline constexpr int kCopyToHost = 1;
inline constexpr int kCopyOnDevice = 2;
// (handle, i) -> element i of the device array at handle (element type: the call's dtype).
inline constexpr char kReadDeviceElement[] = "kiln.read_device_element";
// (handle, value) -> i32: stores `value` (its own dtype) as element 0 of the device array.
inline constexpr char kWriteDeviceElement[] = "kiln.write_device_element";
// (blocks, threads, kernel(args...)) -> i32: runs the kernel call on `blocks` blocks (none when
// blocks <= 0) of `threads` threads; the call is not evaluated on the host.
inline constexpr char kLaunch[] = "kiln.launch";
// Reports a shape mismatch through KilnEnv::shape_error: (kind, index, dim, expected,
// actual) -> i32, kind as KILN_SHAPE_ERROR_* in kiln/artifact_abi.h. Used as an Assert's
// on_fail.
inline constexpr int kShapeErrorInput = 0;   // KILN_SHAPE_ERROR_INPUT
inline constexpr int kShapeErrorOutput = 1;  // KILN_SHAPE_ERROR_OUTPUT
inline constexpr int kShapeErrorBound = 2;   // KILN_SHAPE_ERROR_BOUND
inline constexpr int kShapeErrorValue = 3;   // KILN_SHAPE_ERROR_VALUE
inline constexpr int kShapeErrorNoData = 4;  // KILN_SHAPE_ERROR_NO_DATA
inline constexpr char kShapeError[] = "kiln.shape_error";
// An index read at run time, checked before any access uses it: "kiln.check_index.<op>"
// (index, size, input: i32, dim: i32, wrap: i32 0 or 1) -> i64 is index (plus size where wrap and
// index < 0) when that lies in [0, size). Otherwise the kernel reports the raw index through
// KilnEnv::index_error (input: the graph input it was read from or -1; dim: the indexed
// dimension, -1 for a flat index or kCheckSequenceLength for a length valid in [0, size - 1];
// <op> names the op in the message) and returns at once.
inline constexpr char kCheckIndex[] = "kiln.check_index";
inline constexpr int kCheckSequenceLength = -2;  // KILN_INDEX_SEQUENCE_LENGTH
// The callee name of a check for op `op`, and whether `name` is one.
inline std::string CheckIndexName(const std::string& op) {
  return std::string(kCheckIndex) + "." + op;
}
inline bool IsCheckIndex(const std::string& name) {
  return name.rfind(std::string(kCheckIndex) + ".", 0) == 0;
}
// In a phase of a GPU kernel (a gpu_thread loop, which every thread of the block runs):
// "kiln.warp_fold.<add|max|min>"(buffer[t]), t the thread variable, folds buffer over the 32
// threads of t's warp as a tree (element i with i + 16, then i + 8, ... 1) in registers (warp
// shuffles); thread 32 * w gets the fold of warp w. f32 only.
inline constexpr char kWarpFold[] = "kiln.warp_fold";
inline bool IsWarpFold(const std::string& name) {
  return name.rfind(std::string(kWarpFold) + ".", 0) == 0;
}
// In a CPU kernel: "kiln.prefetch"(buffer[indices]) -> i32, evaluated for its effect, asks
// for the cache line of that element ahead of its load. A hint: no effect on any value, never
// a fault, so the element may lie past the buffer's end (a stream's prefetch running ahead of
// its last row needs no clamp); a target without prefetches ignores it.
inline constexpr char kPrefetch[] = "kiln.prefetch";
// In a CPU kernel: "kiln.transpose"(dst[i...], src[j...], n, dst_row, src_row) -> i32,
// evaluated for its effect: for r, c in [0, n), the element r * dst_row + c elements after
// dst[i...] gets the element c * src_row + r elements after src[j...]. f32 buffers, n a
// constant power of two from 2 to 16, dst_row and src_row integers (constants, or expressions
// of the kernel's variables: a block across channel planes of a symbolic size), each row at
// least n apart, dst and src not overlapping. An n x n block transposed in vector registers (n
// loads, n log2(n) two-vector shuffles, n stores), where a vector loop would gather each row.
inline constexpr char kTranspose[] = "kiln.transpose";
inline constexpr int64_t kMaxTransposeLanes = 16;
}  // namespace intrinsic

std::string ToString(const Stmt& stmt, int indent = 0);
std::string ToString(const PrimFunc& func);
// The kernel's text with its own name, its variables' and its buffers' names replaced by
// names in order of first appearance: equal for kernels that differ only in names, as the
// same layer of two models does. The tuning database keys kernels by it.
std::string CanonicalText(const PrimFunc& func);

}  // namespace kiln::ir
