// tensorc-fuse: groups ops into kernels (tc.fused regions) and leaves
// matmul/conv as library calls. Decisions follow docs/fusion.md:
//
//  - elementwise ops and views join their producer's or consumer's kernel
//    (vertical fusion, multi-output kernels instead of recomputation, so no
//    work is duplicated and nothing is materialized twice);
//  - a kernel has at most one anchor: a reduction/normalization/loss/pooling
//    op, a gather-like op, a matmul/conv (epilogue only: the library call
//    reads its operands from memory) or attention (its own kernel);
//  - reductions of the same input over the same shape that do not depend on
//    each other share a kernel (horizontal fusion);
//  - creation ops (constants, iota, ...) are cloned into each kernel using
//    them; so are broadcasts of small data (a one-hot eq(target[N,1],
//    iota[1,C]), a causal mask): recomputed in each consumer's kernel, never
//    a [N,C] tensor in memory; reshape-like views of kernel boundaries alias
//    and launch nothing;
//  - a merge that would create a cycle between kernels is refused.
// With report=true the pass prints every kernel, its ops, and why each
// unfused producer/consumer pair was not fused.
#include "passes/Passes.h"

#include "ir/core/FusedAttention.h"

#include "ir/core/ReductionSplit.h"
#include "ir/dialect/Conversion.h"
#include "ir/dialect/MatrixTranspose.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <numeric>
#include <set>

namespace tensorc {

#define GEN_PASS_DEF_FUSIONPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// Scatter: embedding_backward, a scatter-add step of the runtime's (rows
// summed at computed indices: no loop nest writes that).
enum class Kind { Elementwise, View, Creation, Reduction, Matmul, Attention, Gather, Collective, Scatter };

Kind classify(Operation *op) {
  static const std::set<std::string> views = {"reshape",      "permute", "transpose",
                                              "broadcast_to", "squeeze", "unsqueeze",
                                              "flatten",      "slice",   "pad"};
  static const std::set<std::string> creation = {"constant", "full", "zeros", "ones", "iota"};
  static const std::set<std::string> reductions = {
      "sum",        "mean",          "max",        "min",         "prod",       "var",
      "logsumexp",  "argmax",     "argmin",        "softmax",    "log_softmax", "layer_norm", "rms_norm",
      "batch_norm", "cross_entropy", "max_pool2d", "avg_pool2d", "max_pool2d_backward", "max_pool2d_taps"};
  static const std::set<std::string> gathers = {"embedding", "gather", "index_select", "concat",
                                                "split"};
  std::string name = op->getName().getStringRef().drop_front(3).str(); // "tc."
  if (views.count(name))
    return Kind::View;
  if (creation.count(name))
    return Kind::Creation;
  if (reductions.count(name))
    return Kind::Reduction;
  if (gathers.count(name))
    return Kind::Gather;
  if (name == "matmul" || name == "conv2d" || name == "conv2d_backward_input" || name == "conv2d_backward_weight")
    return Kind::Matmul;
  if (isFusedAttentionOp(name))
    return Kind::Attention;
  if (name == "embedding_backward")
    return Kind::Scatter;
  if (const OpSchema *schema = tc::schemaOf(op); schema && schema->category == "collective")
    return Kind::Collective;
  return Kind::Elementwise;
}

bool isAnchor(Kind k) {
  return k == Kind::Reduction || k == Kind::Matmul || k == Kind::Attention || k == Kind::Gather ||
         k == Kind::Collective || k == Kind::Scatter;
}

// Whether `operand` reaches `result`'s shape by broadcasting along at least
// one dim (numpy alignment from the right): it has fewer elements along a
// dim of extent other than 1, whatever the symbolic sizes are.
bool isBroadcastInto(Value operand, Value result) {
  auto in = llvm::dyn_cast<tc::TcTensorType>(operand.getType());
  auto out = llvm::dyn_cast<tc::TcTensorType>(result.getType());
  if (!in || !out)
    return false;
  auto inSizes = in.getSizes(), outSizes = out.getSizes();
  if (inSizes.size() > outSizes.size())
    return false;
  size_t lead = outSizes.size() - inSizes.size();
  auto isOne = [](int64_t size) { return size == 1; }; // symbolic sizes are never 1
  for (size_t d = 0; d < outSizes.size(); ++d) {
    if (isOne(outSizes[d]))
      continue;
    if (d < lead || isOne(inSizes[d - lead]))
      return true;
  }
  return false;
}

bool isPureReshape(Operation *op) {
  StringRef n = op->getName().getStringRef();
  return n == "tc.reshape" || n == "tc.squeeze" || n == "tc.unsqueeze" || n == "tc.flatten";
}

// Elementwise ops and views computed from creation ops and broadcasts of
// smaller data only: recomputing them in each consumer's kernel reads little,
// materializing them writes and reads a full tensor. (A one-hot
// eq(target[N,1], iota[1,C]) and its cast: without this the one-hot was a
// [N,C] tensor in memory between a gather and a softmax kernel.)
//
// Each copy recomputes its cone (itself and the cheap ops it reads, a tree:
// a producer read twice is copied twice), so a cone is bounded: an
// assignment to a slice of a mask that reads the mask before it, nine
// times over (Swin's shifted-window masks: pad, where and slice of the
// previous mask), doubled the copies at each step: 105 pads became 92,000
// and code generation ran out of memory. Past the bound the op is
// materialized once and its users read it.
constexpr int64_t kMaxRecomputedCone = 32;

llvm::DenseSet<Operation *> recomputedBroadcasts(func::FuncOp fn) {
  llvm::DenseSet<Operation *> cheap;
  llvm::DenseMap<Operation *, int64_t> coneSize; // of each cheap op
  auto isCreation = [](Operation *d) {
    return d->getName().getStringRef().starts_with("tc.") && classify(d) == Kind::Creation;
  };
  auto isFree = [&](Operation *d) { // recomputed already, or a creation op
    return cheap.contains(d) || isCreation(d);
  };
  auto cone = [&](Operation &op) {
    int64_t size = 1;
    for (Value v : op.getOperands())
      if (Operation *d = v.getDefiningOp())
        size += cheap.contains(d) ? coneSize.lookup(d) : isCreation(d) ? 1 : 0;
    return size;
  };
  auto markCheap = [&](Operation &op) {
    int64_t size = cone(op);
    if (size > kMaxRecomputedCone)
      return;
    cheap.insert(&op);
    coneSize[&op] = size;
  };
  auto sameShape = [](Value a, Value b) {
    auto x = llvm::cast<tc::TcTensorType>(a.getType()), y = llvm::cast<tc::TcTensorType>(b.getType());
    return x.getSizes() == y.getSizes() && x.getSymbols() == y.getSymbols();
  };
  for (Operation &op : fn.getBody().front().getOperations()) {
    if (!op.getName().getStringRef().starts_with("tc.") || op.getNumResults() != 1 ||
        op.getNumOperands() == 0)
      continue;
    Kind k = classify(&op);
    if (k != Kind::Elementwise && k != Kind::View)
      continue;
    // A function of one graph input (ne(target, -100), a cast): reading
    // the input in each consumer costs what reading the result would.
    unsigned inputs = 0, others = 0;
    for (Value v : op.getOperands()) {
      Operation *d = v.getDefiningOp();
      if (!d)
        inputs += sameShape(v, op.getResult(0));
      else if (!isFree(d))
        ++others;
    }
    if (k == Kind::Elementwise && inputs == 1 && others == 0) {
      markCheap(op);
      continue;
    }
    // A reshape of a graph input is an alias of it: one copy per user, so
    // that it ties no kernels together. Shared, the cross-entropy's
    // target[N, 1] (gathered in one kernel, compared with the classes in the
    // gradient's) made the gradient's kernel depend on the gather's, which
    // depends on the row statistics: the softmax could not join the
    // gradient and went to memory ([N, C] written and read once more).
    // Likewise a reshape of a library call's result (in memory too): shared,
    // the LM head's logits [8, 512, 32000] reshaped to [4096, 32000] for the
    // cross-entropy's passes and its target gather became an output of the
    // first kernel (a 262 MB copy) that the gather's kernel read.
    Operation *source = op.getOperand(0).getDefiningOp();
    if (isPureReshape(&op) && (!source || (source->getName().getStringRef().starts_with("tc.") &&
                                           classify(source) == Kind::Matmul))) {
      markCheap(op);
      continue;
    }
    // Only ops that broadcast (numpy alignment) read smaller data: a
    // reshape to a higher rank is not a broadcast, and copying the
    // head-split transposes of q, k, v per user gave the forward and the
    // backward attention different (duplicated) operands.
    bool broadcasts = k == Kind::Elementwise || op.getName().getStringRef() == "tc.broadcast_to";
    bool ok = true;
    for (Value v : op.getOperands()) {
      Operation *d = v.getDefiningOp();
      ok &= (d && isFree(d)) || (broadcasts && isBroadcastInto(v, op.getResult(0)));
    }
    if (ok)
      markCheap(op);
  }
  return cheap;
}

// Whether `user` reads its operand from memory whichever kernel computes
// it: a library call (matmul, convolution), fused attention, or a view
// every user of which does.
bool readFromMemory(Operation *user, int depth = 0) {
  if (!user->getName().getStringRef().starts_with("tc."))
    return false;
  Kind k = classify(user);
  if (k == Kind::Matmul || k == Kind::Attention)
    return true;
  if (k != Kind::View || depth > 8 || user->getNumResults() != 1 || user->getResult(0).use_empty())
    return false;
  return llvm::all_of(user->getUsers(), [&](Operation *u) { return readFromMemory(u, depth + 1); });
}

// Gives every user of a recomputed broadcast its own copy (consumers first,
// so a copied chain copies its producers too): each copy then fuses into
// its one consumer's kernel. Users that read from memory (GEMMs, through
// views or not, and attention) share the original: each copy of theirs
// would be one more kernel writing the same tensor (an LM head's backward
// wrote its [4096, 32000] logits gradient twice, once per GEMM; a mask
// computed twice, once for the forward attention and once for its
// backward, kept the backward from reading the forward's saved results).
void copyPerUser(func::FuncOp fn, const llvm::DenseSet<Operation *> &cheap,
                 llvm::DenseSet<Operation *> &copies) {
  std::vector<Operation *> order;
  for (Operation &op : fn.getBody().front().getOperations())
    if (cheap.contains(&op))
      order.push_back(&op);
  OpBuilder b(fn.getContext());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Operation *op = *it;
    copies.insert(op);
    std::vector<OpOperand *> uses;
    bool shared = false;
    for (OpOperand &use : op->getResult(0).getUses()) {
      if (readFromMemory(use.getOwner()))
        shared = true;
      else
        uses.push_back(&use);
    }
    // Materialized for a GEMM anyway, it is also the function's result
    // (a copy would be one more kernel writing the same tensor).
    if (shared)
      llvm::erase_if(uses, [](OpOperand *use) { return isa<func::ReturnOp>(use->getOwner()); });
    for (size_t u = shared ? 0 : 1; u < uses.size(); ++u) {
      b.setInsertionPoint(uses[u]->getOwner());
      Operation *copy = b.clone(*op);
      uses[u]->set(copy->getResult(0));
      copies.insert(copy);
    }
  }
}

// A column reduction (over leading axes, the last kept: a layer norm's
// weight gradient, sum over rows of x_hat * dy) cannot share the row-wise
// kernel that computes its operand, so that operand went to memory: a full
// [rows, C] tensor written by one kernel and read back by the next. Where
// the operand is an elementwise function of one full-size value already in
// memory (a graph input or another kernel's result), or of two graph
// inputs, and of small ones (row statistics, broadcast vectors), the
// reduction's kernel recomputes it instead (reading no more than it read
// before), and the row-wise kernel no longer writes it. Returns the copies (each
// joins only its consumer's kernel, as recomputed broadcasts do).
void recomputeIntoColumnReductions(func::FuncOp fn, llvm::DenseSet<Operation *> &copies) {
  auto sameShape = [](Value a, Value b) {
    auto x = llvm::cast<tc::TcTensorType>(a.getType()), y = llvm::cast<tc::TcTensorType>(b.getType());
    return x.getSizes() == y.getSizes() && x.getSymbols() == y.getSymbols();
  };
  static const std::set<std::string> columnReductions = {"sum", "mean", "max", "min", "prod"};
  std::vector<Operation *> reductions;
  for (Operation &op : fn.getBody().front().getOperations()) {
    std::string name = op.getName().getStringRef().str();
    if (!op.getName().getStringRef().starts_with("tc.") || !columnReductions.count(name.substr(3)) ||
        op.getNumOperands() != 1)
      continue;
    auto type = llvm::dyn_cast<tc::TcTensorType>(op.getOperand(0).getType());
    auto axes = op.getAttrOfType<DenseI64ArrayAttr>("axes");
    if (!type || !axes || type.getSizes().size() < 2)
      continue;
    int64_t rank = int64_t(type.getSizes().size());
    bool lastKept = llvm::none_of(axes.asArrayRef(), [&](int64_t a) { return a == -1 || a == rank - 1; });
    if (lastKept)
      reductions.push_back(&op);
  }
  for (Operation *r : reductions) {
    Value operand = r->getOperand(0);
    Operation *e = operand.getDefiningOp();
    if (!e || !e->getName().getStringRef().starts_with("tc.") || classify(e) != Kind::Elementwise ||
        e->getNumResults() != 1)
      continue;
    // The cone to recompute: full-size elementwise ops and views (program
    // order), and how many full-size values it reads from memory.
    std::vector<Operation *> cone;
    llvm::DenseSet<Operation *> inCone;
    llvm::DenseSet<Value> fullLeaves;
    bool ok = true;
    std::vector<Operation *> work = {e};
    while (!work.empty() && ok) {
      Operation *op = work.back();
      work.pop_back();
      if (!inCone.insert(op).second)
        continue;
      cone.push_back(op);
      for (Value v : op->getOperands()) {
        Operation *d = v.getDefiningOp();
        bool full = sameShape(v, operand);
        if (d && d->getName().getStringRef().starts_with("tc.") && classify(d) == Kind::Creation)
          continue;
        if (full && d && d->getNumResults() == 1 && d->getName().getStringRef().starts_with("tc.") &&
            (classify(d) == Kind::Elementwise || classify(d) == Kind::View) && !isPureReshape(d)) {
          work.push_back(d);
          continue;
        }
        if (full)
          fullLeaves.insert(v);
      }
      ok = cone.size() <= 16 && fullLeaves.size() <= 2;
    }
    // The recomputation reads no more than the materialized operand would
    // (written once, read once). Two full-size values only where both are
    // graph inputs (a backward graph's saved x and incoming dy): then
    // x_hat * dy costs two reads instead of an elementwise kernel's two reads
    // and a write, and the reduction's read. Not for computed values: a
    // GEMM's result read again here lives longer (a larger arena), and a
    // bias gradient summing a GEMM operand would lose cuBLASLt's epilogue.
    if (!ok || fullLeaves.empty() ||
        (fullLeaves.size() == 2 && !llvm::all_of(fullLeaves, [](Value v) { return !v.getDefiningOp(); })))
      continue;
    llvm::sort(cone, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    OpBuilder b(r);
    IRMapping map;
    for (Operation *op : cone) {
      Operation *copy = b.clone(*op, map);
      copies.insert(copy);
    }
    r->setOperand(0, map.lookup(operand));
    // What only the reduction read is gone.
    for (auto it = cone.rbegin(); it != cone.rend(); ++it)
      if ((*it)->use_empty())
        (*it)->erase();
  }
}

// The "row space" of a reduction-like op: its input type and the axes it
// reduces. Reductions with equal row spaces can run in one row-wise kernel
// even when one depends on another (layer_norm's backward: mean, variance,
// then the two row sums). Empty for ops that never share a kernel.
std::string rowSpace(Operation *op) {
  std::string name = op->getName().getStringRef().drop_front(3).str();
  auto type = llvm::dyn_cast<tc::TcTensorType>(op->getOperand(0).getType());
  if (!type)
    return "";
  int64_t rank = int64_t(type.getSizes().size());
  auto norm = [rank](int64_t a) { return a < 0 ? a + rank : a; };
  std::vector<int64_t> axes;
  static const std::set<std::string> reductions = {"sum",  "mean", "max",      "min",
                                                   "prod", "var",  "logsumexp"};
  if (reductions.count(name)) {
    if (auto a = op->getAttrOfType<DenseI64ArrayAttr>("axes"))
      for (int64_t x : a.asArrayRef())
        axes.push_back(norm(x));
    else
      for (int64_t x = 0; x < rank; ++x)
        axes.push_back(x);
    // A reduction over every axis runs in two stages, the first over the
    // trailing dims of each leading slice: that stage shares the rows of a
    // row-wise kernel (a summed loss joins the layer norm it sums).
    if (int64_t(axes.size()) == rank && name != "var")
      if (std::optional<TensorSpec> spec = tc::toTensorSpec(type))
        if (size_t kept = fullReductionKeptDims(spec->shape); kept > 0)
          axes.erase(axes.begin(), axes.begin() + int64_t(kept));
  } else if (name == "softmax" || name == "log_softmax") {
    auto a = op->getAttrOfType<IntegerAttr>("axis");
    axes.push_back(norm(a ? a.getInt() : -1));
  } else if (name == "layer_norm" || name == "rms_norm") {
    auto a = op->getAttrOfType<IntegerAttr>("axis");
    for (int64_t x = norm(a ? a.getInt() : -1); x < rank; ++x)
      axes.push_back(x);
  } else if (name == "cross_entropy") {
    // Its row statistics (log-sum-exp over the classes) are a softmax's
    // over the same axis: the loss and its gradient's softmax share them,
    // and the logits are read once for both.
    axes.push_back(rank >= 2 ? 1 : 0);
  } else {
    return "";
  }
  std::sort(axes.begin(), axes.end());
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type << " over";
  for (int64_t x : axes)
    os << " " << x;
  return os.str();
}

std::string opLabel(Operation *op) {
  std::string name = op->getName().getStringRef().drop_front(3).str();
  if (auto loc = llvm::dyn_cast<NameLoc>(op->getLoc()))
    return loc.getName().getValue().str() + " (" + name + ")";
  return name;
}

struct Fusion {
  std::vector<Operation *> ops; // in program order
  std::map<Operation *, int> index;
  std::vector<int> parent; // union-find over op indices
  std::vector<std::string> refusals;

  // Each root's members in program order (empty for a non-root): scanning
  // every op per query made fusion quadratic and more (BERT's backward:
  // 19 s of a 20 s compile).
  std::vector<std::vector<int>> memberLists;
  const std::vector<int> none;
  std::vector<Kind> kinds; // classify(ops[i]), once (the pairwise loops asked it ~10^6 times)
  std::vector<int> visitMark; // wouldCycle's visited groups: those marked visitStamp
  int visitStamp = 0;

  int find(int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }

  const std::vector<int> &members(int g) const {
    return parent[size_t(g)] == g ? memberLists[size_t(g)] : none;
  }

  // Merges group `from` into group `into` (both roots): `into` stays the root.
  void join(int from, int into) {
    if (from == into)
      return;
    std::vector<int> merged;
    merged.reserve(memberLists[size_t(from)].size() + memberLists[size_t(into)].size());
    std::merge(memberLists[size_t(from)].begin(), memberLists[size_t(from)].end(),
               memberLists[size_t(into)].begin(), memberLists[size_t(into)].end(), std::back_inserter(merged));
    memberLists[size_t(into)] = std::move(merged);
    memberLists[size_t(from)].clear();
    memberLists[size_t(from)].shrink_to_fit();
    parent[size_t(from)] = into;
  }

  // The common row space of every reduction anchor of group g ("" if they
  // differ or one has none).
  std::string groupRowSpace(int g) {
    std::string space;
    for (int i : members(g))
      if (kinds[size_t(i)] == Kind::Reduction) {
        std::string r = rowSpace(ops[i]);
        if (r.empty() || (!space.empty() && r != space))
          return "";
        space = r;
      }
    return space;
  }

  std::optional<Kind> anchor(int g, Operation **which = nullptr) {
    for (int i : members(g))
      if (isAnchor(kinds[size_t(i)])) {
        if (which)
          *which = ops[i];
        return kinds[size_t(i)];
      }
    return std::nullopt;
  }

  // Whether merging groups a and b would create a cycle: a path from one to
  // the other through a third group. The walk is over groups, not ops: once
  // an op of group G is reached, every member of G leads on (a merged group
  // runs as one kernel, so its inputs all come before any of its outputs).
  bool wouldCycle(int a, int b) {
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      // Ops are in program order and every user comes after its operand:
      // a group whose first op comes after `to`'s last cannot lead to it
      // (the walk skips it: it visited most of the graph per query).
      const int last = members(to).back();
      if (++visitStamp == 0)
        std::fill(visitMark.begin(), visitMark.end(), 0), visitStamp = 1;
      visitMark.resize(ops.size(), 0);
      std::vector<int> stack;
      auto pushUsersOf = [&](int group, bool skipTo) {
        for (int i : members(group))
          for (Operation *user : ops[size_t(i)]->getUsers()) {
            auto it = index.find(user);
            if (it == index.end())
              continue;
            int g = find(it->second);
            if (g != group && !(skipTo && g == to) && members(g).front() <= last)
              stack.push_back(g);
          }
      };
      pushUsersOf(from, /*skipTo=*/true); // a direct edge is the merge itself, not a cycle
      while (!stack.empty()) {
        int g = stack.back();
        stack.pop_back();
        if (g == to)
          return true;
        if (g == from || visitMark[size_t(g)] == visitStamp)
          continue;
        visitMark[size_t(g)] = visitStamp;
        pushUsersOf(g, /*skipTo=*/false);
      }
    }
    return false;
  }

  // Whether a kernel reading `v` reads a tensor from memory: not a rank-0
  // value, not one a creation op (ones, iota, ...) makes in the kernel.
  static bool readFromMemory(Value v) {
    auto t = llvm::dyn_cast<tc::TcTensorType>(v.getType());
    if (t && t.getSizes().empty())
      return false;
    Operation *d = v.getDefiningOp();
    return !d || classify(d) != Kind::Creation;
  }

  // Values a group reads that it does not compute.
  llvm::DenseSet<Value> externalInputs(int g) {
    llvm::DenseSet<Value> in;
    for (int i : members(g))
      for (Value v : ops[i]->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (!d || !index.count(d) || find(index[d]) != g)
          in.insert(v);
      }
    return in;
  }

  // Why producer p's group may not merge with consumer c's group; empty if it may.
  // The most ops one kernel takes: a kernel of thousands of fused ops costs
  // the backends' compilers superlinear time (a 10k-op elementwise chain:
  // 190 s of LLVM for the CPU; 2k ops 7.8 s) for no gain over a few kernels
  // of a few hundred ops each (one more pass over memory per 512 ops).
  static constexpr size_t kMaxKernelOps = 512;
  bool tooLarge(int g, int h) const { return members(g).size() + members(h).size() > kMaxKernelOps; }

  std::string refuse(Operation *p, Operation *c) {
    int g = find(index[p]), h = find(index[c]);
    if (tooLarge(g, h))
      return "the kernel would exceed " + std::to_string(kMaxKernelOps) + " ops";
    Operation *pa = nullptr, *ca = nullptr;
    std::optional<Kind> pk = anchor(g, &pa), ck = anchor(h, &ca);
    if (pk == Kind::Attention || ck == Kind::Attention)
      return "attention runs as its own kernel";
    if (pk == Kind::Collective || ck == Kind::Collective)
      return "a collective is a runtime step of its own, not part of a kernel";
    if (pk == Kind::Scatter || ck == Kind::Scatter)
      return "a scatter-add is a runtime step of its own, not part of a kernel";
    // Left out of its producer's kernel, the transpose is a view the GEMM
    // reads with its transpose flag; inside, the kernel wrote it transposed
    // (an embedding gradient's one-hot, [4096, 32000], written column-wise).
    if (isMatrixTranspose(c) && !c->use_empty() &&
        llvm::all_of(c->getUsers(), [](Operation *u) { return u->getName().getStringRef() == "tc.matmul"; }))
      return "a transpose read only by GEMMs is their transpose flag, not a copy";
    // An elementwise producer of the epilogue (not of the GEMM's operands)
    // is computed in the epilogue's pass like the epilogue itself.
    if (ck == Kind::Matmul && !pk && classify(c) == Kind::Matmul)
      return "no prologue fusion into " + opLabel(ca) +
             ": the library call reads its operands from memory";
    if (pk == Kind::Reduction && ck == Kind::Reduction) {
      std::string a = groupRowSpace(g), b = groupRowSpace(h);
      if (a.empty() || a != b)
        return "reductions over different rows (" + opLabel(pa) + ", " + opLabel(ca) + ")";
      // A reduction of graph inputs alone (the count of valid targets) stays
      // its own early kernel when the consumer also waits for other computed
      // values: joined to it, everything that scales by the count would wait
      // too (a cross-entropy gradient then took one more pass over the logits).
      bool inputsOnly = llvm::all_of(externalInputs(g), [](Value v) {
        Operation *d = v.getDefiningOp();
        return !d || classify(d) == Kind::Creation;
      });
      bool waitsForOthers = llvm::any_of(externalInputs(h), [&](Value v) {
        Operation *d = v.getDefiningOp();
        return d && index.count(d) && find(index[d]) != g;
      });
      if (inputsOnly && waitsForOthers)
        return "a reduction of graph inputs (" + opLabel(pa) + ") stays independent of " + opLabel(ca) +
               ", which waits for other kernels";
    } else if (pk && ck) {
      return "both kernels have an anchor (" + opLabel(pa) + ", " + opLabel(ca) + ")";
    }
    if (pk == Kind::Matmul && classify(c) != Kind::Elementwise)
      return "only elementwise ops join a matmul epilogue";
    if (pk == Kind::Matmul && !ck && readOnlyByReductions(c))
      return "read only by reductions: joins their kernel, which reads the GEMM's product (an epilogue "
             "kernel would write it and the reduction read it back)";
    if (wouldCycle(g, h))
      return "fusing would create a cycle between kernels";
    return "";
  }

  // Whether everything computed from elementwise op `op` (through more
  // elementwise ops and views) ends in reductions: no function result, no
  // matmul or other anchor reads any of it. A GEMM's epilogue of that kind
  // (the f32 cast of an LM head's logits before cross-entropy: 2 x 262 MB
  // written and read back at a 32000 vocabulary) belongs to the reductions.
  bool readOnlyByReductions(Operation *op) {
    std::vector<Operation *> work{op};
    llvm::DenseSet<Operation *> seen;
    bool reduction = false;
    while (!work.empty()) {
      Operation *o = work.back();
      work.pop_back();
      if (!seen.insert(o).second)
        continue;
      for (Operation *user : o->getUsers()) {
        if (!index.count(user))
          return false; // a function result (or an op outside the kernels)
        Kind k = classify(user);
        if (k == Kind::Reduction) {
          reduction = true;
          continue;
        }
        if (k != Kind::Elementwise && k != Kind::View)
          return false;
        work.push_back(user);
      }
      if (seen.size() > 32)
        return false;
    }
    return reduction;
  }

  // Recomputed broadcasts (one user each): they join only their consumer's
  // kernel, or a producer that is recomputed too.
  llvm::DenseSet<Operation *> recomputed;

  void run(func::FuncOp fn) {
    copyPerUser(fn, recomputedBroadcasts(fn), recomputed);
    recomputeIntoColumnReductions(fn, recomputed);
    for (Operation &op : fn.getBody().front().getOperations())
      if (op.getName().getStringRef().starts_with("tc.") && classify(&op) != Kind::Creation) {
        index[&op] = int(ops.size());
        ops.push_back(&op);
      }
    parent.resize(ops.size());
    std::iota(parent.begin(), parent.end(), 0);
    memberLists.resize(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      memberLists[i] = {int(i)};
      kinds.push_back(classify(ops[i]));
    }
    // Recomputed broadcasts join their one consumer first (consumers
    // first, so a copied chain follows): left as groups of their own while
    // the consumer's other producers merge, they made a path between those
    // groups that read as a cycle (a softmax's backward, 1 - rowsum, kept
    // its consumer out of the softmax's kernel and the probabilities in memory).
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      Operation *p = *it;
      if (!recomputed.contains(p) || !p->hasOneUse())
        continue;
      Operation *c = *p->getUsers().begin();
      if (!index.count(c) || find(index[p]) == find(index[c]))
        continue;
      if (refuse(p, c).empty())
        join(find(index[p]), find(index[c]));
    }
    // Vertical: producer/consumer pairs in program order.
    for (Operation *c : ops) {
      for (Value v : c->getOperands()) {
        Operation *p = v.getDefiningOp();
        if (!p || !index.count(p) || find(index[p]) == find(index[c]))
          continue;
        if (recomputed.contains(c) && !recomputed.contains(p))
          continue; // c joins its consumer's kernel instead
        std::string why = refuse(p, c);
        if (why.empty())
          join(find(index[p]), find(index[c]));
        else
          refusals.push_back(opLabel(p) + " -> " + opLabel(c) + ": " + why);
      }
    }
    // Horizontal: reductions of the same input, same shape, independent.
    for (size_t i = 0; i < ops.size(); ++i)
      for (size_t j = i + 1; j < ops.size(); ++j) {
        Operation *a = ops[i], *b = ops[j];
        if (kinds[i] != Kind::Reduction || kinds[j] != Kind::Reduction)
          continue;
        int g = find(int(i)), h = find(int(j));
        if (g == h || a->getOperand(0).getType() != b->getOperand(0).getType() ||
            a->getResult(0).getType() != b->getResult(0).getType() ||
            a->getAttrDictionary() != b->getAttrDictionary())
          continue;
        // Same iteration space; worth one kernel when both read common data
        // from memory: not a rank-0 value (every dropout reads the one
        // seed), not a value a kernel makes itself (a ones tensor CSE made
        // one for the whole graph). Those made all of a backward's
        // same-shaped reductions candidates: 14,713 cycle walks, 2.9 of 5 s
        // compiling a 24-layer GPT-2's backward.
        llvm::DenseSet<Value> gi = externalInputs(g), hi = externalInputs(h);
        if (!llvm::any_of(gi, [&](Value v) { return hi.contains(v) && readFromMemory(v); }))
          continue;
        if (!tooLarge(g, h) && !anchorsOtherThanReductions(g) && !anchorsOtherThanReductions(h) &&
            !wouldCycle(g, h))
          join(g, h);
      }
    // Horizontal into a GEMM's epilogue: an elementwise group that reads a
    // value of the GEMM's result shape which the GEMM's epilogue reads too
    // joins that kernel, whose epilogue pass then computes both (the
    // backward of an erf-gelu MLP: the activation recomputed for the weight
    // gradient beside the activation's gradient, both from the
    // pre-activation: one read of it instead of two, one launch less).
    auto sizesOf = [](Value v) {
      auto t = llvm::dyn_cast<tc::TcTensorType>(v.getType());
      return t ? llvm::SmallVector<int64_t>(t.getSizes()) : llvm::SmallVector<int64_t>();
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      if (kinds[i] != Kind::Matmul)
        continue;
      int h = find(int(i));
      llvm::SmallVector<int64_t> productShape = sizesOf(ops[i]->getResult(0));
      // Full-size values the epilogue (not the GEMM itself) reads.
      llvm::DenseSet<Value> epilogueReads;
      for (int m : members(h))
        if (kinds[size_t(m)] == Kind::Elementwise)
          for (Value v : ops[m]->getOperands()) {
            Operation *d = v.getDefiningOp();
            if ((!d || !index.count(d) || find(index[d]) != h) && sizesOf(v) == productShape)
              epilogueReads.insert(v);
          }
      if (epilogueReads.empty())
        continue;
      for (size_t j = 0; j < ops.size(); ++j) {
        int g = find(int(j));
        if (g == h || kinds[j] != Kind::Elementwise || anchor(g) || tooLarge(g, h) ||
            sizesOf(ops[j]->getResult(0)) != productShape)
          continue;
        if (!llvm::any_of(externalInputs(g), [&](Value v) { return epilogueReads.contains(v); }) ||
            wouldCycle(g, h))
          continue;
        join(g, h); // h stays the merged group's root
      }
    }
    // Horizontal over rows: independent row-wise kernels over the same rows
    // of the same input (a cross-entropy loss and its gradient's softmax)
    // become one, so each row is read once for both.
    for (size_t i = 0; i < ops.size(); ++i)
      for (size_t j = i + 1; j < ops.size(); ++j) {
        Operation *a = ops[i], *b = ops[j];
        if (kinds[i] != Kind::Reduction || kinds[j] != Kind::Reduction ||
            a->getOperand(0) != b->getOperand(0))
          continue;
        int g = find(int(i)), h = find(int(j));
        if (g == h || tooLarge(g, h) || anchorsOtherThanReductions(g) || anchorsOtherThanReductions(h))
          continue;
        std::string space = groupRowSpace(g);
        if (space.empty() || space != groupRowSpace(h) || wouldCycle(g, h))
          continue;
        join(g, h);
      }
  }

  bool anchorsOtherThanReductions(int g) {
    return llvm::any_of(members(g), [&](int m) {
      return isAnchor(kinds[size_t(m)]) && kinds[size_t(m)] != Kind::Reduction;
    });
  }
};

struct FusionPass : impl::FusionPassBase<FusionPass> {
  using FusionPassBase::FusionPassBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) { fuse(fn); });
  }

  void fuse(func::FuncOp fn) {
    Fusion f;
    f.run(fn);
    // Groups in program order of their first member; all members move to
    // the group's last member, which keeps every def before its uses because
    // merges never create cycles.
    std::map<int, std::vector<int>> groups;
    for (size_t i = 0; i < f.ops.size(); ++i)
      groups[f.find(int(i))].push_back(int(i));
    Operation *terminator = fn.getBody().front().getTerminator();
    OpBuilder b(fn.getContext());
    std::string text;
    llvm::raw_string_ostream os(text);
    int kernels = 0, aliases = 0, libraryCalls = 0, collectives = 0;
    // Emit groups in a topological order of the group graph.
    std::vector<int> order;
    std::set<int> done;
    std::function<void(int)> emitAfterDeps = [&](int g) {
      if (done.count(g))
        return;
      done.insert(g);
      for (int m : groups[g])
        for (Value v : f.ops[m]->getOperands())
          if (Operation *d = v.getDefiningOp(); d && f.index.count(d) && f.find(f.index[d]) != g)
            emitAfterDeps(f.find(f.index[d]));
      order.push_back(g);
    };
    for (auto &[g, m] : groups)
      emitAfterDeps(g);
    std::vector<Operation *> toErase;
    int next = 0;
    for (int g : order) {
      std::vector<int> &m = groups[g];
      std::set<Operation *> inGroup;
      for (int i : m)
        inGroup.insert(f.ops[i]);
      Operation *anchorOp = nullptr;
      std::optional<Kind> kind = f.anchor(g, &anchorOp);
      bool allReshapes =
          std::all_of(m.begin(), m.end(), [&](int i) { return isPureReshape(f.ops[i]); });
      // Transposes of the last two dims read only by matmuls are the GEMM's
      // transpose flags, not copies.
      bool gemmTransposes = std::all_of(m.begin(), m.end(), [&](int i) {
        Operation *op = f.ops[i];
        return (isPureReshape(op) || isMatrixTranspose(op)) &&
               llvm::all_of(op->getUsers(), [&](Operation *u) {
                 return inGroup.count(u) || u->getName().getStringRef() == "tc.matmul";
               });
      });
      allReshapes |= gemmTransposes;
      bool libraryAlone = m.size() == 1 && kind == Kind::Matmul;
      // Alone: refuse() merges nothing into them.
      bool collective = kind == Kind::Collective, scatter = kind == Kind::Scatter;
      if (allReshapes || libraryAlone || collective || scatter) {
        for (int i : m)
          f.ops[i]->moveBefore(terminator);
        if (collective) {
          ++collectives;
          os << "collective " << opLabel(f.ops[m[0]]) << "\n";
        } else if (scatter) {
          ++libraryCalls;
          os << "scatter-add " << opLabel(f.ops[m[0]]) << "\n";
        } else if (libraryAlone) {
          ++libraryCalls;
          os << "library " << opLabel(f.ops[m[0]]) << "\n";
        } else {
          ++aliases;
        }
        continue;
      }
      // Inputs: values from outside the group (creation ops are cloned in).
      std::vector<Value> inputs;
      std::vector<Operation *> clones;
      std::set<Operation *> cloneSet;
      for (int i : m)
        for (Value v : f.ops[i]->getOperands()) {
          Operation *d = v.getDefiningOp();
          if (d && inGroup.count(d))
            continue;
          if (d && classify(d) == Kind::Creation &&
              d->getName().getStringRef().starts_with("tc.")) {
            if (cloneSet.insert(d).second)
              clones.push_back(d);
            continue;
          }
          if (std::find(inputs.begin(), inputs.end(), v) == inputs.end())
            inputs.push_back(v);
        }
      std::vector<Value> outputs;
      for (int i : m)
        for (Value r : f.ops[i]->getResults())
          if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !inGroup.count(u); }))
            outputs.push_back(r);
      // An output that is a reshape (through reshapes of the group) of another
      // output is the same bytes: the kernel writes the source once and the
      // reshape becomes a view of it after the kernel. Yielded as well, it was
      // a second full-size write and buffer (an LM head's [4096, 32000] logits
      // gradient, yielded in [8, 512, 32000] for one GEMM and [4096, 32000] for
      // the other: 262 MB more arena and written twice).
      std::vector<std::pair<Value, std::vector<Operation *>>> viewOutputs; // source, reshape chain
      {
        std::vector<Value> kept;
        for (Value o : outputs) {
          std::vector<Operation *> chain;
          Value s = o;
          while (Operation *d = s.getDefiningOp()) {
            if (!inGroup.count(d) || !isPureReshape(d))
              break;
            chain.push_back(d);
            s = d->getOperand(0);
          }
          bool sourceIsOutput = !chain.empty() && s != o &&
                                std::find(outputs.begin(), outputs.end(), s) != outputs.end();
          if (sourceIsOutput) {
            std::reverse(chain.begin(), chain.end());
            viewOutputs.push_back({s, chain});
          } else {
            kept.push_back(o);
          }
        }
        outputs = kept;
      }
      std::string kindName =
          !kind                      ? (std::all_of(m.begin(), m.end(),
                                                    [&](int i) { return classify(f.ops[i]) == Kind::View; })
                                            ? "copy"
                                            : "elementwise")
          : *kind == Kind::Reduction ? "reduction"
          : *kind == Kind::Matmul    ? "matmul"
          : *kind == Kind::Attention ? "attention"
                                     : "gather";
      std::string name = "k" + std::to_string(next++);
      b.setInsertionPoint(terminator);
      SmallVector<Type> resultTypes;
      for (Value o : outputs)
        resultTypes.push_back(o.getType());
      auto fused = b.create<tc::FusedOp>(f.ops[m.back()]->getLoc(), resultTypes,
                                         b.getStringAttr(name), b.getStringAttr(kindName), inputs);
      Block *body = b.createBlock(&fused.getBody());
      IRMapping map;
      for (Value in : inputs)
        map.map(in, body->addArgument(in.getType(), in.getLoc()));
      b.setInsertionPointToEnd(body);
      for (Operation *c : clones)
        b.clone(*c, map);
      for (int i : m)
        b.clone(*f.ops[i], map);
      SmallVector<Value> yielded;
      for (Value o : outputs)
        yielded.push_back(map.lookup(o));
      b.create<tc::YieldOp>(fused.getLoc(), yielded);
      for (auto [o, r] : llvm::zip(outputs, fused.getResults()))
        o.replaceUsesWithIf(r, [&](OpOperand &use) {
          return !inGroup.count(use.getOwner()) && use.getOwner() != fused;
        });
      b.setInsertionPoint(terminator);
      for (auto &[source, chain] : viewOutputs) {
        IRMapping views;
        views.map(source, fused.getResult(unsigned(
                              std::find(outputs.begin(), outputs.end(), source) - outputs.begin())));
        for (Operation *r : chain)
          b.clone(*r, views);
        Value original = chain.back()->getResult(0);
        original.replaceUsesWithIf(views.lookup(original), [&](OpOperand &use) {
          return !inGroup.count(use.getOwner()) && use.getOwner() != fused;
        });
        ++aliases;
      }
      for (int i : m)
        toErase.push_back(f.ops[i]);
      ++kernels;
      os << "kernel " << name << " (" << kindName << "):";
      for (int i : m)
        os << " " << opLabel(f.ops[i]) << (i == m.back() ? "" : ",");
      os << "\n";
    }
    for (auto it = toErase.rbegin(); it != toErase.rend(); ++it)
      (*it)->erase();
    // Creation ops no longer used anywhere.
    SmallVector<Operation *> dead;
    for (Operation &op : fn.getBody().front().getOperations())
      if (op.getName().getStringRef().starts_with("tc.") && classify(&op) == Kind::Creation &&
          op.use_empty())
        dead.push_back(&op);
    for (Operation *op : dead)
      op->erase();
    if (report) {
      llvm::outs() << "fusion of @" << fn.getName() << ": " << kernels << " kernels, "
                   << libraryCalls << " library calls, "
                   << (collectives ? std::to_string(collectives) + " collectives, " : "") << aliases
                   << " view-only groups (no launch: reshapes, GEMM transposes)\n"
                   << os.str();
      for (const std::string &r : f.refusals)
        llvm::outs() << "not fused: " << r << "\n";
    }
  }
};

} // namespace
} // namespace tensorc
