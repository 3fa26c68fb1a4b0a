// The compiled graphs of torch.compile's "neuron" backend (neuronsim/compiler): a plan
// (JSON, written by the compiler's lowering) becomes one GraphProgram, written as a NEFF;
// a NEFF is loaded once per device and run with the graph's tensors bound to it.
//
// The plan:
//   {"tensors": [{"name", "dtype", "elems", "kind": "input" | "output" | "scratch"}],
//    "stages": [{"kind": "pointwise", "steps": [...], "outputs": [reg], "inputs": [place],
//                "outs": [place]},
//               {"kind": "matmul", "a": place, "b": place, "out": place,
//                "epilogue": {"steps": [...], "outputs": [reg], "inputs": [place]},
//                "rows": "softmax" | "log_softmax",
//                "norm": {"op", "prologue": {...}, "steps": [...], "outputs": [reg],
//                         "inputs": [place], "rows": place}}
//                (optional: out = epilogue(a @ b, inputs...), load(0) being the product,
//                then the softmax of each row; then a norm of the stored value, which
//                writes norm's rows = f(value, the row's reduction, inputs...))
//               {"kind": "reduce", "op": "sum" | "mean" | "max" | "min", "in": place,
//                "dim": d, "out": place, "prologue": {"steps": [...], "outputs": [reg]},
//                "epilogue": {"steps": [...], "outputs": [reg], "inputs": [place],
//                             "rows": place}}
//                (optional: the values reduced are the prologue's of in's, load(0) being in;
//                the epilogue writes rows = f(in, the row's result, inputs...))
//               {"kind": "softmax", "log": bool, "in": place, "out": place},
//               {"kind": "attention", "q", "k", "v": place, "mask": place (optional),
//                "out", "lse": place, "scale": float, "causal": bool},
//               {"kind": "attention_backward", "q", "k", "v", "out", "dout", "lse", "dq",
//                "dk", "dv": place, "mask": place (optional), "scale", "causal"},
//               {"kind": "gather", "table", "index", "out": place} (index: int32, the
//                low words of int64 indices at stride 2),
//               {"kind": "scatter", "src", "index", "out": place} (out's rows named by
//                index = src's rows; index as gather's),
//               {"kind": "topk", "in": place, "dim", "k", "largest": bool, "values",
//                "indices": place} (indices int32, as gather's index),
//               {"kind": "cumsum", "in": place, "dim", "out": place},
//               {"kind": "grouped_matmul", "a", "b", "offs", "out": place} (offs int32)]}
//   place: {"tensor", "offset", "sizes", "strides"} (elements; the tensor's dtype)
//   step:  {"op": "load", "input"} | {"op": "constant", "imm"} |
//          {"op": "activation", "func", "args": [x], "imm": scale} |
//          {"op": "alu", "alu", "args": [a, b]} |
//          {"op": "alu_imm", "alu", "args": [a], "imm", "reverse"} |
//          {"op": "select", "args": [p, t, f]} | {"op": "position", "weights"}
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/extension.h>
#include <nlohmann/json.hpp>

#include "compiler/graph.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/kernels/graph.h"
#include "runtime/backend.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {
namespace {

using nlohmann::json;
using Op = kernels::PointwiseExpr::Op;

template <class T>
T parse(std::optional<T> v, const std::string& what, const std::string& name) {
  if (!v) throw std::invalid_argument(fmt::format("plan: unknown {} '{}'", what, name));
  return *v;
}

// A number of the plan: JSON has no infinities or NaN, so the plan writes those as the
// strings "inf", "-inf" and "nan" (a causal mask's -inf, for instance).
float number(const json& v) {
  if (!v.is_string()) return v.get<float>();
  const std::string s = v;
  if (s == "inf") return std::numeric_limits<float>::infinity();
  if (s == "-inf") return -std::numeric_limits<float>::infinity();
  if (s == "nan") return std::numeric_limits<float>::quiet_NaN();
  throw std::invalid_argument(fmt::format("plan: '{}' is not a number", s));
}

kernels::PointwiseExpr expression(const json& stage) {
  kernels::PointwiseExpr e;
  for (const json& s : stage.at("steps")) {
    const std::string op = s.at("op");
    auto arg = [&](size_t i) { return s.at("args").at(i).get<int32_t>(); };
    if (op == "load") {
      e.load(s.at("input"));
    } else if (op == "constant") {
      e.constant(number(s.at("imm")));
    } else if (op == "activation") {
      const std::string f = s.at("func");
      e.activation(parse(isa::parse_act_func(f), "activation", f), arg(0), number(s.at("imm")));
    } else if (op == "alu") {
      const std::string a = s.at("alu");
      e.alu(parse(isa::parse_alu_op(a), "ALU op", a), arg(0), arg(1));
    } else if (op == "alu_imm") {
      const std::string a = s.at("alu");
      e.alu_imm(parse(isa::parse_alu_op(a), "ALU op", a), arg(0), number(s.at("imm")),
                s.value("reverse", false));
    } else if (op == "select") {
      e.select(arg(0), arg(1), arg(2));
    } else if (op == "position") {
      e.position(s.at("weights").get<std::vector<int64_t>>());
    } else {
      throw std::invalid_argument(fmt::format("plan: unknown pointwise step '{}'", op));
    }
  }
  if (stage.contains("outputs")) e.set_outputs(stage.at("outputs").get<std::vector<int32_t>>());
  return e;
}

class PlanReader {
 public:
  explicit PlanReader(const json& plan) {
    for (const json& t : plan.at("tensors")) {
      const std::string name = t.at("name"), dtype = t.at("dtype"), kind = t.at("kind");
      dtypes_[name] = parse(isa::parse_dtype(dtype), "dtype", dtype);
    }
  }

  kernels::Place place(const json& p) const {
    kernels::Place out;
    out.tensor = p.at("tensor");
    const auto it = dtypes_.find(out.tensor);
    if (it == dtypes_.end())
      throw std::invalid_argument(fmt::format("plan: no tensor '{}'", out.tensor));
    out.offset = p.value("offset", int64_t{0});
    out.view = {it->second, p.at("sizes").get<std::vector<int64_t>>(),
                p.at("strides").get<std::vector<int64_t>>()};
    return out;
  }
  std::vector<kernels::Place> places(const json& list) const {
    std::vector<kernels::Place> out;
    for (const json& p : list) out.push_back(place(p));
    return out;
  }

 private:
  std::unordered_map<std::string, isa::DType> dtypes_;
};

isa::TensorKind tensor_kind(const std::string& kind) {
  if (kind == "input") return isa::TensorKind::input;
  if (kind == "output") return isa::TensorKind::output;
  if (kind == "scratch") return isa::TensorKind::scratch;
  throw std::invalid_argument(fmt::format("plan: unknown tensor kind '{}'", kind));
}

kernels::ReduceOp reduce_op(const std::string& op) {
  static const std::unordered_map<std::string, kernels::ReduceOp> ops{
      {"sum", kernels::ReduceOp::sum},
      {"mean", kernels::ReduceOp::mean},
      {"max", kernels::ReduceOp::max},
      {"min", kernels::ReduceOp::min}};
  const auto it = ops.find(op);
  if (it == ops.end()) throw std::invalid_argument(fmt::format("plan: unknown reduction '{}'", op));
  return it->second;
}

isa::Program build_graph(const std::string& plan_text) {
  const json plan = json::parse(plan_text);
  const PlanReader reader(plan);
  kernels::GraphProgram g(Backend::get().target());
  for (const json& t : plan.at("tensors"))
    g.tensor(t.at("name"), *isa::parse_dtype(t.at("dtype").get<std::string>()), t.at("elems"),
             tensor_kind(t.at("kind")));
  for (const json& s : plan.at("stages")) {
    const std::string kind = s.at("kind");
    if (kind == "pointwise") {
      g.pointwise(expression(s), reader.places(s.at("inputs")), reader.places(s.at("outs")));
    } else if (kind == "matmul") {
      std::optional<kernels::PointwiseExpr> expr;
      std::vector<kernels::Place> inputs;
      if (s.contains("epilogue")) {
        expr = expression(s.at("epilogue"));
        inputs = reader.places(s.at("epilogue").at("inputs"));
      }
      const std::string rows = s.value("rows", "");
      if (!rows.empty() && rows != "softmax" && rows != "log_softmax")
        throw std::invalid_argument(fmt::format("plan: unknown row operation '{}'", rows));
      std::optional<kernels::PointwiseExpr> norm_prologue, norm_epilogue;
      std::optional<kernels::RowNorm> norm;
      if (s.contains("norm")) {
        const json& n = s.at("norm");
        if (n.contains("prologue")) norm_prologue = expression(n.at("prologue"));
        norm_epilogue = expression(n);
        norm = kernels::RowNorm{reduce_op(n.at("op")), norm_prologue ? &*norm_prologue : nullptr,
                                &*norm_epilogue, reader.places(n.at("inputs")),
                                reader.place(n.at("rows"))};
      }
      g.matmul(reader.place(s.at("a")), reader.place(s.at("b")), reader.place(s.at("out")),
               expr ? &*expr : nullptr, inputs, !rows.empty(), rows == "log_softmax",
               norm ? &*norm : nullptr);
    } else if (kind == "reduce") {
      std::optional<kernels::PointwiseExpr> prologue, epilogue;
      std::vector<kernels::Place> inputs;
      std::optional<kernels::Place> rows;
      if (s.contains("prologue")) prologue = expression(s.at("prologue"));
      if (s.contains("epilogue")) {
        const json& ep = s.at("epilogue");
        epilogue = expression(ep);
        inputs = reader.places(ep.at("inputs"));
        rows = reader.place(ep.at("rows"));
      }
      g.reduce(reduce_op(s.at("op")), reader.place(s.at("in")), s.at("dim"),
               reader.place(s.at("out")), prologue ? &*prologue : nullptr,
               epilogue ? &*epilogue : nullptr, inputs, rows ? &*rows : nullptr);
    } else if (kind == "softmax") {
      g.softmax(reader.place(s.at("in")), reader.place(s.at("out")), s.value("log", false));
    } else if (kind == "attention") {
      std::optional<kernels::Place> mask;
      if (s.contains("mask")) mask = reader.place(s.at("mask"));
      g.attention(reader.place(s.at("q")), reader.place(s.at("k")), reader.place(s.at("v")),
                  mask ? &*mask : nullptr, reader.place(s.at("out")), reader.place(s.at("lse")),
                  s.at("scale").get<float>(), s.at("causal").get<bool>());
    } else if (kind == "attention_backward") {
      std::map<std::string, kernels::Place> places;
      for (const char* name : {"q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv", "mask"})
        if (s.contains(name))
          places[name == std::string("mask") ? "bias" : name] = reader.place(s.at(name));
      g.attention_backward(places, s.at("scale").get<float>(), s.at("causal").get<bool>());
    } else if (kind == "gather") {
      g.gather(reader.place(s.at("table")), reader.place(s.at("index")), reader.place(s.at("out")));
    } else if (kind == "scatter") {
      g.scatter(reader.place(s.at("src")), reader.place(s.at("index")), reader.place(s.at("out")));
    } else if (kind == "topk") {
      g.topk(reader.place(s.at("in")), s.at("dim"), s.at("k"), s.at("largest"),
             reader.place(s.at("values")), reader.place(s.at("indices")));
    } else if (kind == "cumsum") {
      g.cumsum(reader.place(s.at("in")), s.at("dim"), reader.place(s.at("out")));
    } else if (kind == "grouped_matmul") {
      g.grouped_matmul(reader.place(s.at("a")), reader.place(s.at("b")), reader.place(s.at("offs")),
                       reader.place(s.at("out")));
    } else {
      throw std::invalid_argument(fmt::format("plan: unknown stage '{}'", kind));
    }
  }
  return g.finish();
}

}  // namespace

void compile_graph(const std::string& plan, const std::string& name, const std::string& path) {
  isa::Program program;
  try {
    program = build_graph(plan);
  } catch (const json::exception& e) {
    throw std::invalid_argument(fmt::format("{}: the plan is not valid: {}", name, e.what()));
  }
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path());
  // Written beside and renamed, so that a concurrent reader never sees half a NEFF.
  const std::filesystem::path partial = target.string() + fmt::format(".{}.partial", ::getpid());
  isa::neff::write_neff_file(isa::to_neff(program, target.filename().string()), partial);
  std::filesystem::rename(partial, target);
}

void run_graph(const std::string& name, const std::string& path,
               const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  TORCH_CHECK(!tensors.empty(), name, ": a compiled graph runs with its tensors");
  const int device = tensors.front().second.device().index();
  Backend& backend = Backend::get();
  const sim::ProgramRef program = backend.program(device, "graph:" + path, [&] {
    return isa::from_neff(isa::neff::read_neff_file(path), path);
  });
  TORCH_CHECK(program, name, ": ", path, " does not hold a program this device runs");
  backend.run_kernel(name, program, bindings_of(tensors));
}

void register_graph_functions(pybind11::module_& m) {
  m.def("compile_graph", &compile_graph, pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Builds the program of a graph plan (JSON) and writes it as a NEFF at path.");
  m.def("run_graph", &run_graph, pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Runs the NEFF at path (loaded once per device) with the named tensors bound.");
}

}  // namespace neuronsim::pytorch
