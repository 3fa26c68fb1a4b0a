// C[M, N] = A[M, K] @ B[K, N] on TensorE.
//
// The PE computes dst[M, N] (+)= stationary[K, M]^T @ moving[K, N], contracting
// over partitions. B already has K on its rows, so B tiles load straight into
// partitions; A has M on its rows, so each [128, K] row block of A is loaded with
// one DMA and transposed on chip, 128x128 block by block, by PE transposes into
// PSUM (several blocks per 2 KiB bank) and one copy per bank back to SBUF. Each
// A^T block is then reused for every N tile. Loop nest per M tile:
//
//   load A rows (SP)  ->  PE transposes -> A^T in SBUF (copies on DVE/ACT),
//                         one M tile ahead of the matmuls
//   for each 512-column N tile: K/128 matmuls accumulating in one PSUM bank,
//                               then one PSUM -> SBUF copy (alternating ACT, DVE)
//   store the [128, N] result row block (one DMA, triggered by the idle POOL)
//
// Engines: SP triggers the loads (A, streamed B), ACT's queues load a resident B,
// POOL only triggers stores, so no compute stream ever waits behind a DMA.
#include <fmt/format.h>

#include "common.h"
#include "neuronsim/kernels/kernels.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::Engine;

constexpr std::string_view kName = "matmul";
constexpr uint32_t kNTile = 512;     // FP32 columns of one 2 KiB PSUM bank = moving free max
constexpr uint32_t kAccBanks = 4;    // PSUM banks for accumulation: PE runs ahead of the copies
constexpr uint32_t kStreamBufs = 4;  // B tiles in flight when B is streamed

class MatmulKernel {
 public:
  MatmulKernel(std::string_view target, int64_t M, int64_t K, int64_t N, DType dtype,
               DType out_dtype, uint64_t b_resident_budget)
      : kb_(target), M_(u32(M)), K_(u32(K)), N_(u32(N)), dt_(dtype), out_dt_(out_dtype) {
    a_ = kb_.input("a", dt_, {M, K});
    b_ = kb_.input("b", dt_, {K, N});
    c_ = kb_.output("c", out_dt_, {M, N});
    allocate(b_resident_budget);
  }

  isa::Program build() {
    if (b_resident_) load_resident_b();
    pipeline(
        mtiles_.count(), 1, [&](uint32_t m) { load_a(m); }, [&](uint32_t m) { compute(m); });
    return kb_.finish();
  }

 private:
  uint32_t k_parts(uint32_t kt) const { return tile_len(K_, kPartitions, kt); }
  uint32_t n_cols(uint32_t nt) const { return tile_len(N_, kNTile, nt); }

  void allocate(uint64_t b_resident_budget) {
    const uint64_t capacity = kb_.target().sbuf_partition_bytes;
    const uint64_t fixed = 2 * tile_bytes(dt_, K_) +
                           2 * tile_bytes(dt_, uint64_t{KT_} * kPartitions) +
                           2 * tile_bytes(out_dt_, N_);
    const uint64_t resident = KT_ * tile_bytes(dt_, N_);
    const uint64_t streamed = kStreamBufs * tile_bytes(dt_, kNTile);
    b_resident_ = resident <= b_resident_budget && fixed + resident <= capacity;
    require(fixed + streamed <= capacity, kName,
            fmt::format("K={}, N={} need {} bytes per SBUF partition, {} has {}", K_, N_,
                        fixed + streamed, kb_.target().name, capacity));
    for (int i = 0; i < 2; ++i) {
      a_rows_[i] = sbuf(kb_, kName, dt_, kPartitions, K_);
      a_t_[i] = sbuf(kb_, kName, dt_, kPartitions, KT_ * kPartitions);
      out_rows_[i] = sbuf(kb_, kName, out_dt_, kPartitions, N_);
    }
    const uint32_t nb = b_resident_ ? KT_ : kStreamBufs;
    for (uint32_t i = 0; i < nb; ++i)
      b_tiles_.push_back(sbuf(kb_, kName, dt_, kPartitions, b_resident_ ? N_ : kNTile));
    // PSUM: two banks for transposes, four for accumulation (6 of 8 banks).
    const uint32_t bank_elems =
        kb_.target().psum_bank_bytes / static_cast<uint32_t>(isa::dtype_size(dt_));
    for (auto& t : trans_) t = psum(kb_, kName, dt_, kPartitions, bank_elems);
    for (auto& t : acc_) t = psum(kb_, kName, DType::fp32, kPartitions, kNTile);
    blocks_per_bank_ = bank_elems / kPartitions;
  }

  // B as KT row chunks [128, N], loaded once on ACT's queues while SP loads A.
  void load_resident_b() {
    for (uint32_t kt = 0; kt < KT_; ++kt)
      kb_.dma_copy(isa::rows(b_tiles_[kt], 0, k_parts(kt)),
                   hbm_block(b_, kt * kPartitions, k_parts(kt), 0, N_), Engine::ACT);
  }

  // The moving operand for chunk kt of N tile nt: a view of resident B, or a
  // freshly loaded streaming buffer.
  AccessPattern b_tile(uint32_t kt, uint32_t nt) {
    const uint32_t kp = k_parts(kt), nn = n_cols(nt);
    if (b_resident_) return isa::cols(isa::rows(b_tiles_[kt], 0, kp), nt * kNTile, nn);
    const AccessPattern t =
        isa::cols(isa::rows(b_tiles_[stream_next_++ % kStreamBufs], 0, kp), 0, nn);
    kb_.dma_copy(t, hbm_block(b_, kt * kPartitions, kp, nt * kNTile, nn), Engine::SP);
    return t;
  }

  void load_a(uint32_t m) {
    const uint32_t mp = mtiles_.parts(m);
    kb_.dma_copy(isa::rows(a_rows_[m % 2], 0, mp), hbm_block(a_, mtiles_.first(m), mp, 0, K_),
                 Engine::SP);
  }

  // PSUM -> SBUF copies alternate between ScalarE and VectorE, the two engines
  // that read PSUM, so neither becomes the bottleneck behind TensorE.
  void evacuate(const AccessPattern& dst, const AccessPattern& src) {
    kb_.tensor_copy(evac_next_++ % 2 ? Engine::DVE : Engine::ACT, dst, src);
  }

  // A^T for M tile m: chunk kt lands at columns [kt*mp, (kt+1)*mp) of a_t, with
  // the k index on partitions. Blocks of equal height share one PSUM bank.
  void transpose_a(uint32_t m) {
    const uint32_t mp = mtiles_.parts(m);
    const AccessPattern a_rows = isa::rows(a_rows_[m % 2], 0, mp);
    const AccessPattern& a_t = a_t_[m % 2];
    for (uint32_t kt0 = 0; kt0 < KT_;) {
      const uint32_t kp = k_parts(kt0);
      uint32_t count = 0;
      while (kt0 + count < KT_ && count < blocks_per_bank_ && k_parts(kt0 + count) == kp) ++count;
      const AccessPattern bank = isa::rows(trans_[trans_next_++ % 2], 0, kp);
      for (uint32_t j = 0; j < count; ++j)
        kb_.transpose(Engine::PE, isa::cols(bank, j * mp, mp),
                      isa::cols(a_rows, (kt0 + j) * kPartitions, kp));
      evacuate(isa::cols(isa::rows(a_t, 0, kp), kt0 * mp, count * mp),
               isa::cols(bank, 0, count * mp));
      kt0 += count;
    }
  }

  void compute(uint32_t m) {
    // TensorE transposes the next A block before the matmuls of this one, so it
    // has work while ACT/DVE copy this block's A^T out of PSUM.
    if (m == 0) transpose_a(0);
    if (m + 1 < mtiles_.count()) transpose_a(m + 1);
    const uint32_t mp = mtiles_.parts(m);
    const AccessPattern out = isa::rows(out_rows_[m % 2], 0, mp);
    for (uint32_t nt = 0; nt < NT_; ++nt) {
      const AccessPattern acc =
          isa::cols(isa::rows(acc_[acc_next_++ % kAccBanks], 0, mp), 0, n_cols(nt));
      for (uint32_t kt = 0; kt < KT_; ++kt) {
        const AccessPattern stationary =
            isa::cols(isa::rows(a_t_[m % 2], 0, k_parts(kt)), kt * mp, mp);
        kb_.matmul(acc, stationary, b_tile(kt, nt), /*accumulate=*/kt > 0);
      }
      evacuate(isa::cols(out, nt * kNTile, n_cols(nt)), acc);  // casts FP32 to out_dtype
    }
    kb_.dma_copy(hbm_block(c_, mtiles_.first(m), mp, 0, N_), out, Engine::POOL);
  }

  KernelBuilder kb_;
  uint32_t M_, K_, N_;
  DType dt_, out_dt_;
  RowTiles mtiles_{M_};
  uint32_t KT_ = ceil_div(K_, kPartitions);
  uint32_t NT_ = ceil_div(N_, kNTile);
  AccessPattern a_, b_, c_;
  AccessPattern a_rows_[2], a_t_[2], out_rows_[2], trans_[2], acc_[kAccBanks];
  std::vector<AccessPattern> b_tiles_;
  bool b_resident_ = false;
  uint32_t blocks_per_bank_ = 1;
  uint32_t stream_next_ = 0, evac_next_ = 0, trans_next_ = 0, acc_next_ = 0;
};

}  // namespace

namespace detail {

isa::Program matmul(std::string_view target, int64_t M, int64_t K, int64_t N, DType dtype,
                    DType out_dtype, uint64_t b_resident_budget) {
  check_dims(kName, {{"M", M}, {"K", K}, {"N", N}});
  check_float(kName, "dtype", dtype);
  check_float(kName, "out_dtype", out_dtype);
  return MatmulKernel(target, M, K, N, dtype, out_dtype, b_resident_budget).build();
}

}  // namespace detail

isa::Program matmul(std::string_view target, int64_t M, int64_t K, int64_t N, DType dtype,
                    DType out_dtype) {
  // B stays resident when it takes at most half of SBUF, leaving room for A and C.
  const uint64_t budget = isa::target_by_name(target).sbuf_partition_bytes / 2;
  return detail::matmul(target, M, K, N, dtype, out_dtype, budget);
}

}  // namespace neuronsim::kernels
