// out[cols, rows] = x[rows, cols]^T, bit exact.
//
// TensorE transposes blocks of up to 128x128 from SBUF into PSUM. The kernel
// walks x in steps of (a group of G row tiles) x (512 columns):
//   SP    loads the G row tiles [128, 512] of the step (one DMA each, 2 KiB rows)
//   PE    for each 128-column block: G transposes side by side into one PSUM
//         bank (G = 2 KiB / (128 * element size): 4 for fp32, 8 for bf16)
//   ACT / DVE (alternating) copy the bank to SBUF: [128 out rows, G*128]
//   POOL  stores it: 128 rows of out, G*128 contiguous elements each
// Copies through FP32 are exact for float dtypes, so only those are accepted.
#include <vector>

#include "common.h"
#include "neuronsim/kernels/kernels.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::Engine;

constexpr std::string_view kName = "transpose";
constexpr uint32_t kColChunk = 512;  // columns of x per load
constexpr uint32_t kOutBufs = 4;     // PSUM banks and SBUF result tiles in rotation

}  // namespace

isa::Program transpose(std::string_view target, int64_t rows, int64_t cols, DType dtype) {
  check_dims(kName, {{"rows", rows}, {"cols", cols}});
  check_float(kName, "dtype", dtype);
  KernelBuilder kb(target);
  const AccessPattern x = kb.input("x", dtype, {rows, cols});
  const AccessPattern out = kb.output("out", dtype, {cols, rows});
  const uint32_t R = u32(rows), C = u32(cols);

  const RowTiles row_tiles{R};
  const auto elem = static_cast<uint32_t>(isa::dtype_size(dtype));
  const uint32_t group = kb.target().psum_bank_bytes / (kPartitions * elem);
  const uint32_t row_groups = ceil_div(row_tiles.count(), group);
  const uint32_t col_chunks = ceil_div(C, kColChunk);

  // Two sets of G input tiles (load of the next step overlaps this one).
  std::vector<AccessPattern> in_tiles;
  for (uint32_t i = 0; i < 2 * group; ++i)
    in_tiles.push_back(sbuf(kb, kName, dtype, kPartitions, kColChunk));
  std::vector<AccessPattern> banks, out_tiles;
  for (uint32_t i = 0; i < kOutBufs; ++i) {
    banks.push_back(psum(kb, kName, dtype, kPartitions, group * kPartitions));
    out_tiles.push_back(sbuf(kb, kName, dtype, kPartitions, group * kPartitions));
  }

  // Step s = (row group rg, column chunk cc); its row tiles are rg*G .. rg*G + G-1.
  auto tiles_in_group = [&](uint32_t rg) {
    return std::min(group, row_tiles.count() - rg * group);
  };
  auto load = [&](uint32_t s) {
    const uint32_t rg = s / col_chunks, cc = s % col_chunks;
    const uint32_t width = tile_len(C, kColChunk, cc);
    for (uint32_t j = 0; j < tiles_in_group(rg); ++j) {
      const uint32_t rt = rg * group + j, p = row_tiles.parts(rt);
      kb.dma_copy(isa::cols(isa::rows(in_tiles[(s % 2) * group + j], 0, p), 0, width),
                  hbm_block(x, row_tiles.first(rt), p, cc * kColChunk, width), Engine::SP);
    }
  };
  uint32_t block_count = 0;
  auto compute = [&](uint32_t s) {
    const uint32_t rg = s / col_chunks, cc = s % col_chunks;
    const uint32_t width = tile_len(C, kColChunk, cc);
    const uint32_t row0 = row_tiles.first(rg * group);
    const uint32_t group_rows = std::min<uint32_t>(R - row0, group * kPartitions);
    for (uint32_t cb = 0; cb < ceil_div(width, kPartitions); ++cb, ++block_count) {
      const uint32_t pc = tile_len(width, kPartitions, cb);  // x columns = out rows of this block
      const AccessPattern bank =
          isa::cols(isa::rows(banks[block_count % kOutBufs], 0, pc), 0, group_rows);
      for (uint32_t j = 0; j < tiles_in_group(rg); ++j) {
        const uint32_t p = row_tiles.parts(rg * group + j);
        const AccessPattern src =
            isa::cols(isa::rows(in_tiles[(s % 2) * group + j], 0, p), cb * kPartitions, pc);
        kb.transpose(Engine::PE, isa::cols(bank, j * kPartitions, p), src);
      }
      const AccessPattern result =
          isa::cols(isa::rows(out_tiles[block_count % kOutBufs], 0, pc), 0, group_rows);
      kb.tensor_copy(block_count % 2 ? Engine::DVE : Engine::ACT, result, bank);
      kb.dma_copy(hbm_block(out, cc * kColChunk + cb * kPartitions, pc, row0, group_rows), result,
                  Engine::POOL);
    }
  };
  pipeline(row_groups * col_chunks, 1, load, compute);
  return kb.finish();
}

}  // namespace neuronsim::kernels
