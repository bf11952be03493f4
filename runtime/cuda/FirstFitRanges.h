// First-fit allocation of byte ranges inside one fixed-size region, with
// freed neighbours merged. Nccl carves small buffers from shared symmetric
// windows with it: a window is 2 MiB at least, too much for each bias's
// gradient. It is deterministic: the same sequence of take/give calls
// yields the same offsets, which is what puts a buffer at the same offset
// of its window on every rank (NCCL's symmetric kernels need that).
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace tensorc::cuda {

class FirstFitRanges {
public:
  explicit FirstFitRanges(size_t bytes) : size_(bytes) {
    if (bytes)
      free_[0] = bytes;
  }
  // The lowest offset with `bytes` free (taken), or nullopt.
  std::optional<size_t> take(size_t bytes) {
    if (!bytes)
      return std::nullopt;
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes) {
        size_t offset = it->first, left = it->second - bytes;
        free_.erase(it);
        if (left)
          free_[offset + bytes] = left;
        used_[offset] = bytes;
        return offset;
      }
    return std::nullopt;
  }
  // Frees the range taken at `offset`; false where none was.
  bool give(size_t offset) {
    auto used = used_.find(offset);
    if (used == used_.end())
      return false;
    size_t bytes = used->second;
    used_.erase(used);
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + bytes) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == offset) {
        before->second += bytes;
        return true;
      }
    }
    free_[offset] = bytes;
    return true;
  }
  size_t size() const { return size_; }
  size_t freeBytes() const {
    size_t n = 0;
    for (const auto &[offset, bytes] : free_)
      n += bytes;
    return n;
  }
  size_t freeRanges() const { return free_.size(); }

private:
  size_t size_;
  std::map<size_t, size_t> free_; // offset -> bytes
  std::map<size_t, size_t> used_; // offset -> bytes
};

} // namespace tensorc::cuda
