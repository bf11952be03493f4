// Packing intermediate buffers into one arena, as XLA's heap simulator does:
// every buffer has a size and a live interval [first, last] over the kernel
// schedule, and buffers live at the same time never overlap. MLIR-free: the
// compiler plans at representative sizes for its report, and the runtime
// plans again at bind time for symbolic sizes with the same function.
#pragma once

#include <cstdint>
#include <vector>

namespace tensorc {

struct BufferRequest {
  int64_t size = 0; // bytes
  int first = 0;    // schedule step that writes it
  int last = 0;     // last step that reads it (>= first)
  // A buffer that dies at step `first` whose storage this one may take
  // (in-place update by an elementwise kernel); -1 if none.
  int inPlaceWith = -1;
};

struct MemoryPlan {
  std::vector<int64_t> offsets; // per buffer
  int64_t arenaBytes = 0;       // the arena's size
  int64_t lowerBound = 0;       // the most bytes live at one step (in-place chains count once)
  std::vector<bool> inPlace;    // per buffer: took its in-place partner's storage
};

// Best-fit by size: buffers placed largest first at the lowest offset that
// overlaps no buffer with an intersecting interval; in-place requests are
// honoured when the partner's storage fits. Offsets are multiples of
// `alignment`.
MemoryPlan planMemory(const std::vector<BufferRequest> &buffers, int64_t alignment = 256);

} // namespace tensorc
