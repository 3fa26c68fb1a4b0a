// The gradients of attention (attention.cpp), flash-style: the probabilities are
// recomputed on chip from the forward's logsumexp, and no [Tq, Tk] tensor reaches HBM.
//
// Per KV head, every query tile of the heads sharing it is prepared once and stays in SBUF:
// q and dO as rows ([128 q, D], the moving operands of dK and dV) and transposed ([D, 128 q],
// the stationary operands of S and dP, by PE transposes), -lse, D = rowsum(dO * O), and an
// FP32 dq accumulator. Keys then come in blocks of W (512 in bf16/fp16, 256 in fp32): K's
// rows (the moving operand of dq), K^T and V^T by PE transposes. Per (key block, query tile):
//   PE    S = q K^T, dP = dO V^T                              [128 q, W] FP32 in PSUM
//   DVE   S += causal mask (diagonal block, 128 keys)
//   ACT   P = exp(scale S - lse)                              in the input dtype
//   DVE   dP - D; POOL dS = (dP - D) * P                      in the input dtype
//   PE    dV += P^T dO, dK += dS^T q (P and dS are the stationary operands as they are:
//         queries on partitions), accumulated in PSUM over every query tile of the block
//   PE    dS^T by transposes, copied out by ACT; dq_blk = dS K; DVE dq += dq_blk
// After a block's last query tile, dK (times scale) and dV leave PSUM and are stored; after
// the last block, dq (times scale). Causal attention skips the query tiles above a block
// and trims the diagonal ones to the keys they see, as the forward does. The PE runs one
// query tile ahead (its S and dP while ACT, DVE and GpSimd work on the previous tile's).
// PSUM: S and dP two each, dK and dV one bank each, one bank for dS^T (two buffers), one for
// dq_blk (two) and the transposes of the preparation.
#include <fmt/format.h>
#include <fmt/ranges.h>

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

constexpr std::string_view kName = "attention_backward";

struct QueryTile {
  uint32_t h = 0, q0 = 0, parts = 0;
};

class AttentionBackward {
 public:
  AttentionBackward(KernelBuilder& kb, const Declare& declare, const AttentionGradOperands& ops,
                    float scale, bool causal)
      : kb_(kb), scale_(scale), causal_(causal) {
    const View q = four_d(ops.q), k = four_d(ops.k), v = four_d(ops.v);
    check(ops, q, k, v);
    dt_ = q.dtype;
    B_ = u32(q.sizes[0]);
    Hq_ = u32(q.sizes[1]);
    Hkv_ = u32(k.sizes[1]);
    Tq_ = u32(q.sizes[2]);
    Tk_ = u32(k.sizes[2]);
    D_ = u32(q.sizes[3]);
    Dv_ = u32(v.sizes[3]);
    W_ = kb_.target().psum_bank_bytes / 2 / static_cast<uint32_t>(isa::dtype_size(dt_));
    q_ = Heads(declare(kb_, "q", ops.q, false), q);
    k_ = Heads(declare(kb_, "k", ops.k, false), k);
    v_ = Heads(declare(kb_, "v", ops.v, false), v);
    o_ = Heads(declare(kb_, "out", ops.out, false), four_d(ops.out));
    do_ = Heads(declare(kb_, "dout", ops.dout, false), four_d(ops.dout));
    lse_ = RowValues(declare(kb_, "lse", ops.lse, false), ops.lse);
    if (ops.bias) {
      const View bias = four_d(broadcast_to(
          kName, "bias", *ops.bias, std::vector<int64_t>{q.sizes[0], q.sizes[1], Tq_, Tk_}));
      bias_ = Heads(declare(kb_, "bias", *ops.bias, false), bias);
      bias_dt_ = bias.dtype;
      has_bias_ = true;
    }
    dq_ = Heads(declare(kb_, "dq", ops.dq, true), four_d(ops.dq));
    dk_ = Heads(declare(kb_, "dk", ops.dk, true), four_d(ops.dk));
    dv_ = Heads(declare(kb_, "dv", ops.dv, true), four_d(ops.dv));
    allocate();
  }

  void build() {
    if (causal_) emit_causal_mask(kb_, mask_);
    for (uint32_t b = 0; b < B_; ++b)
      for (uint32_t hk = 0; hk < Hkv_; ++hk) {
        prepare(b, hk);
        for (uint32_t j = 0; j * W_ < Tk_; ++j) key_block(b, hk, j);
        store_dq(b);
      }
  }

 private:
  void check(const AttentionGradOperands& ops, const View& q, const View& k, const View& v) const {
    for (const auto& [name, view] : {std::pair{"q", &ops.q},
                                     {"k", &ops.k},
                                     {"v", &ops.v},
                                     {"out", &ops.out},
                                     {"dout", &ops.dout},
                                     {"lse", &ops.lse},
                                     {"dq", &ops.dq},
                                     {"dk", &ops.dk},
                                     {"dv", &ops.dv}})
      check_view(kName, name, *view);
    require(q.sizes.size() == 4 && k.sizes.size() == 4 && v.sizes.size() == 4, kName,
            "q, k and v must be [batch, heads, sequence, head dim] (or 3-D)");
    require(
        q.sizes[1] % k.sizes[1] == 0 && k.sizes[1] == v.sizes[1] && k.sizes[2] == v.sizes[2] &&
            q.sizes[3] == k.sizes[3] && k.sizes[0] == q.sizes[0] && v.sizes[0] == q.sizes[0],
        kName,
        fmt::format("q [{}], k [{}], v [{}] are not attention's operands", fmt::join(q.sizes, ", "),
                    fmt::join(k.sizes, ", "), fmt::join(v.sizes, ", ")));
    require(
        q.sizes[3] <= kPartitions && v.sizes[3] <= kPartitions, kName,
        fmt::format("head dims {} and {} must be at most {}", q.sizes[3], v.sizes[3], kPartitions));
    const std::vector<int64_t> out_sizes{q.sizes[0], q.sizes[1], q.sizes[2], v.sizes[3]};
    for (const auto& [name, view, sizes] : {std::tuple{"out", &ops.out, out_sizes},
                                            {"dout", &ops.dout, out_sizes},
                                            {"dq", &ops.dq, q.sizes},
                                            {"dk", &ops.dk, k.sizes},
                                            {"dv", &ops.dv, v.sizes}}) {
      require(four_d(*view).sizes == sizes, kName,
              fmt::format("{} [{}] should be [{}]", name, fmt::join(view->sizes, ", "),
                          fmt::join(sizes, ", ")));
      require(view->dtype == q.dtype, kName, fmt::format("{} has another dtype than q", name));
      require(view->strides.back() == 1 || view->sizes.back() == 1, kName,
              fmt::format("{}'s head dim must be contiguous", name));
    }
    for (const auto& [name, view] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}})
      require(view->strides[3] == 1 || view->sizes[3] == 1, kName,
              fmt::format("{}'s head dim must be contiguous", name));
    require(k.dtype == q.dtype && v.dtype == q.dtype, kName, "q, k and v must have one dtype");
    check_float(kName, "q", q.dtype);
    require(ops.lse.dtype == DType::fp32 && ops.lse.sizes.size() + 1 == ops.q.sizes.size(), kName,
            "lse must be FP32 [batch, query heads, queries]");
    if (ops.bias) {
      check_float(kName, "bias", ops.bias->dtype);
      require(ops.bias->strides.back() == 1 || ops.bias->strides.back() == 0 ||
                  ops.bias->sizes.back() == 1,
              kName, "the mask's key dim must be contiguous or broadcast");
    }
  }

  // ---- SBUF and PSUM ----

  struct TileState {
    AccessPattern q, q_t, dout, dout_t, dq, nlse, ndelta;  // ndelta: -rowsum(dO * O)
  };

  void allocate() {
    const uint32_t chunks = W_ / kPartitions;
    // Per step (two of each): P, dP - D, dS, dS^T, the mask or attn_mask block.
    for (uint32_t i = 0; i < 2; ++i) {
      p_[i] = sbuf(kb_, kName, dt_, kPartitions, W_);
      dpd_[i] = sbuf(kb_, kName, dt_, kPartitions, W_);
      ds_[i] = sbuf(kb_, kName, dt_, kPartitions, W_);
      ds_t_[i] = sbuf(kb_, kName, dt_, kPartitions, W_);
      if (has_bias_) {
        bias_tiles_[i] = sbuf(kb_, kName, bias_dt_, kPartitions, W_);
        scores_[i] = sbuf(kb_, kName, DType::fp32, kPartitions, W_);
      }
    }
    if (causal_) mask_ = sbuf(kb_, kName, DType::fp32, kPartitions, kPartitions);
    // Per key block (two): K's rows (chunk c at columns c*D), K^T, V's rows and V^T.
    for (uint32_t i = 0; i < 2; ++i) {
      k_rows_[i] = sbuf(kb_, kName, dt_, kPartitions, chunks * D_);
      k_t_[i] = sbuf(kb_, kName, dt_, kPartitions, W_);
      v_rows_[i] = sbuf(kb_, kName, dt_, kPartitions, chunks * Dv_);
      v_t_[i] = sbuf(kb_, kName, dt_, kPartitions, W_);
    }
    for (auto& t : grad_out_) t = sbuf(kb_, kName, dt_, kPartitions, std::max(D_, Dv_));
    o_rows_ = sbuf(kb_, kName, dt_, kPartitions, Dv_);
    product_ = sbuf(kb_, kName, DType::fp32, kPartitions, Dv_);
    // Every query tile of a KV head, resident.
    const uint64_t per_tile = tile_bytes(dt_, D_) * 2 + tile_bytes(dt_, Dv_) +
                              tile_bytes(dt_, kPartitions) + tile_bytes(DType::fp32, D_) +
                              2 * tile_bytes(DType::fp32, 1);
    const uint32_t tiles = Hq_ / Hkv_ * ceil_div(Tq_, kPartitions);
    const uint64_t left = kb_.target().sbuf_partition_bytes - kb_.sbuf_mark();
    require(uint64_t{tiles} * (per_tile + 64) <= left, kName,
            fmt::format("the {} query tiles of a KV head ({} queries, {} heads per KV head) do "
                        "not fit in SBUF beside the key blocks",
                        tiles, Tq_, Hq_ / Hkv_));
    for (uint32_t t = 0; t < tiles; ++t) {
      TileState s;
      s.q = sbuf(kb_, kName, dt_, kPartitions, D_);
      s.q_t = sbuf(kb_, kName, dt_, kPartitions, kPartitions);
      s.dout = sbuf(kb_, kName, dt_, kPartitions, Dv_);
      s.dout_t = sbuf(kb_, kName, dt_, kPartitions, kPartitions);
      s.dq = sbuf(kb_, kName, DType::fp32, kPartitions, D_);
      s.nlse = sbuf(kb_, kName, DType::fp32, kPartitions, 1);
      s.ndelta = sbuf(kb_, kName, DType::fp32, kPartitions, 1);
      state_.push_back(s);
    }
    // PSUM: 8 banks.
    for (uint32_t i = 0; i < 2; ++i) {
      s_psum_[i] = psum(kb_, kName, DType::fp32, kPartitions, W_);
      dp_psum_[i] = psum(kb_, kName, DType::fp32, kPartitions, W_);
    }
    dk_psum_ = psum(kb_, kName, DType::fp32, kPartitions, chunks * D_);
    dv_psum_ = psum(kb_, kName, DType::fp32, kPartitions, chunks * Dv_);
    ds_t_psum_ = psum(kb_, kName, dt_, kPartitions, 2 * W_);
    dq_psum_ = psum(kb_, kName, DType::fp32, kPartitions, 2 * D_);
  }

  // ---- the query tiles of a KV head ----

  std::vector<QueryTile> tiles_of(uint32_t hk) const {
    std::vector<QueryTile> tiles;
    const uint32_t group = Hq_ / Hkv_;
    for (uint32_t t = 0; t * kPartitions < Tq_; ++t)
      for (uint32_t g = 0; g < group; ++g)
        tiles.push_back({hk * group + g, t * kPartitions, tile_len(Tq_, kPartitions, t)});
    return tiles;
  }

  Engine copy_engine() { return copies_++ % 2 ? Engine::DVE : Engine::ACT; }

  // [rows, cols] of `src` (SBUF) transposed into dst [cols, rows] through PSUM.
  void transpose(const AccessPattern& dst, const AccessPattern& src, const AccessPattern& bank) {
    const uint32_t rows = src.num_partitions, cols = static_cast<uint32_t>(src.free_elems());
    const AccessPattern t = isa::cols(isa::rows(bank, 0, cols), 0, rows);
    kb_.transpose(Engine::PE, t, src);
    kb_.tensor_copy(copy_engine(), dst, t);
  }

  // q and dO of every tile, as rows and transposed; -lse; D = rowsum(dO * O).
  void prepare(uint32_t b, uint32_t hk) {
    tiles_ = tiles_of(hk);
    for (size_t t = 0; t < tiles_.size(); ++t) {
      const QueryTile& qt = tiles_[t];
      const TileState& s = state_[t];
      const uint32_t p = qt.parts;
      const auto rows = [&](const AccessPattern& a) { return isa::rows(a, 0, p); };
      kb_.dma_copy(rows(s.q), q_.block(kName, b, qt.h, qt.q0, p, 0, D_), Engine::SP);
      kb_.dma_copy(rows(s.dout), do_.block(kName, b, qt.h, qt.q0, p, 0, Dv_), Engine::SP);
      kb_.dma_copy(rows(o_rows_), o_.block(kName, b, qt.h, qt.q0, p, 0, Dv_), Engine::SP);
      kb_.dma_copy(rows(s.nlse), lse_.rows(b, qt.h, qt.q0, p), Engine::SP);
      const AccessPattern bank = isa::rows(s_psum_[t % 2], 0, kPartitions);
      AccessPattern tb = bank;
      tb.dtype = dt_;
      transpose(isa::cols(isa::rows(s.q_t, 0, D_), 0, p), rows(s.q), tb);
      AccessPattern tb2 = isa::rows(dp_psum_[t % 2], 0, kPartitions);
      tb2.dtype = dt_;
      transpose(isa::cols(isa::rows(s.dout_t, 0, Dv_), 0, p), rows(s.dout), tb2);
      kb_.tensor_tensor(Engine::POOL, rows(product_), rows(s.dout), rows(o_rows_), AluOp::multiply);
      kb_.tensor_reduce(Engine::DVE, rows(s.ndelta), rows(product_), AluOp::add, 0x1,
                        /*negate=*/true);
      // -lse, capped: a row masked out entirely (lse = -inf) gets P = exp(-inf) = 0.
      kb_.tensor_scalar(Engine::POOL, rows(s.nlse), rows(s.nlse), AluOp::multiply, -1.0f,
                        AluOp::min, std::numeric_limits<float>::max());
      kb_.memset(Engine::POOL, rows(s.dq), 0.0f);
    }
  }

  // ---- a key block ----

  uint32_t keys(uint32_t j) const { return tile_len(Tk_, W_, j); }

  void load_block(uint32_t b, uint32_t hk, uint32_t j) {
    const uint32_t k0 = j * W_, n = keys(j), slot = j % 2;
    for (uint32_t c = 0; c * kPartitions < n; ++c) {
      const uint32_t kc = tile_len(n, kPartitions, c);
      kb_.dma_copy(isa::cols(isa::rows(k_rows_[slot], 0, kc), c * D_, D_),
                   k_.block(kName, b, hk, k0 + c * kPartitions, kc, 0, D_), Engine::SP);
      kb_.dma_copy(isa::cols(isa::rows(v_rows_[slot], 0, kc), c * Dv_, Dv_),
                   v_.block(kName, b, hk, k0 + c * kPartitions, kc, 0, Dv_), Engine::SP);
    }
    for (uint32_t c = 0; c * kPartitions < n; ++c) {
      const uint32_t kc = tile_len(n, kPartitions, c);
      AccessPattern bank = isa::cols(ds_t_psum_, (c % 2) * W_, kPartitions);
      transpose(isa::cols(isa::rows(k_t_[slot], 0, D_), c * kPartitions, kc),
                isa::cols(isa::rows(k_rows_[slot], 0, kc), c * D_, D_), bank);
      transpose(isa::cols(isa::rows(v_t_[slot], 0, Dv_), c * kPartitions, kc),
                isa::cols(isa::rows(v_rows_[slot], 0, kc), c * Dv_, Dv_), bank);
    }
  }

  struct Step {
    uint32_t tile, width;
    int32_t diagonal = -1;
  };

  void key_block(uint32_t b, uint32_t hk, uint32_t j) {
    const uint32_t k0 = j * W_;
    load_block(b, hk, j);
    std::vector<Step> steps;
    for (uint32_t t = 0; t < tiles_.size(); ++t) {
      const QueryTile& qt = tiles_[t];
      Step s{t, keys(j)};
      if (causal_) {
        if (qt.q0 + qt.parts <= k0) continue;  // every key of the block is past the tile's rows
        if (k0 + s.width > qt.q0 + 1) {
          s.diagonal = static_cast<int32_t>(qt.q0 - k0);
          s.width = std::min(s.width, qt.q0 + qt.parts - k0);
        }
      }
      steps.push_back(s);
    }
    std::fill(std::begin(written_), std::end(written_), 0u);
    // Four steps in flight, each engine on the previous round's results: the PE computes
    // step i+2's S and dP, ACT and GpSimd step i+1's P and dS, the PE step i's dK and dV (DVE
    // copying its dS^T out of PSUM) and step i-1's dq, which DVE adds up.
    const auto n = static_cast<uint32_t>(steps.size());
    for (uint32_t i = 0; i < std::min(n, 2u); ++i) scores(b, j, steps[i], i);
    if (n > 0) probabilities(steps[0], 0);
    for (uint32_t i = 0; i <= n; ++i) {
      if (i + 2 < n) scores(b, j, steps[i + 2], i + 2);
      if (i + 1 < n) probabilities(steps[i + 1], i + 1);
      if (i < n) key_gradients(steps[i], i);
      if (i > 0) query_gradient(j, steps[i - 1], i - 1);
    }
    store_dk_dv(b, hk, j);
  }

  // S = q K^T and dP = dO V^T of a step, on the PE.
  void scores(uint32_t b, uint32_t j, const Step& s, uint32_t i) {
    const TileState& st = state_[s.tile];
    const QueryTile& qt = tiles_[s.tile];
    const uint32_t p = qt.parts, slot = j % 2;
    kb_.matmul(isa::cols(isa::rows(s_psum_[i % 2], 0, p), 0, s.width),
               isa::cols(isa::rows(st.q_t, 0, D_), 0, p),
               isa::cols(isa::rows(k_t_[slot], 0, D_), 0, s.width));
    kb_.matmul(isa::cols(isa::rows(dp_psum_[i % 2], 0, p), 0, s.width),
               isa::cols(isa::rows(st.dout_t, 0, Dv_), 0, p),
               isa::cols(isa::rows(v_t_[slot], 0, Dv_), 0, s.width));
    if (has_bias_)
      kb_.dma_copy(isa::cols(isa::rows(bias_tiles_[i % 2], 0, p), 0, s.width),
                   bias_.block(kName, b, qt.h, qt.q0, p, j * W_, s.width), Engine::SP);
  }

  // P = exp(scale S + mask - lse), the forward's probabilities; dS = (dP - D) * P. ACT
  // computes P and dP - D straight out of PSUM, GpSimd their product: all in the input
  // dtype, so that the product runs at one element per cycle.
  void probabilities(const Step& s, uint32_t i) {
    const TileState& st = state_[s.tile];
    const uint32_t p = tiles_[s.tile].parts;
    const auto block = [&](const AccessPattern& a) {
      return isa::cols(isa::rows(a, 0, p), 0, s.width);
    };
    const auto [src, scale] = step_scores(kb_, s_psum_[i % 2], mask_, s.diagonal, scale_,
                                          has_bias_ ? &scores_[i % 2] : nullptr,
                                          has_bias_ ? &bias_tiles_[i % 2] : nullptr, p, s.width);
    const AccessPattern nlse = isa::rows(st.nlse, 0, p), ndelta = isa::rows(st.ndelta, 0, p);
    kb_.activation(block(p_[i % 2]), src, ActFunc::exp, scale, &nlse);
    kb_.activation(block(dpd_[i % 2]), block(dp_psum_[i % 2]), ActFunc::identity, 1.0f, &ndelta);
    kb_.tensor_tensor(Engine::POOL, block(ds_[i % 2]), block(dpd_[i % 2]), block(p_[i % 2]),
                      AluOp::multiply);
  }

  // dV += P^T dO, dK += dS^T q, per 128 keys (P and dS are the stationary operands as they
  // are); dS^T by PE transposes, copied out of PSUM by DVE for dq.
  void key_gradients(const Step& s, uint32_t i) {
    const TileState& st = state_[s.tile];
    const uint32_t p = tiles_[s.tile].parts, chunks = ceil_div(s.width, kPartitions);
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t kc = tile_len(s.width, kPartitions, c);
      const auto chunk = [&](const AccessPattern& a) {
        return isa::cols(isa::rows(a, 0, p), c * kPartitions, kc);
      };
      // Tiles come in query order, so a chunk's later steps see at least its first one's
      // keys: rows past the first step's are never accumulated uninitialised.
      const bool acc = written_[c] > 0;
      require(kc >= written_[c], kName, "a step sees fewer keys of a chunk than an earlier one");
      written_[c] = kc;
      kb_.matmul(isa::cols(isa::rows(dv_psum_, 0, kc), c * Dv_, Dv_), chunk(p_[i % 2]),
                 isa::rows(st.dout, 0, p), acc);
      kb_.matmul(isa::cols(isa::rows(dk_psum_, 0, kc), c * D_, D_), chunk(ds_[i % 2]),
                 isa::rows(st.q, 0, p), acc);
      kb_.transpose(Engine::PE,
                    isa::cols(isa::rows(ds_t_psum_, 0, kc), (i % 2) * W_ + c * kPartitions, p),
                    chunk(ds_[i % 2]));
    }
    copy_transposed_chunks(kb_, Engine::DVE, ds_t_[i % 2], isa::cols(ds_t_psum_, (i % 2) * W_, W_),
                           s.width, p);
  }

  // dq += dS K, the block's part in PSUM, added by DVE.
  void query_gradient(uint32_t j, const Step& s, uint32_t i) {
    const uint32_t p = tiles_[s.tile].parts, chunks = ceil_div(s.width, kPartitions);
    const AccessPattern dq_blk = isa::cols(isa::rows(dq_psum_, 0, p), (i % 2) * D_, D_);
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t kc = tile_len(s.width, kPartitions, c);
      kb_.matmul(dq_blk, isa::cols(isa::rows(ds_t_[i % 2], 0, kc), c * kPartitions, p),
                 isa::cols(isa::rows(k_rows_[j % 2], 0, kc), c * D_, D_), c > 0);
    }
    const AccessPattern dq = isa::rows(state_[s.tile].dq, 0, p);
    kb_.tensor_tensor(Engine::DVE, dq, dq, dq_blk, AluOp::add);
  }

  // dK (times scale) and dV of block j out of PSUM and to HBM; keys no query sees get 0.
  void store_dk_dv(uint32_t b, uint32_t hk, uint32_t j) {
    const uint32_t k0 = j * W_, n = keys(j);
    for (uint32_t c = 0; c * kPartitions < n; ++c) {
      const uint32_t kc = tile_len(n, kPartitions, c);
      const AccessPattern dk = isa::rows(grad_out_[0], 0, kc), dv = isa::rows(grad_out_[1], 0, kc);
      const AccessPattern dk_out = isa::cols(dk, 0, D_), dv_out = isa::cols(dv, 0, Dv_);
      // Keys no query sees (past the last row, under a causal mask) get 0.
      const uint32_t seen = written_[c];
      if (seen < kc) {
        kb_.memset(Engine::POOL, dk_out, 0.0f);
        kb_.memset(Engine::POOL, dv_out, 0.0f);
      }
      if (seen > 0) {
        kb_.activation(isa::rows(dk_out, 0, seen),
                       isa::cols(isa::rows(dk_psum_, 0, seen), c * D_, D_), ActFunc::identity,
                       scale_);
        kb_.tensor_copy(Engine::DVE, isa::rows(dv_out, 0, seen),
                        isa::cols(isa::rows(dv_psum_, 0, seen), c * Dv_, Dv_));
      }
      kb_.dma_copy(dk_.block(kName, b, hk, k0 + c * kPartitions, kc, 0, D_), dk_out, Engine::POOL);
      kb_.dma_copy(dv_.block(kName, b, hk, k0 + c * kPartitions, kc, 0, Dv_), dv_out, Engine::POOL);
    }
  }

  void store_dq(uint32_t b) {
    for (size_t t = 0; t < tiles_.size(); ++t) {
      const QueryTile& qt = tiles_[t];
      const AccessPattern out = isa::cols(isa::rows(grad_out_[2], 0, qt.parts), 0, D_);
      kb_.activation(out, isa::rows(state_[t].dq, 0, qt.parts), ActFunc::identity, scale_);
      kb_.dma_copy(dq_.block(kName, b, qt.h, qt.q0, qt.parts, 0, D_), out, Engine::POOL);
    }
  }

  KernelBuilder& kb_;
  float scale_;
  bool causal_;
  DType dt_ = DType::bf16, bias_dt_ = DType::fp32;
  uint32_t B_ = 0, Hq_ = 0, Hkv_ = 0, Tq_ = 0, Tk_ = 0, D_ = 0, Dv_ = 0, W_ = 0;
  Heads q_, k_, v_, o_, do_, bias_, dq_, dk_, dv_;
  RowValues lse_;
  bool has_bias_ = false;

  AccessPattern p_[2], dpd_[2], ds_[2], ds_t_[2], bias_tiles_[2], scores_[2], mask_;
  AccessPattern k_rows_[2], k_t_[2], v_rows_[2], v_t_[2], grad_out_[3], o_rows_, product_;
  std::vector<TileState> state_;
  std::vector<QueryTile> tiles_;
  AccessPattern s_psum_[2], dp_psum_[2], dk_psum_, dv_psum_, ds_t_psum_, dq_psum_;
  uint32_t written_[8] = {};  // per 128-key chunk of the block: the keys its dK/dV rows hold
  uint32_t copies_ = 0;
};

}  // namespace

void detail::emit_attention_backward(KernelBuilder& kb, const Declare& declare,
                                     const AttentionGradOperands& ops, float scale, bool causal) {
  AttentionBackward(kb, declare, ops, scale, causal).build();
}

isa::Program attention_backward(std::string_view target, const AttentionGradOperands& ops,
                                float scale, bool causal) {
  KernelBuilder kb(target);
  detail::emit_attention_backward(kb, declare_operand, ops, scale, causal);
  return kb.finish();
}

}  // namespace neuronsim::kernels
