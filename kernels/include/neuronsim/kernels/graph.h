// A compiled graph (torch.compile's "neuron" backend) as one program: the eager
// kernels as stages in one KernelBuilder, reading and writing places in the graph's
// tensors. The builder's dependency tracking orders the stages: a stage waits only for
// the HBM bytes and SBUF/PSUM buffers it shares with earlier ones. Stages take their
// buffers in turn around SBUF and PSUM, so independent stages overlap. A fused stage that
// does not fit SBUF (an epilogue of very long rows) is emitted as the stages it fuses.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/kernels/eager.h"

namespace neuronsim::kernels {

// A view of a graph tensor: `view` (its dtype the tensor's) from element `offset`.
struct Place {
  std::string tensor;
  int64_t offset = 0;
  View view;
};

// A norm computed from a matmul's stored value in the same stage: rows = epilogue(value,
// the row's reduction of prologue(value), inputs...): load(0) is the value, load(1) the row's
// result, load(k) inputs[k - 2] broadcast to the value's sizes; rows has its sizes.
struct RowNorm {
  ReduceOp op = ReduceOp::mean;
  const PointwiseExpr* prologue = nullptr;
  const PointwiseExpr* epilogue = nullptr;
  std::vector<Place> inputs;
  Place rows;
};

class GraphProgram {
 public:
  explicit GraphProgram(std::string_view target);

  // A tensor of the graph, `elems` elements of `dtype`: an input or output bound at
  // each run, or scratch, which the program keeps in HBM (a value no later graph needs).
  void tensor(const std::string& name, isa::DType dtype, int64_t elems, isa::TensorKind kind);

  // The stages. Each throws std::invalid_argument naming the kernel and the operand
  // when a place does not fit its tensor or the kernel refuses the case.
  void pointwise(const PointwiseExpr& expr, std::span<const Place> inputs,
                 std::span<const Place> outs);
  // out = epilogue(a @ b, inputs...) when an epilogue is given: an expression whose
  // load(0) is the product and load(k) is epilogue_inputs[k - 1] (broadcast to out's sizes),
  // computed on each output tile in SBUF before it is stored.
  // Then, with softmax_rows, the softmax (log_softmax with log) of each row of that. With
  // a norm, the stage also writes norm->rows from the value it stores (the tiles hold whole
  // rows: an RMS norm of the residual stream the epilogue adds to).
  void matmul(const Place& a, const Place& b, const Place& out,
              const PointwiseExpr* epilogue = nullptr, std::span<const Place> epilogue_inputs = {},
              bool softmax_rows = false, bool log = false, const RowNorm* norm = nullptr);
  // With a prologue (an expression whose one input, load(0), is in), the values reduced
  // are the prologue's, computed on chip.
  // With an epilogue, the stage also writes `rows` (in's sizes) = epilogue(in, the row's
  // result, epilogue_inputs...): load(0) is in's element, load(1) its row's result, load(k)
  // epilogue_inputs[k - 2]; each row must fit one tile.
  void reduce(ReduceOp op, const Place& in, int64_t dim, const Place& out,
              const PointwiseExpr* prologue = nullptr, const PointwiseExpr* epilogue = nullptr,
              std::span<const Place> epilogue_inputs = {}, const Place* rows = nullptr);
  // softmax (or log_softmax) over the last dim; both places contiguous in that dim and
  // rows of it one after the other.
  void softmax(const Place& in, const Place& out, bool log);
  // Scaled dot-product attention (kernels::attention), `mask` added to the scaled scores
  // when given.
  void attention(const Place& q, const Place& k, const Place& v, const Place* mask,
                 const Place& out, const Place& lse, float scale, bool causal);
  // Its gradients (kernels::attention_backward): places named as that kernel's tensors
  // ("q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv", and "bias" when there is one).
  void attention_backward(const std::map<std::string, Place>& places, float scale, bool causal);

  // Embedding lookups (kernels::gather_rows): out's rows [count, cols] = table's rows
  // [rows, cols] named by `index`, an int32 view of `count` elements (stride 2 reads the
  // low words of int64 indices). Table and out have their rows one after another.
  void gather(const Place& table, const Place& index, const Place& out);

  // The k largest (or smallest) along `dim` and their positions (kernels::topk; indices an
  // int32 view: the low words of int64 ones at stride 2).
  void topk(const Place& in, int64_t dim, int64_t k, bool largest, const Place& values,
            const Place& indices);
  // Running sums along `dim` (kernels::cumsum).
  void cumsum(const Place& in, int64_t dim, const Place& out);
  // out's rows named by `index` = src's rows, in order (kernels::scatter_rows): out [rows,
  // cols] and src [count, cols] with rows one after another; index as gather's.
  void scatter(const Place& src, const Place& index, const Place& out);
  // A grouped product (kernels::grouped_matmul): out's rows of group g = a's rows @ b[g],
  // the groups' cumulative row ends read from `offs` (int32) on the device.
  void grouped_matmul(const Place& a, const Place& b, const Place& offs, const Place& out);

  size_t stages() const { return stages_; }
  isa::Program finish();

 private:
  struct Declared {
    isa::AccessPattern pattern;
    int64_t elems;
    isa::TensorKind kind;
  };
  isa::AccessPattern at(std::string_view kernel, const std::string& operand, const Place& place,
                        bool output) const;
  // How a stage's kernel finds its operands: each named operand at its place.
  // (A kernels::detail::Declare: an operand's pattern from its name and view.)
  std::function<isa::AccessPattern(isa::KernelBuilder&, const std::string&, const View&, bool)>
  binder(std::string_view kernel, const std::map<std::string, const Place*>& places) const;
  // Runs one stage, its SBUF and PSUM after the last stage's (see graph.cpp).
  template <class Emit>
  void stage(Emit&& emit);
  // Runs a fused stage; false, having emitted nothing, when its kernel refuses it (too
  // big for SBUF), so that the caller emits the stages it fuses one by one.
  template <class Emit>
  bool fused(Emit&& emit);
  // A gather (or, with `scatter`, a scatter) of rows between `table` and `packed` by index.
  void indirect_rows(const char* kernel, const Place& table, const Place& index,
                     const Place& packed, bool scatter);
  // A contiguous scratch tensor for a value an unfused stage passes to the next.
  Place temporary(isa::DType dtype, const std::vector<int64_t>& sizes);

  isa::KernelBuilder kb_;
  std::unordered_map<std::string, Declared> tensors_;
  size_t stages_ = 0;
  uint64_t next_sbuf_ = 0, next_psum_ = 0;
  size_t temporaries_ = 0;
};

}  // namespace neuronsim::kernels
