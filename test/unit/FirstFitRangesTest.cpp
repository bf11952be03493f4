// The range allocator that carves small buffers from shared NCCL windows:
// first fit, freed neighbours merged, and the same offsets for the same
// sequence of calls (every rank must put a buffer at the same offset).
#include "runtime/cuda/FirstFitRanges.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using tensorc::cuda::FirstFitRanges;

TEST(FirstFitRanges, TakesLowestFittingRangeAndMergesFreedNeighbours) {
  FirstFitRanges r(1024);
  EXPECT_EQ(r.take(256), 0u);
  EXPECT_EQ(r.take(256), 256u);
  EXPECT_EQ(r.take(512), 512u);
  EXPECT_FALSE(r.take(1).has_value()); // full
  EXPECT_TRUE(r.give(256));
  EXPECT_FALSE(r.give(256)); // not taken twice
  EXPECT_FALSE(r.give(100)); // not a range's start
  EXPECT_FALSE(r.take(512).has_value()); // 256 free
  EXPECT_TRUE(r.give(0));    // merges with [256, 512)
  EXPECT_EQ(r.freeRanges(), 1u);
  EXPECT_EQ(r.take(512), 0u); // the merged range fits
  EXPECT_TRUE(r.give(512));
  EXPECT_TRUE(r.give(0)); // merges both sides: one range, all free
  EXPECT_EQ(r.freeRanges(), 1u);
  EXPECT_EQ(r.freeBytes(), 1024u);
  EXPECT_FALSE(r.take(2048).has_value());
  EXPECT_FALSE(r.take(0).has_value());
}

TEST(FirstFitRanges, SameCallsSameOffsetsAndNoOverlap) {
  // Two "ranks" replay one random sequence of takes and gives: identical
  // offsets, taken ranges never overlap, every byte back at the end.
  std::mt19937 rng(7);
  FirstFitRanges a(1 << 16), b(1 << 16);
  std::vector<std::pair<size_t, size_t>> live; // offset, bytes
  for (int i = 0; i < 2000; ++i) {
    if (live.empty() || rng() % 3) {
      size_t bytes = 256 * (1 + rng() % 16);
      std::optional<size_t> x = a.take(bytes), y = b.take(bytes);
      ASSERT_EQ(x, y);
      if (!x)
        continue;
      for (auto [o, n] : live)
        ASSERT_TRUE(*x + bytes <= o || o + n <= *x) << "overlap at step " << i;
      live.push_back({*x, bytes});
    } else {
      size_t k = rng() % live.size();
      ASSERT_TRUE(a.give(live[k].first));
      ASSERT_TRUE(b.give(live[k].first));
      live.erase(live.begin() + long(k));
    }
  }
  for (auto [o, n] : live) {
    ASSERT_TRUE(a.give(o));
    ASSERT_TRUE(b.give(o));
  }
  EXPECT_EQ(a.freeBytes(), size_t(1) << 16);
  EXPECT_EQ(a.freeRanges(), 1u);
}
