// Attention, flash-style: out = softmax(q k^T * scale + mask) v, per head, without ever
// writing the [Tq, Tk] scores to HBM.
//
// Each query tile (128 rows of one head) keeps its running state on chip: the negated
// row max, the row sum of exponentials and an FP32 output accumulator [128, Dv]. Keys
// come in blocks of W (one PSUM bank of the input dtype: 1024 bf16/fp16, 512 fp32), and
// per (query tile, key block) step the engines do
//   PE    S = q K^T block, q^T stationary                  [128, W] FP32 in PSUM
//   DVE   S += mask                                        causal diagonal (128 keys, in
//                                                          PSUM) or attn_mask (into SBUF)
//   DVE   block max, negated; POOL the running max         (online softmax)
//   ACT   P = exp(scale (S - max)) in the input dtype, row sums accumulated by ACT (the
//         scale applies in FP32: scaling q in bf16 would round scores of large q and k)
//   ACT   alpha = exp(old max - new max); POOL l = l alpha + sums, O *= alpha
//   PE    P^T by transposes, 128 keys at a time; copied out of PSUM (ACT or DVE)
//   PE    O_blk = P^T-stationary x V chunks, accumulated in PSUM; DVE O += O_blk
// and, after a tile's last block, out = O / l in the input dtype and the logsumexp
// -max + log(l) (natural log, of the scaled scores) in FP32, stored by POOL.
// Causal attention (top-left aligned, as torch's is_causal) skips the blocks above the
// diagonal and trims the diagonal block to the keys the tile's last row sees, so only its
// last 128 keys need the mask: a [128, 128] tile of 0 / -1e30 built once by GpSimd's
// affine_select.
//
// q^T and K^T need the head dim on partitions, and a DMA would move one element per
// descriptor for that (the head dim is the contiguous one), so their rows load in
// contiguous runs and the PE transposes them, 128 rows at a time. The query tiles of one KV head
// (along the sequence, then the heads that share it under grouped-query attention) are taken in
// groups of up to 8 whose state stays on chip. K^T and V stay resident in SBUF for the
// whole KV head when they fit (tens of thousands of keys at head dim 128); otherwise
// every group streams them in blocks, three buffers deep: block j+2's rows load while
// block j+1 is transposed and block j is in use, so each group reads K and V once.
//
// Four steps are in flight: the PE computes step i+2's scores while ACT and DVE do step
// i+1's softmax, the PE transposes step i's P and multiplies step i-1's P^T by V, so each
// engine works on results of the previous round. ACT and DVE, which read PSUM, carry the
// per-key work (max, exp, the P^T copy: about 1.9 us per 1024 keys x 128 queries on trn2,
// against 1.1 us of PE); the small per-row updates go to the otherwise idle GpSimd.
// PSUM: two score buffers (4 banks in bf16), two P^T banks, one bank for the transposes
// of q and K, one for the two O_blk buffers.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "attention.h"
#include "common.h"
#include "eager_common.h"
#include "neuronsim/kernels/eager.h"
#include "stages.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::ActFunc;
using isa::AluOp;
using isa::Engine;

constexpr std::string_view kName = "attention";
constexpr uint32_t kGroup = 8;        // query tiles whose state stays on chip together
constexpr uint32_t kMovingMax = 512;  // moving free size of one matmul (FP32 bank)
constexpr float kFloatMax = std::numeric_limits<float>::max();
constexpr uint32_t kStreamSlots = 3;  // K/V block buffers when they stream
constexpr uint32_t kStepColumns = 4;  // steps in flight whose per-row columns are live

// One query tile: rows [q0, q0 + parts) of query head h of batch b, and its state.
struct QueryTile {
  uint32_t b = 0, h = 0, q0 = 0, parts = 0;
  uint32_t blocks = 0;  // key blocks it attends to
};

// One (query tile, key block) step.
struct Step {
  uint32_t tile;          // index into the group
  uint32_t block;         // key block
  uint32_t width;         // keys of the block this tile sees (the diagonal block is trimmed)
  int32_t diagonal = -1;  // causal: q0 - k0 when the block crosses the diagonal, else -1
  bool first_of_block = false, last_of_tile = false;
};

class AttentionKernel {
 public:
  AttentionKernel(KernelBuilder& kb, const Declare& declare, const AttentionOperands& ops,
                  float scale, bool causal)
      : kb_(kb), scale_(scale), causal_(causal) {
    const View q = four_d(ops.q), k = four_d(ops.k), v = four_d(ops.v), out = four_d(ops.out);
    check(q, k, v, out, ops);
    dt_ = q.dtype;
    B_ = u32(q.sizes[0]);
    Hq_ = u32(q.sizes[1]);
    Hkv_ = u32(k.sizes[1]);
    Tq_ = u32(q.sizes[2]);
    Tk_ = u32(k.sizes[2]);
    D_ = u32(q.sizes[3]);
    Dv_ = u32(v.sizes[3]);
    W_ = kb_.target().psum_bank_bytes / static_cast<uint32_t>(isa::dtype_size(dt_));
    DC_ = ceil_div(D_, kPartitions);
    blocks_ = ceil_div(Tk_, W_);
    q_ = Heads(declare(kb_, "q", ops.q, false), q);
    k_ = Heads(declare(kb_, "k", ops.k, false), k);
    v_ = Heads(declare(kb_, "v", ops.v, false), v);
    if (ops.bias) {
      View bias = four_d(broadcast_to(kName, "bias", *ops.bias,
                                      std::vector<int64_t>{q.sizes[0], q.sizes[1], Tq_, Tk_}));
      bias_ = Heads(declare(kb_, "bias", *ops.bias, false), bias);
      bias_dt_ = bias.dtype;
      has_bias_ = true;
    }
    out_ = Heads(declare(kb_, "out", ops.out, true), out);
    lse_ = RowValues(declare(kb_, "lse", ops.lse, true), ops.lse);
    allocate();
  }

  void build() {
    if (causal_) build_causal_mask();
    const std::vector<Group> groups = plan_groups();
    load_q(groups[0], 0);
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& group = groups[g];
      if (g == 0 || group.b != groups[g - 1].b || group.hk != groups[g - 1].hk)
        loaded_ = transposed_ = 0;  // a new KV head: nothing of it on chip yet
      // The next group's rows of q load while this group works.
      if (g + 1 < groups.size()) load_q(groups[g + 1], (g + 1) % 2);
      run_group(group, g % 2);
    }
  }

 private:
  // Query tiles of one KV head that share a pass over its keys.
  struct Group {
    uint32_t b = 0, hk = 0;
    std::vector<QueryTile> tiles;
  };

  std::vector<Group> plan_groups() const {
    const uint32_t group_heads = Hq_ / Hkv_, qtiles = ceil_div(Tq_, kPartitions);
    std::vector<Group> groups;
    for (uint32_t b = 0; b < B_; ++b)
      for (uint32_t hk = 0; hk < Hkv_; ++hk) {
        // Along the sequence, then the heads sharing the KV head, so that a group's tiles
        // see about the same key blocks under a causal mask.
        std::vector<QueryTile> tiles;
        for (uint32_t t = 0; t < qtiles; ++t)
          for (uint32_t g = 0; g < group_heads; ++g) {
            QueryTile qt{b, hk * group_heads + g, t * kPartitions, tile_len(Tq_, kPartitions, t)};
            qt.blocks = causal_ ? ceil_div(std::min(Tk_, qt.q0 + qt.parts), W_) : blocks_;
            tiles.push_back(qt);
          }
        for (size_t first = 0; first < tiles.size(); first += kGroup) {
          const auto end = tiles.begin() + std::min<size_t>(first + kGroup, tiles.size());
          groups.push_back({b, hk, {tiles.begin() + first, end}});
        }
      }
    return groups;
  }

  void check(const View& q, const View& k, const View& v, const View& out,
             const AttentionOperands& ops) const {
    for (const auto& [name, view] : {std::pair{"q", &ops.q},
                                     {"k", &ops.k},
                                     {"v", &ops.v},
                                     {"out", &ops.out},
                                     {"lse", &ops.lse}})
      check_view(kName, name, *view);
    if (ops.bias) check_view(kName, "bias", *ops.bias);
    require(
        q.sizes.size() == 4 && k.sizes.size() == 4 && v.sizes.size() == 4 && out.sizes.size() == 4,
        kName, "q, k, v and out must be [batch, heads, sequence, head dim] (or 3-D)");
    require(k.sizes[0] == q.sizes[0] && v.sizes[0] == q.sizes[0], kName,
            "q, k and v must have the same batch");
    require(k.sizes[1] == v.sizes[1] && k.sizes[2] == v.sizes[2], kName,
            fmt::format("k [{}] and v [{}] must have the same heads and keys",
                        fmt::join(k.sizes, ", "), fmt::join(v.sizes, ", ")));
    require(q.sizes[1] % k.sizes[1] == 0, kName,
            fmt::format("{} query heads do not share {} KV heads evenly", q.sizes[1], k.sizes[1]));
    require(q.sizes[3] == k.sizes[3], kName,
            fmt::format("q's head dim {} differs from k's {}", q.sizes[3], k.sizes[3]));
    require(q.sizes[3] <= 2 * kPartitions && v.sizes[3] <= 2 * kPartitions, kName,
            fmt::format("head dims {} (q, k) and {} (v) must be at most {}", q.sizes[3], v.sizes[3],
                        2 * kPartitions));
    require(out.sizes == std::vector<int64_t>{q.sizes[0], q.sizes[1], q.sizes[2], v.sizes[3]},
            kName,
            fmt::format("out [{}] is not [batch, query heads, queries, v's head dim]",
                        fmt::join(out.sizes, ", ")));
    for (const auto& [name, view] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}})
      require(view->strides[3] == 1 || view->sizes[3] == 1, kName,
              fmt::format("{}'s head dim must be contiguous (stride {})", name, view->strides[3]));
    require(k.dtype == q.dtype && v.dtype == q.dtype && out.dtype == q.dtype, kName,
            "q, k, v and out must have one dtype");
    check_float(kName, "q", q.dtype);
    const size_t lr = ops.lse.sizes.size();
    require(ops.lse.dtype == DType::fp32 && lr + 1 == ops.q.sizes.size(), kName,
            "lse must be FP32 [batch, query heads, queries]");
    require(ops.lse.sizes.back() == q.sizes[2] && ops.lse.sizes[lr - 2] == q.sizes[1], kName,
            fmt::format("lse [{}] is not [batch, query heads, queries]",
                        fmt::join(ops.lse.sizes, ", ")));
    if (ops.bias) {
      check_float(kName, "bias", ops.bias->dtype);
      require(ops.bias->strides.back() == 1 || ops.bias->sizes.back() == 1 ||
                  ops.bias->strides.back() == 0,
              kName, "the mask's key dim must be contiguous or broadcast");
    }
  }

  // ---- SBUF and PSUM ----

  uint64_t block_bytes() const {
    return tile_bytes(dt_, DC_ * W_) + tile_bytes(dt_, W_ / kPartitions * Dv_);
  }

  void allocate() {
    const uint32_t chunks = W_ / kPartitions;
    // Per step: the scores with their mask (FP32), P and P^T (two of each), the masks.
    for (auto& p : p_) p = sbuf(kb_, kName, dt_, kPartitions, W_);
    for (auto& p : p_t_) p = sbuf(kb_, kName, dt_, kPartitions, W_);
    if (causal_) mask_ = sbuf(kb_, kName, DType::fp32, kPartitions, kPartitions);
    if (has_bias_)
      for (uint32_t i = 0; i < 2; ++i) {
        bias_tiles_[i] = sbuf(kb_, kName, bias_dt_, kPartitions, W_);
        scores_[i] = sbuf(kb_, kName, DType::fp32, kPartitions, W_);
      }
    for (auto& c : step_cols_)
      for (auto* a : {&c.block_max, &c.alpha, &c.sums}) *a = column();
    // Per query tile of a group: q's rows (two groups' worth), q^T, the state.
    for (uint32_t i = 0; i < 2 * kGroup; ++i)
      q_rows_.push_back(sbuf(kb_, kName, dt_, kPartitions, D_));
    for (uint32_t i = 0; i < kGroup; ++i) {
      TileState s;
      s.q_t = sbuf(kb_, kName, dt_, kPartitions, DC_ * kPartitions);
      s.o = sbuf(kb_, kName, DType::fp32, kPartitions, Dv_);
      s.nmax[0] = column();
      s.nmax[1] = column();
      s.l = column();
      state_.push_back(s);
    }
    for (auto& o : out_tiles_) o = sbuf(kb_, kName, dt_, kPartitions, Dv_);
    for (auto& c : lse_cols_) c = column();
    for (auto& r : k_rows_) r = sbuf(kb_, kName, dt_, kPartitions, chunks * D_);
    // K^T and V blocks: all of them when they fit in what is left (less a margin for the
    // allocator's alignment), else three that stream.
    const uint64_t left = kb_.target().sbuf_partition_bytes - kb_.sbuf_mark();
    resident_ = uint64_t{blocks_} * block_bytes() + 4096 <= left;
    const uint32_t slots = resident_ ? blocks_ : std::min(blocks_, kStreamSlots);
    require(uint64_t{slots} * block_bytes() <= left, kName,
            fmt::format("SBUF holds no {} key blocks of head dims {} and {} beside the state",
                        slots, D_, Dv_));
    for (uint32_t i = 0; i < slots; ++i) {
      kt_.push_back(sbuf(kb_, kName, dt_, kPartitions, DC_ * W_));
      vb_.push_back(sbuf(kb_, kName, dt_, kPartitions, chunks * Dv_));
    }
    // PSUM: 8 banks of 2 KiB.
    for (auto& s : s_psum_) s = psum(kb_, kName, DType::fp32, kPartitions, W_);
    for (auto& p : p_t_psum_) p = psum(kb_, kName, dt_, kPartitions, W_);
    trans_ = psum(kb_, kName, dt_, kPartitions, W_);
    o_blk_ = psum(kb_, kName, DType::fp32, kPartitions, 2 * Dv_);
  }

  AccessPattern column() { return sbuf(kb_, kName, DType::fp32, kPartitions, 1); }

  // ---- masks ----

  // mask_[p, j] = 0 where j <= p, else kMasked: added to the 128 keys from q0 on.
  void build_causal_mask() { emit_causal_mask(kb_, mask_); }

  // ---- K and V ----

  uint32_t slot(uint32_t block) const { return resident_ ? block : block % kStreamSlots; }
  uint32_t keys(uint32_t block) const { return tile_len(Tk_, W_, block); }

  // The DMAs of block j: K's rows into a staging buffer, V's rows straight into its slot.
  void load_block(uint32_t b, uint32_t hk, uint32_t j) {
    const uint32_t k0 = j * W_, n = keys(j);
    const AccessPattern rows = k_rows_[j % kStreamSlots], v = vb_[slot(j)];
    for (uint32_t c = 0; c * kPartitions < n; ++c) {
      const uint32_t kc = tile_len(n, kPartitions, c);
      kb_.dma_copy(isa::cols(isa::rows(rows, 0, kc), c * D_, D_),
                   k_.block(kName, b, hk, k0 + c * kPartitions, kc, 0, D_), Engine::SP);
      kb_.dma_copy(isa::cols(isa::rows(v, 0, kc), c * Dv_, Dv_),
                   v_.block(kName, b, hk, k0 + c * kPartitions, kc, 0, Dv_), Engine::SP);
    }
  }

  // K^T of block j: K's rows transposed on the PE, 128 keys at a time, per 128 of D.
  void transpose_block(uint32_t j) {
    const uint32_t n = keys(j);
    const AccessPattern rows = k_rows_[j % kStreamSlots], kt = kt_[slot(j)];
    for (uint32_t dc = 0; dc < DC_; ++dc) {
      const uint32_t dp = tile_len(D_, kPartitions, dc);
      for (uint32_t c = 0; c * kPartitions < n; ++c) {
        const uint32_t kc = tile_len(n, kPartitions, c);
        kb_.transpose(Engine::PE, isa::cols(isa::rows(trans_, 0, dp), c * kPartitions, kc),
                      isa::cols(isa::rows(rows, 0, kc), c * D_ + dc * kPartitions, dp));
      }
      kb_.tensor_copy(evacuation_engine(), isa::cols(isa::rows(kt, 0, dp), dc * W_, n),
                      isa::cols(isa::rows(trans_, 0, dp), 0, n));
    }
  }

  // Block j on chip, for the KV head (b, hk): loaded `ahead` blocks ahead of its use by
  // the DMAs, transposed one block ahead by the PE. Streamed blocks count per group.
  void ensure_loaded(uint32_t b, uint32_t hk, uint32_t j, uint32_t limit) {
    for (; loaded_ < std::min(j + 1, limit); ++loaded_) load_block(b, hk, loaded_);
  }
  void ensure_transposed(uint32_t b, uint32_t hk, uint32_t j, uint32_t limit) {
    ensure_loaded(b, hk, j, limit);
    for (; transposed_ < std::min(j + 1, limit); ++transposed_) transpose_block(transposed_);
  }

  Engine evacuation_engine() { return evacuations_++ % 2 ? Engine::DVE : Engine::ACT; }

  // ---- a group of query tiles ----

  struct TileState {
    AccessPattern q_t, o, nmax[2], l;
  };
  struct StepColumns {
    AccessPattern block_max, alpha, sums;
  };

  void load_q(const Group& group, uint32_t parity) {
    for (size_t t = 0; t < group.tiles.size(); ++t) {
      const QueryTile& qt = group.tiles[t];
      kb_.dma_copy(isa::rows(q_rows_[parity * kGroup + t], 0, qt.parts),
                   q_.block(kName, qt.b, qt.h, qt.q0, qt.parts, 0, D_), Engine::SP);
    }
  }

  // q^T of each tile, with the head dim on partitions (chunk dc at columns dc*128).
  void transpose_q(const Group& group, uint32_t parity) {
    const uint32_t per_bank = W_ / kPartitions;
    uint32_t used = 0;
    for (size_t t = 0; t < group.tiles.size(); ++t)
      for (uint32_t dc = 0; dc < DC_; ++dc, ++used) {
        const uint32_t dp = tile_len(D_, kPartitions, dc), qp = group.tiles[t].parts;
        const AccessPattern bank =
            isa::cols(isa::rows(trans_, 0, dp), used % per_bank * kPartitions, qp);
        kb_.transpose(
            Engine::PE, bank,
            isa::cols(isa::rows(q_rows_[parity * kGroup + t], 0, qp), dc * kPartitions, dp));
        kb_.activation(isa::cols(isa::rows(state_[t].q_t, 0, dp), dc * kPartitions, qp), bank,
                       ActFunc::identity);
      }
  }

  // Steps: block by block, each block for the tiles that see it.
  std::vector<Step> plan_steps(const Group& group, uint32_t blocks) const {
    std::vector<Step> steps;
    for (uint32_t j = 0; j < blocks; ++j) {
      bool first = true;
      for (uint32_t t = 0; t < group.tiles.size(); ++t) {
        const QueryTile& qt = group.tiles[t];
        if (j >= qt.blocks) continue;
        Step s{t, j, keys(j)};
        if (causal_ && j * W_ + s.width > qt.q0 + 1) {  // a key past row 0's last one
          s.diagonal = static_cast<int32_t>(qt.q0 - j * W_);
          s.width = std::min(s.width, qt.q0 + qt.parts - j * W_);
        }
        s.first_of_block = std::exchange(first, false);
        s.last_of_tile = j + 1 == qt.blocks;
        steps.push_back(s);
      }
    }
    return steps;
  }

  void run_group(const Group& group, uint32_t parity) {
    const std::span<const QueryTile> tiles = group.tiles;
    const uint32_t b = group.b, hk = group.hk;
    uint32_t blocks = 0;
    for (const QueryTile& qt : tiles) blocks = std::max(blocks, qt.blocks);
    const std::vector<Step> steps = plan_steps(group, blocks);
    if (!resident_) loaded_ = transposed_ = 0;  // streamed: every group reads K and V anew
    transpose_q(group, parity);
    ensure_loaded(b, hk, 1, blocks);
    ensure_transposed(b, hk, 0, blocks);
    // Four steps in flight, each engine working on the previous round's results: the PE
    // computes step i+2's scores, ACT and DVE step i+1's softmax, the PE transposes step i's
    // P (ACT or DVE copying it out of PSUM) and multiplies step i-1's P^T by V, which DVE
    // then adds to the tile's output.
    const auto n = static_cast<uint32_t>(steps.size());
    const auto emit_scores = [&](uint32_t i) {
      if (i >= n) return;
      ensure_transposed(b, hk, steps[i].block, blocks);
      scores(tiles, steps[i], i);
    };
    emit_scores(0);
    emit_scores(1);
    softmax(tiles, steps[0], 0);
    for (uint32_t i = 0; i <= n; ++i) {
      if (i > 0) rescale_output(tiles, steps[i - 1], i - 1);
      emit_scores(i + 2);
      if (i < n && steps[i].first_of_block) ensure_transposed(b, hk, steps[i].block + 1, blocks);
      if (i + 1 < n) softmax(tiles, steps[i + 1], i + 1);
      if (i < n) transpose_p(tiles, steps[i], i);
      if (i > 0) {
        const Step& done = steps[i - 1];
        multiply_v(tiles, done, i - 1);
        if (done.last_of_tile) finish(tiles[done.tile], done.tile);
      }
      // Block j+2 streams into the buffers of block j-1, whose last use is now behind.
      if (i < n && steps[i].first_of_block) ensure_loaded(b, hk, steps[i].block + 2, blocks);
    }
  }

  // ---- one step ----

  // S = q K^T block, and the step's attn_mask block loaded.
  void scores(std::span<const QueryTile> tiles, const Step& s, uint32_t i) {
    const QueryTile& qt = tiles[s.tile];
    const TileState& st = state_[s.tile];
    const AccessPattern kt = kt_[slot(s.block)], sp = isa::rows(s_psum_[i % 2], 0, qt.parts);
    for (uint32_t c0 = 0; c0 < s.width; c0 += kMovingMax) {
      const uint32_t n = std::min(kMovingMax, s.width - c0);
      for (uint32_t dc = 0; dc < DC_; ++dc) {
        const uint32_t dp = tile_len(D_, kPartitions, dc);
        kb_.matmul(isa::cols(sp, c0, n),
                   isa::cols(isa::rows(st.q_t, 0, dp), dc * kPartitions, qt.parts),
                   isa::cols(isa::rows(kt, 0, dp), dc * W_ + c0, n), dc > 0);
      }
    }
    if (has_bias_)
      kb_.dma_copy(isa::cols(isa::rows(bias_tiles_[i % 2], 0, qt.parts), 0, s.width),
                   bias_.block(kName, qt.b, qt.h, qt.q0, qt.parts, s.block * W_, s.width),
                   Engine::SP);
  }

  // Where the step's softmax reads its scores, and the scale still to apply to them: the
  // raw q k^T in PSUM (scaled by the exponential, in FP32), or, with an attn_mask, the
  // scaled scores plus the mask in SBUF (the mask is added after the scale, as torch does).
  std::pair<AccessPattern, float> step_scores(std::span<const QueryTile> tiles, const Step& s,
                                              uint32_t i) {
    return detail::step_scores(
        kb_, s_psum_[i % 2], mask_, s.diagonal, scale_, has_bias_ ? &scores_[i % 2] : nullptr,
        has_bias_ ? &bias_tiles_[i % 2] : nullptr, tiles[s.tile].parts, s.width);
  }

  // The running max is kept negated and scaled: -scale * max, the bias of the exponential.
  void softmax(std::span<const QueryTile> tiles, const Step& s, uint32_t i) {
    const uint32_t p = tiles[s.tile].parts;
    const TileState& st = state_[s.tile];
    const StepColumns& c = step_cols_[i % kStepColumns];
    const auto col = [&](const AccessPattern& a) { return isa::rows(a, 0, p); };
    const auto [src, scale] = step_scores(tiles, s, i);
    const AccessPattern pb = isa::cols(isa::rows(p_[i % 2], 0, p), 0, s.width);
    const AccessPattern old_max = col(st.nmax[s.block % 2]),
                        new_max = col(st.nmax[(s.block + 1) % 2]);
    const AccessPattern bmax = col(c.block_max);
    kb_.tensor_reduce(Engine::DVE, bmax, src, AluOp::max, 0x1, /*negate=*/true);
    if (s.block == 0) {
      // Capped at the largest float: a row whose scores are all -inf (masked out) then
      // gets exp(-inf) = 0 everywhere, and the output 0, as torch's math path gives.
      kb_.tensor_scalar(Engine::POOL, new_max, bmax, AluOp::multiply, scale, AluOp::min, kFloatMax);
      const AccessPattern l = col(st.l);
      kb_.activation(pb, src, ActFunc::exp, scale, &new_max, &l, AluOp::add);
      return;
    }
    // -max' = min(-max, -block max); the state so far scaled by exp(max - max').
    const AccessPattern alpha = col(c.alpha), sums = col(c.sums);
    kb_.tensor_scalar(Engine::POOL, new_max, bmax, AluOp::multiply, scale, AluOp::min, 0.0f,
                      nullptr, &old_max);
    kb_.activation(pb, src, ActFunc::exp, scale, &new_max, &sums, AluOp::add);
    kb_.activation(alpha, old_max, ActFunc::exp, -1.0f, &new_max);
    const AccessPattern l = col(st.l);
    kb_.tensor_scalar(Engine::POOL, l, l, AluOp::multiply, 0.0f, AluOp::add, 0.0f, &alpha, &sums);
  }

  // O (+)= P V: P^T by PE transposes (one PSUM bank, one copy out), then the matmuls.
  void transpose_p(std::span<const QueryTile> tiles, const Step& s, uint32_t i) {
    const uint32_t p = tiles[s.tile].parts, chunks = ceil_div(s.width, kPartitions);
    const AccessPattern pt_psum = p_t_psum_[i % 2], pt = p_t_[i % 2];
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t kc = tile_len(s.width, kPartitions, c);
      kb_.transpose(Engine::PE, isa::cols(isa::rows(pt_psum, 0, kc), c * kPartitions, p),
                    isa::cols(isa::rows(p_[i % 2], 0, p), c * kPartitions, kc));
    }
    copy_transposed_chunks(kb_, evacuation_engine(), pt, pt_psum, s.width, p);
  }

  void multiply_v(std::span<const QueryTile> tiles, const Step& s, uint32_t i) {
    const uint32_t p = tiles[s.tile].parts, chunks = ceil_div(s.width, kPartitions);
    const AccessPattern pt = p_t_[i % 2], v = vb_[slot(s.block)];
    const AccessPattern blk = isa::cols(isa::rows(o_blk_, 0, p), i % 2 * Dv_, Dv_);
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t kc = tile_len(s.width, kPartitions, c);
      kb_.matmul(blk, isa::cols(isa::rows(pt, 0, kc), c * kPartitions, p),
                 isa::cols(isa::rows(v, 0, kc), c * Dv_, Dv_), c > 0);
    }
    const AccessPattern o = isa::rows(state_[s.tile].o, 0, p);
    if (s.block == 0)
      kb_.tensor_copy(Engine::DVE, o, blk);
    else
      kb_.tensor_tensor(Engine::DVE, o, o, blk, AluOp::add);
  }

  // The output so far scaled by exp(max - max') before step i's part is added, on GpSimd
  // (off the busy engines), emitted before GpSimd waits on the next step's softmax.
  void rescale_output(std::span<const QueryTile> tiles, const Step& s, uint32_t i) {
    if (s.block == 0) return;
    const uint32_t p = tiles[s.tile].parts;
    const AccessPattern o = isa::rows(state_[s.tile].o, 0, p);
    const AccessPattern alpha = isa::rows(step_cols_[i % kStepColumns].alpha, 0, p);
    kb_.tensor_scalar(Engine::POOL, o, o, AluOp::multiply, 0.0f, AluOp::bypass, 0.0f, &alpha);
  }

  // out = O / l in the input dtype; lse = log(l) + max, FP32.
  void finish(const QueryTile& qt, uint32_t t) {
    const uint32_t p = qt.parts;
    const TileState& st = state_[t];
    const auto col = [&](const AccessPattern& a) { return isa::rows(a, 0, p); };
    const AccessPattern l = col(st.l), nmax = col(st.nmax[qt.blocks % 2]);
    const AccessPattern rl = col(lse_cols_[0]), lse = col(lse_cols_[1 + finished_ % 2]);
    const AccessPattern out = isa::rows(out_tiles_[finished_ % 2], 0, p);
    ++finished_;
    // l >= 1 for every row with a score above -inf; 0 for a row masked out entirely.
    kb_.tensor_scalar(Engine::POOL, rl, l, AluOp::max, 1e-30f);
    kb_.activation(rl, rl, ActFunc::reciprocal);
    kb_.tensor_scalar(Engine::DVE, out, isa::rows(st.o, 0, p), AluOp::multiply, 0.0f, AluOp::bypass,
                      0.0f, &rl);
    kb_.dma_copy(out_.block(kName, qt.b, qt.h, qt.q0, p, 0, Dv_), out, Engine::POOL);
    kb_.activation(lse, l, ActFunc::log);
    kb_.tensor_tensor(Engine::DVE, lse, lse, nmax, AluOp::subtract);
    kb_.dma_copy(lse_.rows(qt.b, qt.h, qt.q0, p), lse, Engine::POOL);
  }

  KernelBuilder& kb_;
  float scale_;
  bool causal_;
  DType dt_ = DType::bf16, bias_dt_ = DType::fp32;
  uint32_t B_ = 0, Hq_ = 0, Hkv_ = 0, Tq_ = 0, Tk_ = 0, D_ = 0, Dv_ = 0, W_ = 0, DC_ = 0;
  uint32_t blocks_ = 0;
  Heads q_, k_, v_, out_, bias_;
  bool has_bias_ = false, resident_ = false;
  RowValues lse_;

  AccessPattern scores_[2], p_[2], p_t_[2], mask_, bias_tiles_[2], out_tiles_[2];
  StepColumns step_cols_[kStepColumns];
  AccessPattern lse_cols_[3];
  std::vector<AccessPattern> q_rows_, kt_, vb_;
  AccessPattern k_rows_[kStreamSlots];
  std::vector<TileState> state_;
  AccessPattern s_psum_[2], p_t_psum_[2], trans_, o_blk_;

  uint32_t loaded_ = 0, transposed_ = 0, finished_ = 0, evacuations_ = 0;
};

}  // namespace

std::pair<AccessPattern, float> detail::step_scores(KernelBuilder& kb, const AccessPattern& raw,
                                                    const AccessPattern& mask, int32_t diagonal,
                                                    float scale, const AccessPattern* scaled,
                                                    const AccessPattern* bias, uint32_t parts,
                                                    uint32_t width) {
  const auto block = [&](const AccessPattern& a) {
    return isa::cols(isa::rows(a, 0, parts), 0, width);
  };
  const AccessPattern scores = block(raw);
  if (diagonal >= 0) {
    // Only the keys from q0 on, at most 128 of them, cross the diagonal.
    const auto d = static_cast<uint32_t>(diagonal);
    const uint32_t n = static_cast<uint32_t>(scores.free_elems()) - d;
    const AccessPattern cross = isa::cols(scores, d, n);
    kb.tensor_tensor(Engine::DVE, cross, cross, isa::cols(isa::rows(mask, 0, parts), 0, n),
                     AluOp::add);
  }
  if (!bias) return {scores, scale};
  const AccessPattern sum = block(*scaled);
  kb.activation(sum, scores, ActFunc::identity, scale);
  kb.tensor_tensor(Engine::DVE, sum, sum, block(*bias), AluOp::add);
  return {sum, 1.0f};
}

void detail::copy_transposed_chunks(KernelBuilder& kb, Engine engine, const AccessPattern& dst,
                                    const AccessPattern& src, uint32_t width, uint32_t parts) {
  // A short last chunk leaves rows of the others' height that it does not use.
  const uint32_t full = width / kPartitions, rest = width % kPartitions;
  if (full > 0)
    kb.tensor_copy(engine, isa::cols(dst, 0, full * kPartitions),
                   isa::cols(src, 0, full * kPartitions));
  if (rest > 0)
    kb.tensor_copy(engine, isa::cols(isa::rows(dst, 0, rest), full * kPartitions, parts),
                   isa::cols(isa::rows(src, 0, rest), full * kPartitions, parts));
}

View detail::four_d(const View& v) {
  if (v.sizes.size() != 3) return v;
  View w = v;
  w.sizes.insert(w.sizes.begin(), 1);
  w.strides.insert(w.strides.begin(), 0);
  return w;
}

detail::RowValues::RowValues(const AccessPattern& tensor, const View& v) : t(tensor) {
  const size_t r = v.sizes.size();
  batch = r == 3 ? v.strides[0] : 0;
  head = v.strides[r - 2];
  row = v.strides[r - 1];
}

AccessPattern detail::RowValues::rows(uint32_t b, uint32_t h, uint32_t r0, uint32_t n) const {
  AccessPattern ap = t;
  ap.offset = t.offset + static_cast<uint64_t>(b * batch + h * head + int64_t{r0} * row) *
                             isa::dtype_size(t.dtype);
  ap.num_partitions = n;
  ap.partition_stride = row;
  ap.num_dims = 1;
  ap.dims[0] = {1, 1};
  return ap;
}

void detail::emit_causal_mask(KernelBuilder& kb, const AccessPattern& mask) {
  kb.memset(Engine::POOL, mask, 0.0f);
  isa::Instruction in;
  in.opcode = isa::Opcode::affine_select;
  in.engine = Engine::POOL;
  AccessPattern pattern;
  pattern.space = isa::MemSpace::Pattern;
  pattern.dtype = DType::int32;
  pattern.dims[0] = {-1, static_cast<uint32_t>(mask.free_elems())};
  in.operands = {{isa::Role::dst, mask}, {isa::Role::on_true, mask}, {isa::Role::pattern, pattern}};
  in.ints[0] = 0;  // v = p - j >= 0: kept
  in.ints[1] = 1;
  in.alu0 = AluOp::is_ge;
  in.imm0 = kMaskedScore;
  kb.emit(std::move(in));
}

void detail::emit_attention(KernelBuilder& kb, const Declare& declare, const AttentionOperands& ops,
                            float scale, bool causal) {
  AttentionKernel(kb, declare, ops, scale, causal).build();
}

isa::Program attention(std::string_view target, const AttentionOperands& ops, float scale,
                       bool causal) {
  KernelBuilder kb(target);
  detail::emit_attention(kb, declare_operand, ops, scale, causal);
  return kb.finish();
}

}  // namespace neuronsim::kernels
