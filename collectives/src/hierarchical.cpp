// The two-level grids: rows of W ranks (hier2d inside a host, hierarchical with a host per row),
// each phase a ring over a row or a column of the grid.
#include "plans.h"

#include <utility>
#include <vector>

namespace neuronsim::cc::plans {

namespace {

// A ring over the ranks `g` (this rank is g[me]) on pieces(i), i < g.size(): the pieces
// {offset, bytes} of the buffer that are rank i's share, one message each. All-gather, or with
// `reduce` reduce-scatter (which ends with this rank's share reduced).
using Piece = std::pair<uint64_t, uint64_t>;
template <typename F>
void group_ring(RankPlan& p, const std::vector<int>& g, int me, F pieces, uint64_t tag0,
                bool reduce) {
  const int n = static_cast<int>(g.size()), shift = reduce ? 1 : 0;
  for (int s = 0; s < n - 1; ++s) {
    Step st;
    const std::vector<Piece> out = pieces(mod(me - s - shift, n)),
                             in = pieces(mod(me - s - 1 - shift, n));
    for (size_t k = 0; k < out.size(); ++k) {
      const uint64_t tag = tag0 + static_cast<uint64_t>(s) * out.size() + k;
      st.sends.push_back(
          {g[static_cast<size_t>(mod(me + 1, n))], 0, out[k].first, out[k].second, tag, false});
      st.recvs.push_back(
          {g[static_cast<size_t>(mod(me - 1, n))], 0, in[k].first, in[k].second, tag, reduce});
    }
    st.reduction_streams = reduce && s + 2 < n;
    p.steps.push_back(std::move(st));
  }
}
// A share of one piece each.
template <typename F>
auto one_piece(F piece) {
  return [piece](int i) { return std::vector<Piece>{piece(i)}; };
}

struct HostGrid {
  int H, col, host;
  std::vector<int> row_group, col_group;  // this rank's row (its host), and its column
  HostGrid(int R, int r, int W) : H(R / W), col(r % W), host(r / W) {
    for (int c = 0; c < W; ++c) row_group.push_back(host * W + c);
    for (int h = 0; h < H; ++h) col_group.push_back(h * W + col);
  }
};

}  // namespace

// All-gather and reduce-scatter across hosts of W ranks each (rank r at column r % W of host
// r / W), R blocks of `blocks`. All-gather: each rank's block to the same column of every
// host (over EFA, every chip at once), then in each host every column's blocks to the others.
// Reduce-scatter runs the same backwards: in each host first, each column keeping the partial
// sums of its blocks of every host, then across hosts, each rank keeping its own block.
void grid_gather_or_scatter(RankPlan& p, int R, int r, const Chunks& blocks, int W, bool reduce) {
  const HostGrid g(R, r, W);
  auto block = [&](int b) { return Piece{blocks.off(b), blocks.bytes(b, b + 1)}; };
  auto own_column = one_piece([&](int h) { return block(h * W + g.col); });
  auto column = [&](int c) {  // column c's block of every host
    std::vector<Piece> out;
    for (int h = 0; h < g.H; ++h) out.push_back(block(h * W + c));
    return out;
  };
  if (!reduce) group_ring(p, g.col_group, g.host, own_column, 0, false);
  group_ring(p, g.row_group, g.col, column, uint64_t{1} << 20, reduce);
  if (reduce) group_ring(p, g.col_group, g.host, own_column, 0, true);
}

// Two-level all-reduce on a grid of rows of W ranks (rank r at column r % W, row r / W): hier2d
// with rows of kHierRow, hierarchical with a host per row. The buffer is split into W parts;
// part c is split again into H sub-parts for the column phase.
void grid_all_reduce(RankPlan& p, int R, int r, uint64_t count, uint64_t es, int W) {
  const HostGrid g(R, r, W);
  const Chunks parts{count, es, W};
  auto part = one_piece([&](int c) { return Piece{parts.off(c), parts.bytes(c, c + 1)}; });
  // Sub-parts of part `col`: elements of that part split H ways.
  const uint64_t first = count * static_cast<uint64_t>(g.col) / W,
                 last = count * static_cast<uint64_t>(g.col + 1) / W;
  const Chunks sub{last - first, es, g.H};
  auto subpart = one_piece([&](int h) {
    return Piece{first * es + sub.off(h), sub.bytes(h, h + 1)};
  });
  // The row reduce-scatter leaves part `col` at this rank (the ring ends with chunk `me`).
  group_ring(p, g.row_group, g.col, part, 0, true);
  group_ring(p, g.col_group, g.host, subpart, 100, true);
  group_ring(p, g.col_group, g.host, subpart, 200, false);
  group_ring(p, g.row_group, g.col, part, 300, false);
}

}  // namespace neuronsim::cc::plans
