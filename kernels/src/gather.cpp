// gather_rows: out[i, :] = table[index[i], :] by indirect DMA (dma_copy with an index
// operand); scatter_rows: out[index[i], :] = src[i, :], the same with the index naming
// rows of the destination (dma_copy scatter=true); scatter_add_rows adds into those rows
// (add=true). The indices go from HBM to one SBUF partition
// each (one small DMA per tile of 128), then one indirect transfer per tile copies the named table
// rows straight to the tile's output rows in HBM. Index tiles alternate between two SBUF slots so
// the load of tile i+1 overlaps the gather of tile i; the gathers alternate between the SP and ACT
// queues.
#include <algorithm>

#include "common.h"
#include "neuronsim/kernels/eager.h"
#include "stages.h"

namespace neuronsim::kernels {

using namespace detail;
using isa::Engine;

namespace {

// An HBM pattern of a tensor's elements from `base`'s offset as [rows, cols] rows.
AccessPattern as_rows(AccessPattern base, int64_t rows, int64_t cols) {
  base.num_partitions = static_cast<uint32_t>(rows);
  base.partition_stride = cols;
  base.num_dims = 1;
  base.dims[0] = {1, static_cast<uint32_t>(cols)};
  return base;
}

// Declares each operand as a tensor of its own, with the operand's shape.
AccessPattern declare_shaped(KernelBuilder& kb, const std::string& name, const View& v,
                             bool output) {
  return output ? kb.output(name, v.dtype, v.sizes) : kb.input(name, v.dtype, v.sizes);
}

isa::Program indirect_rows(std::string_view kName, std::string_view target, isa::DType dtype,
                           int64_t rows, int64_t cols, int64_t count, int64_t index_stride,
                           bool scatter, bool add = false) {
  KernelBuilder kb(target);
  emit_indirect_rows(kb, declare_shaped, kName, dtype, rows, cols, count, index_stride, scatter,
                     add);
  return kb.finish();
}

}  // namespace

namespace detail {

// One indirect transfer per tile of 128 indices; `scatter` indexes the table (out).
void emit_indirect_rows(KernelBuilder& kb, const Declare& declare, std::string_view kName,
                        isa::DType dtype, int64_t rows, int64_t cols, int64_t count,
                        int64_t index_stride, bool scatter, bool add) {
  require(!add || scatter, kName, "only a scatter adds into its rows");
  require(!add || dtype == isa::DType::fp32 || dtype == isa::DType::bf16, kName,
          "the DMA adds into FP32 or BF16 rows only");
  check_dims(kName, {{"rows", rows}, {"cols", cols}, {"count", count}});
  require(index_stride >= 1 && index_stride <= 65535, kName, "index_stride must be 1..65535");
  const int64_t index_elems = (count - 1) * index_stride + 1;

  const View table_view{dtype, {rows, cols}, {cols, 1}};
  const View packed_view{dtype, {count, cols}, {cols, 1}};
  const AccessPattern table =
      as_rows(declare(kb, scatter ? "out" : "table", table_view, scatter), rows, cols);
  const AccessPattern index =
      declare(kb, "index", View{isa::DType::int32, {index_elems}, {1}}, false);
  const AccessPattern packed =
      as_rows(declare(kb, scatter ? "src" : "out", packed_view, !scatter), count, cols);
  const AccessPattern slots[2] = {sbuf(kb, kName, isa::DType::int32, kPartitions, 1),
                                  sbuf(kb, kName, isa::DType::int32, kPartitions, 1)};

  for (int64_t first = 0, tile = 0; first < count; first += kPartitions, ++tile) {
    const auto n = static_cast<uint32_t>(std::min<int64_t>(kPartitions, count - first));
    // Indices first..first+n-1, one per partition.
    AccessPattern ids = index;
    ids.offset = index.offset + static_cast<uint64_t>(first * index_stride) * 4;
    ids.num_partitions = static_cast<uint16_t>(n);
    ids.partition_stride = index_stride;
    ids.num_dims = 1;
    ids.dims[0] = {1, 1};
    const AccessPattern slot = isa::rows(slots[tile % 2], 0, n);
    kb.dma_copy(slot, ids, Engine::SP);

    isa::Instruction move;
    move.opcode = isa::Opcode::dma_copy;
    move.engine = tile % 2 == 0 ? Engine::SP : Engine::ACT;
    const AccessPattern part = isa::rows(packed, static_cast<uint32_t>(first), n);
    move.operands = {{isa::Role::dst, scatter ? table : part},
                     {isa::Role::src, scatter ? part : table},
                     {isa::Role::index, slot}};
    if (scatter) move.flags = isa::kScatter;
    if (add) move.flags |= isa::kAddToDst;
    // Queue 0 carries the index loads. Scatters stay on one queue of one engine, in
    // order, so a repeated index keeps the last row as the instruction promises.
    move.ints[0] = scatter ? 1 : static_cast<int32_t>(1 + tile % 15);
    if (scatter) move.engine = Engine::SP;
    kb.emit(std::move(move));
  }
}

}  // namespace detail

isa::Program gather_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                         int64_t count, int64_t index_stride) {
  return indirect_rows("gather_rows", target, dtype, rows, cols, count, index_stride, false);
}

isa::Program scatter_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                          int64_t count, int64_t index_stride) {
  return indirect_rows("scatter_rows", target, dtype, rows, cols, count, index_stride, true);
}

isa::Program scatter_add_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                              int64_t count, int64_t index_stride) {
  return indirect_rows("scatter_add_rows", target, dtype, rows, cols, count, index_stride, true,
                       true);
}

}  // namespace neuronsim::kernels
