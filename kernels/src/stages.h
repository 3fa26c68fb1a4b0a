// The kernels as stages: each emits its instructions into a caller's KernelBuilder,
// with its operands' HBM tensors obtained through `declare` (eager_common.h). The
// public functions of eager.h and kernels.h are one stage in a builder of their own;
// a graph program (graph.cpp) is many stages in one builder.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "eager_common.h"

namespace neuronsim::kernels::detail {

void emit_pointwise(KernelBuilder& kb, const Declare& declare, const PointwiseExpr& expr,
                    std::span<const View> inputs, std::span<const View> outs);
// What a matmul computes on each output tile before it is stored: an expression whose
// load(0) is the product (FP32) and load(k) for k >= 1 is inputs[k - 1], a view broadcast
// to out's sizes; then, optionally, a softmax or log_softmax of each row (the tiles hold
// whole rows).
enum class RowOp : uint8_t { none, softmax, log_softmax };
// After the stored value, a norm of it: rows = epilogue(value, the row's reduction of
// prologue(value), inputs...) (load(0): the stored value, load(1): the row's result,
// load(k): inputs[k - 2] broadcast to out's sizes); rows has out's sizes (an RMS norm of
// the residual stream that the epilogue adds to).
struct MatmulNorm {
  ReduceOp op = ReduceOp::sum;
  const PointwiseExpr* prologue = nullptr;
  const PointwiseExpr* epilogue = nullptr;
  std::vector<View> inputs;
  View rows;
};
struct MatmulEpilogue {
  const PointwiseExpr* expr = nullptr;
  std::vector<View> inputs;
  RowOp rows = RowOp::none;
  const MatmulNorm* norm = nullptr;
};
void emit_matmul(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
                 const View& out, const MatmulEpilogue* epilogue = nullptr);
// A product in blocks whose rows are found at run time (grouped_matmul.cpp): block b is
// 128 rows of A named by a_index's column b, times the B of the block's group, whose rows
// b_index names; the block's product rows go to the same rows of out (an indirect
// scatter). The tables are whole operands, one row per partition-axis row: A [S, K] and
// out [S, N] with unit column strides; B's table is W [G * N, K] when b_of_rows (B = W^T,
// k contiguous), else B [G * K, N].
struct MatmulBlocks {
  AccessPattern a, b, out;
  bool b_of_rows = false;
  uint32_t count = 0;
  AccessPattern a_index;  // int32 [128, count]
  // Writes block `block`'s int32 [128, b_index_tiles] into dst: column t holds B's table
  // rows t * 128 + p of the block's group (rows past the group's are not read).
  std::function<void(uint32_t block, const AccessPattern& dst)> b_index;
  uint32_t b_index_tiles = 0;
  AccessPattern scale;  // fp32 [128, 1]: A's rows are multiplied by it (0: no group has rows)
};
// `preamble` emits what the blocks' indices need, once the product has its SBUF (taken
// after the tiles the caller took before), so that a product short of SBUF throws having
// emitted nothing.
void emit_block_matmul(KernelBuilder& kb, uint32_t K, uint32_t N, DType dtype, DType out_dtype,
                       const MatmulBlocks& blocks, const std::function<void()>& preamble);

// The FP32 temporaries emit_tile_expression needs for `expr` (one per computed step);
// throws std::invalid_argument for steps a tile expression has no instruction for.
size_t tile_expression_temps(std::string_view kernel, const PointwiseExpr& expr, size_t inputs);
// Which steps of `expr` are columns (one value per row, [P, 1]) when the inputs flagged
// in column_inputs are; throws std::invalid_argument when a select reads a column or the
// result is one.
std::vector<bool> tile_expression_columns(std::string_view kernel, const PointwiseExpr& expr,
                                          const std::vector<bool>& column_inputs);
// Evaluates `expr` over SBUF tiles of one shape: load(k) reads loads[k], computed step k
// (in order, loads not counted) goes to temps[k] (FP32), or column_temps[k] ([P, 1] FP32)
// when it is a column, the result (expr's one output) to dst, on `engine` (ScalarE for
// activations). A column input (column_inputs[k]) is one value per row, [P, 1], which
// steps combine with rows as each partition's scalar operand (a row's mean in a norm).
void emit_tile_expression(KernelBuilder& kb, isa::Engine engine, const PointwiseExpr& expr,
                          std::span<const AccessPattern> loads,
                          std::span<const AccessPattern> temps, const AccessPattern& dst,
                          const std::vector<bool>& column_inputs = {},
                          std::span<const AccessPattern> column_temps = {});
// With a prologue (an expression of its one input, load(0)), the values reduced are the
// prologue's of in's elements, computed on chip (the square of an RMS norm).
// With an epilogue, the reduction also writes rows = expr(in, the row's result,
// inputs...): load(0) is in's element (before any prologue), load(1) the result of its row
// (one value per row), load(k) for k >= 2 is inputs[k - 2] broadcast to in's sizes; `out`
// has in's sizes. Each row must fit one tile (an RMS norm's normalised rows, say).
struct RowEpilogue {
  const PointwiseExpr* expr = nullptr;
  std::vector<View> inputs;
  View out;
};
void emit_reduce(KernelBuilder& kb, const Declare& declare, ReduceOp op, const View& in,
                 int64_t dim, const View& out, const PointwiseExpr* prologue = nullptr,
                 const RowEpilogue* epilogue = nullptr);
void emit_grouped_matmul(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
                         const View& offs, const View& out);
void emit_cumsum(KernelBuilder& kb, const Declare& declare, const View& in, int64_t dim,
                 const View& out);
void emit_topk(KernelBuilder& kb, const Declare& declare, const View& in, int64_t dim, int64_t k,
               bool largest, const View& values, const View& indices);
void emit_attention(KernelBuilder& kb, const Declare& declare, const AttentionOperands& ops,
                    float scale, bool causal);
void emit_attention_backward(KernelBuilder& kb, const Declare& declare,
                             const AttentionGradOperands& ops, float scale, bool causal);
// gather_rows (or, with `scatter`, scatter_rows): operands "table" (or "out"), "index"
// and "out" (or "src") declared as views of their shapes; the index operand is int32.
void emit_indirect_rows(KernelBuilder& kb, const Declare& declare, std::string_view kernel,
                        isa::DType dtype, int64_t rows, int64_t cols, int64_t count,
                        int64_t index_stride, bool scatter, bool add = false);
// x and out: [rows, cols] patterns (rows on partitions, unit column stride).
void emit_row_softmax(KernelBuilder& kb, std::string_view kernel, const AccessPattern& x,
                      const AccessPattern& out, bool log);

}  // namespace neuronsim::kernels::detail
