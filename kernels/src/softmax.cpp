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
