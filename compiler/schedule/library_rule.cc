// The library rule: a matmul or a conv of one group as calls to a library's sgemm, for
// targets that have the library (libraries=openblas, libraries=dnnl). The tuner measures it
// against the generated form, one space per library.
//
// A matmul, or a pointwise conv (out[n, :, plane] = w @ x[n, :, plane]), whose operands are
// plain row-major (or transposed) matrices per batch element:
//
//   for t in [0, batch * row blocks * column blocks) parallel
//     let b.. = t's batch element, rows [row0, row0 + rows), columns [col0, col0 + cols)
//     sgemm(A rows of b.., B columns of b.., C block of b..)
//     for i in rows { for j in columns vectorized { epilogue } }
//
// Any other conv of one group (strides, padding, dilation, any taps) as im2col: its B, the
// input at each tap (zero in the padding), is gathered for a block of output positions into
// a task-local buffer, then multiplied by the weights read in place as [M, C * KH * KW]:
//
//   for t in [0, batch * position blocks) parallel
//     allocate col[K][P]; col[k, q] = input at tap k for position p0 + q
//     sgemm(w, col, out[n, :, p0 : p0 + cols]); epilogue over the task's outputs
//
// Threads: the artifact's thread pool (KilnEnv::parallel_for, as big as the runtime was told)
// runs the tasks, and the library runs each call on the calling thread; kernels cannot ask
// KilnEnv how many threads it has, and a library's own pool would start as many threads as
// the machine has cores on top of Kiln's.
//  - OpenBLAS (Debian's pthread build): openblas_set_num_threads(1) once per kernel. The count
//    is global to the process, so other OpenBLAS users in the process become single-threaded.
//  - oneDNN (Debian's libdnnl2 is built for OpenMP, libgomp): every Kiln thread that calls
//    dnnl_sgemm is an OpenMP initial thread with its own team of omp_get_max_threads()
//    threads, so two pool threads on two cores start two more (measured: 6 threads in the
//    process instead of 4; 2 x 5 products of 256 x 1024 x 1024 took 155-167 ms against
//    104-135 ms single-threaded, and twice as long while other work ran). omp_set_num_threads(1)
//    sets only the calling thread's nthreads-var, so each task sets it before its call; Debian's
//    oneDNN has no threadpool API (DNNL_CPU_RUNTIME is OMP). omp_set_num_threads is libgomp's,
//    which libdnnl.so.2 needs: the loader and the JIT find it through the library's
//    dependencies.
#include <algorithm>
#include <string>

#include "compiler/arith/analyzer.h"
#include "compiler/schedule/conv_rule.h"
#include "compiler/schedule/rules.h"
#include "compiler/schedule/schedule_util.h"

namespace kiln::schedule {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::ForKind;
using ir::Stmt;

// Rows per task: enough that the library's packing of B is paid for by the product, few
// enough that a matrix of a few hundred rows feeds every thread. Columns per task likewise:
// a matrix-vector product or a pointwise conv over a large plane still makes several tasks.
constexpr int64_t kRowsPerTask = 64;
constexpr int64_t kColsPerTask = 512;
// An im2col buffer's size: a task's block of positions with all its taps stays in L2.
constexpr int64_t kIm2colBytes = int64_t{512} << 10;
// A split index (the conv's k over (c, kh, kw)) is checked value by value up to this extent.
constexpr int64_t kMaxCheckedExtent = int64_t{1} << 16;
// CBLAS's enums (cblas.h), and oneDNN's transposition flags ('N', 'T').
constexpr int64_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;
constexpr int64_t kDnnlNoTrans = 'N', kDnnlTrans = 'T';

bool UsesVar(const PrimExpr& e, const PrimExpr& var) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (v.get() == var.get()) return true;
  }
  return false;
}

// A matrix operand of sgemm: element [row, col] is buffer[indices] with the variables `row`
// and `col` in the indices. Rows lie `stride` elements apart and their elements next to each
// other, or, transposed, columns `stride` apart and rows next to each other.
struct Operand {
  Buffer buffer;
  std::vector<PrimExpr> indices;
  PrimExpr row, col;
  bool transposed = false;
  PrimExpr stride;

  // The element [r, c], as sgemm's pointer arguments are written (ir::ExternFunction).
  PrimExpr At(const PrimExpr& r, const PrimExpr& c) const {
    arith::Analyzer analyzer;
    std::vector<PrimExpr> at;
    for (const PrimExpr& index : indices) {
      at.push_back(analyzer.Simplify(Replace(index, {row, col}, {r, c})));
    }
    return arith::Load(buffer, std::move(at));
  }
  // sgemm wants a leading dimension of at least 1 even for empty matrices.
  PrimExpr Ld() const { return Max(stride, I(1)); }
};

// Whether indices [from, end) address element `var` of a dense run, var < extent: zeros, then
// var last; or a row-major split of var over constant extents (a conv's k over (c, kh, kw)),
// checked value by value.
bool AddressesRun(const std::vector<PrimExpr>& indices, size_t from, const Buffer& buffer,
                  const PrimExpr& var, const PrimExpr& extent) {
  if (from >= indices.size()) return false;
  bool zeros_then_var = IsVar(indices.back(), var);
  for (size_t d = from; d + 1 < indices.size(); ++d) {
    zeros_then_var = zeros_then_var && indices[d]->is_const_int(0);
  }
  if (zeros_then_var) return true;
  if (extent->kind != ExprKind::kIntImm || extent->int_value > kMaxCheckedExtent) return false;
  for (size_t d = from; d < indices.size(); ++d) {
    if (buffer->shape[d]->kind != ExprKind::kIntImm) return false;
  }
  for (int64_t v = 0; v < extent->int_value; ++v) {
    auto lookup = [&](const arith::ExprNode& e) -> std::optional<int64_t> {
      if (&e == var.get()) return v;
      return std::nullopt;
    };
    int64_t offset = 0;
    for (size_t d = from; d < indices.size(); ++d) {
      absl::StatusOr<int64_t> index = arith::EvaluateInt(indices[d], lookup);
      if (!index.ok() || *index < 0 || *index >= buffer->shape[d]->int_value) return false;
      offset = offset * buffer->shape[d]->int_value + *index;
    }
    if (offset != v) return false;
  }
  return true;
}

// `load` as an operand with rows `row` < rows and columns `col` < cols; the indices before the
// matrix's own must be free of the matmul's loop variables.
std::optional<Operand> MatchOperand(const PrimExpr& load, const PrimExpr& row, const PrimExpr& rows,
                                    const PrimExpr& col, const PrimExpr& cols, const Matmul& m) {
  if (load->kind != ExprKind::kLoad || load->dtype != DataType::Float(32) ||
      load->buffer->dtype != DataType::Float(32)) {
    return std::nullopt;
  }
  const std::vector<PrimExpr>& indices = load->args;
  for (size_t major = 0; major < indices.size(); ++major) {
    const bool by_rows =
        IsVar(indices[major], row) && AddressesRun(indices, major + 1, load->buffer, col, cols);
    const bool by_cols = !by_rows && IsVar(indices[major], col) &&
                         AddressesRun(indices, major + 1, load->buffer, row, rows);
    if (!by_rows && !by_cols) {
      for (const PrimExpr& var : {m.i.var, m.j.var, m.k}) {
        if (UsesVar(indices[major], var)) return std::nullopt;
      }
      continue;
    }
    PrimExpr stride = I(1);
    for (size_t d = major + 1; d < indices.size(); ++d) stride = stride * load->buffer->shape[d];
    return Operand{load->buffer, indices, row, col, by_cols, arith::Analyzer().Simplify(stride)};
  }
  return std::nullopt;
}

// C[b.., i, 0.., j] as an operand.
std::optional<Operand> OutputOperand(const Matmul& m) {
  std::vector<PrimExpr> indices;
  for (const Axis& axis : m.batch) indices.push_back(axis.var);
  indices.push_back(m.i.var);
  for (int64_t d = 0; d < m.c_flat_dims; ++d) indices.push_back(I(0));
  indices.push_back(m.j.var);
  if (indices.size() != m.c->shape.size()) return std::nullopt;
  std::optional<Operand> c =
      MatchOperand(arith::Load(m.c, indices), m.i.var, m.i.extent, m.j.var, m.j.extent, m);
  if (!c || c->transposed) return std::nullopt;
  return c;
}

// C[row0.., col0..] = A[row0.., :] @ B[:, col0..] for `rows` x `cols` elements, as `library`'s
// sgemm; and what keeps the library on the calling thread, per kernel or per task.
struct Sgemm {
  std::string_view library;

  // `*_at` are the operands' first elements.
  Stmt Call(const Operand& a, const PrimExpr& a_at, const Operand& b, const PrimExpr& b_at,
            const Operand& c, const PrimExpr& c_at, const PrimExpr& rows, const PrimExpr& cols,
            const PrimExpr& depth) const {
    if (library == "dnnl") {
      auto trans = [](const Operand& op) { return I(op.transposed ? kDnnlTrans : kDnnlNoTrans); };
      return ir::Evaluate(
          arith::Call(DataType::Int(32), "dnnl_sgemm",
                      {trans(a), trans(b), rows, cols, depth, arith::FloatImm(1), a_at, a.Ld(),
                       b_at, b.Ld(), arith::FloatImm(0), c_at, c.Ld()}));
    }
    auto trans = [](const Operand& op) { return I(op.transposed ? kTrans : kNoTrans); };
    return ir::Evaluate(
        arith::Call(DataType::Int(32), "cblas_sgemm",
                    {I(kRowMajor), trans(a), trans(b), rows, cols, depth, arith::FloatImm(1), a_at,
                     a.Ld(), b_at, b.Ld(), arith::FloatImm(0), c_at, c.Ld()}));
  }
  // One call per kernel (OpenBLAS's count is the process's) or per task (OpenMP's is the
  // thread's).
  std::optional<Stmt> SingleThreaded(bool per_task) const {
    const char* fn = library == "dnnl" ? "omp_set_num_threads" : "openblas_set_num_threads";
    if (per_task != (library == "dnnl")) return std::nullopt;
    return ir::Evaluate(arith::Call(DataType::Int(32), fn, {I(1)}));
  }
};

// The epilogue over rows [row0, row0 + rows) and columns [col0, col0 + cols) of C, finished
// and still in cache.
std::optional<Stmt> Epilogue(const Matmul& m, const PrimExpr& row0, const PrimExpr& rows,
                             const PrimExpr& col0, const PrimExpr& cols) {
  if (m.epilogue.empty()) return std::nullopt;
  Stmt columns = ir::For(m.j.var, col0, cols, ForKind::kVectorized, ir::Seq(m.epilogue));
  return ir::For(m.i.var, row0, rows, ForKind::kSerial, columns);
}

// for task in [0, tasks) parallel, binding the batch variables from task / blocks (row-major
// over the batch axes) around `body`, which reads task % blocks as its block.
Stmt OverTasks(const Matmul& m, const Sgemm& sgemm, const PrimExpr& task, const PrimExpr& blocks,
               Stmt body) {
  if (std::optional<Stmt> set = sgemm.SingleThreaded(true)) body = ir::Seq({*set, body});
  PrimExpr tasks = blocks, rest = FloorDiv(task, blocks);
  for (const Axis& axis : m.batch) tasks = tasks * axis.extent;
  for (auto axis = m.batch.rbegin(); axis != m.batch.rend(); ++axis) {
    body = ir::Let(axis->var, FloorMod(rest, axis->extent), body);
    rest = FloorDiv(rest, axis->extent);
  }
  std::vector<Stmt> kernel;
  if (std::optional<Stmt> set = sgemm.SingleThreaded(false)) kernel.push_back(*set);
  kernel.push_back(Loop(task, tasks, ForKind::kParallel, body));
  return ir::Seq(kernel);
}

// A and B read in place: tasks over the batch, blocks of kRowsPerTask rows and blocks of
// kColsPerTask columns.
Stmt InPlace(const Matmul& m, const Sgemm& sgemm, const Operand& a, const Operand& b,
             const Operand& c) {
  const PrimExpr task = arith::MakeVar("task");
  const PrimExpr row0 = arith::MakeVar("row0"), rows = arith::MakeVar("rows");
  const PrimExpr col0 = arith::MakeVar("col0"), cols = arith::MakeVar("cols");
  const PrimExpr row_blocks = CeilDiv(m.i.extent, kRowsPerTask);
  const PrimExpr col_blocks = CeilDiv(m.j.extent, kColsPerTask);
  std::vector<Stmt> steps = {sgemm.Call(a, a.At(row0, I(0)), b, b.At(I(0), col0), c,
                                        c.At(row0, col0), rows, cols, m.depth)};
  if (std::optional<Stmt> epilogue = Epilogue(m, row0, rows, col0, cols))
    steps.push_back(*epilogue);
  Stmt body = ir::Seq(steps);
  body = ir::Let(cols, Min(I(kColsPerTask), m.j.extent - col0), body);
  body = ir::Let(rows, Min(I(kRowsPerTask), m.i.extent - row0), body);
  const PrimExpr block = FloorMod(task, row_blocks * col_blocks);
  body = ir::Let(col0, FloorMod(block, col_blocks) * I(kColsPerTask), body);
  body = ir::Let(row0, FloorDiv(block, col_blocks) * I(kRowsPerTask), body);
  return OverTasks(m, sgemm, task, row_blocks * col_blocks, body);
}

// B gathered (a conv's input at each tap): tasks over the batch and blocks of positions, each
// gathering its block of B into a local buffer. nullopt where even a narrow block of B does
// not fit one.
std::optional<Stmt> Im2col(const Matmul& m, const Sgemm& sgemm, const Operand& a,
                           const Operand& c) {
  if (m.depth->kind != ExprKind::kIntImm) return std::nullopt;
  const int64_t depth = m.depth->int_value;
  const int64_t width = kIm2colBytes / 4 / std::max<int64_t>(depth, 1) / 8 * 8;
  if (width < 8) return std::nullopt;
  const PrimExpr task = arith::MakeVar("task");
  const PrimExpr col0 = arith::MakeVar("col0"), cols = arith::MakeVar("cols");
  const PrimExpr q = arith::MakeVar("q");
  const Buffer col = arith::MakeBuffer("im2col", DataType::Float(32), {m.depth, I(width)});
  const Operand b{col, {m.k, q}, m.k, q, false, I(width)};
  Stmt gather = Loop(m.k, m.depth, ForKind::kSerial,
                     Loop(q, cols, ForKind::kSerial,
                          ir::Store(col, {m.k, q}, Replace(m.b_load, {m.j.var}, {col0 + q}))));
  std::vector<Stmt> steps = {gather, sgemm.Call(a, a.At(I(0), I(0)), b, b.At(I(0), I(0)), c,
                                                c.At(I(0), col0), m.i.extent, cols, m.depth)};
  if (std::optional<Stmt> epilogue = Epilogue(m, I(0), m.i.extent, col0, cols)) {
    steps.push_back(*epilogue);
  }
  Stmt body = ir::Allocate(col, ir::Seq(steps));
  const PrimExpr blocks = CeilDiv(m.j.extent, width);
  body = ir::Let(cols, Min(I(width), m.j.extent - col0), body);
  body = ir::Let(col0, FloorMod(task, blocks) * I(width), body);
  return OverTasks(m, sgemm, task, blocks, body);
}

}  // namespace

const std::vector<std::string>& LibraryRules() {
  static const auto* libraries = new std::vector<std::string>{"openblas", "dnnl"};
  return *libraries;
}

std::optional<ScheduledKernel> ScheduleAsLibraryCall(const Stmt& body, const ir::Target& target,
                                                     std::string_view library) {
  if (!target.HasLibrary(library) ||
      std::find(LibraryRules().begin(), LibraryRules().end(), library) == LibraryRules().end()) {
    return std::nullopt;
  }
  std::optional<Matmul> m = MatchMatmul(body);
  if (!m) m = MatchConvAsMatmul(body);
  if (!m || m->b_packed) return std::nullopt;
  std::optional<Operand> a = MatchOperand(m->a_load, m->i.var, m->i.extent, m->k, m->depth, *m);
  std::optional<Operand> c = OutputOperand(*m);
  if (!a || !c) return std::nullopt;
  const Sgemm sgemm{library};
  if (std::optional<Operand> b =
          MatchOperand(m->b_load, m->k, m->depth, m->j.var, m->j.extent, *m)) {
    return ScheduledKernel{InPlace(*m, sgemm, *a, *b, *c), std::nullopt};
  }
  // Only a conv's B is gathered (MatchMatmul's are loads).
  if (m->c_flat_dims == 0) return std::nullopt;
  std::optional<Stmt> im2col = Im2col(*m, sgemm, *a, *c);
  if (!im2col) return std::nullopt;
  return ScheduledKernel{*im2col, std::nullopt};
}

std::vector<SearchSpace> LibrarySpaces(const Stmt& body, const ir::Target& target) {
  std::vector<SearchSpace> spaces;
  for (const std::string& library : LibraryRules()) {
    if (ScheduleAsLibraryCall(body, target, library)) spaces.push_back({library, {}});
  }
  return spaces;
}

}  // namespace kiln::schedule
