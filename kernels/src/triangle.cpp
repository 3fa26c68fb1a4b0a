// triangle (tril/triu): each [n rows, f cols] tile is loaded, then GpSimd's affine_select
// writes v = offset + channel_multiplier * p + step * j >= 0 ? x : 0, with the
// coefficients chosen so that v is (i - j + diagonal) for the lower triangle and
// (j - i - diagonal) for the upper one, i and j being the tile's absolute row and column.
// Two slot pairs let the load of one tile overlap the select and store of the previous.
#include <algorithm>

#include "common.h"
#include "neuronsim/kernels/eager.h"

namespace neuronsim::kernels {

using namespace detail;
using isa::Engine;

namespace {

constexpr uint32_t kCols = 2048;  // columns per tile: 8 KiB of FP32 per partition

void affine_select(KernelBuilder& kb, const AccessPattern& dst, const AccessPattern& src,
                   int64_t offset, int32_t channel_multiplier, int32_t step) {
  isa::Instruction in;
  in.opcode = isa::Opcode::affine_select;
  in.engine = Engine::POOL;
  AccessPattern pattern;
  pattern.space = isa::MemSpace::Pattern;
  pattern.dtype = isa::DType::int32;
  pattern.dims[0] = {step, static_cast<uint32_t>(dst.free_elems())};
  in.operands = {{isa::Role::dst, dst}, {isa::Role::on_true, src}, {isa::Role::pattern, pattern}};
  in.ints[0] = static_cast<int32_t>(offset);
  in.ints[1] = channel_multiplier;
  in.alu0 = isa::AluOp::is_ge;
  in.imm0 = 0.0f;
  kb.emit(std::move(in));
}

}  // namespace

isa::Program triangle(std::string_view target, isa::DType dtype, int64_t batch, int64_t rows,
                      int64_t cols, int64_t diagonal, bool upper) {
  constexpr std::string_view kName = "triangle";
  check_dims(kName,
             {{"batch", batch}, {"rows", rows}, {"cols", cols}, {"batch * rows", batch * rows}});
  require(diagonal > -(int64_t{1} << 30) && diagonal < (int64_t{1} << 30), kName,
          "diagonal out of range");

  KernelBuilder kb(target);
  const AccessPattern in = kb.input("in", dtype, {batch * rows, cols});
  const AccessPattern out = kb.output("out", dtype, {batch * rows, cols});
  const uint32_t width = static_cast<uint32_t>(std::min<int64_t>(kCols, cols));
  AccessPattern x[2], y[2];
  for (int s = 0; s < 2; ++s) {
    x[s] = sbuf(kb, kName, dtype, kPartitions, width);
    y[s] = sbuf(kb, kName, dtype, kPartitions, width);
  }
  int tile = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r0 = 0; r0 < rows; r0 += kPartitions)
      for (int64_t c0 = 0; c0 < cols; c0 += width, ++tile) {
        const auto n = static_cast<uint32_t>(std::min<int64_t>(kPartitions, rows - r0));
        const auto f = static_cast<uint32_t>(std::min<int64_t>(width, cols - c0));
        const auto row = static_cast<uint32_t>(b * rows + r0);
        const AccessPattern src = isa::cols(isa::rows(in, row, n), static_cast<uint32_t>(c0), f);
        const AccessPattern dst = isa::cols(isa::rows(out, row, n), static_cast<uint32_t>(c0), f);
        const AccessPattern xs = isa::cols(isa::rows(x[tile % 2], 0, n), 0, f);
        const AccessPattern ys = isa::cols(isa::rows(y[tile % 2], 0, n), 0, f);
        kb.dma_copy(xs, src, Engine::SP);
        if (upper)
          affine_select(kb, ys, xs, c0 - r0 - diagonal, -1, 1);  // j - i - diagonal >= 0
        else
          affine_select(kb, ys, xs, r0 - c0 + diagonal, 1, -1);  // i - j + diagonal >= 0
        kb.dma_copy(dst, ys, Engine::POOL);
      }
  return kb.finish();
}

}  // namespace neuronsim::kernels
