// Helpers of the eager kernels: checks of strided views, their HBM tensors, and
// the tiling of an elementwise index space into [partitions, free] tiles whose
// HBM side is one DMA access pattern per operand.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "neuronsim/kernels/eager.h"

namespace neuronsim::kernels::detail {

// Throws unless the view has matching ranks, non-negative sizes and strides, at
// least one element and an extent that one HBM tensor holds.
void check_view(std::string_view kernel, const char* what, const View& v);
// Throws unless no two indices of the view reach the same element.
void check_no_self_overlap(std::string_view kernel, const char* what, const View& v);
// `v` seen with `sizes` by numpy broadcasting: missing leading dims and size-1
// dims get stride 0. Throws when a dim is neither equal nor 1.
View broadcast_to(std::string_view kernel, const char* what, const View& v,
                  std::span<const int64_t> sizes);
// The views with their dims permuted alike, so that views[key]'s strides
// decrease (stable): the walk then follows that view's memory order.
std::vector<View> order_dims(std::vector<View> views, size_t key);

// v without dim `dim`.
View without_dim(const View& v, size_t dim);
// The views (of one shape) in views[key]'s memory order and coalesced, with their largest
// dim moved last: the layout of the kernels that give every index of these dims a
// partition, the largest dim on the partitions (reduce, cumsum).
std::vector<View> partition_layout(std::vector<View> views, size_t key);

// An iota on GpSimd: dst[p, j] = offset + partition_step * p + the j-th value of the
// walk of `dims` (index times stride, summed over the dims).
void emit_iota(KernelBuilder& kb, const AccessPattern& dst, std::span<const isa::Dim> dims,
               int32_t offset, int32_t partition_step = 0);

// dst = value on `engine`; NaN (which no immediate may be) as |+inf * 0|, positive.
void emit_memset(KernelBuilder& kb, isa::Engine engine, const AccessPattern& dst, float value);

// dst = predicate != 0 ? on_true : on_false, on `engine`.
void emit_select(KernelBuilder& kb, isa::Engine engine, const AccessPattern& dst,
                 const AccessPattern& predicate, const AccessPattern& on_true,
                 const AccessPattern& on_false);

// Declares the HBM tensor of a view: extent_elems() elements of its dtype.
AccessPattern declare_input(KernelBuilder& kb, const std::string& name, const View& v);
AccessPattern declare_output(KernelBuilder& kb, const std::string& name, const View& v);

// How a kernel gets the HBM tensor of an operand view, whose pattern's offset is the
// view's first element. A kernel of its own declares one program tensor per operand
// (declare_operand); a stage of a graph program binds the operand to a place in one of
// the graph's tensors instead (graph.cpp), so kernels add that offset to every access.
using Declare = std::function<AccessPattern(KernelBuilder& kb, const std::string& name,
                                            const View& v, bool output)>;
AccessPattern declare_operand(KernelBuilder& kb, const std::string& name, const View& v,
                              bool output);

// A stride as a free dim of an access pattern (i32); throws when it does not fit.
int32_t dim_stride(std::string_view kernel, int64_t stride);

// An index space of coalesced dims cut into tiles. Dims before `part` are walked
// one index per tile, dims after `cut` are whole in every partition, and `cut`
// is the one dim a partition holds a stretch of (`len` indices from `first`):
//   * cut == part ("runs", like elementwise's flat tiles): partition r holds the
//     run of `len` indices of `part` from start + r*len, so HBM rows step
//     len * stride[part] and the free dims are {stride[part], len} and the rest;
//   * cut == part + 1 ("blocks", for a long inner dim): partition r holds index
//     start + r of `part` (rows step stride[part]) and indices [first, first+len)
//     of `cut`, so the free dims are {stride[cut], len} and the rest.
// At most 4 free dims: cut >= dims - 4.
struct TilePlan {
  struct Tile {
    std::vector<int64_t> outer;  // indices of the dims before `part`
    int64_t start;               // first index along `part`
    uint32_t parts;
    int64_t first;  // blocks: first index along `cut` (runs: 0)
    uint32_t len;
  };
  std::vector<int64_t> sizes;
  size_t part = 0, cut = 0;
  uint64_t inner = 1;  // product of the sizes after `cut`
  std::vector<Tile> tiles;

  uint32_t free_elems(const Tile& t) const { return static_cast<uint32_t>(t.len * inner); }
  uint32_t max_free() const;
};

// Tiles of at most `max_free` elements per partition over `sizes` (1-5 dims; the
// caller has coalesced them). Throws when more than 5 dims are left.
TilePlan plan_tiles(std::string_view kernel, std::vector<int64_t> sizes, uint32_t max_free);

// Blocks over `sizes` (2-5 dims) with partitions along the next-to-last dim and
// the last one cut into stretches of up to `max_free`: the tiles of a reduction
// along the last dim, one kept index per partition.
TilePlan plan_rows(std::string_view kernel, std::vector<int64_t> sizes, uint32_t max_free);

// The HBM side of tile `t` for a tensor walked with `strides` (one per plan dim).
AccessPattern hbm_tile(std::string_view kernel, const AccessPattern& tensor,
                       std::span<const int64_t> strides, const TilePlan& plan,
                       const TilePlan::Tile& t);

// The first `parts` partitions and `free` elements of an on-chip tile, as `dtype`.
inline AccessPattern on_chip(const AccessPattern& tile, uint32_t parts, uint32_t free,
                             DType dtype) {
  AccessPattern ap = isa::cols(isa::rows(tile, 0, parts), 0, free);
  ap.dtype = dtype;
  return ap;
}

}  // namespace neuronsim::kernels::detail
