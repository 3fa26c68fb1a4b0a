// GraphProgram: stages bound to places in the graph's tensors (see graph.h).
#include "neuronsim/kernels/graph.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stages.h"

namespace neuronsim::kernels {

using namespace detail;

GraphProgram::GraphProgram(std::string_view target) : kb_(target) {}

void GraphProgram::tensor(const std::string& name, isa::DType dtype, int64_t elems,
                          isa::TensorKind kind) {
  require(elems >= 1, "graph", fmt::format("tensor {} has no elements", name));
  require(!tensors_.contains(name), "graph", fmt::format("tensor {} is declared twice", name));
  isa::AccessPattern ap;
  switch (kind) {
    case isa::TensorKind::input:
      ap = kb_.input(name, dtype, {1, elems});
      break;
    case isa::TensorKind::output:
      ap = kb_.output(name, dtype, {1, elems});
      break;
    case isa::TensorKind::scratch:
      ap = kb_.scratch(name, dtype, {1, elems});
      break;
    default:
      require(false, "graph", fmt::format("tensor {}: a graph holds no constants", name));
  }
  tensors_.emplace(name, Declared{ap, elems, kind});
}

isa::AccessPattern GraphProgram::at(std::string_view kernel, const std::string& operand,
                                    const Place& place, bool output) const {
  const auto it = tensors_.find(place.tensor);
  require(
      it != tensors_.end(), kernel,
      fmt::format("{} is in tensor {}, which the graph does not declare", operand, place.tensor));
  const Declared& t = it->second;
  require(place.view.dtype == t.pattern.dtype, kernel,
          fmt::format("{} is {}, its tensor {} is {}", operand, isa::dtype_name(place.view.dtype),
                      place.tensor, isa::dtype_name(t.pattern.dtype)));
  require(
      place.offset >= 0 && place.offset + place.view.extent_elems() <= t.elems, kernel,
      fmt::format("{} reaches elements {}..{} of tensor {}, which has {}", operand, place.offset,
                  place.offset + place.view.extent_elems() - 1, place.tensor, t.elems));
  require(!output || t.kind != isa::TensorKind::input, kernel,
          fmt::format("{} would write tensor {}, an input of the graph", operand, place.tensor));
  isa::AccessPattern ap = t.pattern;
  ap.offset = static_cast<uint64_t>(place.offset) * isa::dtype_size(ap.dtype);
  return ap;
}

Declare GraphProgram::binder(std::string_view kernel,
                             const std::map<std::string, const Place*>& places) const {
  return
      [this, kernel, &places](KernelBuilder&, const std::string& name, const View&, bool output) {
        return at(kernel, name, *places.at(name), output);
      };
}

template <class Emit>
void GraphProgram::stage(Emit&& emit) {
  // Each stage takes its SBUF and PSUM after the last stage's, wrapping to the start when
  // they do not fit there: a stage that does not read the last one's results then finds
  // its buffers free and loads while the last one computes. The kernels allocate before
  // they emit, so a stage refused for space is tried again from the start.
  const size_t before = kb_.instructions();
  kb_.release_sbuf(next_sbuf_);
  kb_.release_psum(next_psum_);
  try {
    emit();
  } catch (const std::invalid_argument&) {
    if ((next_sbuf_ == 0 && next_psum_ == 0) || kb_.instructions() != before) throw;
    kb_.release_sbuf(0);
    kb_.release_psum(0);
    emit();
  }
  next_sbuf_ = kb_.sbuf_mark();
  next_psum_ = kb_.psum_mark();
  ++stages_;
}

void GraphProgram::pointwise(const PointwiseExpr& expr, std::span<const Place> inputs,
                             std::span<const Place> outs) {
  require(!expr.draws_random(), "pointwise", "a graph program draws no random numbers");
  std::map<std::string, const Place*> places;
  std::vector<View> in_views, out_views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    places[fmt::format("in{}", i)] = &inputs[i];
    in_views.push_back(inputs[i].view);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    places[fmt::format("out{}", k)] = &outs[k];
    out_views.push_back(outs[k].view);
  }
  const Declare bind = binder("pointwise", places);
  stage([&] { emit_pointwise(kb_, bind, expr, in_views, out_views); });
}

void GraphProgram::matmul(const Place& a, const Place& b, const Place& out,
                          const PointwiseExpr* epilogue, std::span<const Place> epilogue_inputs,
                          bool softmax_rows, bool log, const RowNorm* norm) {
  std::map<std::string, const Place*> places{{"a", &a}, {"b", &b}, {"out", &out}};
  const RowOp rows = !softmax_rows ? RowOp::none : log ? RowOp::log_softmax : RowOp::softmax;
  MatmulEpilogue ep{epilogue, {}, rows};
  for (size_t k = 0; k < epilogue_inputs.size(); ++k) {
    places[fmt::format("e{}", k + 1)] = &epilogue_inputs[k];
    ep.inputs.push_back(epilogue_inputs[k].view);
  }
  MatmulNorm mn;
  if (norm) {
    mn = {norm->op, norm->prologue, norm->epilogue, {}, norm->rows.view};
    places["norm_rows"] = &norm->rows;
    for (size_t k = 0; k < norm->inputs.size(); ++k) {
      places[fmt::format("n{}", k + 2)] = &norm->inputs[k];
      mn.inputs.push_back(norm->inputs[k].view);
    }
    ep.norm = &mn;
  }
  const Declare bind = binder("matmul", places);
  if (!epilogue && !softmax_rows && !norm)
    return stage([&] { emit_matmul(kb_, bind, a.view, b.view, out.view); });
  if (fused([&] { emit_matmul(kb_, bind, a.view, b.view, out.view, &ep); })) return;
  // Too big to fuse: the product to scratch, the epilogue, the softmax and the norm as
  // stages of their own.
  if (epilogue || softmax_rows) {
    const Place product = temporary(DType::fp32, out.view.sizes);
    matmul(a, b, product);
    Place value = product;
    if (epilogue) {
      value = softmax_rows ? temporary(DType::fp32, out.view.sizes) : out;
      std::vector<Place> inputs{product};
      inputs.insert(inputs.end(), epilogue_inputs.begin(), epilogue_inputs.end());
      pointwise(*epilogue, inputs, {&value, 1});
    }
    if (softmax_rows) softmax(value, out, log);
  } else {
    matmul(a, b, out);
  }
  if (norm) {
    std::vector<int64_t> kept = out.view.sizes;
    kept.back() = 1;
    reduce(norm->op, out, static_cast<int64_t>(kept.size()) - 1, temporary(DType::fp32, kept),
           norm->prologue, norm->epilogue, norm->inputs, &norm->rows);
  }
}

template <class Emit>
bool GraphProgram::fused(Emit&& emit) {
  const size_t before = kb_.instructions();
  try {
    stage(emit);
    return true;
  } catch (const std::invalid_argument&) {
    if (kb_.instructions() != before) throw;  // refused after it began: cannot be undone
    return false;
  }
}

Place GraphProgram::temporary(DType dtype, const std::vector<int64_t>& sizes) {
  const std::string name = fmt::format("unfused{}", temporaries_++);
  View v{dtype, sizes, std::vector<int64_t>(sizes.size())};
  int64_t step = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    v.strides[d] = step;
    step *= sizes[d];
  }
  tensor(name, dtype, std::max<int64_t>(step, 1), isa::TensorKind::scratch);
  return {name, 0, v};
}

void GraphProgram::reduce(ReduceOp op, const Place& in, int64_t dim, const Place& out,
                          const PointwiseExpr* prologue, const PointwiseExpr* epilogue,
                          std::span<const Place> epilogue_inputs, const Place* rows) {
  require(!epilogue == !rows, "reduce", "an epilogue writes rows, and rows need an epilogue");
  std::map<std::string, const Place*> places{{"in", &in}, {"out", &out}};
  RowEpilogue ep{epilogue, {}, rows ? rows->view : View{}};
  if (rows) places["rows"] = rows;
  for (size_t k = 0; k < epilogue_inputs.size(); ++k) {
    places[fmt::format("e{}", k + 2)] = &epilogue_inputs[k];
    ep.inputs.push_back(epilogue_inputs[k].view);
  }
  const Declare bind = binder("reduce", places);
  if (!epilogue)
    return stage([&] { emit_reduce(kb_, bind, op, in.view, dim, out.view, prologue); });
  if (fused([&] { emit_reduce(kb_, bind, op, in.view, dim, out.view, prologue, &ep); })) return;
  // Rows too long to fuse: the reduction, then the epilogue as a stage of its own, reading
  // the row's result broadcast along the reduced dim.
  reduce(op, in, dim, out, prologue);
  Place result = out;
  const auto d =
      static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(in.view.sizes.size()) : dim);
  if (result.view.sizes.size() < in.view.sizes.size()) {
    result.view.sizes.insert(result.view.sizes.begin() + static_cast<std::ptrdiff_t>(d), 1);
    result.view.strides.insert(result.view.strides.begin() + static_cast<std::ptrdiff_t>(d), 0);
  }
  std::vector<Place> inputs{in, result};
  inputs.insert(inputs.end(), epilogue_inputs.begin(), epilogue_inputs.end());
  pointwise(*epilogue, inputs, {rows, 1});
}

namespace {

// The [rows, cols] pattern of a view whose last dim is contiguous and whose rows
// follow one another: every row of the other dims in order.
isa::AccessPattern row_major(std::string_view kernel, const char* operand, isa::AccessPattern ap,
                             const View& v) {
  require(!v.sizes.empty(), kernel, fmt::format("{} is a 0-dim tensor", operand));
  const int64_t cols = v.sizes.back();
  int64_t rows = 1, expect = cols;
  require(v.strides.back() == 1 || cols == 1, kernel,
          fmt::format("{}'s last dim is not contiguous (stride {})", operand, v.strides.back()));
  for (size_t d = v.sizes.size() - 1; d-- > 0;) {
    require(v.sizes[d] == 1 || v.strides[d] == expect, kernel,
            fmt::format("{}'s rows are not one after another (sizes [{}], strides [{}])", operand,
                        fmt::join(v.sizes, ", "), fmt::join(v.strides, ", ")));
    expect *= v.sizes[d];
    rows *= v.sizes[d];
  }
  check_dims(kernel, {{"rows", rows}, {"cols", cols}});
  ap.num_partitions = u32(rows);
  ap.partition_stride = cols;
  ap.num_dims = 1;
  ap.dims[0] = {1, u32(cols)};
  return ap;
}

}  // namespace

void GraphProgram::softmax(const Place& in, const Place& out, bool log) {
  const char* kernel = log ? "log_softmax" : "softmax";
  check_float(kernel, "in", in.view.dtype);
  require(in.view.sizes == out.view.sizes && in.view.dtype == out.view.dtype, kernel,
          "in and out differ in sizes or dtype");
  const isa::AccessPattern x = row_major(kernel, "in", at(kernel, "in", in, false), in.view);
  const isa::AccessPattern y = row_major(kernel, "out", at(kernel, "out", out, true), out.view);
  stage([&] { emit_row_softmax(kb_, kernel, x, y, log); });
}

void GraphProgram::attention(const Place& q, const Place& k, const Place& v, const Place* mask,
                             const Place& out, const Place& lse, float scale, bool causal) {
  std::map<std::string, const Place*> places{
      {"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}};
  if (mask) places["bias"] = mask;
  const Declare bind = binder("attention", places);
  const AttentionOperands ops{q.view,   k.view,   v.view,
                              out.view, lse.view, mask ? &mask->view : nullptr};
  stage([&] { emit_attention(kb_, bind, ops, scale, causal); });
}

void GraphProgram::attention_backward(const std::map<std::string, Place>& places, float scale,
                                      bool causal) {
  constexpr const char* kernel = "attention_backward";
  std::map<std::string, const Place*> bound;
  for (const auto& [name, place] : places) bound[name] = &place;
  const auto view = [&](const char* name) -> const View& {
    const auto it = places.find(name);
    require(it != places.end(), kernel, fmt::format("no place for {}", name));
    return it->second.view;
  };
  const auto mask = places.find("bias");
  const AttentionGradOperands ops{
      view("q"),    view("k"),
      view("v"),    view("out"),
      view("dout"), view("lse"),
      view("dq"),   view("dk"),
      view("dv"),   mask != places.end() ? &mask->second.view : nullptr};
  const Declare bind = binder(kernel, bound);
  stage([&] { emit_attention_backward(kb_, bind, ops, scale, causal); });
}

void GraphProgram::gather(const Place& table, const Place& index, const Place& out) {
  indirect_rows("gather_rows", table, index, out, false);
}

void GraphProgram::topk(const Place& in, int64_t dim, int64_t k, bool largest, const Place& values,
                        const Place& indices) {
  const std::map<std::string, const Place*> places{
      {"in", &in}, {"values", &values}, {"indices", &indices}};
  const Declare bind = binder("topk", places);
  stage([&] { emit_topk(kb_, bind, in.view, dim, k, largest, values.view, indices.view); });
}

void GraphProgram::cumsum(const Place& in, int64_t dim, const Place& out) {
  const std::map<std::string, const Place*> places{{"in", &in}, {"out", &out}};
  const Declare bind = binder("cumsum", places);
  stage([&] { emit_cumsum(kb_, bind, in.view, dim, out.view); });
}

void GraphProgram::scatter(const Place& src, const Place& index, const Place& out) {
  indirect_rows("scatter_rows", out, index, src, true);
}

void GraphProgram::indirect_rows(const char* kernel, const Place& table, const Place& index,
                                 const Place& packed, bool scatter) {
  const char* table_name = scatter ? "out" : "table";
  const char* packed_name = scatter ? "src" : "out";
  const View& i = index.view;
  require(i.dtype == isa::DType::int32 && i.sizes.size() == 1 && i.strides[0] >= 1, kernel,
          "index is not a 1-dim int32 view");
  require(table.view.dtype == packed.view.dtype, kernel,
          fmt::format("{} and {} differ in dtype", table_name, packed_name));
  const int64_t count = i.sizes[0], stride = i.strides[0];
  const isa::AccessPattern rows =
      row_major(kernel, table_name, at(kernel, table_name, table, scatter), table.view);
  const isa::AccessPattern moved =
      row_major(kernel, packed_name, at(kernel, packed_name, packed, !scatter), packed.view);
  require(moved.num_partitions == count && moved.partition_stride == rows.partition_stride, kernel,
          fmt::format("{} has {} rows of {}, not {} of {}", packed_name, moved.num_partitions,
                      moved.partition_stride, count, rows.partition_stride));
  const Place words{index.tensor, index.offset, View{i.dtype, {(count - 1) * stride + 1}, {1}}};
  const std::map<std::string, const Place*> places{
      {table_name, &table}, {"index", &words}, {packed_name, &packed}};
  const Declare bind = binder(kernel, places);
  stage([&] {
    emit_indirect_rows(kb_, bind, kernel, table.view.dtype, rows.num_partitions,
                       rows.partition_stride, count, stride, scatter);
  });
}

void GraphProgram::grouped_matmul(const Place& a, const Place& b, const Place& offs,
                                  const Place& out) {
  const std::map<std::string, const Place*> places{
      {"a", &a}, {"b", &b}, {"offs", &offs}, {"out", &out}};
  const Declare bind = binder("grouped_matmul", places);
  stage([&] { emit_grouped_matmul(kb_, bind, a.view, b.view, offs.view, out.view); });
}

isa::Program GraphProgram::finish() {
  require(stages_ > 0, "graph", "a graph program needs at least one stage");
  return kb_.finish();
}

}  // namespace neuronsim::kernels
