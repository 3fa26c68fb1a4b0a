// out = x <op> y, elementwise.
//
// Elementwise work does not care which element sits on which partition, so the
// [rows, cols] tensors are tiled as one flat array: each tile is [128, F] with
// every partition taking F contiguous elements, i.e. one contiguous stretch of
// HBM per tile. That gives long DMA descriptors (F elements per partition) for
// any shape, and tiles whose HBM ranges never overlap, so the stores of
// different tiles need no ordering between them. The tail that does not fill
// 128 partitions becomes a tile of fewer full partitions plus a one-partition
// remainder.
//
// Tiles alternate between VectorE and GpSimdE, which both run tensor_tensor.
// x loads on SP's queues, y on ACT's (ACT computes nothing here); a tile that
// POOL computed is stored by POOL itself (no semaphore wait: its own earlier
// instruction), a DVE tile by SP.
#include <vector>

#include <fmt/format.h>

#include "common.h"
#include "neuronsim/kernels/kernels.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::Engine;

constexpr std::string_view kName = "elementwise";
constexpr uint32_t kChunk = 2048;  // elements per partition and tile: 8 KiB of FP32, near DMA peak

struct FlatTile {
  uint64_t start;     // first element
  uint32_t parts;     // partitions used
  uint32_t per_part;  // elements per partition
};

std::vector<FlatTile> flat_tiles(uint64_t total) {
  std::vector<FlatTile> tiles;
  // Per-partition length: kChunk, or less so that small tensors still use all partitions.
  const uint64_t spread = std::max<uint64_t>(1, total / kPartitions);
  const uint32_t per = static_cast<uint32_t>(std::min<uint64_t>(kChunk, spread));
  uint64_t at = 0;
  while (total - at >= uint64_t{kPartitions} * per) {
    tiles.push_back({at, kPartitions, per});
    at += uint64_t{kPartitions} * per;
  }
  if (const uint64_t parts = (total - at) / per; parts > 0) {
    tiles.push_back({at, static_cast<uint32_t>(parts), per});
    at += parts * per;
  }
  if (total > at) tiles.push_back({at, 1, static_cast<uint32_t>(total - at)});
  return tiles;
}

}  // namespace

isa::Program elementwise(std::string_view target, ElementwiseOp op, int64_t rows, int64_t cols,
                         DType dtype) {
  check_dims(kName, {{"rows", rows}, {"cols", cols}});
  require(op == ElementwiseOp::add || op == ElementwiseOp::multiply, kName, "unknown operation");
  const isa::AluOp alu = op == ElementwiseOp::add ? isa::AluOp::add : isa::AluOp::multiply;

  KernelBuilder kb(target);
  const AccessPattern x = kb.input("x", dtype, {rows, cols});
  const AccessPattern y = kb.input("y", dtype, {rows, cols});
  const AccessPattern out = kb.output("out", dtype, {rows, cols});
  const std::vector<FlatTile> tiles =
      flat_tiles(static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols));

  // Per buffer: an x tile (also the result, computed in place) and a y tile.
  const uint32_t per = tiles.front().per_part;
  const uint32_t nbuf = buffer_count(kb, kName, 0, 2 * tile_bytes(dtype, per), "a tile pair");
  struct Slot {
    AccessPattern x, y;
  };
  std::vector<Slot> slots;
  for (uint32_t i = 0; i < nbuf; ++i)
    slots.push_back(
        {sbuf(kb, kName, dtype, kPartitions, per), sbuf(kb, kName, dtype, kPartitions, per)});

  auto view = [&](const AccessPattern& t, const FlatTile& ft) {
    return isa::cols(isa::rows(t, 0, ft.parts), 0, ft.per_part);
  };
  auto load = [&](uint32_t i) {
    const FlatTile& ft = tiles[i];
    const Slot& s = slots[i % nbuf];
    kb.dma_copy(view(s.x, ft), hbm_flat(x, ft.start, u16(ft.parts), ft.per_part), Engine::SP);
    kb.dma_copy(view(s.y, ft), hbm_flat(y, ft.start, u16(ft.parts), ft.per_part), Engine::ACT);
  };
  auto compute = [&](uint32_t i) {
    const FlatTile& ft = tiles[i];
    const Slot& s = slots[i % nbuf];
    const Engine engine = i % 2 ? Engine::POOL : Engine::DVE;
    kb.tensor_tensor(engine, view(s.x, ft), view(s.x, ft), view(s.y, ft), alu);
    kb.dma_copy(hbm_flat(out, ft.start, u16(ft.parts), ft.per_part), view(s.x, ft),
                engine == Engine::POOL ? Engine::POOL : Engine::SP);
  };
  pipeline(static_cast<uint32_t>(tiles.size()), nbuf - 1, load, compute);
  return kb.finish();
}

}  // namespace neuronsim::kernels
