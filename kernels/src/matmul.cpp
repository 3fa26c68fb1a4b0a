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
//
// The eager matmul over views (eager.h) runs the same loop nest over every batch,
// with each operand addressed through its strides. Where A's m index is contiguous
// (A is a transposed view) it loads A^T straight from HBM, a DMA that puts k on
// partitions and m along the free axis in contiguous runs, and saves the PE
// transposes and their PSUM evacuations. Otherwise that DMA would move one element
// per descriptor (docs/cost-model.md §4.2), so it transposes on the PE like
// matmul(). Transposed B (linear's weight.t()) is still one strided DMA per tile,
// one descriptor per element: transposing B on chip is left to do.
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
constexpr uint32_t kNTile = 512;     // FP32 columns of one 2 KiB PSUM bank = moving free max
constexpr uint32_t kAccBanks = 4;    // PSUM banks for accumulation: PE runs ahead of the copies
constexpr uint32_t kStreamBufs = 4;  // B tiles in flight when B is streamed

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
  bool a_direct = false;  // A^T loaded by a strided DMA instead of PE transposes
  bool b_shared = true;   // one B for every batch (it may stay resident)
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

  void build() {
    if (b_resident_) load_resident_b();
    pipeline(
        shape_.batches * mtiles_.count(), 1, [&](uint32_t i) { load_a(i); },
        [&](uint32_t i) { compute(i); });
  }

 private:
  uint32_t k_parts(uint32_t kt) const { return tile_len(K_, kPartitions, kt); }
  uint32_t n_cols(uint32_t nt) const { return tile_len(N_, kNTile, nt); }
  // Step i of the pipeline is M tile m_of(i) of batch batch_of(i).
  uint32_t batch_of(uint32_t i) const { return i / mtiles_.count(); }
  uint32_t m_of(uint32_t i) const { return i % mtiles_.count(); }

  void allocate(uint64_t b_resident_budget) {
    const uint64_t capacity = kb_.target().sbuf_partition_bytes;
    // With an epilogue the product stays FP32 in SBUF; the epilogue reads it and its
    // inputs' tiles and writes a tile of out's dtype, which is stored.
    const DType rows_dt = has_epilogue_ ? DType::fp32 : out_dt_;
    uint64_t epilogue_bytes = 0;
    if (has_epilogue_) {
      epilogue_bytes = 2 * tile_bytes(out_dt_, N_) + epilogue_temps_ * tile_bytes(DType::fp32, N_);
      for (const HbmMatrix& in : epilogue_in_) epilogue_bytes += 2 * tile_bytes(in.t.dtype, N_);
      if (rows_ != RowOp::none)  // the expression's rows, their exponentials, three columns
        epilogue_bytes += 2 * tile_bytes(DType::fp32, N_) + 3 * tile_bytes(DType::fp32, 1);
      if (norm_) {  // the prologue's rows, the rows written, the inputs' tiles, temporaries
        epilogue_bytes += tile_bytes(DType::fp32, N_) + 2 * tile_bytes(norm_rows_.t.dtype, N_) +
                          norm_temps_ * (tile_bytes(DType::fp32, N_) + 4);
        for (const HbmMatrix& in : norm_in_) epilogue_bytes += 2 * tile_bytes(in.t.dtype, N_);
      }
    }
    const uint64_t a_bytes = (shape_.a_direct ? 0 : 2 * tile_bytes(dt_, K_)) +
                             2 * tile_bytes(dt_, uint64_t{KT_} * kPartitions);
    const uint64_t resident = KT_ * tile_bytes(dt_, N_);
    const uint64_t streamed = kStreamBufs * tile_bytes(dt_, kNTile);
    // The product's rows are stored in blocks of block_cols_ columns: whole rows when they
    // fit (an epilogue needs them whole), else the widest multiple of a PSUM tile that
    // does, so that N (an LM head's vocabulary) has no limit of its own.
    const uint64_t whole = 2 * tile_bytes(rows_dt, N_) + epilogue_bytes;
    if (!has_epilogue_ && a_bytes + whole + streamed > capacity && a_bytes + streamed < capacity) {
      const uint64_t cols = (capacity - a_bytes - streamed) / (2 * isa::dtype_size(rows_dt));
      block_cols_ = std::max<uint32_t>(u32(cols / kNTile * kNTile), kNTile);
    }
    const uint64_t fixed = a_bytes + 2 * tile_bytes(rows_dt, block_cols_) + epilogue_bytes;
    b_resident_ = shape_.b_shared && resident <= b_resident_budget && fixed + resident <= capacity;
    require(fixed + streamed <= capacity, kName,
            fmt::format("K={}, N={} need {} bytes per SBUF partition, {} has {}", K_, N_,
                        fixed + streamed, kb_.target().name, capacity));
    for (int i = 0; i < 2; ++i) {
      if (!shape_.a_direct) a_rows_[i] = sbuf(kb_, kName, dt_, kPartitions, K_);
      a_t_[i] = sbuf(kb_, kName, dt_, kPartitions, KT_ * kPartitions);
      out_rows_[i] = sbuf(kb_, kName, rows_dt, kPartitions, block_cols_);
      if (has_epilogue_) {
        stored_[i] = sbuf(kb_, kName, out_dt_, kPartitions, N_);
        for (const HbmMatrix& in : epilogue_in_)
          epilogue_tiles_[i].push_back(sbuf(kb_, kName, in.t.dtype, kPartitions, N_));
      }
    }
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
    const uint32_t nb = b_resident_ ? KT_ : kStreamBufs;
    for (uint32_t i = 0; i < nb; ++i)
      b_tiles_.push_back(sbuf(kb_, kName, dt_, kPartitions, b_resident_ ? N_ : kNTile));
    // PSUM: two banks for transposes, four for accumulation (6 of 8 banks).
    const uint32_t bank_elems =
        kb_.target().psum_bank_bytes / static_cast<uint32_t>(isa::dtype_size(dt_));
    if (!shape_.a_direct)
      for (auto& t : trans_) t = psum(kb_, kName, dt_, kPartitions, bank_elems);
    for (auto& t : acc_) t = psum(kb_, kName, DType::fp32, kPartitions, kNTile);
    blocks_per_bank_ = bank_elems / kPartitions;
  }

  // B as KT row chunks [128, N], loaded once on ACT's queues while SP loads A.
  void load_resident_b() {
    for (uint32_t kt = 0; kt < KT_; ++kt)
      kb_.dma_copy(isa::rows(b_tiles_[kt], 0, k_parts(kt)),
                   b_.block(kName, 0, kt * kPartitions, k_parts(kt), 0, N_), Engine::ACT);
  }

  // The moving operand for chunk kt of N tile nt: a view of resident B, or a
  // freshly loaded streaming buffer.
  AccessPattern b_tile(uint32_t batch, uint32_t kt, uint32_t nt) {
    const uint32_t kp = k_parts(kt), nn = n_cols(nt);
    if (b_resident_) return isa::cols(isa::rows(b_tiles_[kt], 0, kp), nt * kNTile, nn);
    const AccessPattern t =
        isa::cols(isa::rows(b_tiles_[stream_next_++ % kStreamBufs], 0, kp), 0, nn);
    kb_.dma_copy(t, b_.block(kName, batch, kt * kPartitions, kp, nt * kNTile, nn), Engine::SP);
    return t;
  }

  void load_a(uint32_t i) {
    if (shape_.a_direct) return load_a_t(i);
    const uint32_t m = m_of(i), mp = mtiles_.parts(m);
    kb_.dma_copy(isa::rows(a_rows_[i % 2], 0, mp),
                 a_.block(kName, batch_of(i), mtiles_.first(m), mp, 0, K_), Engine::SP);
  }

  // A^T for step i straight from HBM, in transpose_a's layout: the full 128-row K
  // chunks in one DMA (an outer dim steps 128 k), the last partial one in another.
  void load_a_t(uint32_t i) {
    const uint32_t m = m_of(i), mp = mtiles_.parts(m), full = K_ / kPartitions;
    const HbmMatrix a_t{a_.t, a_.col, a_.row, a_.batch};  // k on rows, m on columns
    if (full > 0) {
      AccessPattern src = a_t.block(kName, batch_of(i), 0, kPartitions, mtiles_.first(m), mp);
      src.num_dims = 2;
      src.dims[1] = src.dims[0];
      src.dims[0] = {dim_stride(kName, a_t.row * kPartitions), full};
      kb_.dma_copy(isa::cols(a_t_[i % 2], 0, full * mp), src, Engine::SP);
    }
    if (const uint32_t rest = K_ % kPartitions; rest > 0)
      kb_.dma_copy(isa::cols(isa::rows(a_t_[i % 2], 0, rest), full * mp, mp),
                   a_t.block(kName, batch_of(i), full * kPartitions, rest, mtiles_.first(m), mp),
                   Engine::SP);
  }

  // PSUM -> SBUF copies alternate between ScalarE and VectorE, the two engines
  // that read PSUM, so neither becomes the bottleneck behind TensorE.
  void evacuate(const AccessPattern& dst, const AccessPattern& src) {
    kb_.tensor_copy(evac_next_++ % 2 ? Engine::DVE : Engine::ACT, dst, src);
  }

  // A^T for step i: chunk kt lands at columns [kt*mp, (kt+1)*mp) of a_t, with
  // the k index on partitions. Blocks of equal height share one PSUM bank.
  void transpose_a(uint32_t i) {
    const uint32_t mp = mtiles_.parts(m_of(i));
    const AccessPattern a_rows = isa::rows(a_rows_[i % 2], 0, mp);
    const AccessPattern& a_t = a_t_[i % 2];
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

  void compute(uint32_t i) {
    // TensorE transposes the next A block before the matmuls of this one, so it
    // has work while ACT/DVE copy this block's A^T out of PSUM.
    if (!shape_.a_direct) {
      if (i == 0) transpose_a(0);
      if (i + 1 < shape_.batches * mtiles_.count()) transpose_a(i + 1);
    }
    const uint32_t m = m_of(i), mp = mtiles_.parts(m);
    const uint32_t tiles_per_block = ceil_div(block_cols_, kNTile);
    for (uint32_t nt0 = 0; nt0 < NT_; nt0 += tiles_per_block) {
      const uint32_t first = nt0 * kNTile, cols = std::min(block_cols_, N_ - first);
      const AccessPattern out = isa::cols(isa::rows(out_rows_[out_next_++ % 2], 0, mp), 0, cols);
      for (uint32_t nt = nt0; nt < std::min(NT_, nt0 + tiles_per_block); ++nt) {
        const AccessPattern acc =
            isa::cols(isa::rows(acc_[acc_next_++ % kAccBanks], 0, mp), 0, n_cols(nt));
        for (uint32_t kt = 0; kt < KT_; ++kt) {
          const AccessPattern stationary =
              isa::cols(isa::rows(a_t_[i % 2], 0, k_parts(kt)), kt * mp, mp);
          kb_.matmul(acc, stationary, b_tile(batch_of(i), kt, nt), /*accumulate=*/kt > 0);
        }
        // Casts FP32 to out_dtype.
        evacuate(isa::cols(out, nt * kNTile - first, n_cols(nt)), acc);
      }
      const AccessPattern result = has_epilogue_ ? apply_epilogue(i, out) : out;
      kb_.dma_copy(c_.block(kName, batch_of(i), mtiles_.first(m), mp, first, cols), result,
                   Engine::POOL);
      if (norm_) apply_norm(i, result);
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
    const uint32_t m = m_of(i), mp = mtiles_.parts(m);
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
    const uint32_t m = m_of(i), mp = mtiles_.parts(m);
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

  KernelBuilder& kb_;
  uint32_t M_, K_, N_;
  DType dt_, out_dt_;
  MatmulShape shape_;
  RowTiles mtiles_{M_};
  uint32_t KT_ = ceil_div(K_, kPartitions);
  uint32_t NT_ = ceil_div(N_, kNTile);
  HbmMatrix a_, b_, c_;
  AccessPattern a_rows_[2], a_t_[2], out_rows_[2], trans_[2], acc_[kAccBanks];
  std::vector<AccessPattern> b_tiles_;
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
  uint32_t blocks_per_bank_ = 1;
  uint32_t block_cols_ = N_;  // columns of out_rows_: N, or a block of it (allocate)
  uint32_t stream_next_ = 0, evac_next_ = 0, trans_next_ = 0, acc_next_ = 0, out_next_ = 0;
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

isa::Program matmul(std::string_view target, const View& a, const View& b, const View& out) {
  KernelBuilder kb(target);
  detail::emit_matmul(kb, declare_operand, a, b, out);
  return kb.finish();
}

}  // namespace neuronsim::kernels
