// C[M, N] = A[M, K] @ B[K, N] on TensorE.
//
// The PE computes dst[M, N] (+)= stationary[K, M]^T @ moving[K, N], contracting
// over partitions. B already has K on its rows, so B chunks load straight into
// partitions; A has M on its rows, so each [128, K] row block of A is loaded with
// one DMA and transposed on chip, 128x128 block by block, by PE transposes into
// PSUM (several blocks per 2 KiB bank) and one copy per bank back to SBUF. Each
// A^T block is then reused for every N tile.
//
// B stays resident in SBUF when it fits in half of it (loaded once, on ACT's
// queues). Otherwise it streams in panels of K/128 chunks [128, 512] (narrower when
// K is large), filled one panel ahead of the matmuls, and each panel serves a whole
// group of M tiles, as many as their A^T fit in SBUF, so that B is read once per
// group instead of once per M tile (an LM head over 4 k tokens reads its 311 MB
// weight once). Loop nest per step (one group of M tiles):
//
//   load A rows (SP) -> PE transposes -> A^T in SBUF (copies on DVE/ACT), a step
//                       ahead of the matmuls
//   for each N tile: its B chunks (resident, or a panel filled one ahead);
//     for each M tile: K/128 matmuls accumulating in one PSUM bank, then one
//                      PSUM -> SBUF copy (alternating ACT, DVE)
//   store each tile's block of rows (one DMA, triggered by the idle POOL)
//
// Engines: SP triggers the loads (A, streamed B), ACT's queues load a resident B,
// POOL only triggers stores, so no compute stream ever waits behind a DMA.
//
// The eager matmul over views (eager.h) runs the same loop nest over every batch,
// with each operand addressed through its strides. Where A's m index is contiguous
// (A is a transposed view) it loads A^T straight from HBM, a DMA that puts k on
// partitions and m along the free axis in contiguous runs, and saves the PE
// transposes and their PSUM evacuations. Otherwise that DMA would move one element
// per descriptor (docs/cost-model.md §4.2), so it transposes on the PE like
// matmul(). Where B's k index is contiguous (linear's weight.t(): B = W^T for a
// row-major W) the same holds for B: W's rows load in contiguous pieces of 2 KiB
// and the PE transposes them into B's chunks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common.h"
#include "eager_common.h"
#include "neuronsim/kernels/eager.h"
#include "neuronsim/kernels/kernels.h"
#include "stages.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::Engine;

constexpr std::string_view kName = "matmul";
constexpr uint32_t kNTile = 512;   // FP32 columns of one 2 KiB PSUM bank = moving free max
constexpr uint32_t kAccBanks = 4;  // PSUM banks for accumulation: PE runs ahead of the copies

// One operand's matrices in HBM: element (r, c) of batch b at
// b * batch + r * row + c * col of tensor `t`.
struct HbmMatrix {
  AccessPattern t;
  int64_t row = 0, col = 1, batch = 0;

  // Rows [r0, r0 + nr) x columns [c0, c0 + nc) of batch b, rows on partitions.
  AccessPattern block(std::string_view kernel, uint32_t b, uint32_t r0, uint32_t nr, uint32_t c0,
                      uint32_t nc) const {
    AccessPattern ap = t;
    ap.offset = t.offset +
                static_cast<uint64_t>(b * batch + r0 * row + c0 * col) * isa::dtype_size(t.dtype);
    ap.num_partitions = u16(nr);
    ap.partition_stride = row;
    ap.num_dims = 1;
    ap.dims[0] = {dim_stride(kernel, col), nc};
    return ap;
  }
};

// A matrix [rows, cols] of a 2-D tensor declared by the builder, unit column stride.
HbmMatrix dense(const AccessPattern& t) {
  return {t, t.partition_stride, 1, 0};
}

// An eager view's matrices: the last two dims, and the batch dim when there is one
// (stride 0 when the operand is broadcast over the batch).
HbmMatrix strided(const AccessPattern& t, const View& v) {
  const size_t r = v.sizes.size() - 2;
  const int64_t batch = r == 1 && v.sizes[0] > 1 ? v.strides[0] : 0;
  return {t, v.strides[r], v.strides[r + 1], batch};
}

// What differs between matmul() and the eager matmul over views.
struct MatmulShape {
  uint32_t batches = 1;
  bool a_direct = false;   // A^T loaded by a strided DMA instead of PE transposes
  bool b_of_rows = false;  // B = W^T of a row-major W (linear's weight.t()): PE transposes W's rows
  bool b_shared = true;    // one B for every batch (it may stay resident)
};

// Where the matmuls find B: KT chunks [128, cols] of one SBUF buffer, chunk kt at
// columns kt * stride + first (the resident B, or a streamed panel).
struct BChunks {
  AccessPattern buf;
  uint32_t stride = 0, first = 0;
};

class MatmulKernel {
 public:
  MatmulKernel(KernelBuilder& kb, int64_t M, int64_t K, int64_t N, DType dtype, DType out_dtype,
               uint64_t b_resident_budget)
      : kb_(kb), M_(u32(M)), K_(u32(K)), N_(u32(N)), dt_(dtype), out_dt_(out_dtype) {
    a_ = dense(kb_.input("a", dt_, {M, K}));
    b_ = dense(kb_.input("b", dt_, {K, N}));
    c_ = dense(kb_.output("c", out_dt_, {M, N}));
    allocate(b_resident_budget);
  }

  MatmulKernel(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
               const View& out, const MatmulShape& shape, const MatmulEpilogue* epilogue)
      : kb_(kb),
        M_(u32(out.sizes[out.sizes.size() - 2])),
        K_(u32(a.sizes.back())),
        N_(u32(out.sizes.back())),
        dt_(a.dtype),
        out_dt_(out.dtype),
        shape_(shape) {
    a_ = strided(declare(kb_, "a", a, false), a);
    b_ = strided(declare(kb_, "b", b, false), b);
    c_ = strided(declare(kb_, "out", out, true), out);
    if (epilogue && (epilogue->expr || epilogue->rows != RowOp::none || epilogue->norm)) {
      has_epilogue_ = true;
      epilogue_ = epilogue->expr;
      rows_ = epilogue->rows;
      if (rows_ != RowOp::none) check_float(kName, "out", out.dtype);
      if (epilogue_)
        epilogue_temps_ = tile_expression_temps(kName, *epilogue_, epilogue->inputs.size() + 1);
      for (size_t k = 0; k < epilogue->inputs.size(); ++k) {
        const std::string name = fmt::format("e{}", k + 1);
        const View v = broadcast_to(kName, name.c_str(), epilogue->inputs[k], out.sizes);
        epilogue_in_.push_back(strided(declare(kb_, name, epilogue->inputs[k], false), v));
      }
      if (epilogue->norm) declare_norm(declare, *epilogue->norm, out);
    }
    allocate(kb_.target().sbuf_partition_bytes / 2);
  }

  // A grouped product's blocks (MatmulBlocks): batch b is block b, one M tile of 128 rows.
  MatmulKernel(KernelBuilder& kb, uint32_t K, uint32_t N, DType dtype, DType out_dtype,
               const MatmulBlocks& blocks)
      : kb_(kb), M_(kPartitions), K_(K), N_(N), dt_(dtype), out_dt_(out_dtype), blocks_(&blocks) {
    shape_.batches = blocks.count;
    shape_.b_of_rows = blocks.b_of_rows;
    shape_.b_shared = false;
    for (auto& t : b_index_) t = sbuf(kb_, kName, DType::int32, kPartitions, blocks.b_index_tiles);
    reserved_ = kb_.sbuf_mark();  // the blocks' indices, which live through the product
    allocate(0);
  }

  void build() {
    // A resident B: one DMA per chunk on ACT's queues, or W's rows transposed a panel's
    // width at a time, their loads triggered by the idle POOL so that they run ahead of
    // the transposes instead of waiting behind ACT's copies out of PSUM.
    const uint32_t width = shape_.b_of_rows ? nt_cols_ : N_;
    if (b_resident_)
      for (uint32_t n0 = 0; n0 < N_; n0 += width)
        fill_b({b_all_, N_, n0}, 0, n0, std::min(width, N_ - n0),
               shape_.b_of_rows ? Engine::POOL : Engine::ACT);
    pipeline(
        steps(), 1, [&](uint32_t i) { load_a(i); }, [&](uint32_t i) { compute(i); });
  }

 private:
  uint32_t k_parts(uint32_t kt) const { return tile_len(K_, kPartitions, kt); }
  uint32_t n_cols(uint32_t nt) const { return tile_len(N_, nt_cols_, nt); }
  // Step i is a group of up to group_ M tiles of one batch: tiles [first_tile(i),
  // first_tile(i) + tiles_in(i)) of batch batch_of(i). With an epilogue a group is one tile.
  uint32_t groups() const { return ceil_div(mtiles_.count(), group_); }
  uint32_t steps() const { return shape_.batches * groups(); }
  uint32_t batch_of(uint32_t i) const { return i / groups(); }
  uint32_t first_tile(uint32_t i) const { return i % groups() * group_; }
  uint32_t tiles_in(uint32_t i) const { return std::min(group_, mtiles_.count() - first_tile(i)); }
  // A^T of tile j of a step: chunk kt at columns [a_t_col(j, kt, mp), + mp) of a_t_.
  uint32_t a_t_col(uint32_t j, uint32_t kt, uint32_t mp) const {
    return j * KT_ * kPartitions + kt * mp;
  }
  uint32_t piece_k() const { return blocks_per_bank_ * kPartitions; }
  // How many K chunks from kt0 (before `end`, at most `limit`) share kt0's height: the
  // blocks one PSUM bank takes, so that one copy moves them all.
  uint32_t equal_chunks(uint32_t kt0, uint32_t end, uint32_t limit) const {
    uint32_t count = 0;
    while (kt0 + count < end && count < limit && k_parts(kt0 + count) == k_parts(kt0)) ++count;
    return count;
  }
  // `ap` with an outer free dim of `count` steps of `stride` elements.
  static AccessPattern with_outer(AccessPattern ap, int64_t stride, uint32_t count) {
    ap.num_dims = 2;
    ap.dims[1] = ap.dims[0];
    ap.dims[0] = {dim_stride(kName, stride), count};
    return ap;
  }

  // SBUF per partition, as allocate() lays it out, for a group of `group` M tiles, panels
  // of `panel` columns and output blocks of `block` columns.
  uint64_t a_bytes(uint32_t group) const {
    return (shape_.a_direct ? 0 : 2 * tile_bytes(dt_, K_)) +
           2 * tile_bytes(dt_, uint64_t{group} * KT_ * kPartitions);
  }
  uint64_t b_bytes(uint32_t panel, bool resident) const {
    const uint64_t staging =
        shape_.b_of_rows ? 2 * (panel / kPartitions) * tile_bytes(dt_, piece_k()) : 0;
    return staging + (resident ? tile_bytes(dt_, uint64_t{KT_} * N_)
                               : 2 * tile_bytes(dt_, uint64_t{KT_} * panel));
  }
  uint64_t out_bytes(uint32_t block, uint32_t buffers) const {
    return buffers * tile_bytes(has_epilogue_ ? DType::fp32 : out_dt_, block) + epilogue_bytes();
  }
  uint64_t epilogue_bytes() const {
    if (!has_epilogue_) return 0;
    // The product stays FP32 in SBUF; the epilogue reads it and its inputs' tiles and
    // writes a tile of out's dtype, which is stored.
    uint64_t bytes = 2 * tile_bytes(out_dt_, N_) + epilogue_temps_ * tile_bytes(DType::fp32, N_);
    for (const HbmMatrix& in : epilogue_in_) bytes += 2 * tile_bytes(in.t.dtype, N_);
    if (rows_ != RowOp::none)  // the expression's rows, their exponentials, three columns
      bytes += 2 * tile_bytes(DType::fp32, N_) + 3 * tile_bytes(DType::fp32, 1);
    if (norm_) {  // the prologue's rows, the rows written, the inputs' tiles, temporaries
      bytes += tile_bytes(DType::fp32, N_) + 2 * tile_bytes(norm_rows_.t.dtype, N_) +
               norm_temps_ * (tile_bytes(DType::fp32, N_) + 4);
      for (const HbmMatrix& in : norm_in_) bytes += 2 * tile_bytes(in.t.dtype, N_);
    }
    return bytes;
  }

  // Chooses how B is held, the panel width, the M tiles per step and the output block:
  //  - B streamed in panels of KT chunks [128, nt_cols_], the widest of 512, 256 or 128
  //    columns that fits; each panel serves every M tile of a step, so a step groups as
  //    many M tiles as their A^T fit (B is read once per step) and stores [128, nt_cols_]
  //    blocks. An epilogue needs whole rows: one M tile a step.
  //  - B resident (loaded once, before the matmuls) instead, when it takes at most
  //    b_resident_budget and more than one M tile uses it: one M tile a step, so that
  //    the loads and transposes of the next tile's A overlap this tile's matmuls. A lone
  //    M tile streams B, its matmuls overlapping B's loads.
  // With one M tile a step, the product's rows are stored whole when they fit, else in
  // blocks of the widest multiple of a panel that fits, so N (an LM head's vocabulary) has
  // no limit of its own.
  void allocate(uint64_t b_resident_budget) {
    const uint64_t capacity = kb_.target().sbuf_partition_bytes - reserved_;
    const auto fits = [&](uint32_t group, uint32_t block, uint32_t buffers, bool resident) {
      return a_bytes(group) + b_bytes(nt_cols_, resident) + out_bytes(block, buffers) <= capacity;
    };
    const bool resident_fits = shape_.b_shared &&
                               tile_bytes(dt_, uint64_t{KT_} * N_) <= b_resident_budget &&
                               fits(1, N_, 2, true);
    for (const uint32_t width : {kNTile, kNTile / 2, kNTile / 4}) {
      nt_cols_ = width;
      if (fits(1, has_epilogue_ ? N_ : width, 2, false)) break;
    }
    NT_ = ceil_div(N_, nt_cols_);
    if (!has_epilogue_ && mtiles_.count() > 1) {
      const uint64_t per_tile = a_bytes(1) - a_bytes(0);
      const uint64_t fixed = a_bytes(0) + b_bytes(nt_cols_, false) + out_bytes(nt_cols_, kOutBufs);
      if (fixed < capacity)
        group_ = u32(std::clamp<uint64_t>((capacity - fixed) / per_tile, 1, mtiles_.count()));
    }
    if (resident_fits && shape_.batches * mtiles_.count() > 1) {
      b_resident_ = true;
      nt_cols_ = kNTile;
      NT_ = ceil_div(N_, kNTile);
      group_ = 1;
    }
    out_bufs_ = group_ > 1 ? kOutBufs : 2;
    if (group_ > 1) {
      block_cols_ = nt_cols_;
    } else if (!has_epilogue_ && !fits(1, N_, 2, b_resident_)) {
      const uint64_t fixed = a_bytes(1) + b_bytes(nt_cols_, b_resident_);
      const uint64_t room = fixed < capacity ? capacity - fixed : 0;
      const uint64_t cols = room / (2 * isa::dtype_size(out_dt_));
      block_cols_ =
          std::max<uint32_t>(u32(std::min<uint64_t>(cols, N_) / nt_cols_ * nt_cols_), nt_cols_);
    }
    const uint64_t need =
        a_bytes(group_) + b_bytes(nt_cols_, b_resident_) + out_bytes(block_cols_, out_bufs_);
    require(need <= capacity, kName,
            fmt::format("K={}, N={} need {} bytes per SBUF partition, {} has {}", K_, N_, need,
                        kb_.target().name, capacity));
    place_buffers();
  }

  void place_buffers() {
    const DType rows_dt = has_epilogue_ ? DType::fp32 : out_dt_;
    for (int i = 0; i < 2; ++i) {
      if (!shape_.a_direct) a_rows_[i] = sbuf(kb_, kName, dt_, kPartitions, K_);
      a_t_[i] = sbuf(kb_, kName, dt_, kPartitions, group_ * KT_ * kPartitions);
      if (has_epilogue_) {
        stored_[i] = sbuf(kb_, kName, out_dt_, kPartitions, N_);
        for (const HbmMatrix& in : epilogue_in_)
          epilogue_tiles_[i].push_back(sbuf(kb_, kName, in.t.dtype, kPartitions, N_));
      }
    }
    for (uint32_t i = 0; i < out_bufs_; ++i)
      out_rows_.push_back(sbuf(kb_, kName, rows_dt, kPartitions, block_cols_));
    for (size_t t = 0; t < epilogue_temps_; ++t)
      temps_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, N_));
    if (norm_) {
      norm_pre_ = sbuf(kb_, kName, DType::fp32, kPartitions, N_);
      norm_result_ = sbuf(kb_, kName, DType::fp32, kPartitions, 1);
      for (size_t t = 0; t < norm_temps_; ++t) {
        norm_temps_full_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, N_));
        norm_temps_col_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, 1));
      }
      for (int b = 0; b < 2; ++b) {
        norm_out_[b] = sbuf(kb_, kName, norm_rows_.t.dtype, kPartitions, N_);
        for (const HbmMatrix& in : norm_in_)
          norm_tiles_[b].push_back(sbuf(kb_, kName, in.t.dtype, kPartitions, N_));
      }
    }
    if (rows_ != RowOp::none) {
      pre_ = sbuf(kb_, kName, DType::fp32, kPartitions, N_);
      exp_ = sbuf(kb_, kName, DType::fp32, kPartitions, N_);
      for (auto& c : columns_) c = sbuf(kb_, kName, DType::fp32, kPartitions, 1);
    }
    if (b_resident_)
      b_all_ = sbuf(kb_, kName, dt_, kPartitions, KT_ * N_);
    else
      for (auto& p : panels_) p = sbuf(kb_, kName, dt_, kPartitions, KT_ * nt_cols_);
    if (shape_.b_of_rows)
      for (uint32_t i = 0; i < 2 * nt_cols_ / kPartitions; ++i)
        staging_.push_back(sbuf(kb_, kName, dt_, kPartitions, piece_k()));
    // PSUM: two banks for transposes, four for accumulation (6 of 8 banks).
    if (!shape_.a_direct || shape_.b_of_rows)
      for (auto& t : trans_) t = psum(kb_, kName, dt_, kPartitions, bank_elems_);
    for (auto& t : acc_) t = psum(kb_, kName, DType::fp32, kPartitions, kNTile);
  }

  // Columns [0, cols) of every chunk of `dst` get B[k, n0 + c] of batch `batch`: row chunks
  // of B straight from HBM, or, when B is W^T, W's rows (contiguous) transposed on the PE.
  void fill_b(const BChunks& dst, uint32_t batch, uint32_t n0, uint32_t cols, Engine engine) {
    const AccessPattern* index = blocks_ ? &block_b_index(batch) : nullptr;
    if (!shape_.b_of_rows) {
      for (uint32_t kt = 0; kt < KT_; ++kt) {
        const AccessPattern chunk =
            isa::cols(isa::rows(dst.buf, 0, k_parts(kt)), kt * dst.stride + dst.first, cols);
        if (index) {
          kb_.indirect_copy(chunk, table_cols(blocks_->b, n0, cols),
                            isa::cols(isa::rows(*index, 0, k_parts(kt)), kt, 1), engine);
          continue;
        }
        kb_.dma_copy(
            isa::cols(isa::rows(dst.buf, 0, k_parts(kt)), kt * dst.stride + dst.first, cols),
            b_.block(kName, batch, kt * kPartitions, k_parts(kt), n0, cols), engine);
      }
      return;
    }
    const HbmMatrix w{b_.t, b_.col, b_.row, b_.batch};  // n on rows, k on columns
    const uint32_t blocks = ceil_div(cols, kPartitions);
    const uint32_t per_bank = std::max<uint32_t>(1, bank_elems_ / nt_cols_);
    for (uint32_t k0 = 0; k0 < K_; k0 += piece_k()) {
      // W's rows [n0, n0 + cols) x k [k0, k0 + kw), one contiguous DMA per 128 rows.
      const uint32_t kw = std::min(piece_k(), K_ - k0);
      std::vector<AccessPattern> pieces;
      for (uint32_t q = 0; q < blocks; ++q) {
        const uint32_t np = tile_len(cols, kPartitions, q);
        pieces.push_back(
            isa::cols(isa::rows(staging_[staging_next_++ % staging_.size()], 0, np), 0, kw));
        if (index)
          kb_.indirect_copy(pieces.back(), table_cols(blocks_->b, k0, kw),
                            isa::cols(isa::rows(*index, 0, np), n0 / kPartitions + q, 1), engine);
        else
          kb_.dma_copy(pieces.back(), w.block(kName, batch, n0 + q * kPartitions, np, k0, kw),
                       engine);
      }
      // Chunks of equal height share a PSUM bank, each [kp, cols]; one copy per bank.
      const uint32_t kt_end = ceil_div(k0 + kw, kPartitions);
      for (uint32_t kt0 = k0 / kPartitions; kt0 < kt_end;) {
        const uint32_t kp = k_parts(kt0), count = equal_chunks(kt0, kt_end, per_bank);
        const AccessPattern bank = isa::rows(trans_[trans_next_++ % 2], 0, kp);
        for (uint32_t c = 0; c < count; ++c)
          for (uint32_t q = 0; q < blocks; ++q)
            kb_.transpose(Engine::PE,
                          isa::cols(bank, c * cols + q * kPartitions, pieces[q].num_partitions),
                          isa::cols(pieces[q], (kt0 + c) * kPartitions - k0, kp));
        // Chunks kt0.. at a stride of dst.stride columns.
        const AccessPattern out =
            isa::cols(isa::rows(dst.buf, 0, kp), kt0 * dst.stride + dst.first, cols);
        evacuate(count > 1 ? with_outer(out, dst.stride, count) : out,
                 isa::cols(bank, 0, count * cols));
        kt0 += count;
      }
    }
  }

  // B's chunks for N tile nt of step i: the resident B, or a streamed panel, filled one
  // panel ahead of the matmuls that read it (its DMAs and transposes overlap theirs).
  BChunks b_chunks(uint32_t i, uint32_t nt) {
    if (b_resident_) return {b_all_, N_, nt * nt_cols_};
    const uint32_t use = i * NT_ + nt, uses = steps() * NT_;
    const auto fill = [&](uint32_t u) {
      fill_b({panels_[u % 2], nt_cols_, 0}, batch_of(u / NT_), u % NT_ * nt_cols_, n_cols(u % NT_),
             Engine::SP);
    };
    if (use == 0) fill(0);
    if (use + 1 < uses) fill(use + 1);
    return {panels_[use % 2], nt_cols_, 0};
  }

  // A for step i, tile by tile: A^T straight from HBM, or A's rows (two buffers) transposed
  // on the PE, the next tile's rows loading while the PE transposes this one. The pipeline
  // emits this a step ahead, so the PE transposes the next step before this one's matmuls.
  void load_a(uint32_t i) {
    if (blocks_) {  // the block's rows, gathered by their indices
      kb_.indirect_copy(a_rows_[i % 2], table_cols(blocks_->a, 0, K_),
                        isa::cols(blocks_->a_index, i, 1), Engine::SP);
      transpose_a(i, 0);
      return;
    }
    const uint32_t tiles = tiles_in(i);
    for (uint32_t j = 0; j < tiles; ++j) {
      if (shape_.a_direct) {
        load_a_t(i, j);
        continue;
      }
      const uint32_t m = first_tile(i) + j, mp = mtiles_.parts(m);
      kb_.dma_copy(isa::rows(a_rows_[(i * group_ + j) % 2], 0, mp),
                   a_.block(kName, batch_of(i), mtiles_.first(m), mp, 0, K_), Engine::SP);
      if (j > 0) transpose_a(i, j - 1);
    }
    if (!shape_.a_direct) transpose_a(i, tiles - 1);
  }

  // A^T of tile j of step i straight from HBM: the full 128-row K chunks in one DMA (an
  // outer dim steps 128 k), the last partial one in another.
  void load_a_t(uint32_t i, uint32_t j) {
    const uint32_t m = first_tile(i) + j, mp = mtiles_.parts(m), full = K_ / kPartitions;
    const HbmMatrix a_t{a_.t, a_.col, a_.row, a_.batch};  // k on rows, m on columns
    const AccessPattern dst = a_t_[i % 2];
    if (full > 0) {
      const AccessPattern src =
          with_outer(a_t.block(kName, batch_of(i), 0, kPartitions, mtiles_.first(m), mp),
                     a_t.row * kPartitions, full);
      kb_.dma_copy(isa::cols(dst, a_t_col(j, 0, mp), full * mp), src, Engine::SP);
    }
    if (const uint32_t rest = K_ % kPartitions; rest > 0)
      kb_.dma_copy(isa::cols(isa::rows(dst, 0, rest), a_t_col(j, full, mp), mp),
                   a_t.block(kName, batch_of(i), full * kPartitions, rest, mtiles_.first(m), mp),
                   Engine::SP);
  }

  // Columns [c0, c0 + nc) of every row of a table (the source or destination of an
  // indirect copy, whose index picks the rows).
  static AccessPattern table_cols(AccessPattern table, uint32_t c0, uint32_t nc) {
    table.offset += static_cast<uint64_t>(c0) * static_cast<uint64_t>(table.dims[0].stride) *
                    isa::dtype_size(table.dtype);
    table.dims[0].size = nc;
    return table;
  }

  // B's row indices for block `batch`, made when its first panel is filled (batches come in
  // order), in one of two buffers.
  const AccessPattern& block_b_index(uint32_t batch) {
    if (b_index_batch_ != static_cast<int64_t>(batch)) {
      b_index_batch_ = batch;
      blocks_->b_index(batch, b_index_[++b_index_next_ % 2]);
    }
    return b_index_[b_index_next_ % 2];
  }

  // PSUM -> SBUF copies alternate between ScalarE and VectorE, the two engines
  // that read PSUM, so neither becomes the bottleneck behind TensorE.
  void evacuate(const AccessPattern& dst, const AccessPattern& src) {
    kb_.tensor_copy(evac_next_++ % 2 ? Engine::DVE : Engine::ACT, dst, src);
  }

  // A^T of tile j of step i from its rows: chunk kt lands at a_t_col(j, kt, mp), the k
  // index on partitions. Blocks of equal height share one PSUM bank.
  void transpose_a(uint32_t i, uint32_t j) {
    const uint32_t mp = mtiles_.parts(first_tile(i) + j);
    const AccessPattern a_rows = isa::rows(a_rows_[(i * group_ + j) % 2], 0, mp);
    const AccessPattern& a_t = a_t_[i % 2];
    for (uint32_t kt0 = 0; kt0 < KT_;) {
      const uint32_t kp = k_parts(kt0), count = equal_chunks(kt0, KT_, blocks_per_bank_);
      const AccessPattern bank = isa::rows(trans_[trans_next_++ % 2], 0, kp);
      for (uint32_t c = 0; c < count; ++c)
        kb_.transpose(Engine::PE, isa::cols(bank, c * mp, mp),
                      isa::cols(a_rows, (kt0 + c) * kPartitions, kp));
      const AccessPattern dst = isa::cols(isa::rows(a_t, 0, kp), a_t_col(j, kt0, mp), count * mp);
      if (blocks_) {  // times the blocks' scale (0 when no group has rows)
        const AccessPattern scale = isa::rows(blocks_->scale, 0, kp);
        kb_.tensor_scalar(evac_next_++ % 2 ? Engine::DVE : Engine::ACT, dst,
                          isa::cols(bank, 0, count * mp), isa::AluOp::multiply, 0.0f,
                          isa::AluOp::bypass, 0.0f, &scale);
      } else {
        evacuate(dst, isa::cols(bank, 0, count * mp));
      }
      kt0 += count;
    }
  }

  // Step i's products, block by block of output columns: for each N tile, its B chunks
  // serve every M tile of the step (K/128 matmuls accumulating in one PSUM bank, then one
  // copy out of PSUM); a tile's block is stored (after the epilogue) once complete.
  void compute(uint32_t i) {
    const uint32_t tiles = tiles_in(i), per_block = ceil_div(block_cols_, nt_cols_);
    for (uint32_t nt0 = 0; nt0 < NT_; nt0 += per_block) {
      const uint32_t first = nt0 * nt_cols_, cols = std::min(block_cols_, N_ - first);
      const uint32_t nt_end = std::min(NT_, nt0 + per_block);
      std::vector<AccessPattern> outs;
      for (uint32_t j = 0; j < tiles; ++j)
        outs.push_back(isa::cols(
            isa::rows(out_rows_[out_next_++ % out_bufs_], 0, mtiles_.parts(first_tile(i) + j)), 0,
            cols));
      for (uint32_t nt = nt0; nt < nt_end; ++nt) {
        const BChunks b = b_chunks(i, nt);
        for (uint32_t j = 0; j < tiles; ++j) {
          const uint32_t m = first_tile(i) + j, mp = mtiles_.parts(m);
          const AccessPattern acc =
              isa::cols(isa::rows(acc_[acc_next_++ % kAccBanks], 0, mp), 0, n_cols(nt));
          for (uint32_t kt = 0; kt < KT_; ++kt) {
            const uint32_t kp = k_parts(kt);
            kb_.matmul(acc, isa::cols(isa::rows(a_t_[i % 2], 0, kp), a_t_col(j, kt, mp), mp),
                       isa::cols(isa::rows(b.buf, 0, kp), kt * b.stride + b.first, n_cols(nt)),
                       /*accumulate=*/kt > 0);
          }
          // Casts FP32 to out_dtype.
          evacuate(isa::cols(outs[j], nt * nt_cols_ - first, n_cols(nt)), acc);
          if (nt + 1 < nt_end) continue;
          const AccessPattern result = has_epilogue_ ? apply_epilogue(i, outs[j]) : outs[j];
          if (blocks_)  // to the block's rows of out
            kb_.indirect_copy(table_cols(blocks_->out, first, cols), result,
                              isa::cols(blocks_->a_index, i, 1), Engine::POOL, /*scatter=*/true);
          else
            kb_.dma_copy(c_.block(kName, batch_of(i), mtiles_.first(m), mp, first, cols), result,
                         Engine::POOL);
          if (norm_) apply_norm(i, result);
        }
      }
    }
  }

  // The norm's operands: its inputs broadcast to out's sizes and its rows, out's sizes.
  void declare_norm(const Declare& declare, const MatmulNorm& norm, const View& out) {
    require(norm.rows.sizes == out.sizes, kName, "the norm's rows are not the product's");
    norm_ = &norm;
    std::vector<bool> columns(norm.inputs.size() + 2, false);
    columns[1] = true;  // load(1): the row's result
    tile_expression_columns(kName, *norm.epilogue, columns);
    norm_columns_ = columns;
    norm_temps_ = norm.epilogue->steps().size() +
                  (norm.prologue ? tile_expression_temps(kName, *norm.prologue, 1) : 0);
    norm_rows_ = strided(declare(kb_, "norm_rows", norm.rows, true), norm.rows);
    for (size_t k = 0; k < norm.inputs.size(); ++k) {
      const std::string name = fmt::format("n{}", k + 2);
      const View v = broadcast_to(kName, name.c_str(), norm.inputs[k], out.sizes);
      norm_in_.push_back(strided(declare(kb_, name, norm.inputs[k], false), v));
    }
  }

  // The norm over step i's stored rows: the prologue, the reduction along the row, the
  // epilogue with the row's result as load(1); its rows stored to "norm_rows".
  void apply_norm(uint32_t i, const AccessPattern& value) {
    const uint32_t m = first_tile(i), mp = mtiles_.parts(m);
    const Engine engine = i % 2 ? Engine::POOL : Engine::DVE;
    std::vector<AccessPattern> loads{value, isa::rows(norm_result_, 0, mp)}, temps, columns;
    for (size_t k = 0; k < norm_in_.size(); ++k) {
      const AccessPattern tile = isa::rows(norm_tiles_[i % 2][k], 0, mp);
      kb_.dma_copy(tile, norm_in_[k].block(kName, batch_of(i), mtiles_.first(m), mp, 0, N_),
                   k % 2 ? Engine::SP : Engine::ACT);
      loads.push_back(tile);
    }
    for (size_t t = 0; t < norm_temps_; ++t) {
      temps.push_back(isa::rows(norm_temps_full_[t], 0, mp));
      columns.push_back(isa::rows(norm_temps_col_[t], 0, mp));
    }
    AccessPattern reduced = value;
    if (norm_->prologue) {
      reduced = isa::rows(norm_pre_, 0, mp);
      emit_tile_expression(kb_, engine, *norm_->prologue, {&value, 1}, temps, reduced);
    }
    const AccessPattern result = loads[1];
    kb_.tensor_reduce(engine, result, reduced, reduce_alu(norm_->op), 0x1);
    if (norm_->op == ReduceOp::mean)
      kb_.tensor_scalar(engine, result, result, isa::AluOp::divide, static_cast<float>(N_));
    const AccessPattern rows = isa::rows(norm_out_[i % 2], 0, mp);
    emit_tile_expression(kb_, engine, *norm_->epilogue, loads, temps, rows, norm_columns_, columns);
    kb_.dma_copy(norm_rows_.block(kName, batch_of(i), mtiles_.first(m), mp, 0, N_), rows,
                 Engine::POOL);
  }

  static isa::AluOp reduce_alu(ReduceOp op) {
    switch (op) {
      case ReduceOp::max:
        return isa::AluOp::max;
      case ReduceOp::min:
        return isa::AluOp::min;
      default:
        return isa::AluOp::add;
    }
  }

  // The epilogue over step i's rows: its inputs' rows loaded (on SP's and ACT's queues),
  // the expression on VectorE or GpSimd (ScalarE for activations); returns the tile to store.
  AccessPattern apply_epilogue(uint32_t i, const AccessPattern& product) {
    const uint32_t m = first_tile(i), mp = mtiles_.parts(m);
    std::vector<AccessPattern> loads{product};
    for (size_t k = 0; k < epilogue_in_.size(); ++k) {
      const AccessPattern tile = isa::rows(epilogue_tiles_[i % 2][k], 0, mp);
      kb_.dma_copy(tile, epilogue_in_[k].block(kName, batch_of(i), mtiles_.first(m), mp, 0, N_),
                   k % 2 ? Engine::ACT : Engine::SP);
      loads.push_back(tile);
    }
    std::vector<AccessPattern> temps;
    for (const AccessPattern& t : temps_) temps.push_back(isa::rows(t, 0, mp));
    const AccessPattern stored = isa::rows(stored_[i % 2], 0, mp);
    AccessPattern value = product;
    if (epilogue_) {
      value = rows_ == RowOp::none ? stored : isa::rows(pre_, 0, mp);
      emit_tile_expression(kb_, i % 2 ? Engine::POOL : Engine::DVE, *epilogue_, loads, temps,
                           value);
    }
    if (rows_ != RowOp::none) row_softmax(value, stored, mp);
    if (!epilogue_ && rows_ == RowOp::none)  // a norm of the bare product: stored as out's dtype
      kb_.tensor_copy(i % 2 ? Engine::POOL : Engine::DVE, stored, product);
    return stored;
  }

  // dst = softmax (or log_softmax) of each row of x, as the softmax kernel computes it:
  // VectorE's negated row max, ScalarE's exponentials summed as they are written.
  void row_softmax(const AccessPattern& x, const AccessPattern& dst, uint32_t mp) {
    const AccessPattern nmax = isa::rows(columns_[0], 0, mp), sum = isa::rows(columns_[1], 0, mp);
    const AccessPattern scale = isa::rows(columns_[2], 0, mp), e = isa::rows(exp_, 0, mp);
    kb_.tensor_reduce(Engine::DVE, nmax, x, isa::AluOp::max, 0x1, /*negate=*/true);
    kb_.activation(e, x, isa::ActFunc::exp, 1.0f, &nmax, &sum, isa::AluOp::add);
    if (rows_ == RowOp::log_softmax) {
      kb_.activation(scale, sum, isa::ActFunc::log);
      kb_.tensor_scalar(Engine::DVE, dst, x, isa::AluOp::add, 0.0f, isa::AluOp::subtract, 0.0f,
                        &nmax, &scale);
    } else {
      kb_.activation(scale, sum, isa::ActFunc::reciprocal);
      kb_.tensor_scalar(Engine::DVE, dst, e, isa::AluOp::multiply, 0.0f, isa::AluOp::bypass, 0.0f,
                        &scale);
    }
  }

  static constexpr uint32_t kOutBufs = 4;  // output blocks in flight when a step has many tiles

  KernelBuilder& kb_;
  uint32_t M_, K_, N_;
  DType dt_, out_dt_;
  MatmulShape shape_;
  RowTiles mtiles_{M_};
  uint32_t KT_ = ceil_div(K_, kPartitions);
  uint32_t bank_elems_ = kb_.target().psum_bank_bytes / static_cast<uint32_t>(isa::dtype_size(dt_));
  uint32_t blocks_per_bank_ = bank_elems_ / kPartitions;  // 128-column blocks per PSUM bank
  uint32_t nt_cols_ = kNTile;  // columns of an N tile (a PSUM bank's FP32, or a narrower panel)
  uint32_t NT_ = ceil_div(N_, kNTile);
  uint32_t group_ = 1;        // M tiles a step (allocate)
  uint32_t block_cols_ = N_;  // columns of out_rows_: N, or a block of it (allocate)
  uint32_t out_bufs_ = 2;
  HbmMatrix a_, b_, c_;
  AccessPattern a_rows_[2], a_t_[2], trans_[2], acc_[kAccBanks];
  AccessPattern b_all_, panels_[2];
  std::vector<AccessPattern> out_rows_, staging_;
  bool has_epilogue_ = false;
  const MatmulNorm* norm_ = nullptr;
  std::vector<bool> norm_columns_;
  size_t norm_temps_ = 0;
  HbmMatrix norm_rows_;
  std::vector<HbmMatrix> norm_in_;
  AccessPattern norm_pre_, norm_result_, norm_out_[2];
  std::vector<AccessPattern> norm_temps_full_, norm_temps_col_, norm_tiles_[2];
  const PointwiseExpr* epilogue_ = nullptr;
  RowOp rows_ = RowOp::none;
  AccessPattern pre_, exp_, columns_[3];
  size_t epilogue_temps_ = 0;
  std::vector<HbmMatrix> epilogue_in_;
  std::vector<AccessPattern> epilogue_tiles_[2], temps_;
  AccessPattern stored_[2];
  bool b_resident_ = false;
  const MatmulBlocks* blocks_ = nullptr;
  AccessPattern b_index_[2];
  int64_t b_index_batch_ = -1;
  uint32_t b_index_next_ = 0;
  uint64_t reserved_ = 0;  // SBUF bytes per partition taken before the kernel's own
  uint32_t staging_next_ = 0, evac_next_ = 0, trans_next_ = 0, acc_next_ = 0, out_next_ = 0;
};

// Sizes [.., M, K] x [.., K, N] -> [.., M, N] with one batch count (a broadcast
// operand may say 1); returns what the kernel needs to know beyond the views.
MatmulShape check_views(const View& a, const View& b, const View& out) {
  check_view(kName, "a", a);
  check_view(kName, "b", b);
  check_view(kName, "out", out);
  check_no_self_overlap(kName, "out", out);
  const size_t r = out.sizes.size();
  require((r == 2 || r == 3) && a.sizes.size() == r && b.sizes.size() == r, kName,
          fmt::format("a, b and out must all be 2-D or all 3-D, not {}-D, {}-D and {}-D",
                      a.sizes.size(), b.sizes.size(), r));
  const int64_t M = out.sizes[r - 2], K = a.sizes[r - 1], N = out.sizes[r - 1];
  require(a.sizes[r - 2] == M && b.sizes[r - 2] == K && b.sizes[r - 1] == N, kName,
          fmt::format("a [{}] times b [{}] is not out [{}]", fmt::join(a.sizes, ", "),
                      fmt::join(b.sizes, ", "), fmt::join(out.sizes, ", ")));
  // Views are declared flat (declare_operand) and tiled: no dim becomes the row count of
  // one access pattern, so M, K and N are limited only by what check_view checks.
  for (const auto& [name, value] : {std::pair{"M", M}, {"K", K}, {"N", N}})
    require(value >= 1, kName, fmt::format("{} must be at least 1, not {}", name, value));
  MatmulShape shape;
  // A^T straight from HBM is one descriptor per element unless A's m index is the contiguous
  // one (A a transposed view): then a DMA does it, else PE transposes (docs/cost-model.md §4.2).
  shape.a_direct = M == 1 || a.strides[r - 2] == 1;
  // B with its k index contiguous is W^T of a row-major W (linear's weight.t(), attention's
  // k.transpose(-2, -1)): W's rows load contiguously and are transposed on the PE, instead of
  // a DMA of one descriptor per element.
  shape.b_of_rows = N > 1 && b.strides[r - 2] == 1 && b.strides[r - 1] != 1;
  if (r == 3) {
    const int64_t B = out.sizes[0];
    for (const View* v : {&a, &b})
      require(v->sizes[0] == B || v->sizes[0] == 1, kName,
              fmt::format("batch {} of an operand is neither out's {} nor 1", v->sizes[0], B));
    require(B >= 1, kName, fmt::format("batch must be at least 1, not {}", B));
    shape.batches = u32(B);
    shape.b_shared = b.sizes[0] == 1 || b.strides[0] == 0;
  }
  require(a.dtype == b.dtype, kName,
          fmt::format("a is {} but b is {}", isa::dtype_name(a.dtype), isa::dtype_name(b.dtype)));
  check_float(kName, "a", a.dtype);
  check_float(kName, "out", out.dtype);
  return shape;
}

}  // namespace

namespace detail {

isa::Program matmul(std::string_view target, int64_t M, int64_t K, int64_t N, DType dtype,
                    DType out_dtype, uint64_t b_resident_budget) {
  check_dims(kName, {{"M", M}, {"K", K}, {"N", N}});
  check_float(kName, "dtype", dtype);
  check_float(kName, "out_dtype", out_dtype);
  KernelBuilder kb(target);
  MatmulKernel(kb, M, K, N, dtype, out_dtype, b_resident_budget).build();
  return kb.finish();
}

}  // namespace detail

isa::Program matmul(std::string_view target, int64_t M, int64_t K, int64_t N, DType dtype,
                    DType out_dtype) {
  // B stays resident when it takes at most half of SBUF, leaving room for A and C.
  const uint64_t budget = isa::target_by_name(target).sbuf_partition_bytes / 2;
  return detail::matmul(target, M, K, N, dtype, out_dtype, budget);
}

namespace detail {

void emit_matmul(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
                 const View& out, const MatmulEpilogue* epilogue) {
  MatmulKernel(kb, declare, a, b, out, check_views(a, b, out), epilogue).build();
}

}  // namespace detail

namespace detail {

void emit_block_matmul(KernelBuilder& kb, uint32_t K, uint32_t N, DType dtype, DType out_dtype,
                       const MatmulBlocks& blocks, const std::function<void()>& preamble) {
  MatmulKernel kernel(kb, K, N, dtype, out_dtype, blocks);
  preamble();
  kernel.build();
}

}  // namespace detail

isa::Program matmul(std::string_view target, const View& a, const View& b, const View& out) {
  KernelBuilder kb(target);
  detail::emit_matmul(kb, declare_operand, a, b, out);
  return kb.finish();
}

}  // namespace neuronsim::kernels
