// tensorc-schedule: reorders a function's top-level ops to lower its peak
// memory when the dataflow allows a choice. Greedy list scheduling: among the
// ops whose operands are all computed, run next the one that frees the most
// bytes net of what it allocates (ties: program order). The new order is kept
// only if its peak of live intermediate bytes is lower than the original's.
// Views (reshapes) are free and follow their operand's lifetime, as in
// tensorc-plan-memory.
//
// Then every collective of a computed value (a gradient's all_reduce or
// reduce_scatter) moves up to right after the op that computes it: the CUDA
// runtime runs collectives on a communication stream beside the compute
// stream, so one issued as soon as its operand exists overlaps the work
// still to come (DDP's gradient buckets start while backward runs).
// Collectives of function arguments (FSDP's parameter all_gathers) stay
// where they are: gathering every parameter up front would hold them all.
#include "passes/Passes.h"

#include "ir/dialect/Conversion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <numeric>

namespace tensorc {

#define GEN_PASS_DEF_SCHEDULEPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

int64_t bytesAt(Value v, const std::map<std::string, int64_t> &dims) {
  std::optional<TensorSpec> spec = tc::toTensorSpec(v.getType());
  if (!spec)
    return 0;
  int64_t n = int64_t(dtypeSize(spec->dtype));
  for (const Dim &d : spec->shape)
    n *= d.evaluate(dims).value_or(64);
  return n;
}

struct Scheduler {
  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, int> index;
  llvm::DenseSet<Value> external; // function arguments and returned values: not intermediates
  std::map<std::string, int64_t> dims;

  // Peak bytes of intermediates live at once under `order`.
  int64_t peak(const std::vector<int> &order) {
    llvm::DenseMap<Value, int> lastUse;
    for (size_t s = 0; s < order.size(); ++s)
      for (Value v : ops[order[s]]->getOperands())
        lastUse[v] = int(s);
    int64_t live = 0, best = 0;
    for (size_t s = 0; s < order.size(); ++s) {
      for (Value r : ops[order[s]]->getResults())
        if (!external.contains(r) && !r.use_empty())
          live += bytesAt(r, dims);
      best = std::max(best, live);
      for (Value v : ops[order[s]]->getOperands())
        if (lastUse.lookup(v) == int(s) && !external.contains(v) && v.getDefiningOp() &&
            index.count(v.getDefiningOp()))
          live -= bytesAt(v, dims);
    }
    return best;
  }

  std::vector<int> greedy() {
    llvm::DenseMap<Value, int> remainingUses;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        remainingUses[v]++;
    std::vector<int> pending(ops.size(), 0), order;
    std::vector<std::vector<int>> users(ops.size());
    for (size_t i = 0; i < ops.size(); ++i)
      for (Value v : ops[i]->getOperands())
        if (Operation *d = v.getDefiningOp(); d && index.count(d)) {
          users[index[d]].push_back(int(i));
          ++pending[i];
        }
    std::vector<bool> done(ops.size(), false);
    for (size_t step = 0; step < ops.size(); ++step) {
      int pick = -1;
      int64_t bestGain = INT64_MIN;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (done[i] || pending[i] > 0)
          continue;
        int64_t gain = 0;
        for (Value r : ops[i]->getResults())
          if (!external.contains(r))
            gain -= bytesAt(r, dims);
        llvm::DenseSet<Value> seen;
        for (Value v : ops[i]->getOperands())
          if (seen.insert(v).second &&
              remainingUses[v] == int(llvm::count(ops[i]->getOperands(), v)) && v.getDefiningOp() &&
              index.count(v.getDefiningOp()) && !external.contains(v))
            gain += bytesAt(v, dims);
        if (gain > bestGain) {
          bestGain = gain;
          pick = int(i);
        }
      }
      done[pick] = true;
      order.push_back(pick);
      for (Value v : ops[pick]->getOperands())
        remainingUses[v]--;
      for (int u : users[pick])
        --pending[u];
    }
    return order;
  }
};

struct SchedulePass : impl::SchedulePassBase<SchedulePass> {
  using SchedulePassBase::SchedulePassBase;
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) {
      Scheduler s;
      Block &body = fn.getBody().front();
      for (Operation &op : body.without_terminator()) {
        s.index[&op] = int(s.ops.size());
        s.ops.push_back(&op);
      }
      for (BlockArgument a : body.getArguments())
        s.external.insert(a);
      for (Value v : body.getTerminator()->getOperands())
        s.external.insert(v);
      if (auto bounds = fn->getAttrOfType<DictionaryAttr>("tc.dim_bounds"))
        for (NamedAttribute b : bounds) {
          auto range = llvm::cast<DenseI64ArrayAttr>(b.getValue());
          s.dims[b.getName().getValue().str()] =
              std::max<int64_t>(range[0], range.size() > 1 ? std::min<int64_t>(range[1], 64) : 64);
        }
      std::vector<int> original(s.ops.size());
      std::iota(original.begin(), original.end(), 0);
      std::vector<int> order = s.greedy();
      if (s.peak(order) < s.peak(original)) {
        Operation *terminator = body.getTerminator();
        for (int i : order)
          s.ops[i]->moveBefore(terminator);
      }
      issueCollectivesEarly(body);
      bucketSmallCollectives(body, s.dims);
    });
  }

  // A collective of under kBucketBytes then waits for the next collective
  // (if none of its users comes first), so that the two are consecutive and
  // the CUDA runtime sends them to NCCL as one group, one kernel: a layer's
  // bias and norm gradients ride with a weight's, as in DDP's buckets. Each
  // NCCL kernel costs its latency and takes SMs from the kernels it
  // overlaps.
  static constexpr int64_t kBucketBytes = 1 << 20;
  static void bucketSmallCollectives(Block &body, const std::map<std::string, int64_t> &dims) {
    std::vector<Operation *> collectives = collectivesOf(body);
    // From the last: a run of small ones gathers before the next big one.
    for (size_t i = collectives.size(); i-- > 1;) {
      Operation *op = collectives[i - 1], *next = collectives[i];
      int64_t bytes = 0;
      for (Value r : op->getResults())
        bytes += bytesAt(r, dims);
      if (bytes >= kBucketBytes)
        continue;
      bool usedBefore = false;
      for (Value r : op->getResults())
        for (Operation *u : r.getUsers())
          usedBefore |= u->getBlock() == &body && u != body.getTerminator() && !next->isBeforeInBlock(u);
      if (!usedBefore && op->isBeforeInBlock(next))
        op->moveBefore(next);
    }
  }

  static std::vector<Operation *> collectivesOf(Block &body) {
    std::vector<Operation *> collectives;
    for (Operation &op : body.without_terminator())
      if (const OpSchema *schema = tc::schemaOf(&op); schema && schema->category == "collective")
        collectives.push_back(&op);
    return collectives;
  }

  static void issueCollectivesEarly(Block &body) {
    for (Operation *op : collectivesOf(body)) {
      // The latest of its operands' producers in this block; none (only
      // arguments) or one in another block: it stays.
      Operation *after = nullptr;
      for (Value v : op->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (!d || d->getBlock() != &body) {
          after = nullptr;
          break;
        }
        if (!after || after->isBeforeInBlock(d))
          after = d;
      }
      if (after && after->isBeforeInBlock(op))
        op->moveAfter(after);
    }
  }
};

} // namespace
} // namespace tensorc
