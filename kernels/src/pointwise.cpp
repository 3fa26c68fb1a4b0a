// pointwise: a PointwiseExpr evaluated over strided views; fill: a memset.
//
// The views (out and every input broadcast to out's sizes) are put in out's
// memory order and coalesced together, then cut into tiles by plan_tiles: every
// tile is one DMA per operand whatever the strides, because the HBM side of a
// tile is just an access pattern with the operand's strides. An input broadcast
// along the tile's free dims (stride 0) moves each element once and is read on chip
// through a pattern with stride 0 there, instead of one descriptor per repeat.
// Tiles of different indices never touch the same output element, so stores need
// no order among them.
//
// The expression is compiled once into a schedule that every tile repeats:
//   * loads of the same input are shared, steps the result does not need are
//     dropped, and an alu_imm whose only user is another alu_imm becomes the first
//     op of that user's two-op tensor_scalar;
//   * every value lives in a register slot, an FP32-sized [128, F] SBUF tile,
//     reused once its last reader has run (never by that reader itself: a 16-bit
//     load read by an FP32 write in place would be overwritten before it is read);
//   * constants get one tile each, set once before the loop;
//   * positions are iota instructions on GpSimd, whose index pattern is the tile's
//     walk of a view with the position's weights as strides;
//   * random values are rng instructions on the tile's engine into a uint16 view of
//     the slot, after both engines' generators took their state from "seeds".
// Each buffer (2-3, for double buffering as in elementwise.cpp) has its own set of
// slots, so tile i+1's loads and tile i's compute overlap, and tiles on VectorE
// and GpSimd (alternating) run side by side. Activations run on ScalarE. Loads are
// triggered by SP, and by ACT too when no step needs ScalarE; the engine of the
// last step stores when it can trigger DMA (ACT, POOL), else SP.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "eager_common.h"
#include "stages.h"

namespace neuronsim::kernels {

using Reg = PointwiseExpr::Reg;
using Op = PointwiseExpr::Op;

Reg PointwiseExpr::push(Step step) {
  steps_.push_back(std::move(step));
  return static_cast<Reg>(steps_.size() - 1);
}

Reg PointwiseExpr::load(int32_t input) {
  Step s;
  s.input = input;
  return push(std::move(s));
}
Reg PointwiseExpr::constant(float value) {
  Step s;
  s.op = Op::constant;
  s.imm = value;
  return push(std::move(s));
}
Reg PointwiseExpr::activation(isa::ActFunc func, Reg x, float scale) {
  Step s;
  s.op = Op::activation;
  s.args = {x};
  s.func = func;
  s.imm = scale;
  return push(std::move(s));
}
Reg PointwiseExpr::alu(isa::AluOp op, Reg a, Reg b) {
  Step s;
  s.op = Op::alu;
  s.args = {a, b};
  s.alu = op;
  return push(std::move(s));
}
Reg PointwiseExpr::alu_imm(isa::AluOp op, Reg a, float imm, bool reverse) {
  // An instruction's immediate is never NaN (docs/isa.md): a NaN operand is a constant.
  if (std::isnan(imm)) {
    const Reg c = constant(imm);
    return reverse ? alu(op, c, a) : alu(op, a, c);
  }
  Step s;
  s.op = Op::alu_imm;
  s.args = {a};
  s.alu = op;
  s.imm = imm;
  s.reverse = reverse;
  return push(std::move(s));
}
Reg PointwiseExpr::alu_scalar(isa::AluOp op, Reg a, int32_t input, bool reverse) {
  Step s;
  s.op = Op::alu_imm;
  s.args = {a};
  s.alu = op;
  s.reverse = reverse;
  s.scalar = input;
  return push(std::move(s));
}

Reg PointwiseExpr::select(Reg predicate, Reg on_true, Reg on_false) {
  Step s;
  s.op = Op::select;
  s.args = {predicate, on_true, on_false};
  return push(std::move(s));
}

Reg PointwiseExpr::position(std::vector<int64_t> weights) {
  Step s;
  s.op = Op::position;
  s.weights = std::move(weights);
  return push(std::move(s));
}

Reg PointwiseExpr::random() {
  Step s;
  s.op = Op::random;
  return push(std::move(s));
}

bool PointwiseExpr::draws_random() const {
  return std::ranges::any_of(steps_, [](const Step& s) { return s.op == Op::random; });
}

std::vector<Reg> PointwiseExpr::outputs() const {
  if (!outputs_.empty()) return outputs_;
  return {static_cast<Reg>(steps_.size()) - 1};
}

PointwiseExpr PointwiseExpr::unary(isa::ActFunc func, float scale) {
  PointwiseExpr e;
  e.activation(func, e.load(0), scale);
  return e;
}
PointwiseExpr PointwiseExpr::binary(isa::AluOp op) {
  PointwiseExpr e;
  e.alu(op, e.load(0), e.load(1));
  return e;
}
PointwiseExpr PointwiseExpr::scalar(isa::AluOp op, float imm, bool reverse) {
  PointwiseExpr e;
  e.alu_imm(op, e.load(0), imm, reverse);
  return e;
}
PointwiseExpr PointwiseExpr::copy() {
  PointwiseExpr e;
  e.load(0);
  return e;
}

namespace {

using namespace detail;
using isa::Engine;

constexpr uint32_t kChunk = 2048;  // elements per partition and tile, as in elementwise.cpp

size_t arity(Op op) {
  switch (op) {
    case Op::load:
    case Op::constant:
    case Op::position:
    case Op::random:
      return 0;
    case Op::activation:
    case Op::alu_imm:
      return 1;
    case Op::alu:
      return 2;
    case Op::select:
      return 3;
  }
  return 0;
}

// The per-tile schedule of an expression (see the top of the file).
struct Schedule {
  std::vector<int> rep;        // per step: the step whose value it is (shared loads)
  std::vector<int> slot;       // per step: register slot, -1 if it has none
  std::vector<int> constant;   // per step: constant tile, -1 if none
  std::vector<int> fused;      // per step: the alu_imm absorbed as op0, -1 if none
  std::vector<int> order;      // steps emitted as instructions, in order
  std::vector<int> loads;      // load steps, one per input read
  std::vector<int> results;    // per output: the step stored
  std::vector<bool> direct;    // per step: written in its output's dtype (see eager.h)
  std::vector<int> positions;  // per step: index among the position views, -1 if none
  int slots = 0, constants = 0;
  bool uses_act = false;

  bool is_result(int s) const { return std::ranges::find(results, s) != results.end(); }
};

void check_expr(std::string_view kernel, const PointwiseExpr& expr, size_t inputs, size_t outputs,
                size_t rank) {
  const auto& steps = expr.steps();
  require(!steps.empty(), kernel, "the expression has no steps");
  const std::vector<Reg> results = expr.outputs();
  require(
      results.size() == outputs, kernel,
      fmt::format("the expression has {} outputs for {} output views", results.size(), outputs));
  for (Reg r : results)
    require(r >= 0 && static_cast<size_t>(r) < steps.size(), kernel,
            fmt::format("output register {} is not a step", r));
  for (size_t s = 0; s < steps.size(); ++s) {
    const PointwiseExpr::Step& st = steps[s];
    require(st.args.size() == arity(st.op), kernel,
            fmt::format("step {} takes {} registers, not {}", s, arity(st.op), st.args.size()));
    for (Reg a : st.args)
      require(a >= 0 && static_cast<size_t>(a) < s, kernel,
              fmt::format("step {} reads register {}, which is not an earlier step", s, a));
    require(st.op != Op::load || (st.input >= 0 && static_cast<size_t>(st.input) < inputs), kernel,
            fmt::format("step {} loads input {} of {}", s, st.input, inputs));
    require(st.scalar < 0 || (st.op == Op::alu_imm && static_cast<size_t>(st.scalar) < inputs),
            kernel,
            fmt::format("step {} takes its scalar from input {} of {}", s, st.scalar, inputs));
    require(st.op != Op::position ||
                (st.weights.size() == rank &&
                 std::ranges::all_of(st.weights, [](int64_t w) { return w >= 0; })),
            kernel,
            fmt::format("step {} is a position with {} weights for {} output dims (each >= 0)", s,
                        st.weights.size(), rank));
  }
}

// Which steps the result needs, after sharing loads; and how often each is read.
void mark_live(const std::vector<PointwiseExpr::Step>& steps, const std::vector<Reg>& expr_outputs,
               Schedule& sc, std::vector<bool>& live, std::vector<int>& uses) {
  std::vector<int> first_load;
  for (size_t s = 0; s < steps.size(); ++s) {
    sc.rep.push_back(static_cast<int>(s));
    if (steps[s].op != Op::load) continue;
    const size_t in = static_cast<size_t>(steps[s].input);
    if (first_load.size() <= in) first_load.resize(in + 1, -1);
    if (first_load[in] < 0) first_load[in] = static_cast<int>(s);
    sc.rep[s] = first_load[in];
  }
  live.assign(steps.size(), false);
  uses.assign(steps.size(), 0);
  for (Reg r : expr_outputs) {
    sc.results.push_back(sc.rep[static_cast<size_t>(r)]);
    live[static_cast<size_t>(sc.results.back())] = true;
  }
  for (size_t s = steps.size(); s-- > 0;) {
    if (!live[s] || sc.rep[s] != static_cast<int>(s)) continue;
    for (Reg a : steps[s].args) {
      live[static_cast<size_t>(sc.rep[static_cast<size_t>(a)])] = true;
      ++uses[static_cast<size_t>(sc.rep[static_cast<size_t>(a)])];
    }
  }
}

// The registers step s reads when it is emitted (a fused step reads its op0's input).
std::vector<int> reads(const std::vector<PointwiseExpr::Step>& steps, const Schedule& sc, int s) {
  const int from = sc.fused[static_cast<size_t>(s)] >= 0 ? sc.fused[static_cast<size_t>(s)] : s;
  std::vector<int> regs;
  for (Reg a : steps[static_cast<size_t>(from)].args)
    regs.push_back(sc.rep[static_cast<size_t>(a)]);
  return regs;
}

// Register slots by a linear scan: loads are live from the start of the tile,
// a computed value from its step; a slot frees after the value's last reader.
void allocate_slots(const std::vector<PointwiseExpr::Step>& steps, Schedule& sc) {
  const size_t n = steps.size();
  std::vector<int> last_use(n, -1);
  for (int s : sc.order)
    for (int r : reads(steps, sc, s)) last_use[static_cast<size_t>(r)] = s;
  for (int r : sc.results) last_use[static_cast<size_t>(r)] = static_cast<int>(n);  // the stores
  sc.slot.assign(n, -1);
  std::vector<int> free_slots;
  auto take = [&](int s) {
    if (free_slots.empty()) {
      sc.slot[static_cast<size_t>(s)] = sc.slots++;
    } else {
      sc.slot[static_cast<size_t>(s)] = free_slots.back();
      free_slots.pop_back();
    }
  };
  for (int s : sc.loads) take(s);
  for (int s : sc.order) {
    take(s);
    for (int r : reads(steps, sc, s))
      if (last_use[static_cast<size_t>(r)] == s && sc.slot[static_cast<size_t>(r)] >= 0) {
        free_slots.push_back(sc.slot[static_cast<size_t>(r)]);
        last_use[static_cast<size_t>(r)] = -1;  // a value read twice by s frees once
      }
  }
}

Schedule schedule(std::string_view kernel, const PointwiseExpr& expr, size_t inputs, size_t outputs,
                  size_t rank) {
  check_expr(kernel, expr, inputs, outputs, rank);
  const auto& steps = expr.steps();
  Schedule sc;
  std::vector<bool> live;
  std::vector<int> uses;
  mark_live(steps, expr.outputs(), sc, live, uses);
  sc.fused.assign(steps.size(), -1);
  sc.constant.assign(steps.size(), -1);
  sc.positions.assign(steps.size(), -1);
  sc.direct.assign(steps.size(), false);
  int positions = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!live[s] || sc.rep[s] != static_cast<int>(s)) continue;
    const PointwiseExpr::Step& st = steps[s];
    if (st.op == Op::load) sc.loads.push_back(static_cast<int>(s));
    if (st.op == Op::constant) sc.constant[s] = sc.constants++;
    if (st.op == Op::position) sc.positions[s] = positions++;
    sc.direct[s] = uses[s] == 0 && std::ranges::count(sc.results, static_cast<int>(s)) == 1 &&
                   st.op != Op::position && st.op != Op::random;
    if (st.op == Op::load || st.op == Op::constant) continue;
    sc.uses_act |= st.op == Op::activation;
    if (st.op == Op::alu_imm) {
      const int a = sc.rep[static_cast<size_t>(st.args[0])];
      const auto au = static_cast<size_t>(a);
      if (steps[au].op == Op::alu_imm && uses[au] == 1 && sc.fused[au] < 0 && !sc.is_result(a)) {
        sc.fused[s] = a;
        std::erase(sc.order, a);  // emitted as op0 of s
      }
    }
    sc.order.push_back(static_cast<int>(s));
  }
  allocate_slots(steps, sc);
  return sc;
}

// tensor_scalar with both reverse flags (the builder's shorthand has none). `scalar`
// gives the [P, 1] tile of a step's scalar input (alu_scalar).
template <class Scalar>
void scalar_op(KernelBuilder& kb, Engine engine, const AccessPattern& dst, const AccessPattern& src,
               const PointwiseExpr::Step* op0, const PointwiseExpr::Step& op1, Scalar&& scalar) {
  isa::Instruction in;
  in.opcode = isa::Opcode::tensor_scalar;
  in.engine = engine;
  in.operands = {{isa::Role::dst, dst}, {isa::Role::src, src}};
  const PointwiseExpr::Step& first = op0 ? *op0 : op1;
  in.alu0 = first.alu;
  in.imm0 = first.imm;
  in.flags |= first.reverse ? isa::kReverse0 : 0;
  if (first.scalar >= 0) in.operands.push_back({isa::Role::operand0, scalar(first.scalar)});
  if (op0) {
    in.alu1 = op1.alu;
    in.imm1 = op1.imm;
    in.flags |= op1.reverse ? isa::kReverse1 : 0;
    if (op1.scalar >= 0) in.operands.push_back({isa::Role::operand1, scalar(op1.scalar)});
  }
  kb.emit(std::move(in));
}

class PointwiseKernel {
 public:
  // Output k is named out_names[k]; views_ holds the outputs, then the inputs, then
  // one view per position step (out's sizes, the weights as strides).
  PointwiseKernel(std::string_view kernel, KernelBuilder& kb, const Declare& declare,
                  const PointwiseExpr& expr, std::span<const View> inputs,
                  std::span<const View> outs, const std::vector<std::string>& out_names)
      : kernel_(kernel), kb_(kb), expr_(expr), num_outs_(outs.size()) {
    require(!outs.empty(), kernel, "no output view");
    const std::vector<int64_t>& sizes = outs[0].sizes;
    std::vector<View> views;
    for (size_t k = 0; k < outs.size(); ++k) {
      check_view(kernel, out_names[k].c_str(), outs[k]);
      check_no_self_overlap(kernel, out_names[k].c_str(), outs[k]);
      require(outs[k].sizes == sizes, kernel,
              fmt::format("{} has sizes [{}], not [{}] as {}", out_names[k],
                          fmt::join(outs[k].sizes, ", "), fmt::join(sizes, ", "), out_names[0]));
      views.push_back(outs[k]);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string name = fmt::format("in{}", i);
      check_view(kernel, name.c_str(), inputs[i]);
      views.push_back(broadcast_to(kernel, name.c_str(), inputs[i], sizes));
    }
    sc_ = schedule(kernel, expr, inputs.size(), outs.size(), sizes.size());
    for (size_t s = 0; s < expr.steps().size(); ++s)
      if (sc_.positions[s] >= 0) {
        View pattern{DType::int32, sizes, expr.steps()[s].weights};
        check_view(kernel, "position", pattern);
        views.push_back(std::move(pattern));
      }
    views_ = coalesce(order_dims(std::move(views), 0));
    for (size_t i = 0; i < inputs.size(); ++i)
      in_.push_back(declare(kb_, fmt::format("in{}", i), inputs[i], false));
    for (size_t k = 0; k < outs.size(); ++k)
      out_.push_back(declare(kb_, out_names[k], outs[k], true));
    if (expr.draws_random()) {
      require(kb_.target().core_version >= 3, kernel,
              fmt::format("random numbers need NeuronCore-v3 or later to set the generators' "
                          "state; {} is v{}",
                          kb_.target().name, kb_.target().core_version));
      seeds_ = kb_.input("seeds", DType::uint32, {kPartitions, PointwiseExpr::kSeedWords});
    }
    allocate();
  }

  void build() {
    if (seeds_) seed_generators();
    for (const auto& [input, tile] : scalars_) {  // each scalar input once, on every partition
      AccessPattern one = in_[static_cast<size_t>(input)];
      one.num_partitions = kPartitions;
      one.partition_stride = 0;
      one.num_dims = 1;
      one.dims[0] = {1, 1};
      kb_.dma_copy(tile, one, Engine::SP);
    }
    for (size_t s = 0; s < expr_.steps().size(); ++s)
      if (sc_.constant[s] >= 0)
        emit_memset(kb_, Engine::DVE, constants_[static_cast<size_t>(sc_.constant[s])],
                    expr_.steps()[s].imm);
    pipeline(
        static_cast<uint32_t>(plan_.tiles.size()), nbuf_ - 1, [&](uint32_t i) { load(i); },
        [&](uint32_t i) { compute(i); });
  }

 private:
  const PointwiseExpr::Step& step(int s) const { return expr_.steps()[static_cast<size_t>(s)]; }
  const View& input_view(int32_t input) const {
    return views_[num_outs_ + static_cast<size_t>(input)];
  }
  size_t position_view(int s) const {
    return num_outs_ + in_.size() + static_cast<size_t>(sc_.positions[static_cast<size_t>(s)]);
  }

  // Per element and partition: 4 bytes per slot and buffer, 4 per constant. Three
  // buffers while they leave tiles of a quarter chunk or more, else two.
  void allocate() {
    for (const PointwiseExpr::Step& st : expr_.steps())
      if (st.scalar >= 0 && !scalars_.contains(st.scalar)) {
        require(input_view(st.scalar).numel() == 1 ||
                    std::ranges::all_of(input_view(st.scalar).strides,
                                        [](int64_t s) { return s == 0; }),
                kernel_,
                fmt::format("in{} is read as a scalar but has more than one element", st.scalar));
        scalars_[st.scalar] = sbuf(kb_, kernel_, DType::fp32, kPartitions, 1);
      }
    const uint64_t capacity = kb_.target().sbuf_partition_bytes - 4 * scalars_.size() -
                              (seeds_ ? 4 * PointwiseExpr::kSeedWords : 0);
    auto free_for = [&](uint32_t nbuf) {
      const uint64_t per_elem = 4 * (uint64_t{nbuf} * u32(sc_.slots) + u32(sc_.constants));
      return static_cast<uint32_t>(std::min<uint64_t>(kChunk, capacity / per_elem / 16 * 16));
    };
    nbuf_ = free_for(3) >= kChunk / 4 ? 3 : 2;
    require(free_for(nbuf_) >= 16, kernel_,
            fmt::format("the expression needs {} registers; {} SBUF holds too few tiles of them",
                        sc_.slots, kb_.target().name));
    plan_ = plan_tiles(kernel_, views_[0].sizes, free_for(nbuf_));
    const uint32_t free = plan_.max_free();
    for (uint32_t b = 0; b < nbuf_; ++b)
      for (int r = 0; r < sc_.slots; ++r)
        slots_.push_back(sbuf(kb_, kernel_, DType::fp32, kPartitions, free));
    for (size_t s = 0; s < expr_.steps().size(); ++s)
      if (sc_.constant[s] >= 0)
        constants_.push_back(sbuf(kb_, kernel_, dtype_of(static_cast<int>(s)), kPartitions, free));
  }

  // The dtype a value is kept in: its input's for loads, its output's for a result
  // written directly, else FP32.
  DType dtype_of(int s) const {
    if (step(s).op == Op::load) return input_view(step(s).input).dtype;
    if (step(s).op == Op::random) return DType::uint16;  // rng writes integers
    if (sc_.direct[static_cast<size_t>(s)])
      return views_[static_cast<size_t>(std::ranges::find(sc_.results, s) - sc_.results.begin())]
          .dtype;
    return DType::fp32;
  }

  AccessPattern value(int s, uint32_t i) const {
    const TilePlan::Tile& t = plan_.tiles[i];
    const auto su = static_cast<size_t>(s);
    const AccessPattern& tile = sc_.constant[su] >= 0
                                    ? constants_[static_cast<size_t>(sc_.constant[su])]
                                    : slots_[(i % nbuf_) * u32(sc_.slots) + u32(sc_.slot[su])];
    if (repeats(s)) return repeated(tile, s, i);
    return on_chip(tile, t.parts, plan_.free_elems(t),
                   sc_.constant[su] >= 0 ? tile.dtype : dtype_of(s));
  }

  // A load whose view repeats elements along the tile's free dims (stride 0: RMS norm's
  // [rows, 1] scale broadcast along each row) moves each element once and is read
  // through a pattern that repeats it on chip: as laid out in HBM, its DMA would be one
  // descriptor per element. A load that is itself stored keeps the plain layout.
  bool repeats(int s) const {
    if (step(s).op != Op::load || std::ranges::find(sc_.results, s) != sc_.results.end())
      return false;
    const View& v = input_view(step(s).input);
    for (size_t d = plan_.cut; d < plan_.sizes.size(); ++d)
      if (v.strides[d] == 0 && plan_.sizes[d] > 1) return true;
    return false;
  }

  // The free dims of tile i for input view `v`: sizes, and strides in SBUF where the
  // repeated dims take no room (stride 0).
  std::vector<isa::Dim> compact_dims(const View& v, uint32_t i) const {
    std::vector<isa::Dim> dims;
    int64_t step = 1;
    for (size_t d = plan_.sizes.size(); d-- > plan_.cut;) {
      const uint32_t size = d == plan_.cut ? plan_.tiles[i].len : u32(plan_.sizes[d]);
      const bool repeated = v.strides[d] == 0 && size > 1;
      dims.insert(dims.begin(), isa::Dim{repeated ? 0 : dim_stride(kernel_, step), size});
      if (!repeated) step *= size;
    }
    return dims;
  }

  // Step s's value in tile i, read with its repeats.
  AccessPattern repeated(const AccessPattern& slot, int s, uint32_t i) const {
    AccessPattern ap = isa::rows(slot, 0, plan_.tiles[i].parts);
    ap.dtype = dtype_of(s);
    const std::vector<isa::Dim> dims = compact_dims(input_view(step(s).input), i);
    ap.num_dims = static_cast<uint8_t>(dims.size());
    std::ranges::copy(dims, ap.dims.begin());
    return ap;
  }

  // The DMA of load step s in tile i when it repeats: each distinct element once.
  void load_compact(int s, uint32_t i, const AccessPattern& tensor, size_t view, Engine trigger) {
    AccessPattern src = hbm(view, tensor, i);
    uint64_t elems = 1;
    for (size_t k = 0; k < src.num_dims; ++k) {
      if (src.dims[k].stride == 0) src.dims[k].size = 1;
      elems *= src.dims[k].size;
    }
    const AccessPattern& slot =
        slots_[(i % nbuf_) * u32(sc_.slots) + u32(sc_.slot[static_cast<size_t>(s)])];
    kb_.dma_copy(on_chip(slot, plan_.tiles[i].parts, u32(elems), dtype_of(s)), src, trigger);
  }

  AccessPattern hbm(size_t view, const AccessPattern& tensor, uint32_t i) const {
    return hbm_tile(kernel_, tensor, views_[view].strides, plan_, plan_.tiles[i]);
  }

  void load(uint32_t i) {
    uint32_t k = 0;
    for (int s : sc_.loads) {
      const auto in = static_cast<size_t>(step(s).input);
      const Engine trigger = !sc_.uses_act && k++ % 2 ? Engine::ACT : Engine::SP;
      if (repeats(s))
        load_compact(s, i, in_[in], num_outs_ + in, trigger);
      else
        kb_.dma_copy(value(s, i), hbm(num_outs_ + in, in_[in], i), trigger);
    }
  }

  void compute(uint32_t i) {
    const Engine engine = i % 2 ? Engine::POOL : Engine::DVE;
    for (int s : sc_.order) emit(s, i, engine);
    for (size_t k = 0; k < num_outs_; ++k)
      kb_.dma_copy(hbm(k, out_[k], i), value(sc_.results[k], i),
                   store_engine(i + static_cast<uint32_t>(k), sc_.results[k], engine));
  }

  // The engine that computed a result triggers its store when it can (no
  // semaphore wait: its own earlier instruction); DVE cannot trigger DMA. Stores of
  // a constant (fill) spread over every trigger engine's queues.
  Engine store_engine(uint32_t i, int result, Engine engine) const {
    switch (step(result).op) {
      case Op::activation:
        return Engine::ACT;
      case Op::load:
        return Engine::SP;
      case Op::position:
        return Engine::POOL;
      case Op::random:
        return engine == Engine::POOL ? Engine::POOL : Engine::SP;
      case Op::constant:
        return std::array{Engine::SP, Engine::ACT, Engine::POOL}[i % 3];
      default:
        return engine == Engine::POOL ? Engine::POOL : Engine::SP;
    }
  }

  void emit(int s, uint32_t i, Engine engine) {
    const PointwiseExpr::Step& st = step(s);
    const std::vector<int> regs = reads(expr_.steps(), sc_, s);
    const AccessPattern dst = value(s, i);
    switch (st.op) {
      case Op::activation:
        kb_.activation(dst, value(regs[0], i), st.func, st.imm);
        break;
      case Op::alu:
        kb_.tensor_tensor(engine, dst, value(regs[0], i), value(regs[1], i), st.alu);
        break;
      case Op::alu_imm: {
        const int f = sc_.fused[static_cast<size_t>(s)];
        scalar_op(
            kb_, engine, dst, value(regs[0], i), f >= 0 ? &step(f) : nullptr, st,
            [&](int32_t input) { return isa::rows(scalars_.at(input), 0, plan_.tiles[i].parts); });
        break;
      }
      case Op::select:
        emit_select(kb_, engine, dst, value(regs[0], i), value(regs[1], i), value(regs[2], i));
        break;
      case Op::position:
        iota(dst, s, i);
        break;
      case Op::random: {
        isa::Instruction rng;
        rng.opcode = isa::Opcode::rng;
        rng.engine = engine;
        rng.operands = {{isa::Role::dst, dst}};
        kb_.emit(std::move(rng));
        break;
      }
      case Op::load:
      case Op::constant:
        break;  // never in the order: loads are DMAs, constants are set once
    }
  }

  // Both engines' generators take their state from "seeds" (VectorE's words, then
  // GpSimd's), once: every tile draws on from there.
  void seed_generators() {
    const AccessPattern tile = sbuf(kb_, kernel_, DType::uint32, kPartitions,
                                    static_cast<uint32_t>(PointwiseExpr::kSeedWords));
    kb_.dma_copy(tile, *seeds_, Engine::SP);
    for (const auto& [engine, first] : {std::pair{Engine::DVE, 0}, std::pair{Engine::POOL, 6}}) {
      AccessPattern words = tile;
      words.offset += 4 * static_cast<uint32_t>(first);
      words.dims[0] = {1, 6};
      isa::Instruction set;
      set.opcode = isa::Opcode::rand_set_state;
      set.engine = engine;
      set.operands = {{isa::Role::src, words}};
      kb_.emit(std::move(set));
    }
  }

  // dst <- the position of each element of tile i: the tile's walk of the position's
  // view, as the pattern of an iota (offset and partition step in elements).
  void iota(const AccessPattern& dst, int s, uint32_t i) {
    AccessPattern unit;
    unit.space = isa::MemSpace::HBM;
    unit.dtype = DType::int8;  // one byte per element: byte offsets are element offsets
    const AccessPattern walk = hbm(position_view(s), unit, i);
    require(walk.offset <= uint64_t{std::numeric_limits<int32_t>::max()} &&
                std::abs(walk.partition_stride) <= std::numeric_limits<int32_t>::max(),
            kernel_, "a position's first value or partition step does not fit 32 bits");
    emit_iota(kb_, dst, walk.free_dims(), static_cast<int32_t>(walk.offset),
              static_cast<int32_t>(walk.partition_stride));
  }

  std::string_view kernel_;
  KernelBuilder& kb_;
  const PointwiseExpr& expr_;
  size_t num_outs_;
  std::vector<View> views_;  // the outputs, the inputs, the positions; ordered and coalesced
  Schedule sc_;
  std::vector<AccessPattern> in_;
  std::vector<AccessPattern> out_;
  TilePlan plan_;
  uint32_t nbuf_ = 2;
  std::vector<AccessPattern> slots_;  // [buffer][slot]
  std::vector<AccessPattern> constants_;
  std::map<int32_t, AccessPattern> scalars_;  // per scalar input: its [128, 1] FP32 tile
  std::optional<AccessPattern> seeds_;        // the tensor "seeds", when a step draws
};

}  // namespace

namespace detail {

std::vector<bool> tile_expression_columns(std::string_view kernel, const PointwiseExpr& expr,
                                          const std::vector<bool>& column_inputs) {
  check_expr(kernel, expr, column_inputs.size(), 1, 0);
  const auto& steps = expr.steps();
  std::vector<bool> column(steps.size(), false);
  for (size_t s = 0; s < steps.size(); ++s) {
    const PointwiseExpr::Step& st = steps[s];
    require(st.op != Op::position && st.op != Op::random && st.scalar < 0, kernel,
            "an epilogue takes no positions, random numbers or scalar inputs");
    if (st.op == Op::load) {
      column[s] = column_inputs[static_cast<size_t>(st.input)];
      continue;
    }
    const bool any =
        std::ranges::any_of(st.args, [&](Reg a) { return column[static_cast<size_t>(a)]; });
    const bool all = !st.args.empty() && std::ranges::all_of(st.args, [&](Reg a) {
      return column[static_cast<size_t>(a)];
    });
    require(st.op != Op::select || !any, kernel, "a select of a row's value");
    column[s] = all;
  }
  require(!column[static_cast<size_t>(expr.outputs().front())], kernel,
          "the result is one value per row, not a row");
  return column;
}

size_t tile_expression_temps(std::string_view kernel, const PointwiseExpr& expr, size_t inputs) {
  const std::vector<bool> none(inputs, false);
  tile_expression_columns(kernel, expr, none);
  return static_cast<size_t>(std::ranges::count_if(
      expr.steps(), [](const PointwiseExpr::Step& st) { return st.op != Op::load; }));
}

void emit_tile_expression(KernelBuilder& kb, Engine engine, const PointwiseExpr& expr,
                          std::span<const AccessPattern> loads,
                          std::span<const AccessPattern> temps, const AccessPattern& dst,
                          const std::vector<bool>& column_inputs,
                          std::span<const AccessPattern> column_temps) {
  const auto& steps = expr.steps();
  const Reg result = expr.outputs().front();
  std::vector<bool> none(loads.size(), false);
  const std::vector<bool> column =
      tile_expression_columns("epilogue", expr, column_inputs.empty() ? none : column_inputs);
  std::vector<AccessPattern> value(steps.size());
  size_t next = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const PointwiseExpr::Step& st = steps[s];
    if (st.op == Op::load) {
      value[s] = loads[static_cast<size_t>(st.input)];
      if (static_cast<Reg>(s) == result) kb.tensor_copy(engine, dst, value[s]);
      continue;
    }
    value[s] = static_cast<Reg>(s) == result ? dst : column[s] ? column_temps[next] : temps[next];
    ++next;
    auto arg = [&](size_t k) { return value[static_cast<size_t>(st.args[k])]; };
    auto is_column = [&](size_t k) { return bool(column[static_cast<size_t>(st.args[k])]); };
    switch (st.op) {
      case Op::constant:
        emit_memset(kb, engine, value[s], st.imm);
        break;
      case Op::activation:
        kb.activation(value[s], arg(0), st.func, st.imm);
        break;
      case Op::alu:
        if (column[s] || is_column(0) == is_column(1)) {
          kb.tensor_tensor(engine, value[s], arg(0), arg(1), st.alu);
        } else {  // a row and its row's value: the value is each partition's scalar operand
          const bool first = is_column(0);
          isa::Instruction in;
          in.opcode = isa::Opcode::tensor_scalar;
          in.engine = engine;
          in.operands = {{isa::Role::dst, value[s]},
                         {isa::Role::src, arg(first ? 1 : 0)},
                         {isa::Role::operand0, arg(first ? 0 : 1)}};
          in.alu0 = st.alu;
          in.flags |= first ? isa::kReverse0 : 0;
          kb.emit(std::move(in));
        }
        break;
      case Op::alu_imm:
        scalar_op(kb, engine, value[s], arg(0), nullptr, st,
                  [](int32_t) { return AccessPattern{}; });
        break;
      case Op::select:
        emit_select(kb, engine, value[s], arg(0), arg(1), arg(2));
        break;
      default:
        break;  // refused by tile_expression_columns
    }
  }
}

void emit_pointwise(KernelBuilder& kb, const Declare& declare, const PointwiseExpr& expr,
                    std::span<const View> inputs, std::span<const View> outs) {
  std::vector<std::string> names;
  for (size_t k = 0; k < outs.size(); ++k) names.push_back(fmt::format("out{}", k));
  PointwiseKernel("pointwise", kb, declare, expr, inputs, outs, names).build();
}

}  // namespace detail

isa::Program pointwise(std::string_view target, const PointwiseExpr& expr,
                       std::span<const View> inputs, const View& out) {
  KernelBuilder kb(target);
  PointwiseKernel("pointwise", kb, declare_operand, expr, inputs, {&out, 1}, {"out"}).build();
  return kb.finish();
}

isa::Program pointwise(std::string_view target, const PointwiseExpr& expr,
                       std::span<const View> inputs, std::span<const View> outs) {
  KernelBuilder kb(target);
  detail::emit_pointwise(kb, declare_operand, expr, inputs, outs);
  return kb.finish();
}

isa::Program fill(std::string_view target, const View& out, float value) {
  PointwiseExpr expr;
  expr.constant(value);
  KernelBuilder kb(target);
  PointwiseKernel("fill", kb, declare_operand, expr, {}, {&out, 1}, {"out"}).build();
  return kb.finish();
}

}  // namespace neuronsim::kernels
