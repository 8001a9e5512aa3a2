// Host lowering's state and steps, shared by lower_host.cc (bindings, shapes, workspace,
// kernel calls) and lower_host_control.cc (if, scan and loop bodies). Internal to them.
#pragma once

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/ir/pass_context.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/plan_memory.h"

namespace kiln::transform::host {

using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;
namespace intrinsic = ir::intrinsic;

inline PrimExpr I32(int64_t v) { return arith::IntImm(v, DataType::Int(32)); }

inline PrimExpr HostCall(DataType dtype, const char* name, std::vector<PrimExpr> args) {
  return arith::Call(dtype, name, std::move(args));
}

// A straight-line host program under construction. `Let` scopes everything emitted after it,
// so the program is kept flat and nested only when it is finished. A Let's value may be set
// later (workspace offsets are known only once every lifetime is), or the Let dropped.
class HostProgram {
 public:
  size_t Let(PrimExpr var, PrimExpr value) {
    items_.push_back({var, value, nullptr});
    return items_.size() - 1;
  }
  void Emit(Stmt stmt) { items_.push_back({nullptr, nullptr, stmt}); }
  void SetLetValue(size_t item, PrimExpr value) { items_[item].value = std::move(value); }
  void DropLet(size_t item) { items_[item].dropped = true; }

  Stmt Finish() const {
    std::vector<Stmt> tail;
    Stmt body = ir::Seq({});
    for (size_t i = items_.size(); i-- > 0;) {
      const Item& item = items_[i];
      if (item.dropped) continue;
      if (item.stmt) {
        tail.insert(tail.begin(), item.stmt);
        continue;
      }
      body = ir::Let(item.var, item.value, ir::Seq(tail));
      tail = {body};
    }
    return ir::Seq(tail);
  }

 private:
  struct Item {
    PrimExpr var, value;
    Stmt stmt;
    bool dropped = false;
  };
  std::vector<Item> items_;
};

struct TensorShape {
  const std::vector<PrimExpr>* dims;
};

class HostLowering {
 public:
  HostLowering(ir::IRModule& module, const ir::Function& func, ir::PassContext& context)
      : module_(module),
        func_(func),
        context_(context),
        device_(context.schedule_target.value_or(context.target).IsGpu()) {
    if (func.result->kind == ir::ExprKind::kTuple) {
      outputs_ = func.result->args;
    } else {
      outputs_ = {func.result};
    }
  }

  absl::Status Run();

 private:
  static ir::PrimFunc HostFunc(const std::string& name, Stmt body);

  absl::Status CheckShapesKnown() const;

  // Every symbolic var must appear as a whole dim of some input, or nothing can bind it.
  absl::Status CheckAllVarsBindable();

  // Symbolic vars bound to the values of a small integer tensor (match_cast of
  // tensor_to_shape, made by the importer for a reshape target, say). Host code reads the
  // values of a graph input before anything else runs, so that the workspace can be sized
  // from them. The values of a kernel's result (a count that sizes a data-dependent output)
  // are read right after that kernel: they bind run-time vars (BindRunTimeValues).
  absl::Status CollectInputValueVars();

  absl::Status CollectRunTimeVars(const ir::Binding& b);

  bool IsValueVar(const PrimExpr& var) const;

  // Whether `e` uses a var that is bound only once a kernel has run.
  bool UsesRunTimeVar(const PrimExpr& e) const;

  // `%c: Shape([expected]) = match_cast(shape([actual]), ...)`: a constraint on run-time
  // values that shape inference assumed (ImportContext::CheckAtRunTime).
  static bool IsValueCheck(const ir::Binding& b);

  // Checks each constraint right after the values are bound, before any shape built on them
  // is used, and reports it against the input whose values break it.
  void CheckValueConstraints(HostProgram& p) const;

  void EmitValueCheck(HostProgram& p, const ir::Binding& b) const;

  // A constraint on run-time vars is checked where it stands, once they are bound.
  bool IsRunTimeCheck(const ir::Binding& b) const;

  // The input whose values `e` reads, or -1.
  int64_t InputOfValues(const PrimExpr& e) const;

  static bool IsTensorToShape(const ir::Binding& b);

  // Lets each value var be its element of the input's data. kiln_infer_shapes therefore
  // needs the data of such inputs too (kiln/artifact_abi.h): NULL data is reported.
  void BindInputValues(HostProgram& p) const;

  // The extent a float scale makes of `dim`, as tensor_to_shape(scales, dims) defines it:
  // trunc(dim * scale) in double, -1 (reported by the non-negative check that follows it)
  // where the scale is not positive.
  static PrimExpr ScaledExtent(const PrimExpr& element, const PrimExpr& dim);

  // `kiln compile --dim-bound seq=4096`: the planner may size storage for seq <= 4096, so
  // the host checks that bound before anything runs.
  absl::Status BindUserBounds();

  // The var object bound from input dim `at`.
  const PrimExpr& BinderVar(std::pair<size_t, size_t> at) const;

  // Binds each symbolic var from the first input dim that is exactly it, then checks every
  // other input dim against what the model says it must be, and every var against its bound.
  void BindAndCheckInputs(HostProgram& p) const;

  PrimExpr InputDim(size_t i, size_t d) const { return (*func_.params[i]->struct_info.shape)[d]; }

  static Stmt CheckDim(int is_output, size_t index, size_t dim, PrimExpr expected, PrimExpr actual);

  // An output shape that depends on data is known only once the kernels that count it have
  // run: kiln_infer_shapes runs the program up to the last such count, on the inputs' data,
  // with every result, outputs too, in the workspace.
  absl::StatusOr<Stmt> InferShapes();

  bool OutputShapesUseRunTimeVars() const;

  // Every input with elements: the kernels that count may read any of them. An empty one
  // may come without data.
  void RequireInputData(HostProgram& p) const;

  void BindInputData(HostProgram& p);

  // What lowering the bindings recorded, so that kiln_run lowers them anew.
  void ForgetBindings();

  absl::StatusOr<Stmt> RunBody();

  // Calls each kernel in order. This is where memory is managed: each result of a kernel call
  // (every field of a tuple result) that is not a graph output lives in the workspace, from
  // the call that produces it to the last binding that uses it or any TupleGetItem of it.
  // Once every lifetime is known, the planner packs them into one workspace, allocated once;
  // or one per run-time binding, for the results whose size depends on what it binds.
  // Shape only (kiln_infer_shapes), it stops after the last run-time binding or check.
  absl::Status EmitBindings(HostProgram& p);

  bool IsRunTimeBinding(const ir::Binding& b) const;

  // `%s: Shape([n]) = match_cast(tensor_to_shape(%count))` where a kernel made %count: reads
  // its values, now that it exists, into n; results sized by n get a workspace of their own
  // from here on. kiln_run checks each output dim made of such vars once they are bound.
  void BindRunTimeValues(HostProgram& p, const ir::Binding& b);

  void CheckRunTimeOutputDims(HostProgram& p);

  bool RunTimeVarsBound(const PrimExpr& e) const;

  // A workspace whose size the planner may state in every var bound so far.
  void OpenSegment(HostProgram& p);

  // The workspace a result of `bytes` lives in: the latest one whose vars its size uses.
  size_t SegmentOf(const PrimExpr& bytes) const;

  // A size at the user's bounds when they bound it, else its formula.
  PrimExpr AtBounds(const PrimExpr& bytes) const;

  void PlaceInWorkspaces(HostProgram& p);

  MemoryPlan PlaceInWorkspace(HostProgram& p, size_t segment);

  absl::Status EmitKernelCall(HostProgram& p, const ir::Binding& b);

  // ---- Device artifacts (kernels scheduled for a GPU): kernels see only device memory. Every
  // input gets a device copy and every result, outputs too, lives in the (device) workspace;
  // outputs are copied back at the end. The host reads kernels' results (counts, conditions)
  // element by element from the device, and runs each kernel call as a launch.
  void CopyInputsToDevice(HostProgram& p);
  void CopyOutputsToHost(HostProgram& p, size_t end);

  // The kernel call `call` as a statement: the call itself, or for a device its launch over
  // the blocks and threads of its gpu_block and gpu_thread loops.
  Stmt RunKernel(PrimExpr call) const;

  // Element `k` (of type `dtype`) of a kernel's result at `data`.
  PrimExpr ReadResultElement(DataType dtype, PrimExpr data, int64_t k) const;

  // Where each result of binding `b` (each field of a tuple) goes: straight into a graph
  // output, or a new intermediate in the workspace, its handle Let in the top-level program
  // (a body's intermediates too, so that the planner places them all).
  absl::StatusOr<std::vector<size_t>> ResultStorages(const ir::Binding& b);

  size_t AddIntermediate(const std::string& name, PrimExpr bytes);

  // ---- Control flow: lower_host_control.cc (if, loop and scan bodies in host code).
  static bool IsControlFlow(const ir::ExprNode& value);

  // A value of an enclosing scope that a body reads lives until the binding that runs it.
  void MarkSubgraphUses(const ir::Function& f, size_t i);

  void MarkUse(const ir::Expr& e, size_t i);

  static absl::Status ControlFlowError(const ir::Binding& b, const std::string& what);

  absl::Status EmitControlFlow(HostProgram& p, const ir::Binding& b);

  // Lowers the bindings of `body`, a body of control-flow binding `b`, into `q`.
  absl::Status EmitBody(HostProgram& q, const ir::Binding& b, const ir::Function& body);

  absl::Status EmitBodyBindings(HostProgram& q, const ir::Function& body);

  // `%s: Shape([n]) = match_cast(tensor_to_shape(%t))` in a body: n is Let from %t's values
  // in each iteration (the Let is in the iteration's program), before the kernels that use it.
  void BindBodyValues(HostProgram& q, const ir::Binding& b);

  // `%kept: Tensor(state) = match_cast(%v, Tensor(state))`, which bind_loop_trip_counts puts
  // on a loop's carried results: %v, whose shape the iteration computed, must have the loop
  // state's shape (its buffer). Checked each iteration; %kept is %v's buffer.
  absl::Status CheckKeptShape(HostProgram& q, const ir::Binding& b);

  // The bytes a body's result of shape `info` gets in the workspace, which is planned before
  // the loop runs: its size, or the constant bound of its size where that uses vars the body
  // binds itself (each iteration then uses a prefix of the buffer).
  absl::StatusOr<PrimExpr> BodyBytes(const std::string& name, const ir::StructInfo& info);

  // A shape in a body may use only vars the host bound before the body runs: a shape that
  // the body computes could change from one iteration to the next.
  absl::Status CheckShapeBound(const std::string& name, const ir::StructInfo& info);

  // The fields of the tuple a body returns.
  static absl::StatusOr<std::vector<ir::Expr>> BodyResults(const ir::Binding& b,
                                                           const ir::Function& body, size_t n);

  // A loop-carried value keeps one buffer for all iterations: its shape must not change.
  absl::Status CheckCarried(const ir::Binding& b, const ir::Expr& param, const ir::Expr& initial);

  // dst[0, bytes) = src[0, bytes), by a byte-copy kernel made here.
  Stmt Copy(PrimExpr dst, PrimExpr src, PrimExpr bytes);

  // dst[0] = value, an element of `dtype` (i64 or u8), by a kernel made here.
  Stmt StoreScalar(PrimExpr dst, DataType dtype, PrimExpr value);

  // Whether the bool scalar at `data` is true.
  PrimExpr IsTrue(PrimExpr data) const;

  static PrimExpr Offset(PrimExpr data, PrimExpr bytes);

  // if (cond) then_branch else else_branch: each branch runs its kernels, then copies its
  // results into the if's.
  absl::Status EmitIf(HostProgram& p, const ir::Binding& b);

  // Writes a body's new carried values over the old ones. A new value that is another
  // carried value's buffer (a swap) is staged in a buffer of its own first, so that no copy
  // reads what an earlier one overwrote.
  void UpdateCarried(HostProgram& q, const ir::Binding& b, const std::vector<ir::Expr>& next,
                     const std::vector<size_t>& carried, const std::vector<PrimExpr>& bytes);

  // scan(state..., inputs...): for t in [0, length): the body reads the state and slice t of
  // each input, and its results are the next state and slice t of each output. The state
  // lives in the scan's own results; slices along axis 0 are offsets, no copies.
  absl::Status EmitScan(HostProgram& p, const ir::Binding& b);

  // loop(M, cond, v...): for i in [0, M) while cond, the body reads (i, cond, v...) and
  // returns (cond, v..., scan...). Host code cannot leave a loop early, so iterations past a
  // false condition do nothing. Carried values live in the loop's own results, the iteration
  // number and the condition in buffers of their own. Scan outputs have as many slices as
  // iterations ran: bind_loop_trip_counts (legalize_control.h) made their buffers M slices
  // long and added a last result, the count of iterations that ran.
  absl::Status EmitLoop(HostProgram& p, const ir::Binding& b);

  // The graph output that a kernel's result `k` is written to directly, or null.
  PrimExpr OutputHandle(const ir::ExprNode* var, bool is_tuple, size_t k) const;

  // `%v = %t.k` reads field k where the kernel that made %t wrote it: no copy.
  absl::Status AliasTupleField(const ir::Binding& b);

  PrimExpr ByteSize(const ir::StructInfo& info);

  size_t AddStorage(PrimExpr handle, bool intermediate);

  // A storage lives until the last use of any value that holds it.
  void AssignStorages(const ir::ExprNode* value, std::vector<size_t> storages);

  absl::StatusOr<PrimExpr> KernelCall(const ir::ExprNode& call, const std::vector<size_t>& outputs);

  PrimExpr DataHandle(const ir::Expr& value);

  // Where a tensor's data lives: an input, an output or workspace.
  struct Storage {
    PrimExpr handle;
    bool intermediate;                   // in the workspace (not an input, output or constant)
    size_t first_use = 0, last_use = 0;  // the bindings that produce it and last read it
    PrimExpr bytes;                      // intermediates: size and the Let of their handle
    size_t let_item = 0;
    size_t segment = 0;  // the workspace it lives in
  };

  ir::IRModule& module_;
  const ir::Function& func_;
  std::vector<ir::Expr> outputs_;
  std::map<const arith::ExprNode*, std::pair<size_t, size_t>> binder_;  // var -> (input, dim)
  struct InputValue {
    PrimExpr var;
    size_t input, element;
    DataType dtype;       // the input's element type
    PrimExpr scaled_dim;  // tensor_to_shape(scales, dims): the dim this scale applies to
  };
  std::vector<InputValue> value_binder_;
  std::map<const ir::ExprNode*, PrimExpr> output_handles_;  // output var -> kiln.output_data
  // (tuple var, field index) -> the output that field is, when a TupleGetItem makes it one.
  std::map<std::pair<const ir::ExprNode*, int>, PrimExpr> output_fields_;
  std::vector<Storage> storages_;
  // The storages of each value: one for a tensor, one per field for a tuple.
  std::map<const ir::ExprNode*, std::vector<size_t>> storage_of_;
  std::map<const ir::ExprNode*, size_t> last_use_;
  arith::Analyzer analyzer_;  // knows the user's dim bounds
  std::map<const ir::NDArray*, size_t> constant_index_;
  ir::PassContext& context_;
  std::vector<std::pair<const arith::ExprNode*, int64_t>> bounded_;  // var, user bound
  size_t binding_index_ = 0;                                         // the binding being lowered
  // Vars bound from values that kernels compute, and the workspace opened after each binds.
  std::set<const arith::ExprNode*> run_time_vars_;
  std::map<const arith::ExprNode*, size_t> segment_of_var_;
  struct Segment {
    PrimExpr workspace;
    size_t let_item;
  };
  std::vector<Segment> segments_;
  std::set<std::pair<size_t, size_t>> checked_output_dims_;  // (output, dim)
  HostProgram* top_ = nullptr;  // the function's program; nested ones are control-flow bodies
  // The control-flow bindings whose bodies are being lowered, innermost last.
  std::vector<const ir::Binding*> body_of_;
  bool shape_only_ = false;  // kiln_infer_shapes: no output data, stop at the last count
  const bool device_;        // the kernels run on a device (a GPU, or one emulated on the CPU)
  // Vars that bodies bind from values they compute, per iteration (BindBodyValues).
  std::set<const arith::ExprNode*> body_vars_;
};

}  // namespace kiln::transform::host
