#include "ir/core/MemoryPlanner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

namespace tensorc {

static int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

MemoryPlan planMemory(const std::vector<BufferRequest> &buffers, int64_t alignment) {
  MemoryPlan plan;
  size_t n = buffers.size();
  plan.offsets.assign(n, -1);
  plan.inPlace.assign(n, false);
  // Group in-place chains: a buffer taking its partner's storage shares one
  // placement whose interval is the union and whose size is the largest.
  std::vector<int> root(n);
  std::iota(root.begin(), root.end(), 0);
  std::function<int(int)> find = [&](int i) { return root[i] == i ? i : root[i] = find(root[i]); };
  for (size_t i = 0; i < n; ++i) {
    int p = buffers[i].inPlaceWith;
    if (p >= 0 && size_t(p) < n && buffers[p].size >= buffers[i].size &&
        buffers[p].last == buffers[i].first) {
      root[find(int(i))] = find(p);
      plan.inPlace[i] = true;
    }
  }
  struct Slot {
    int64_t size = 0;
    int first = 0, last = 0;
    std::vector<int> members;
  };
  std::map<int, Slot> slots;
  for (size_t i = 0; i < n; ++i) {
    Slot &s = slots[find(int(i))];
    if (s.members.empty()) {
      s.first = buffers[i].first;
      s.last = buffers[i].last;
    }
    s.size = std::max(s.size, alignUp(buffers[i].size, alignment));
    s.first = std::min(s.first, buffers[i].first);
    s.last = std::max(s.last, buffers[i].last);
    s.members.push_back(int(i));
  }
  // The lower bound: the most bytes live at any step (an in-place chain is
  // one storage).
  std::map<int, int64_t> delta;
  for (auto &[r, slot] : slots) {
    delta[slot.first] += slot.size;
    delta[slot.last + 1] -= slot.size;
  }
  int64_t live = 0;
  for (auto &[step, d] : delta) {
    live += d;
    plan.lowerBound = std::max(plan.lowerBound, live);
  }
  std::vector<Slot *> order;
  for (auto &[r, s] : slots)
    order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Slot *a, const Slot *b) {
    return a->size != b->size ? a->size > b->size : a->first < b->first;
  });
  struct Placed {
    int64_t offset, size;
    int first, last;
  };
  std::vector<Placed> placed;
  for (Slot *s : order) {
    // Intervals already placed that overlap in time, sorted by offset.
    std::vector<Placed> conflicts;
    for (const Placed &p : placed)
      if (p.first <= s->last && s->first <= p.last)
        conflicts.push_back(p);
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Placed &a, const Placed &b) { return a.offset < b.offset; });
    // Best fit: the smallest gap that holds the slot, else past the end.
    int64_t best = -1, bestGap = INT64_MAX, cursor = 0;
    for (const Placed &p : conflicts) {
      if (p.offset > cursor) {
        int64_t gap = p.offset - cursor;
        if (gap >= s->size && gap < bestGap) {
          best = cursor;
          bestGap = gap;
        }
      }
      cursor = std::max(cursor, p.offset + p.size);
    }
    if (best < 0)
      best = cursor;
    placed.push_back({best, s->size, s->first, s->last});
    for (int m : s->members)
      plan.offsets[m] = best;
    plan.arenaBytes = std::max(plan.arenaBytes, best + s->size);
  }
  return plan;
}

} // namespace tensorc
