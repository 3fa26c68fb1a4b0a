// Row normalisations: RMSNorm and LayerNorm.
//
// Rows go on partitions (128 per tile), a whole row in one tile, so the row
// statistics are free-dim reductions. gamma (and beta) are loaded once into
// every partition by a DMA whose HBM side has row stride 0, as FP32. Each tile
// flows through three engines, one stage each, so consecutive tiles overlap:
//
// RMSNorm    ACT   square(x / sqrt(C)) with add-reduction -> mean(x^2) [P, 1]
//            DVE   rstd = (mean + eps)^-0.5; w = x * rstd
//            POOL  y = w * gamma, then triggers the store
// LayerNorm  DVE   bn_stats per <= 512 columns, bn_aggr -> mean, var;
//                  rstd = (var + eps)^-0.5, nmr = -mean * rstd
//            ACT   w = x * rstd + nmr            (activation with per-partition scale and bias)
//            DVE   w = w * gamma                 (after the statistics of the next tile)
//            POOL  y = w + beta, then triggers the store
#include <vector>

#include <cmath>

#include "common.h"
#include "neuronsim/kernels/kernels.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::ActFunc;
using isa::AluOp;
using isa::Engine;

// Shared checks and setup of both norms: tensors and the broadcast affine vectors.
struct NormSetup {
  KernelBuilder kb;
  AccessPattern x, out;
  RowTiles tiles;
  uint32_t C;
  uint32_t bcast_parts;  // partitions that hold gamma/beta: min(rows, 128)

  NormSetup(std::string_view kernel, std::string_view target, int64_t rows, int64_t cols, float eps,
            DType dtype)
      : kb(target),
        tiles{static_cast<uint64_t>(rows)},
        C(u32(cols)),
        bcast_parts(static_cast<uint32_t>(std::min<int64_t>(rows, kPartitions))) {
    check_dims(kernel, {{"rows", rows}, {"cols", cols}});
    check_float(kernel, "dtype", dtype);
    require(std::isfinite(eps) && eps >= 0.0f, kernel, "eps must be finite and non-negative");
    x = kb.input("x", dtype, {rows, cols});
  }

  // A [cols] input loaded once into every used partition as FP32 (ACT's queue:
  // SP is busy with the first x tiles).
  AccessPattern broadcast_input(std::string_view kernel, const std::string& name, DType dtype) {
    const AccessPattern vec = kb.input(name, dtype, {C});
    const AccessPattern tile = sbuf(kb, kernel, DType::fp32, bcast_parts, C);
    kb.dma_copy(tile, hbm_broadcast(vec, u16(bcast_parts), C), Engine::ACT);
    return tile;
  }

  void load(const AccessPattern& x_tile, uint32_t i) {
    const uint32_t p = tiles.parts(i);
    kb.dma_copy(isa::rows(x_tile, 0, p), isa::rows(x, tiles.first(i), p), Engine::SP);
  }
  void store(const AccessPattern& y_tile, uint32_t i) {
    const uint32_t p = tiles.parts(i);
    kb.dma_copy(isa::rows(out, tiles.first(i), p), isa::rows(y_tile, 0, p), Engine::POOL);
  }
};

}  // namespace

isa::Program rmsnorm(std::string_view target, int64_t rows, int64_t cols, float eps, DType dtype) {
  constexpr std::string_view kName = "rmsnorm";
  NormSetup n(kName, target, rows, cols, eps, dtype);
  KernelBuilder& kb = n.kb;
  struct Slot {
    AccessPattern x, w, ms, rstd;  // x is also the result
  };
  const uint64_t slot_bytes =
      tile_bytes(dtype, n.C) + tile_bytes(DType::fp32, n.C) + 2 * tile_bytes(DType::fp32, 1);
  const uint32_t nbuf =
      buffer_count(kb, kName, tile_bytes(DType::fp32, n.C), slot_bytes, "a row tile");
  const AccessPattern gamma = n.broadcast_input(kName, "gamma", dtype);
  n.out = kb.output("out", dtype, {rows, cols});
  std::vector<Slot> slots;
  for (uint32_t i = 0; i < nbuf; ++i)
    slots.push_back({sbuf(kb, kName, dtype, kPartitions, n.C),
                     sbuf(kb, kName, DType::fp32, kPartitions, n.C),
                     sbuf(kb, kName, DType::fp32, kPartitions, 1),
                     sbuf(kb, kName, DType::fp32, kPartitions, 1)});
  // square(x * s) with s = 1/sqrt(C) sums to mean(x^2): no separate division.
  const float inv_sqrt_c = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n.C)));

  auto compute = [&](uint32_t i) {
    const uint32_t p = n.tiles.parts(i);
    const Slot& s = slots[i % nbuf];
    const AccessPattern x = isa::rows(s.x, 0, p), w = isa::rows(s.w, 0, p);
    const AccessPattern ms = isa::rows(s.ms, 0, p), rstd = isa::rows(s.rstd, 0, p);
    kb.activation(w, x, ActFunc::square, inv_sqrt_c, nullptr, &ms, AluOp::add);  // w: scratch
    kb.tensor_scalar(Engine::DVE, rstd, ms, AluOp::add, eps, AluOp::pow, -0.5f);
    kb.tensor_scalar(Engine::DVE, w, x, AluOp::multiply, 0.0f, AluOp::bypass, 0.0f, &rstd);
    kb.tensor_tensor(Engine::POOL, x, w, isa::rows(gamma, 0, p), AluOp::multiply);
    n.store(s.x, i);
  };
  pipeline(
      n.tiles.count(), nbuf - 1, [&](uint32_t i) { n.load(slots[i % nbuf].x, i); }, compute);
  return kb.finish();
}

isa::Program layernorm(std::string_view target, int64_t rows, int64_t cols, float eps,
                       DType dtype) {
  constexpr std::string_view kName = "layernorm";
  NormSetup n(kName, target, rows, cols, eps, dtype);
  KernelBuilder& kb = n.kb;
  const uint32_t fmax = kb.target().bn_stats_fmax;
  const uint32_t chunks = ceil_div(n.C, fmax);
  struct Slot {
    AccessPattern x, w, stats, mv,
        sc;  // x is also the result; mv = (mean, var); sc = (rstd, -mean*rstd)
  };
  const uint64_t slot_bytes = tile_bytes(dtype, n.C) + tile_bytes(DType::fp32, n.C) +
                              tile_bytes(DType::fp32, 6 * chunks) + 2 * tile_bytes(DType::fp32, 2);
  const uint32_t nbuf =
      buffer_count(kb, kName, 2 * tile_bytes(DType::fp32, n.C), slot_bytes, "a row tile");
  const AccessPattern gamma = n.broadcast_input(kName, "gamma", dtype);
  const AccessPattern beta = n.broadcast_input(kName, "beta", dtype);
  n.out = kb.output("out", dtype, {rows, cols});
  std::vector<Slot> slots;
  for (uint32_t i = 0; i < nbuf; ++i)
    slots.push_back({sbuf(kb, kName, dtype, kPartitions, n.C),
                     sbuf(kb, kName, DType::fp32, kPartitions, n.C),
                     sbuf(kb, kName, DType::fp32, kPartitions, 6 * chunks),
                     sbuf(kb, kName, DType::fp32, kPartitions, 2),
                     sbuf(kb, kName, DType::fp32, kPartitions, 2)});

  // DVE: statistics and the per-row scale and bias of tile i.
  auto statistics = [&](uint32_t i) {
    const uint32_t p = n.tiles.parts(i);
    const Slot& s = slots[i % nbuf];
    const AccessPattern x = isa::rows(s.x, 0, p), stats = isa::rows(s.stats, 0, p);
    const AccessPattern mv = isa::rows(s.mv, 0, p), sc = isa::rows(s.sc, 0, p);
    for (uint32_t c = 0; c < chunks; ++c)
      kb.bn_stats(isa::cols(stats, 6 * c, 6), isa::cols(x, c * fmax, tile_len(n.C, fmax, c)));
    kb.bn_aggr(mv, stats);
    const AccessPattern mean = isa::cols(mv, 0, 1), var = isa::cols(mv, 1, 1);
    const AccessPattern rstd = isa::cols(sc, 0, 1), nmr = isa::cols(sc, 1, 1);
    kb.tensor_scalar(Engine::DVE, rstd, var, AluOp::add, eps, AluOp::pow, -0.5f);
    kb.tensor_scalar(Engine::DVE, nmr, mean, AluOp::multiply, 0.0f, AluOp::multiply, -1.0f, &rstd);
  };
  auto compute = [&](uint32_t i) {
    // DVE works out the statistics of tile i+1 before its gamma pass of tile i,
    // which waits for ACT: ACT then finds the next tile's scale ready.
    if (i == 0) statistics(0);
    if (i + 1 < n.tiles.count()) statistics(i + 1);
    const uint32_t p = n.tiles.parts(i);
    const Slot& s = slots[i % nbuf];
    const AccessPattern x = isa::rows(s.x, 0, p), w = isa::rows(s.w, 0, p),
                        sc = isa::rows(s.sc, 0, p);
    const AccessPattern rstd = isa::cols(sc, 0, 1), nmr = isa::cols(sc, 1, 1);
    activation_scaled(kb, w, x, ActFunc::identity, rstd, &nmr);
    kb.tensor_tensor(Engine::DVE, w, w, isa::rows(gamma, 0, p), AluOp::multiply);
    kb.tensor_tensor(Engine::POOL, x, w, isa::rows(beta, 0, p), AluOp::add);
    n.store(s.x, i);
  };
  pipeline(
      n.tiles.count(), nbuf - 1, [&](uint32_t i) { n.load(slots[i % nbuf].x, i); }, compute);
  return kb.finish();
}

}  // namespace neuronsim::kernels
