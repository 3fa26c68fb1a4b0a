// Kernels for the PyTorch eager backend ("neuron" device): each aten op becomes
// one KernelBuilder program on one NeuronCore, reading and writing tensors as
// strided views of HBM.
//
// The backend binds every program tensor to the address of its view's first
// element, with a byte size of View::extent_elems() elements, and passes the
// view's sizes and strides (in elements; stride 0 = broadcast) here. Kernels walk
// the views with strided DMA access patterns, so no operand needs to be
// contiguous. Every function returns a validated isa::Program for `target` and
// throws std::invalid_argument("<kernel>: <what is wrong>") for what it does not
// support; the backend then falls back to the CPU. Refused everywhere: empty views
// (numel 0: nothing to run), negative strides, sizes and strides that disagree in
// rank, extents of 2^32 elements or more, and views that still have more dims
// than one DMA access pattern walks (rows + 4 free dims) after coalescing.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"

namespace neuronsim::kernels {

// A strided view of HBM. sizes and strides have one entry per dim (none for a
// 0-dim scalar); strides are in elements and never negative.
struct View {
  isa::DType dtype = isa::DType::fp32;
  std::vector<int64_t> sizes, strides;

  int64_t numel() const;
  // Elements from the first one to the last one the view reaches, both included:
  // (max reachable element index + 1); the program tensor holds that many.
  int64_t extent_elems() const;
};

// The views, all of one shape (the first one's sizes), with the same element walk
// over fewer dims: size-1 dims dropped, and adjacent dims merged where every view
// is contiguous across them (stride[i] == stride[i+1] * size[i+1], which stride-0
// broadcast dims also satisfy). A 0-dim walk becomes one dim of size 1. Throws
// std::invalid_argument when the views differ in shape.
std::vector<View> coalesce(std::span<const View> views);

// One DMA access pattern walks a row dim and 4 free dims: the eager kernels refuse views
// that keep more after ordering and coalescing, and a caller runs such an op in slices.
inline constexpr size_t kMaxWalkDims = 5;

// The dims the views (all of one shape) keep, ordered by the first one's strides and
// coalesced, as the eager kernels walk them.
size_t walk_dims(std::vector<View> views);

// A small register program evaluated elementwise, per tile, in FP32 on chip: the
// IR of the eager pointwise ops and of the fusions torch.compile will emit.
// Each step computes one value, named by its Reg (the step's index) and readable
// by later steps only (SSA). The last step is the result. Steps:
//   load(i)                  input i ("in<i>"), broadcast to the output's shape
//   constant(v)              v everywhere
//   activation(f, x, s)      f(x * s) on ScalarE (isa::ActFunc)
//   alu(op, a, b)            a <op> b (isa::AluOp: arithmetic, max/min/pow/mod,
//                            comparisons giving 1/0, logical and bitwise ops)
//   alu_imm(op, a, v, rev)   a <op> v, or v <op> a with rev (rsub, v / x, ...)
//   alu_scalar(op, a, i, rev)  the same with v the one element of input i, read once
//                            per kernel (a value that changes from call to call, such
//                            as a learning rate, without a kernel per value)
//   select(p, t, f)          p != 0 ? t : f (torch.where)
//   position(w)              sum over out's dims d of index[d] * w[d] (arange, the
//                            column index of a one-hot), exact below 2^24
//   random()                 16 random bits per element, an integer in [0, 65536) (a
//                            dropout mask: random() < (1 - p) * 65536), drawn by the
//                            engines' generators (isa rng) from the kernel's tensor
//                            "seeds": uint32 [128, 12], row p holding lane p's XORWOW
//                            state for VectorE (words 0-5) then GpSimd (6-11). Each
//                            random() step is its own draw; the values depend on the
//                            seeds and the tiling, so equal seeds give equal values.
//                            NeuronCore-v3 and later (v2 cannot set the state).
// Intermediate values are FP32. The result is the last step, or the steps given to
// set_outputs (one per output view, all of out's shape: the limbs of an integer
// computed 16 bits at a time). A result read by no later step and no other output is
// written in its output's dtype directly, so it is rounded once (a cast is just
// load(0) stored into another dtype); any other result is kept in FP32 and rounded
// by its store.
class PointwiseExpr {
 public:
  using Reg = int32_t;
  enum class Op : uint8_t { load, constant, activation, alu, alu_imm, select, position, random };
  struct Step {
    Op op = Op::load;
    std::vector<Reg> args;  // activation, alu_imm: {x}; alu: {a, b}; select: {p, t, f}
    int32_t input = 0;      // load
    isa::ActFunc func = isa::ActFunc::identity;
    isa::AluOp alu = isa::AluOp::bypass;
    float imm = 0.0f;      // constant: the value; alu_imm: the immediate; activation: the scale
    bool reverse = false;  // alu_imm: imm <op> a
    int32_t scalar = -1;   // alu_imm: the input whose one element is the immediate
    std::vector<int64_t> weights;  // position: one per output dim, >= 0
  };

  Reg load(int32_t input);
  Reg constant(float value);
  Reg activation(isa::ActFunc func, Reg x, float scale = 1.0f);
  Reg alu(isa::AluOp op, Reg a, Reg b);
  Reg alu_imm(isa::AluOp op, Reg a, float imm, bool reverse = false);
  Reg alu_scalar(isa::AluOp op, Reg a, int32_t input, bool reverse = false);
  Reg select(Reg predicate, Reg on_true, Reg on_false);
  Reg position(std::vector<int64_t> weights);
  Reg random();

  // The values stored, one per output; by default the last step alone.
  void set_outputs(std::vector<Reg> outputs) { outputs_ = std::move(outputs); }
  std::vector<Reg> outputs() const;

  // One-step programs of the common eager ops.
  static PointwiseExpr unary(isa::ActFunc func, float scale = 1.0f);  // f(in0 * scale)
  static PointwiseExpr binary(isa::AluOp op);                         // in0 <op> in1
  static PointwiseExpr scalar(isa::AluOp op, float imm, bool reverse = false);
  static PointwiseExpr copy();  // in0, stored as out.dtype: copy_, to(dtype), contiguous()

  const std::vector<Step>& steps() const { return steps_; }
  bool draws_random() const;

  // The generators' state words of the tensor "seeds", 12 per lane.
  static constexpr int kSeedWords = 12;

 private:
  Reg push(Step step);
  std::vector<Step> steps_;
  std::vector<Reg> outputs_;
};

// out = expr(in0, in1, ...) elementwise. Tensors "in0", "in1", ... (one per
// input, in its dtype) and "out". Inputs broadcast to out.sizes by numpy rules
// (dims aligned on the right; a missing or size-1 dim, or a stride-0 one, is
// repeated). out may be strided (an in-place op on a slice, a transposed view)
// but must not overlap itself: sorted by stride, each of its dims must step past
// all the elements of the dims inside it. An input may be the very view out is
// (in-place ops): each element is read by its tile before that tile stores it;
// partially overlapping inputs and outputs are undefined, as torch refuses them.
// Any dtype: floats compute in FP32; integer and bool values are exact where FP32
// holds them exactly (|v| <= 2^24; int32/uint32 beyond that round), and results
// round to nearest and saturate to out.dtype (bool: v != 0).
// Tiling: dims ordered by out's strides and coalesced; tiles of up to 128
// partitions x 2048 elements alternate between VectorE and GpSimd, activations
// run on ScalarE, and the loads of later tiles overlap the compute (2-3 buffers).
isa::Program pointwise(std::string_view target, const PointwiseExpr& expr,
                       std::span<const View> inputs, const View& out);
// The same with one output view per expr.outputs(), tensors "out0", "out1", ...,
// all of one shape (outs[0]'s sizes). Outputs must not overlap each other.
isa::Program pointwise(std::string_view target, const PointwiseExpr& expr,
                       std::span<const View> inputs, std::span<const View> outs);

// Every element of out = value, rounded to out.dtype as a store does (integers:
// nearest, saturated). Tensor "out"; out may be strided as for pointwise.
isa::Program fill(std::string_view target, const View& out, float value);

enum class ReduceOp : uint8_t { sum, mean, max, min, argmax, argmin };

// out = op over dim `dim` of in. Tensors "in" and "out". out has in's sizes with
// `dim` removed or kept with size 1 (keepdim), any strides (no self-overlap).
// sum/mean/max/min accumulate in FP32 (integers exact while partial sums stay
// within 2^24) and round once to out.dtype; mean needs a float out.dtype.
// argmax/argmin give the first index of the max/min (torch's tie rule) into an
// int32 out; NaN is not treated specially (torch returns a NaN's index).
// Layout: every kept index gets a partition and the reduced dim runs along the
// free axis, whatever the strides, so each reduction is one VectorE/GpSimd
// tensor_reduce per tile. A strided DMA costs its bytes in the cost model like a
// contiguous one (docs/cost-model.md §4), so this is cheaper in simulated time
// than a TensorE ones-vector matmul, which would also be FP32-rate (4x) to stay
// exact and could not do max/min. A reduced dim longer than one tile is reduced
// in chunks and the chunk results once more; argmax/argmin need the reduced dim
// in one tile (trn2: up to 8192 elements). Fewer than 128 kept indices leave
// partitions idle: a full reduction (x.sum() as a 1-D view) runs on one partition,
// about 20x the simulated time of copying the same bytes.
isa::Program reduce(std::string_view target, ReduceOp op, const View& in, int64_t dim,
                    const View& out);

// The k largest (largest = true) or smallest elements of `in` along dim `dim`, in that
// order, and their positions along it (torch.topk with sorted = true): tensors "in",
// "values" (in's dtype) and "indices" (int32), both of in's sizes with k along dim, any
// strides. Equal elements come out in position order, so k = the dim's size is a stable
// sort (torch.sort(stable=True), descending for largest). NaN ranks above every number
// (first when largest, last when smallest), as torch orders it; the FP32 keys stay above
// -inf, so -inf ties with -FLT_MAX (largest), and +inf, FLT_MAX and NaN tie (smallest),
// in position order. Rows on the partitions
// as reduce's; VectorE's max8 and match_replace8 take 8 per round over chunks of up to
// 16,384 elements of a row; a longer row keeps each chunk's top k as candidates, which
// must fit one chunk (k = 1024 over 262,144 elements). Float dtypes and integers of at
// most 16 bits (32-bit integers are not exact as FP32 keys). kernels/src/topk.cpp.
isa::Program topk(std::string_view target, const View& in, int64_t dim, int64_t k, bool largest,
                  const View& values, const View& indices);

// out[..., j, ...] = in[..., 0, ...] + ... + in[..., j, ...] along dim `dim`
// (torch.cumsum). Tensors "in" and "out" of the same sizes, any strides (out without
// self-overlap). Running sums are FP32 (integers exact while they stay within 2^24)
// and each is rounded to out.dtype once. Layout as reduce's: the other dims on the
// partitions, the scanned dim along the free axis in chunks that carry their last
// sum into the next one (tensor_tensor_scan on VectorE).
isa::Program cumsum(std::string_view target, const View& in, int64_t dim, const View& out);
// out[..., j, ...] = in[..., 0, ...] * ... * in[..., j, ...] (torch.cumprod): cumsum's layout,
// the running products FP32, each rounded to out.dtype once.
isa::Program cumprod(std::string_view target, const View& in, int64_t dim, const View& out);

// out = a @ b on TensorE: [M, K] x [K, N] -> [M, N], or batched [B, M, K] x
// [B, K, N] -> [B, M, N], where a or b may have batch stride 0 (broadcast).
// Tensors "a", "b" (same float dtype) and "out" (float dtype; FP32 accumulation,
// rounded once). Any strides: a transposed a or b (linear's weight.t(), strides
// [1, K]) is read with a strided DMA. Tiling as matmul() in kernels.h. M and the batch
// have no limit of their own (the views are declared flat and tiled); N has none either
// without an epilogue: rows too wide for SBUF are stored in blocks of whole PSUM tiles.
// K is bound by A^T's rows in one SBUF partition (on trn2 about 27,000 for bf16).
isa::Program matmul(std::string_view target, const View& a, const View& b, const View& out);

// out[rows of group g] = a[those rows] @ b[g] (torch._grouped_mm of a 2-D a and a 3-D b):
// a [S, K], b [G, K, N], offs int32 [G] the groups' cumulative row ends, out [S, N]; rows
// past the last end are zero. The ends stay on the device: the program depends on the
// shapes alone. Rows are cut into blocks of 128 rows of one group, whose rows, weights and
// outputs move by indirect DMA (kernels/src/grouped_matmul.cpp). Tensors "a", "b", "offs",
// "out"; a and out with contiguous rows; b's groups one after another at its row stride
// (b contiguous, or the transpose of a contiguous [G, N, K], as a linear layer's experts
// are held); at most 1,024 groups, and fewer than 2^24 rows of a and of b's groups.
isa::Program grouped_matmul(std::string_view target, const View& a, const View& b, const View& offs,
                            const View& out);

// Scaled dot-product attention, flash-style: out = softmax(q k^T * scale + mask) v per
// head, with the [Tq, Tk] scores never leaving the chip. q [B, Hq, Tq, D], k [B, Hkv, Tk,
// D], v [B, Hkv, Tk, Dv] and out [B, Hq, Tq, Dv] (or all 3-D without B), one float dtype,
// any strides but a contiguous head dim; Hq a multiple of Hkv (grouped-query attention:
// query head h reads KV head h / (Hq / Hkv)); D and Dv up to 256. lse [B, Hq, Tq] FP32
// gets each row's logsumexp of the scaled, masked scores (what a backward pass needs).
// Masks: `causal` (key j seen by query i iff j <= i, torch's is_causal), and/or `bias`,
// a float view broadcast to [B, Hq, Tq, Tk] added to the scaled scores (attn_mask).
// Tensors "q", "k", "v", "bias" (when given), "out", "lse". Tiling and engines:
// kernels/src/attention.cpp.
struct AttentionOperands {
  View q, k, v, out, lse;
  const View* bias = nullptr;
};
isa::Program attention(std::string_view target, const AttentionOperands& ops, float scale,
                       bool causal);

// The gradients of attention(): dq, dk, dv (the shapes of q, k, v) from dout (out's shape),
// with the forward's out and lse; the probabilities are recomputed on chip. Same operands,
// scale and masks as the forward; head dims up to 128, and every query tile of a KV head
// resident in SBUF (about 1.6 KiB per partition per 128 queries and query head at head dim
// 128 in bf16: some 4,000 queries for 2 query heads per KV head on trn2). Tensors "q", "k",
// "v", "out", "dout", "lse", "bias" (when given) and the outputs "dq", "dk", "dv".
struct AttentionGradOperands {
  View q, k, v, out, dout, lse, dq, dk, dv;
  const View* bias = nullptr;
};
isa::Program attention_backward(std::string_view target, const AttentionGradOperands& ops,
                                float scale, bool causal);

// out[i, :] = table[index[i * index_stride], :] for i < count: embedding lookups and
// index_select over dim 0, done as the hardware does them, by indirect DMA straight
// from the table in HBM to the output in HBM (no SBUF staging for the rows), 128
// indices per transfer. Tensors: "table" [rows, cols] in `dtype` (contiguous), "index"
// int32 of (count - 1) * index_stride + 1 elements (stride 2 reads the low words of
// int64 indices, which are the indices when they are below 2^31), "out" [count, cols].
// An index outside 0..rows-1 faults the execution, naming the index.
isa::Program gather_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                         int64_t count, int64_t index_stride = 1);

// out[index[i * index_stride], :] = src[i, :] for i < count: the inverse of gather_rows
// (scatter, index_put), by indirect DMA with the index naming rows of out (HBM to HBM).
// Tensors: "src" [count, cols] in `dtype`, "index" as for gather_rows, "out" [rows,
// cols], whose other rows keep their bytes. A repeated index keeps the last row (the
// scatters run in order on one queue); an index outside 0..rows-1 faults the execution.
isa::Program scatter_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                          int64_t count, int64_t index_stride = 1);

// out[index[i * index_stride], :] += src[i, :] for i < count, the sum of the rows that share
// an index (index_add, index_put with accumulate, an embedding's gradient): scatter_rows
// whose DMAs read, add in FP32 and write back (dma_copy add=true). `dtype` is FP32 or BF16,
// each add rounded to it; the scatters run in order on one queue, so a repeated index adds
// its rows in index order. The traffic is the rows named, whatever out's size.
isa::Program scatter_add_rows(std::string_view target, isa::DType dtype, int64_t rows, int64_t cols,
                              int64_t count, int64_t index_stride = 1);

// tril/triu of a batch of matrices: out[b, i, j] = in[b, i, j] where j - i <= diagonal
// (lower) or j - i >= diagonal (upper), else 0. Tensors "in" and "out", both contiguous
// [batch, rows, cols] in `dtype`. Rows go on partitions, 128 at a time, and GpSimd's
// affine_select keeps or zeroes each element by its (row, column) position, so no
// index tensor is read.
isa::Program triangle(std::string_view target, isa::DType dtype, int64_t batch, int64_t rows,
                      int64_t cols, int64_t diagonal, bool upper);

}  // namespace neuronsim::kernels
