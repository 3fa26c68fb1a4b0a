// The steps of each collective algorithm, as make_plan (algorithms.cpp) puts them together:
// internal to the collectives library. A file per algorithm: ring.cpp, mesh.cpp, rdh.cpp and
// hierarchical.cpp (the two-level grids: hier2d inside a host, hierarchical across hosts).
#pragma once

#include <cstdint>

#include "neuronsim/cc/algorithms.h"

namespace neuronsim::cc::plans {

inline bool pow2(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}
inline int log2i(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}
inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// Splits `count` elements into `parts` contiguous chunks (the first ones one element shorter
// when it does not divide); chunk offsets in bytes.
struct Chunks {
  uint64_t count, es;
  int parts;
  uint64_t off(int i) const {
    return count * static_cast<uint64_t>(i) / static_cast<uint64_t>(parts) * es;
  }
  uint64_t bytes(int lo, int hi) const { return off(hi) - off(lo); }  // chunks [lo, hi)
};

// Rank r of R: each step sends and receives one chunk of `c` around the ring.
void ring_reduce_scatter(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0);
void ring_all_gather(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0);

// Rank r of R: one step, a chunk to and from every other rank.
void mesh_reduce_scatter(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag);
void mesh_all_gather(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag);

// Rank r of R (a power of two): recursive halving, then doubling, log2(R) steps each.
void rdh_reduce_scatter(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0);
void rdh_all_gather(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0);

// Rank r of R on a grid of rows of W ranks (a host per row for hierarchical): all-gather or
// reduce-scatter of R blocks, and the two-level all-reduce.
void grid_gather_or_scatter(RankPlan& p, int R, int r, const Chunks& blocks, int W, bool reduce);
void grid_all_reduce(RankPlan& p, int R, int r, uint64_t count, uint64_t es, int W);

}  // namespace neuronsim::cc::plans
