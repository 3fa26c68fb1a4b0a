// Row-wise softmax: out[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r)).
//
// Rows go on partitions (128 per tile) and a whole row sits in one tile, so every
// reduction is along the free dim of one instruction. Per tile:
//   DVE  tensor_reduce max, negated      -> nmax [P, 1] (one tile ahead, see below)
//   ACT  activation exp(x + nmax), with its add-reduction into sum [P, 1] (one pass)
//   ACT  activation reciprocal(sum)      -> rsum [P, 1] (ACT is already in order after exp)
//   DVE  tensor_scalar e * rsum          -> result, written over the x tile
// The exponentials stay FP32 whatever the dtype. SP loads, the otherwise idle
// POOL triggers the stores, so neither compute engine waits behind a DMA.
//
// log_softmax, out = x - max_r - log(sum_r), shares the first two steps and ends
//   ACT  activation log(sum)             -> lse [P, 1] (in the rsum slot)
//   DVE  tensor_scalar (x + nmax) - lse  -> result, written over the x tile
// so no division and no log of a rounded quotient.
//
// Rows too long for a tile (an LM's logits over a vocabulary of 151,936) take two
// passes over blocks of 4096 columns of each row tile, each block loaded by SP:
//   pass 1, per block: DVE negated block max; DVE the running (negated) max; ACT
//     exp(x - max) with its add-reduction, and exp(old max - new max), by which DVE
//     rescales the running sum before adding the block's (online softmax)
//   then ACT log(sum) and DVE the row's bias b = -max - log(sum)
//   pass 2, per block: ACT exp(x + b) (softmax) or DVE x + b (log_softmax), stored
//     by POOL
// Three row reads and one write instead of one and one: what SBUF's size costs.
#include <algorithm>
#include <vector>

#include "common.h"
#include "neuronsim/kernels/kernels.h"
#include "stages.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::ActFunc;
using isa::AluOp;
using isa::Engine;

struct Slot {
  AccessPattern x;     // [128, cols] dtype: the input, then the result
  AccessPattern e;     // [128, cols] fp32 exponentials
  AccessPattern nmax;  // [128, 1] fp32, -max
  AccessPattern sum;   // [128, 1] fp32
  AccessPattern rsum;  // [128, 1] fp32
};

constexpr uint32_t kBlock = 4096;  // columns of a block of a long row

// Per-row columns of a long-row softmax, [128, 1] FP32 each.
struct LongRowColumns {
  AccessPattern nmax[2];  // the running negated max, before and after a block
  AccessPattern block_max, sum, block_sum, scale, bias;
};

void emit_long_row_softmax(KernelBuilder& kb, std::string_view kernel, const AccessPattern& x,
                           const AccessPattern& out, bool log) {
  const DType dtype = x.dtype;
  const uint32_t C = x.dims[0].size, blocks = ceil_div(C, kBlock);
  const RowTiles tiles{x.num_partitions};
  const uint64_t column_bytes = 2 * 7 * tile_bytes(DType::fp32, 1);
  const uint64_t exp_bytes = tile_bytes(DType::fp32, kBlock);
  const uint32_t nbuf = buffer_count(kb, kernel, column_bytes + exp_bytes,
                                     tile_bytes(dtype, kBlock), "a block of a long row");
  std::vector<AccessPattern> slots;
  for (uint32_t i = 0; i < nbuf; ++i) slots.push_back(sbuf(kb, kernel, dtype, kPartitions, kBlock));
  const AccessPattern e = sbuf(kb, kernel, DType::fp32, kPartitions, kBlock);
  LongRowColumns cols[2];  // by row tile parity, so that tile i+1's pass 1 overlaps i's pass 2
  for (LongRowColumns& c : cols)
    for (AccessPattern* a :
         {&c.nmax[0], &c.nmax[1], &c.block_max, &c.sum, &c.block_sum, &c.scale, &c.bias})
      *a = sbuf(kb, kernel, DType::fp32, kPartitions, 1);

  // Step k: row tile k / (2 blocks), pass (k / blocks) % 2, block k % blocks.
  const auto block_of = [&](uint32_t k, uint32_t p) {
    const uint32_t t = k / (2 * blocks), j = k % blocks;
    return isa::cols(isa::rows(x, tiles.first(t), p), j * kBlock, tile_len(C, kBlock, j));
  };
  const auto load = [&](uint32_t k) {
    const uint32_t p = tiles.parts(k / (2 * blocks)), j = k % blocks;
    kb.dma_copy(isa::cols(isa::rows(slots[k % nbuf], 0, p), 0, tile_len(C, kBlock, j)),
                block_of(k, p), Engine::SP);
  };
  const auto compute = [&](uint32_t k) {
    const uint32_t t = k / (2 * blocks), j = k % blocks, p = tiles.parts(t);
    const bool first_pass = k / blocks % 2 == 0;
    const LongRowColumns& c = cols[t % 2];
    const auto col = [&](const AccessPattern& a) { return isa::rows(a, 0, p); };
    const AccessPattern bias = col(c.bias), sum = col(c.sum), block_sum = col(c.block_sum);
    const AccessPattern scale = col(c.scale), block_max = col(c.block_max);
    const uint32_t width = tile_len(C, kBlock, j);
    const AccessPattern xb = isa::cols(isa::rows(slots[k % nbuf], 0, p), 0, width);
    const AccessPattern eb = isa::cols(isa::rows(e, 0, p), 0, width);
    if (!first_pass) {
      if (log)
        kb.tensor_scalar(Engine::DVE, xb, xb, AluOp::add, 0.0f, AluOp::bypass, 0.0f, &bias);
      else
        kb.activation(xb, xb, ActFunc::exp, 1.0f, &bias);
      kb.dma_copy(isa::cols(isa::rows(out, tiles.first(t), p), j * kBlock, width), xb,
                  Engine::POOL);
      return;
    }
    const AccessPattern old_max = col(c.nmax[j % 2]), new_max = col(c.nmax[(j + 1) % 2]);
    if (j == 0) {
      kb.tensor_reduce(Engine::DVE, new_max, xb, AluOp::max, 0x1, /*negate=*/true);
      kb.activation(eb, xb, ActFunc::exp, 1.0f, &new_max, &sum, AluOp::add);
    } else {
      // -max' = min(-max, -block max); the sum so far times exp(max - max').
      kb.tensor_reduce(Engine::DVE, block_max, xb, AluOp::max, 0x1, /*negate=*/true);
      kb.tensor_tensor(Engine::DVE, new_max, old_max, block_max, AluOp::min);
      kb.activation(eb, xb, ActFunc::exp, 1.0f, &new_max, &block_sum, AluOp::add);
      kb.tensor_tensor(Engine::DVE, scale, new_max, old_max, AluOp::subtract);
      kb.activation(scale, scale, ActFunc::exp);
      kb.tensor_scalar(Engine::DVE, sum, sum, AluOp::multiply, 0.0f, AluOp::add, 0.0f, &scale,
                       &block_sum);
    }
    if (j + 1 < blocks) return;
    // b = -max - log(sum), the bias of pass 2.
    kb.activation(scale, sum, ActFunc::log);
    kb.tensor_tensor(Engine::DVE, bias, new_max, scale, AluOp::subtract);
  };
  pipeline(tiles.count() * 2 * blocks, nbuf - 1, load, compute);
}

isa::Program row_softmax(std::string_view kernel, std::string_view target, int64_t rows,
                         int64_t cols, DType dtype, bool log) {
  check_dims(kernel, {{"rows", rows}, {"cols", cols}});
  check_float(kernel, "dtype", dtype);
  KernelBuilder kb(target);
  emit_row_softmax(kb, kernel, kb.input("x", dtype, {rows, cols}),
                   kb.output("out", dtype, {rows, cols}), log);
  return kb.finish();
}

}  // namespace

void detail::emit_row_softmax(KernelBuilder& kb, std::string_view kernel, const AccessPattern& x,
                              const AccessPattern& out, bool log) {
  const DType dtype = x.dtype;
  const int64_t rows = x.num_partitions;
  const uint32_t C = x.dims[0].size;
  const RowTiles tiles{static_cast<uint64_t>(rows)};

  const uint64_t slot_bytes =
      tile_bytes(dtype, C) + tile_bytes(DType::fp32, C) + 3 * tile_bytes(DType::fp32, 1);
  if (2 * slot_bytes > kb.target().sbuf_partition_bytes)
    return emit_long_row_softmax(kb, kernel, x, out, log);
  const uint32_t nbuf = buffer_count(kb, kernel, 0, slot_bytes, "a row tile");
  std::vector<Slot> slots;
  for (uint32_t i = 0; i < nbuf; ++i)
    slots.push_back({sbuf(kb, kernel, dtype, kPartitions, C),
                     sbuf(kb, kernel, DType::fp32, kPartitions, C),
                     sbuf(kb, kernel, DType::fp32, kPartitions, 1),
                     sbuf(kb, kernel, DType::fp32, kPartitions, 1),
                     sbuf(kb, kernel, DType::fp32, kPartitions, 1)});

  auto load = [&](uint32_t i) {
    const uint32_t p = tiles.parts(i);
    kb.dma_copy(isa::rows(slots[i % nbuf].x, 0, p), isa::rows(x, tiles.first(i), p), Engine::SP);
  };
  auto row_max = [&](uint32_t i) {
    const uint32_t p = tiles.parts(i);
    const Slot& s = slots[i % nbuf];
    kb.tensor_reduce(Engine::DVE, isa::rows(s.nmax, 0, p), isa::rows(s.x, 0, p), AluOp::max,
                     /*axes=*/0x1,
                     /*negate=*/true);
  };
  auto compute = [&](uint32_t i) {
    // DVE computes the max of tile i+1 before it waits for ACT's exponentials of
    // tile i, so ACT finds the next max ready and the two engines overlap.
    if (i == 0) row_max(0);
    if (i + 1 < tiles.count()) row_max(i + 1);
    const uint32_t p = tiles.parts(i);
    const Slot& s = slots[i % nbuf];
    const AccessPattern xt = isa::rows(s.x, 0, p), et = isa::rows(s.e, 0, p);
    const AccessPattern nmax = isa::rows(s.nmax, 0, p), sum = isa::rows(s.sum, 0, p);
    const AccessPattern rsum = isa::rows(s.rsum, 0, p);
    kb.activation(et, xt, ActFunc::exp, 1.0f, &nmax, &sum, AluOp::add);
    if (log) {
      kb.activation(rsum, sum, ActFunc::log);
      kb.tensor_scalar(Engine::DVE, xt, xt, AluOp::add, 0.0f, AluOp::subtract, 0.0f, &nmax, &rsum);
    } else {
      kb.activation(rsum, sum, ActFunc::reciprocal);
      kb.tensor_scalar(Engine::DVE, xt, et, AluOp::multiply, 0.0f, AluOp::bypass, 0.0f, &rsum);
    }
    kb.dma_copy(isa::rows(out, tiles.first(i), p), xt, Engine::POOL);
  };
  pipeline(tiles.count(), nbuf - 1, load, compute);
}

isa::Program softmax(std::string_view target, int64_t rows, int64_t cols, DType dtype) {
  return row_softmax("softmax", target, rows, cols, dtype, /*log=*/false);
}

isa::Program log_softmax(std::string_view target, int64_t rows, int64_t cols, DType dtype) {
  return row_softmax("log_softmax", target, rows, cols, dtype, /*log=*/true);
}

}  // namespace neuronsim::kernels
