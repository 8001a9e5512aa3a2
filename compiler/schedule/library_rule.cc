// The library rule: a matmul kernel as calls to OpenBLAS's cblas_sgemm, for targets that have
// the library (libraries=openblas). The tuner measures it against the generated form.
//
//   openblas_set_num_threads(1)
//   for t in [0, batch * ceil(M / 64)) parallel
//     let b.. = t's batch element, row0 = t's first row, rows = min(64, M - row0)
//     cblas_sgemm(row-major, A rows [row0, row0 + rows) of batch element b.., B of b..,
//                 C rows [row0, row0 + rows) of b..)
//     for i in [row0, row0 + rows) { for j in [0, N) vectorized { epilogue } }
//
// Threads: the artifact's thread pool (KilnEnv::parallel_for, as big as the runtime was told)
// runs the tasks, and OpenBLAS runs each call on the calling thread. OpenBLAS's own pool
// would start as many threads as the machine has cores whatever the runtime was told, and
// kernels cannot ask KilnEnv how many threads it has. The count is global to the process, so
// setting it here also makes other OpenBLAS users in the process single-threaded.
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

// Rows per task: enough that OpenBLAS's packing of B is paid for by the product, few enough
// that a matrix of a few hundred rows feeds every thread.
constexpr int64_t kRowsPerTask = 64;
// CBLAS's enums (cblas.h).
constexpr int64_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

bool UsesVar(const PrimExpr& e, const PrimExpr& var) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (v.get() == var.get()) return true;
  }
  return false;
}

// A matrix operand of sgemm: load buffer[lead.., row, col] (or [lead.., col, row] when
// transposed), lead free of the matmul's loop variables.
struct Operand {
  Buffer buffer;
  std::vector<PrimExpr> lead;
  bool transposed = false;

  // The address of element [row, col] of this batch element's matrix, as sgemm's pointer
  // arguments are written (ir::ExternFunction): a load of it.
  PrimExpr At(PrimExpr row, PrimExpr col) const {
    std::vector<PrimExpr> indices = lead;
    indices.push_back(transposed ? col : row);
    indices.push_back(transposed ? row : col);
    return arith::Load(buffer, std::move(indices));
  }
  // The distance between rows as stored; sgemm wants at least 1 even for empty matrices.
  PrimExpr Stride() const { return Max(buffer->shape.back(), I(1)); }
  PrimExpr Trans() const { return I(transposed ? kTrans : kNoTrans); }
};

std::optional<Operand> MatchOperand(const PrimExpr& load, const PrimExpr& row, const PrimExpr& col,
                                    const Matmul& m) {
  if (load->kind != ExprKind::kLoad || load->dtype != DataType::Float(32) ||
      load->buffer->dtype != DataType::Float(32) || load->args.size() < 2) {
    return std::nullopt;
  }
  Operand op{load->buffer, {load->args.begin(), load->args.end() - 2}};
  const PrimExpr& second_last = load->args[load->args.size() - 2];
  const PrimExpr& last = load->args.back();
  if (IsVar(second_last, row) && IsVar(last, col)) {
    op.transposed = false;
  } else if (IsVar(second_last, col) && IsVar(last, row)) {
    op.transposed = true;
  } else {
    return std::nullopt;
  }
  for (const PrimExpr& index : op.lead) {
    for (const PrimExpr& var : {m.i.var, m.j.var, m.k}) {
      if (UsesVar(index, var)) return std::nullopt;
    }
  }
  return op;
}

}  // namespace

std::optional<ScheduledKernel> ScheduleMatmulAsLibraryCall(const Stmt& body,
                                                           const ir::Target& target) {
  if (!target.HasLibrary("openblas")) return std::nullopt;
  std::optional<Matmul> m = MatchMatmul(body);
  if (!m || m->c_flat_dims != 0 || m->b_packed) return std::nullopt;
  std::optional<Operand> a = MatchOperand(m->a_load, m->i.var, m->k, *m);
  std::optional<Operand> b = MatchOperand(m->b_load, m->k, m->j.var, *m);
  if (!a || !b) return std::nullopt;
  std::vector<PrimExpr> batch_vars;
  for (const Axis& axis : m->batch) batch_vars.push_back(axis.var);
  Operand c{m->c, batch_vars};

  // Task t: row block t % blocks of batch element t / blocks (row-major over the batch axes).
  const PrimExpr task = arith::MakeVar("task");
  const PrimExpr row0 = arith::MakeVar("row0");
  const PrimExpr rows = arith::MakeVar("rows");
  const PrimExpr blocks = CeilDiv(m->i.extent, kRowsPerTask);
  PrimExpr tasks = blocks;
  for (const Axis& axis : m->batch) tasks = tasks * axis.extent;

  Stmt product = ir::Evaluate(
      arith::Call(DataType::Int(32), "cblas_sgemm",
                  {I(kRowMajor), a->Trans(), b->Trans(), rows, m->j.extent, m->depth,
                   arith::FloatImm(1), a->At(row0, I(0)), a->Stride(), b->At(I(0), I(0)),
                   b->Stride(), arith::FloatImm(0), c.At(row0, I(0)), c.Stride()}));
  std::vector<Stmt> steps = {product};
  if (!m->epilogue.empty()) {
    // The task's rows of C are finished and still in cache: each element gets its epilogue.
    Stmt columns = ir::For(m->j.var, I(0), m->j.extent, ForKind::kVectorized, ir::Seq(m->epilogue));
    steps.push_back(ir::For(m->i.var, row0, rows, ForKind::kSerial, columns));
  }
  Stmt task_body = ir::Let(rows, Min(I(kRowsPerTask), m->i.extent - row0), ir::Seq(steps));
  task_body = ir::Let(row0, FloorMod(task, blocks) * I(kRowsPerTask), task_body);
  PrimExpr rest = FloorDiv(task, blocks);
  for (auto axis = m->batch.rbegin(); axis != m->batch.rend(); ++axis) {
    task_body = ir::Let(axis->var, FloorMod(rest, axis->extent), task_body);
    rest = FloorDiv(rest, axis->extent);
  }
  Stmt kernel = ir::Seq({
      ir::Evaluate(arith::Call(DataType::Int(32), "openblas_set_num_threads", {I(1)})),
      Loop(task, tasks, ForKind::kParallel, task_body),
  });
  return ScheduledKernel{kernel, std::nullopt};
}

SearchSpace LibrarySpace() { return {"openblas", {}}; }

}  // namespace kiln::schedule
