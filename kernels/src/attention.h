// What the attention kernels (forward and backward) share: heads of [B, H, T, D] views in
// HBM, the causal mask tile, and the lse/column views.
#pragma once

#include <cstdint>
#include <utility>

#include "common.h"
#include "eager_common.h"

namespace neuronsim::kernels::detail {

inline constexpr float kMaskedScore = -1.0e30f;  // exp() gives 0, sums stay finite

// A [B, H, T, D] view in HBM: rows of one head on partitions.
struct Heads {
  AccessPattern t;
  int64_t batch = 0, head = 0, row = 0, col = 1;

  Heads() = default;
  Heads(const AccessPattern& tensor, const View& v)
      : t(tensor), batch(v.strides[0]), head(v.strides[1]), row(v.strides[2]), col(v.strides[3]) {}

  // Rows [r0, r0 + n) x columns [c0, c0 + nc) of head h of batch b.
  AccessPattern block(std::string_view kernel, uint32_t b, uint32_t h, uint32_t r0, uint32_t n,
                      uint32_t c0, uint32_t nc) const {
    AccessPattern ap = t;
    ap.offset = t.offset + static_cast<uint64_t>(b * batch + h * head + int64_t{r0} * row +
                                                 int64_t{c0} * col) *
                               isa::dtype_size(t.dtype);
    ap.num_partitions = n;
    ap.partition_stride = row;
    ap.num_dims = 1;
    ap.dims[0] = {dim_stride(kernel, col), nc};
    return ap;
  }
};

// A 4-D view, or a 3-D one [H, T, D] as a batch of one.
View four_d(const View& v);

// One FP32 value per row of an lse view [B, H, T] (or [H, T]): rows [r0, r0 + n) of head
// h of batch b, one per partition.
struct RowValues {
  AccessPattern t;
  int64_t batch = 0, head = 0, row = 0;

  RowValues() = default;
  RowValues(const AccessPattern& tensor, const View& v);
  AccessPattern rows(uint32_t b, uint32_t h, uint32_t r0, uint32_t n) const;
};

// mask[p, j] = 0 where j <= p, else kMaskedScore ([128, 128] FP32, built by GpSimd): added
// to the 128 keys from a query tile's first row on, it masks the keys past each row.
void emit_causal_mask(KernelBuilder& kb, const AccessPattern& mask);

// The scores of one (query tile, key block) step as the softmax reads them, and the scale
// still to apply, on the step's [parts, width] block of each tile: `raw` (q K^T in PSUM) with
// the causal `mask` ([parts, 128]) added in place to its keys from `diagonal` on (q0 - k0; none
// when negative), read with `scale` in the exponential; or, with an attn_mask tile `bias`,
// scale * raw + bias in `scaled` (SBUF, FP32), read with scale 1: the mask is added after the
// scale, as torch does. `scaled` and `bias` are both given or both null.
std::pair<AccessPattern, float> step_scores(KernelBuilder& kb, const AccessPattern& raw,
                                            const AccessPattern& mask, int32_t diagonal,
                                            float scale, const AccessPattern* scaled,
                                            const AccessPattern* bias, uint32_t parts,
                                            uint32_t width);

// dst <- src for chunks of 128 keys laid side by side by PE transposes ([kc, parts] each,
// `width` keys in all): the full chunks in one copy, a short last one in another.
void copy_transposed_chunks(KernelBuilder& kb, isa::Engine engine, const AccessPattern& dst,
                            const AccessPattern& src, uint32_t width, uint32_t parts);

}  // namespace neuronsim::kernels::detail
