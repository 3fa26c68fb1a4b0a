// Helpers shared by the kernels: argument checks, HBM views for tiling, SBUF
// budgeting and the software pipeline that overlaps loads with compute.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "neuronsim/isa/kernel_builder.h"

namespace neuronsim::kernels::detail {

using isa::AccessPattern;
using isa::DType;
using isa::KernelBuilder;

inline constexpr uint32_t kPartitions = 128;

// Throws std::invalid_argument("<kernel>: <message>").
[[noreturn]] void fail(std::string_view kernel, const std::string& message);
inline void require(bool ok, std::string_view kernel, const std::string& message) {
  if (!ok) fail(kernel, message);
}

// Every dim >= 1 and small enough for one HBM access pattern (rows < 2^32, the
// builder's limit on a tensor's first dim, as on the elements of one row).
void check_dims(std::string_view kernel,
                std::initializer_list<std::pair<const char*, int64_t>> dims);
void check_float(std::string_view kernel, const char* what, DType dtype);

inline uint32_t ceil_div(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}
inline uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}
inline uint16_t u16(uint64_t v) {
  return static_cast<uint16_t>(v);
}

// Size of tile `index` of `tile` elements along a dim of `total` elements.
inline uint32_t tile_len(uint64_t total, uint32_t tile, uint32_t index) {
  return static_cast<uint32_t>(std::min<uint64_t>(tile, total - uint64_t{index} * tile));
}

// Rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of a 2-D HBM tensor.
inline AccessPattern hbm_block(const AccessPattern& t, uint32_t row0, uint32_t nrows, uint32_t col0,
                               uint32_t ncols) {
  return isa::cols(isa::rows(t, row0, nrows), col0, ncols);
}

// `parts` rows of `per_row` contiguous elements, starting at element `start` of
// the tensor: the tensor seen as a flat array.
AccessPattern hbm_flat(const AccessPattern& t, uint64_t start, uint16_t parts, uint32_t per_row);

// A 1-D tensor [n] repeated on `parts` rows: the HBM side has row stride 0, so
// one DMA loads the vector into every partition.
AccessPattern hbm_broadcast(const AccessPattern& vec, uint16_t parts, uint32_t n);

// Bytes per partition of an SBUF tile as the builder allocates it (64-byte aligned).
inline uint64_t tile_bytes(DType dtype, uint64_t free) {
  return (free * isa::dtype_size(dtype) + 63) / 64 * 64;
}

// How many buffers (3 when they fit, else 2) of `slot_bytes` per partition fit in
// the SBUF left after `fixed_bytes`; throws when not even two fit.
uint32_t buffer_count(const KernelBuilder& kb, std::string_view kernel, uint64_t fixed_bytes,
                      uint64_t slot_bytes, const std::string& what);

// sbuf_tile/psum_tile, with the builder's "exhausted" error reported as an
// unsupported shape of `kernel`.
AccessPattern sbuf(KernelBuilder& kb, std::string_view kernel, DType dtype, uint32_t parts,
                   uint32_t free);
AccessPattern psum(KernelBuilder& kb, std::string_view kernel, DType dtype, uint32_t parts,
                   uint32_t free);

// ACT: dst = func(src * scale[p] + bias[p]) with a per-partition scale operand
// (the builder's shorthand only takes an immediate scale).
void activation_scaled(KernelBuilder& kb, const AccessPattern& dst, const AccessPattern& src,
                       isa::ActFunc func, const AccessPattern& scale,
                       const AccessPattern* bias = nullptr);

// Software pipeline over `n` steps: load(i) is emitted `lookahead` steps before
// compute(i), so the DMA queues start on tile i+lookahead while the engines work
// on tile i. With lookahead = buffers - 1, the load waits only for the buffer's
// previous user, which is lookahead+1 steps back.
template <class Load, class Compute>
void pipeline(uint32_t n, uint32_t lookahead, Load&& load, Compute&& compute) {
  for (uint32_t i = 0; i < std::min(n, lookahead); ++i) load(i);
  for (uint32_t i = 0; i < n; ++i) {
    if (i + lookahead < n) load(i + lookahead);
    compute(i);
  }
}

// Rows of the kernel in 128-partition tiles: tile i covers rows [i*128, i*128 + parts(i)).
struct RowTiles {
  uint64_t rows;
  uint32_t count() const { return ceil_div(rows, kPartitions); }
  uint32_t first(uint32_t i) const { return i * kPartitions; }
  uint32_t parts(uint32_t i) const { return tile_len(rows, kPartitions, i); }
};

}  // namespace neuronsim::kernels::detail
