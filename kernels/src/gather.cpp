// gather_rows: out[i, :] = table[index[i], :] by indirect DMA (dma_copy with an index
// operand). The indices go from HBM to one SBUF partition each (one small DMA per tile
// of 128), then one indirect transfer per tile copies the named table rows straight to
// the tile's output rows in HBM. Index tiles alternate between two SBUF slots so the
// load of tile i+1 overlaps the gather of tile i; the gathers alternate between the
// SP and ACT queues.
#include <algorithm>

#include "common.h"
#include "neuronsim/kernels/eager.h"

namespace neuronsim::kernels {

using namespace detail;
using isa::Engine;

isa::Program gather_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                         int64_t count, int64_t index_stride) {
  constexpr std::string_view kName = "gather_rows";
  check_dims(kName, {{"rows", rows}, {"cols", cols}, {"count", count}});
  require(index_stride >= 1 && index_stride <= 65535, kName, "index_stride must be 1..65535");
  const int64_t index_elems = (count - 1) * index_stride + 1;

  KernelBuilder kb(target);
  const AccessPattern table = kb.input("table", dtype, {rows, cols});
  const AccessPattern index = kb.input("index", isa::DType::int32, {index_elems});
  const AccessPattern out = kb.output("out", dtype, {count, cols});
  const AccessPattern slots[2] = {sbuf(kb, kName, isa::DType::int32, kPartitions, 1),
                                  sbuf(kb, kName, isa::DType::int32, kPartitions, 1)};

  for (int64_t first = 0, tile = 0; first < count; first += kPartitions, ++tile) {
    const auto n = static_cast<uint32_t>(std::min<int64_t>(kPartitions, count - first));
    // Indices first..first+n-1, one per partition.
    AccessPattern ids = index;
    ids.offset = static_cast<uint64_t>(first * index_stride) * 4;
    ids.num_partitions = static_cast<uint16_t>(n);
    ids.partition_stride = index_stride;
    ids.num_dims = 1;
    ids.dims[0] = {1, 1};
    const AccessPattern slot = isa::rows(slots[tile % 2], 0, n);
    kb.dma_copy(slot, ids, Engine::SP);

    isa::Instruction gather;
    gather.opcode = isa::Opcode::dma_copy;
    gather.engine = tile % 2 == 0 ? Engine::SP : Engine::ACT;
    gather.operands = {{isa::Role::dst, isa::rows(out, static_cast<uint32_t>(first), n)},
                       {isa::Role::src, table},
                       {isa::Role::index, slot}};
    gather.ints[0] = static_cast<int32_t>(1 + tile % 15);  // queue 0 carries the index loads
    kb.emit(std::move(gather));
  }
  return kb.finish();
}

}  // namespace neuronsim::kernels
