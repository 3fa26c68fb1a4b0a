// pointwise and fill over strided views, against a host evaluation of the same
// expression on the same dtype-rounded inputs. The engines compute each step in
// FP32 and the last one rounds to out.dtype (docs/isa.md, numeric model), and the
// host does the same single-precision operations in the same order, so the
// arithmetic cases are exact; only ScalarE functions, whose table the host shares,
// get a tolerance of a few FP32 units. Every output storage starts filled with a
// sentinel, so that a write outside the view shows as a mismatch.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <ranges>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "neuronsim/kernels/eager.h"
#include "neuronsim/sim/random.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::ActFunc;
using isa::AluOp;
using isa::DType;
using test::contiguous;
using test::swapped;

float host_alu(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::add:
      return a + b;
    case AluOp::subtract:
      return a - b;
    case AluOp::multiply:
      return a * b;
    case AluOp::divide:
      return a / b;
    case AluOp::max:
      return std::max(a, b);
    case AluOp::min:
      return std::min(a, b);
    case AluOp::pow:
      return std::pow(a, b);
    case AluOp::is_gt:
      return a > b ? 1.0f : 0.0f;
    case AluOp::is_le:
      return a <= b ? 1.0f : 0.0f;
    case AluOp::is_equal:
      return a == b ? 1.0f : 0.0f;
    case AluOp::logical_and:
      return a != 0.0f && b != 0.0f ? 1.0f : 0.0f;
    case AluOp::bitwise_xor:
      return static_cast<float>(static_cast<int32_t>(a) ^ static_cast<int32_t>(b));
    default:
      ADD_FAILURE() << "no host reference for " << isa::alu_op_name(op);
      return 0.0f;
  }
}

// The expression on one element, step by step in FP32, as the engines do it.
float host_eval(const PointwiseExpr& expr, const std::vector<float>& in) {
  std::vector<float> r;
  for (const PointwiseExpr::Step& s : expr.steps()) {
    auto arg = [&](size_t k) { return r[static_cast<size_t>(s.args[k])]; };
    switch (s.op) {
      case PointwiseExpr::Op::load:
        r.push_back(in[static_cast<size_t>(s.input)]);
        break;
      case PointwiseExpr::Op::constant:
        r.push_back(s.imm);
        break;
      case PointwiseExpr::Op::activation:
        r.push_back(isa::apply_act_func(s.func, arg(0) * s.imm));
        break;
      case PointwiseExpr::Op::alu:
        r.push_back(host_alu(s.alu, arg(0), arg(1)));
        break;
      case PointwiseExpr::Op::alu_imm: {
        const float v = s.scalar >= 0 ? in[static_cast<size_t>(s.scalar)] : s.imm;
        r.push_back(s.reverse ? host_alu(s.alu, v, arg(0)) : host_alu(s.alu, arg(0), v));
        break;
      }
      case PointwiseExpr::Op::select:
        r.push_back(arg(0) != 0.0f ? arg(1) : arg(2));
        break;
      case PointwiseExpr::Op::position:
      case PointwiseExpr::Op::random:
        ADD_FAILURE() << "positions and random values are checked by their own tests";
        r.push_back(0.0f);
        break;
    }
  }
  return r.back();
}

struct Range {
  float lo = -4.0f, hi = 4.0f;
};

// Runs the kernel and compares out's whole storage with the host result;
// `ulps` FP32 units of relative tolerance (0: exact).
void check(const PointwiseExpr& expr, const std::vector<View>& inputs, const View& out,
           double ulps = 0.0, Range range = {}) {
  const isa::Program p = pointwise("trn2", expr, inputs, out);
  std::map<std::string, std::vector<float>> io;
  for (size_t i = 0; i < inputs.size(); ++i)
    io[fmt::format("in{}", i)] =
        test::storage(inputs[i], static_cast<uint32_t>(i + 1), range.lo, range.hi);
  const float sentinel = test::round_to(out.dtype, 77.0f);
  io["out"].assign(static_cast<size_t>(out.extent_elems()), sentinel);
  std::vector<double> want(io["out"].begin(), io["out"].end());
  test::for_each_index(out.sizes, [&](const std::vector<int64_t>& idx) {
    std::vector<float> vals;
    for (size_t i = 0; i < inputs.size(); ++i)
      vals.push_back(
          io[fmt::format("in{}", i)][static_cast<size_t>(test::offset_of(inputs[i], idx))]);
    want[static_cast<size_t>(test::offset_of(out, idx))] =
        test::round_to(out.dtype, host_eval(expr, vals));
  });
  const std::vector<float> got = test::run(p, io).at("out");
  test::expect_close(got, want, want.size(), [&](size_t i) {
    return ulps * test::kU32 * std::fabs(want[i]) + (ulps > 0 ? 1e-30 : 0.0);
  });
}

PointwiseExpr add() {
  return PointwiseExpr::binary(AluOp::add);
}

TEST(Pointwise, ContiguousOddSizes) {
  for (int64_t n : {1, 127, 129, 1000, 262145})
    check(add(), {contiguous(DType::fp32, {n}), contiguous(DType::fp32, {n})},
          contiguous(DType::fp32, {n}));
  check(add(), {contiguous(DType::fp32, {127, 129}), contiguous(DType::fp32, {127, 129})},
        contiguous(DType::fp32, {127, 129}));
}

TEST(Pointwise, ZeroDimScalar) {
  const View s{DType::fp32, {}, {}};
  check(add(), {s, s}, s);
}

TEST(Pointwise, TransposedInput) {
  const View t =
      swapped(contiguous(DType::fp32, {129, 127}), 0, 1);  // [127, 129], strides [1, 127]
  check(add(), {t, contiguous(DType::fp32, {127, 129})}, contiguous(DType::fp32, {127, 129}));
  // A tall, narrow transposed view: the partition runs go along the long dim.
  const View tall = swapped(contiguous(DType::fp32, {3, 100000}), 0, 1);
  check(PointwiseExpr::copy(), {tall}, contiguous(DType::fp32, {100000, 3}));
  // A long inner dim: [128, 2048] blocks with remainders along both dims.
  const View wide = swapped(contiguous(DType::fp32, {5000, 300}), 0, 1);
  check(add(), {wide, contiguous(DType::fp32, {5000})}, View{DType::fp32, {300, 5000}, {5003, 1}});
}

TEST(Pointwise, SlicedInputAndOutput) {
  // x[:, 3::2] of a [200, 300] tensor, and the same slice as the output (an in-place op on it).
  const View slice{DType::fp32, {200, 149}, {300, 2}};
  check(add(), {slice, contiguous(DType::fp32, {200, 149})}, slice);
  const View rows{DType::fp32, {1000, 7}, {9, 1}};  // x[:, :7] of [1000, 9]
  check(PointwiseExpr::scalar(AluOp::multiply, 3.0f), {rows}, rows);
}

TEST(Pointwise, TransposedOutput) {
  const View out_t = swapped(contiguous(DType::fp32, {129, 1000}), 0, 1);
  check(add(), {contiguous(DType::fp32, {1000, 129}), contiguous(DType::fp32, {1000, 129})}, out_t);
}

TEST(Pointwise, Broadcast) {
  const View out = contiguous(DType::fp32, {127, 129});
  const View row = contiguous(DType::fp32, {129});       // numpy: a missing leading dim
  const View col = contiguous(DType::fp32, {127, 1});    // a size-1 dim
  const View expanded{DType::fp32, {127, 129}, {0, 1}};  // x.expand(): stride 0
  const View scalar_like{DType::fp32, {1, 1}, {1, 1}};
  check(add(), {out, row}, out);
  check(add(), {col, row}, out);
  check(PointwiseExpr::binary(AluOp::subtract), {expanded, col}, out);
  check(PointwiseExpr::binary(AluOp::multiply), {scalar_like, out}, out);
  // Broadcast along a dim of a 3-D permuted output.
  const View out3 = contiguous(DType::fp32, {8, 129, 33});
  check(add(),
        {swapped(contiguous(DType::fp32, {33, 129, 8}), 0, 2), contiguous(DType::fp32, {33})},
        out3);
}

// A column broadcast along rows (RMS norm's x * rsqrt(mean)) loads each element once
// and repeats it on chip: its DMA is not one descriptor per repeated element.
TEST(Pointwise, ABroadcastColumnLoadsEachElementOnce) {
  const View x = contiguous(DType::bf16, {300, 1024}), col = contiguous(DType::fp32, {300, 1});
  const std::vector<View> inputs{x, col};
  const isa::Program p = pointwise("trn2", PointwiseExpr::binary(AluOp::multiply), inputs, x);
  EXPECT_EQ(test::hbm_reads(p, "in1").elems, 300u);
  EXPECT_EQ(test::hbm_reads(p, "in0").elems, 300u * 1024u);
  check(PointwiseExpr::binary(AluOp::multiply), {x, col}, x, 1.0);
  // Repeats in a middle dim too: [4, 1, 8] over [4, 130, 8].
  const View mid{DType::fp32, {4, 130, 8}, {8, 0, 1}};
  check(add(), {contiguous(DType::fp32, {4, 130, 8}), mid}, contiguous(DType::fp32, {4, 130, 8}));
}

// Attention's scores plus a mask shared by the 16 heads: 16 rows of 16,384 elements would
// keep 2 of the 16 DMA engines busy (8 partitions each), so the tiles spread each head's
// elements over 128 partitions instead.
TEST(Pointwise, TilesSpreadOverEnoughPartitionsForEveryDmaEngine) {
  const View scores = contiguous(DType::fp32, {16, 128, 128});
  const View mask{DType::fp32, {16, 128, 128}, {0, 128, 1}};
  const std::vector<View> inputs{scores, mask};
  const isa::Program p = pointwise("trn2", add(), inputs, scores);
  const uint16_t id = p.find_tensor("in0")->var_id;
  for (const auto& stream : p.streams)
    for (const isa::Instruction& in : stream)
      if (in.opcode == isa::Opcode::dma_copy && in.operand(isa::Role::src)->tensor == id &&
          in.operand(isa::Role::src)->space == isa::MemSpace::HBM)
        EXPECT_EQ(in.operand(isa::Role::dst)->num_partitions, 128u);
  check(add(), inputs, scores);
}

TEST(Pointwise, FiveDimsAfterCoalescing) {
  View p = contiguous(DType::fp32, {6, 5, 4, 3, 2});
  std::reverse(p.sizes.begin(), p.sizes.end());
  std::reverse(p.strides.begin(), p.strides.end());  // a full permute: nothing merges
  check(PointwiseExpr::copy(), {p}, contiguous(DType::fp32, {2, 3, 4, 5, 6}));
}

TEST(Pointwise, LowPrecisionFloats) {
  const View a16 = contiguous(DType::bf16, {300, 777});
  check(add(), {a16, a16}, a16);
  const View h = swapped(contiguous(DType::fp16, {129, 127}), 0, 1);
  check(PointwiseExpr::binary(AluOp::multiply), {h, contiguous(DType::fp16, {127, 129})},
        contiguous(DType::fp16, {127, 129}));
  // Mixed: bf16 x fp32 -> fp32 (type promotion done by the backend's dtypes).
  check(add(), {contiguous(DType::bf16, {1000}), contiguous(DType::fp32, {1000})},
        contiguous(DType::fp32, {1000}));
}

TEST(Pointwise, IntegersAreExact) {
  const Range big{-1e6f, 1e6f};
  const View i32 = contiguous(DType::int32, {129, 127});
  check(add(), {i32, swapped(contiguous(DType::int32, {127, 129}), 0, 1)}, i32, 0.0, big);
  check(PointwiseExpr::binary(AluOp::bitwise_xor), {i32, i32}, i32, 0.0, big);
  const View u8 = contiguous(DType::uint8, {1000});
  check(PointwiseExpr::binary(AluOp::max), {u8, u8}, u8, 0.0, {0.0f, 255.0f});
  const View i8 = contiguous(DType::int8, {1000});
  check(PointwiseExpr::scalar(AluOp::multiply, 3.0f), {i8}, i8, 0.0,
        {-100.0f, 100.0f});  // saturates
}

TEST(Pointwise, ComparisonsAndLogicalGiveBool) {
  const View f = contiguous(DType::fp32, {127, 129});
  const View b = contiguous(DType::boolean, {127, 129});
  check(PointwiseExpr::binary(AluOp::is_gt), {f, f}, b);
  check(PointwiseExpr::binary(AluOp::logical_and), {b, b}, b, 0.0, {-1.0f, 1.0f});
  check(PointwiseExpr::scalar(AluOp::is_le, 0.5f), {f}, b);
}

TEST(Pointwise, Casts) {
  const View f = contiguous(DType::fp32, {129, 127});
  check(PointwiseExpr::copy(), {f}, contiguous(DType::bf16, {129, 127}));
  check(PointwiseExpr::copy(), {contiguous(DType::bf16, {1000})}, contiguous(DType::fp32, {1000}));
  check(PointwiseExpr::copy(), {f}, contiguous(DType::int32, {129, 127}), 0.0, {-300.0f, 300.0f});
  check(PointwiseExpr::copy(), {contiguous(DType::int32, {1000})}, contiguous(DType::fp16, {1000}),
        0.0, {-3000.0f, 3000.0f});
  check(PointwiseExpr::copy(), {f}, contiguous(DType::boolean, {129, 127}), 0.0, {-1.0f, 1.0f});
  // .contiguous() of a transposed bf16 view
  check(PointwiseExpr::copy(), {swapped(contiguous(DType::bf16, {127, 129}), 0, 1)},
        contiguous(DType::bf16, {129, 127}));
}

TEST(Pointwise, ScalarOperandsOnEitherSide) {
  const View f = contiguous(DType::fp32, {1000});
  check(PointwiseExpr::scalar(AluOp::subtract, 2.0f, /*reverse=*/true), {f}, f);  // rsub: 2 - x
  check(PointwiseExpr::scalar(AluOp::divide, 3.0f, /*reverse=*/true), {f}, f, 0.0, {0.5f, 4.0f});
  check(PointwiseExpr::scalar(AluOp::pow, 2.0f), {f}, f);
  check(PointwiseExpr::scalar(AluOp::divide, 3.0f), {f}, f);
}

TEST(Pointwise, ActivationsOnScalarE) {
  const View f = contiguous(DType::fp32, {127, 129});
  for (ActFunc fn : {ActFunc::exp, ActFunc::tanh, ActFunc::sigmoid, ActFunc::gelu, ActFunc::relu})
    check(PointwiseExpr::unary(fn, 0.5f), {f}, f, 4.0);
  check(PointwiseExpr::unary(ActFunc::silu), {f}, contiguous(DType::bf16, {127, 129}), 4.0);
  const View one_tile = contiguous(DType::fp32, {128, 64});
  const isa::Program p =
      pointwise("trn2", PointwiseExpr::unary(ActFunc::exp), {&one_tile, 1}, one_tile);
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::activation), 1u);
  for (const isa::Instruction& in : p.stream(isa::Engine::ACT))
    if (in.opcode == isa::Opcode::activation) {
      EXPECT_EQ(in.func, ActFunc::exp);
    }
}

TEST(Pointwise, Expressions) {
  const View f = contiguous(DType::fp32, {129, 1000});
  {  // where(x > 0, x, 0.5 * y): select on a comparison
    PointwiseExpr e;
    const auto x = e.load(0), y = e.load(1);
    e.select(e.alu_imm(AluOp::is_gt, x, 0.0f), x, e.alu_imm(AluOp::multiply, y, 0.5f));
    check(e, {f, f}, f);
  }
  {  // x * 2 + 1 (addcmul-like chains fuse into one two-op tensor_scalar), in bf16
    PointwiseExpr e;
    e.alu_imm(AluOp::add, e.alu_imm(AluOp::multiply, e.load(0), 2.0f), 1.0f);
    const View b = contiguous(DType::bf16, {128, 1000});
    check(e, {b}, b);
    const isa::Program p = pointwise("trn2", e, {&b, 1}, b);
    EXPECT_EQ(test::count_opcode(p, isa::Opcode::tensor_scalar), 1u);  // one tile
  }
  {  // a constant, a shared load and an unused step: clamp(x, -1, c) with c = 0.25
    PointwiseExpr e;
    const auto x = e.load(0);
    const auto c = e.constant(0.25f);
    e.alu_imm(AluOp::add, e.load(0), 5.0f);  // dead
    e.alu(AluOp::min, e.alu_imm(AluOp::max, x, -1.0f), c);
    check(e, {f}, f);
  }
  {  // gelu(x) * y + exp(-x): ScalarE and the ALUs in one tile
    PointwiseExpr e;
    const auto x = e.load(0), y = e.load(1);
    e.alu(AluOp::add, e.alu(AluOp::multiply, e.activation(ActFunc::gelu, x), y),
          e.activation(ActFunc::exp, x, -1.0f));
    check(e, {f, contiguous(DType::fp32, {1000})}, f, 8.0);
  }
}

TEST(Pointwise, TilesAlternateVectorAndGpSimd) {
  const View f = contiguous(DType::fp32, {1024, 1024});  // 4 tiles of [128, 2048]
  const isa::Program p = pointwise("trn2", add(), std::vector<View>{f, f}, f);
  EXPECT_EQ(test::count_opcode(p, isa::Engine::DVE, isa::Opcode::tensor_tensor), 2u);
  EXPECT_EQ(test::count_opcode(p, isa::Engine::POOL, isa::Opcode::tensor_tensor), 2u);
}

// x.add_(y): in0 and out bound to the same bytes, as the backend binds in-place ops.
TEST(Pointwise, InPlaceOnTheSameBytes) {
  const View x{DType::fp32, {300, 129}, {200, 1}};  // rows of a wider tensor
  const View y = contiguous(DType::fp32, {129});
  const isa::Program p = pointwise("trn2", add(), std::vector<View>{x, y}, x);
  sim::DeviceOptions options;
  options.mode = sim::Mode::functional_only;
  auto device = sim::Device::open_generation("trn2", options);
  const sim::ProgramRef loaded = device->load(0, p, "add_");
  const uint64_t xbytes = static_cast<uint64_t>(x.extent_elems()) * 4, ybytes = 129 * 4;
  const uint64_t xa = *device->allocate(0, xbytes), ya = *device->allocate(0, ybytes);
  const std::vector<float> xv = test::storage(x, 1, -4, 4), yv = test::storage(y, 2, -4, 4);
  std::vector<uint8_t> bytes = test::encode(DType::fp32, xv);
  device->write(0, xa, bytes);
  device->write(0, ya, test::encode(DType::fp32, yv));
  sim::Bindings b;
  b[p.find_tensor("in0")->var_id] = {xa, xbytes};
  b[p.find_tensor("out")->var_id] = {xa, xbytes};
  b[p.find_tensor("in1")->var_id] = {ya, ybytes};
  device->run({loaded, b, "add_"});
  device->read(0, xa, bytes);
  const std::vector<float> got = test::decode(DType::fp32, bytes);
  std::vector<double> want(xv.begin(), xv.end());
  test::for_each_index(x.sizes, [&](const std::vector<int64_t>& i) {
    const auto o = static_cast<size_t>(test::offset_of(x, i));
    want[o] = xv[o] + yv[static_cast<size_t>(i[1])];
  });
  test::expect_close(got, want, 200, [](size_t) { return 0.0; });
}

TEST(Fill, ContiguousStridedAndIntegers) {
  struct Case {
    View out;
    float value;
  };
  for (const Case& c : {Case{contiguous(DType::fp32, {1000, 129}), 1.5f},
                        Case{View{DType::bf16, {127, 50}, {300, 3}}, -2.25f},
                        Case{contiguous(DType::int32, {1}), 7.0f},
                        Case{swapped(contiguous(DType::int8, {129, 127}), 0, 1), 300.0f}}) {
    const isa::Program p = fill("trn2", c.out, c.value);
    const float sentinel = test::round_to(c.out.dtype, 77.0f);
    std::vector<float> init(static_cast<size_t>(c.out.extent_elems()), sentinel);
    std::vector<double> want(init.begin(), init.end());
    test::for_each_index(c.out.sizes, [&](const std::vector<int64_t>& i) {
      want[static_cast<size_t>(test::offset_of(c.out, i))] = test::round_to(c.out.dtype, c.value);
    });
    const std::vector<float> got = test::run(p, {{"out", init}}).at("out");
    test::expect_close(got, want, want.size(), [](size_t) { return 0.0; });
  }
}

// Two outputs of different dtypes, the first also read by a later step: the limbs
// of a sum split at 2^8 (low = s mod 256 in uint8; high = (s - low) / 256 in int16).
TEST(Pointwise, SeveralOutputs) {
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{3, 1000}, {1}}) {
    PointwiseExpr e;
    const PointwiseExpr::Reg sum = e.alu(AluOp::add, e.load(0), e.load(1));
    const PointwiseExpr::Reg low = e.alu_imm(AluOp::mod, sum, 256.0f);
    const PointwiseExpr::Reg high =
        e.alu_imm(AluOp::multiply, e.alu(AluOp::subtract, sum, low), 1.0f / 256);
    e.set_outputs({low, high});
    const View in = contiguous(DType::int16, sizes);
    const std::vector<int64_t> reversed(sizes.rbegin(), sizes.rend());
    const std::vector<View> outs{contiguous(DType::uint8, sizes),  // and one column-major
                                 swapped(contiguous(DType::int16, reversed), 0, sizes.size() - 1)};
    const isa::Program p = pointwise("trn2", e, std::vector<View>{in, in}, outs);
    const std::vector<float> a = test::storage(in, 1, -30000, 30000),
                             b = test::storage(in, 2, -30000, 30000);
    const std::vector<float> blank(static_cast<size_t>(in.numel()), 0.0f);
    const auto got = test::run(p, {{"in0", a}, {"in1", b}, {"out0", blank}, {"out1", blank}});
    test::for_each_index(sizes, [&](const std::vector<int64_t>& idx) {
      const auto i = static_cast<size_t>(test::offset_of(in, idx));
      const int sum_ab = static_cast<int>(a[i]) + static_cast<int>(b[i]);
      const int lo = ((sum_ab % 256) + 256) % 256;
      ASSERT_EQ(got.at("out0")[static_cast<size_t>(test::offset_of(outs[0], idx))], lo);
      ASSERT_EQ(got.at("out1")[static_cast<size_t>(test::offset_of(outs[1], idx))],
                (sum_ab - lo) / 256);
    });
  }
}

// A scalar read from an input once per kernel: one program for every value, fused
// into two-op tensor_scalar instructions like immediates.
TEST(Pointwise, ScalarsFromInputs) {
  PointwiseExpr e;  // (in0 * s1 - s2) / s1, s1 and s2 one-element inputs
  const PointwiseExpr::Reg x = e.load(0);
  e.alu_scalar(AluOp::divide, e.alu_scalar(AluOp::subtract, e.alu_scalar(AluOp::multiply, x, 1), 2),
               1);
  const View in = contiguous(DType::fp32, {300, 70}), one{DType::fp32, {1}, {1}};
  check(e, {in, one, one}, contiguous(DType::fp32, {300, 70}));
  check(e, {in, View{DType::bf16, {}, {}}, one}, swapped(contiguous(DType::bf16, {70, 300}), 0, 1));
  const isa::Program p =
      pointwise("trn2", e, std::vector<View>{in, one, one}, contiguous(DType::fp32, {300, 70}));
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::tensor_scalar) +
                test::count_opcode(p, isa::Opcode::tensor_tensor),
            test::count_opcode(p, isa::Opcode::tensor_scalar))
      << "scalars are tensor_scalar operands, not tensors";
  test::expect_invalid(
      [&] {
        pointwise("trn2", e, std::vector<View>{in, in, one}, contiguous(DType::fp32, {300, 70}));
      },
      {"pointwise", "in1 is read as a scalar but has more than one element"});
}

// position(w) is sum_d index[d] * w[d], through any strides of the output: arange
// (w = the contiguous strides) and the column index of a one-hot (w = {0, 1}).
TEST(Pointwise, Positions) {
  PointwiseExpr arange;
  arange.alu_imm(AluOp::add, arange.alu_imm(AluOp::multiply, arange.position({1}), 3.0f), -5.0f);
  for (int64_t n : {1, 130, 300000}) {
    const View out{DType::int32, {n}, {2}};
    const isa::Program p = pointwise("trn2", arange, {}, out);
    const std::vector<float> blank(static_cast<size_t>(out.extent_elems()), 0.0f);
    const std::vector<float> got = test::run(p, {{"out", blank}}).at("out");
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[static_cast<size_t>(2 * i)], 3 * i - 5) << "element " << i;
  }
  PointwiseExpr onehot;
  onehot.alu(AluOp::is_equal, onehot.position({0, 1}), onehot.load(0));
  const View target = contiguous(DType::int32, {300, 1});
  const View out = swapped(contiguous(DType::fp32, {50, 300}), 0, 1);  // [300, 50], column-major
  const isa::Program p = pointwise("trn2", onehot, {&target, 1}, out);
  const std::vector<float> t = test::storage(target, 3, 0, 50);
  const std::vector<float> blank(300 * 50, 0.0f);
  const std::vector<float> got = test::run(p, {{"in0", t}, {"out", blank}}).at("out");
  test::for_each_index(out.sizes, [&](const std::vector<int64_t>& idx) {
    ASSERT_EQ(got[static_cast<size_t>(test::offset_of(out, idx))],
              t[static_cast<size_t>(idx[0])] == static_cast<float>(idx[1]) ? 1.0f : 0.0f)
        << idx[0] << ", " << idx[1];
  });
}

// The generators' states of one "seeds" tensor: lane p's words from a splitmix64 stream.
std::vector<uint8_t> seed_bytes(uint64_t key) {
  std::vector<uint32_t> words;
  for (int lane = 0; lane < 128; ++lane)
    for (int engine = 0; engine < 2; ++engine) {
      const sim::Xorwow g = sim::Xorwow::seeded(key);
      words.insert(words.end(), g.words.begin(), g.words.end());
    }
  std::vector<uint8_t> bytes(words.size() * 4);
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

std::vector<float> run_random(const isa::Program& p, uint64_t key, size_t n) {
  const std::map<std::string, std::vector<uint8_t>> io{{"seeds", seed_bytes(key)},
                                                       {"out", std::vector<uint8_t>(n * 4, 0)}};
  return test::decode(DType::fp32, test::run_raw(p, io).at("out"));
}

TEST(Pointwise, RandomDrawsSixteenBitsPerElementFromEachLanesGenerator) {
  PointwiseExpr bits;
  bits.random();
  // One tile on VectorE: partition p holds 16 consecutive elements, drawn from lane p.
  const isa::Program one = pointwise("trn2", bits, {}, contiguous(DType::fp32, {2048}));
  const std::vector<float> got = run_random(one, 7, 2048);
  const std::vector<uint8_t> seeds = seed_bytes(7);
  for (size_t lane = 0; lane < 128; ++lane) {
    sim::Xorwow g;
    std::memcpy(g.words.data(), seeds.data() + lane * 48, 24);  // VectorE's six words
    for (size_t j = 0; j < 16; ++j)
      ASSERT_EQ(got[lane * 16 + j], static_cast<float>(g.next() & 0xFFFF)) << lane << ", " << j;
  }
  // Many tiles, on both engines: uniform over [0, 65536), repeatable, and seed-dependent.
  const size_t n = 300000;
  const isa::Program many = pointwise("trn2", bits, {}, contiguous(DType::fp32, {int64_t{n}}));
  const std::vector<float> a = run_random(many, 11, n);
  std::array<int, 16> buckets{};
  for (float v : a) {
    ASSERT_TRUE(v >= 0 && v < 65536 && v == std::floor(v)) << v;
    ++buckets[static_cast<size_t>(v) >> 12];
  }
  for (int b : buckets) EXPECT_NEAR(b, n / 16.0, 5 * std::sqrt(n / 16.0));
  EXPECT_EQ(run_random(many, 11, n), a);
  const std::vector<float> b = run_random(many, 12, n);
  EXPECT_LT(
      std::ranges::count_if(std::views::iota(size_t{0}, n), [&](size_t i) { return a[i] == b[i]; }),
      static_cast<std::ptrdiff_t>(n / 1000));
}

TEST(Pointwise, DropoutMaskKeepsTheExpectedShare) {
  PointwiseExpr dropout;  // out0 = x * keep / 0.9, out1 = keep, keep = bits < 0.9 * 2^16
  const PointwiseExpr::Reg keep = dropout.alu_imm(AluOp::is_lt, dropout.random(), 0.9f * 65536);
  const PointwiseExpr::Reg out = dropout.alu_imm(
      AluOp::multiply, dropout.alu(AluOp::multiply, dropout.load(0), keep), 1 / 0.9f);
  dropout.set_outputs({out, keep});
  const View x = contiguous(DType::fp32, {64, 1000});
  const std::vector<View> outs{contiguous(DType::fp32, {64, 1000}),
                               contiguous(DType::boolean, {64, 1000})};
  const isa::Program p = pointwise("trn2", dropout, {&x, 1}, outs);
  const std::vector<float> xs = test::storage(x, 5, 1, 2);
  std::map<std::string, std::vector<uint8_t>> io{{"seeds", seed_bytes(3)},
                                                 {"in0", test::encode(DType::fp32, xs)},
                                                 {"out0", std::vector<uint8_t>(64000 * 4)},
                                                 {"out1", std::vector<uint8_t>(64000)}};
  const auto res = test::run_raw(p, io);
  const std::vector<float> y = test::decode(DType::fp32, res.at("out0"));
  const std::vector<float> m = test::decode(DType::boolean, res.at("out1"));
  size_t kept = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    kept += m[i] != 0;
    ASSERT_FLOAT_EQ(y[i], m[i] != 0 ? xs[i] / 0.9f : 0.0f) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 64000, 0.9, 0.005);  // 5 sigma is 0.006 at 0.9
}

TEST(Pointwise, RandomNeedsNeuronCoreV3) {
  PointwiseExpr bits;
  bits.random();
  test::expect_invalid([&] { pointwise("trn1", bits, {}, contiguous(DType::fp32, {16})); },
                       {"random numbers need NeuronCore-v3 or later"});
}

TEST(Pointwise, RefusesBadViewsAndExpressions) {
  const View f = contiguous(DType::fp32, {4, 5});
  const std::vector<View> two{f, f};
  using test::expect_invalid;
  expect_invalid(
      [&] {
        pointwise("trn2", add(), two, View{DType::fp32, {0, 5}, {5, 1}});
      },
      {"pointwise", "out", "empty"});
  expect_invalid(
      [&] {
        pointwise("trn2", add(), two, View{DType::fp32, {4, 5}, {0, 1}});
      },
      {"pointwise", "out", "overlaps itself"});
  expect_invalid(
      [&] {
        pointwise("trn2", add(), two, View{DType::fp32, {4, 5}, {3, 1}});
      },
      {"pointwise", "overlaps itself"});
  expect_invalid(
      [&] {
        pointwise("trn2", add(), std::vector<View>{f, contiguous(DType::fp32, {3})}, f);
      },
      {"pointwise", "in1", "does not broadcast"});
  expect_invalid(
      [&] {
        pointwise("trn2", add(), std::vector<View>{f, View{DType::fp32, {4, 5}, {5}}}, f);
      },
      {"pointwise", "in1", "sizes but"});
  expect_invalid(
      [&] {
        pointwise("trn2", add(), std::vector<View>{f, View{DType::fp32, {4, 5}, {-5, 1}}}, f);
      },
      {"pointwise", "in1", "negative"});
  expect_invalid([&] { pointwise("trn2", add(), std::vector<View>{f}, f); },
                 {"pointwise", "loads input 1 of 1"});
  expect_invalid([&] { pointwise("trn2", PointwiseExpr{}, two, f); }, {"pointwise", "no steps"});
  PointwiseExpr forward;
  forward.alu(AluOp::add, 0, 1);
  expect_invalid([&] { pointwise("trn2", forward, two, f); }, {"pointwise", "not an earlier step"});
  // Six dims that do not merge (a full permute) are more than one DMA pattern walks.
  View p6 = contiguous(DType::fp32, {2, 3, 2, 3, 2, 3});
  std::reverse(p6.sizes.begin(), p6.sizes.end());
  std::reverse(p6.strides.begin(), p6.strides.end());
  expect_invalid(
      [&] {
        pointwise("trn2", PointwiseExpr::copy(), {&p6, 1}, contiguous(DType::fp32, p6.sizes));
      },
      {"pointwise", "6 dims after coalescing"});
  expect_invalid(
      [&] {
        fill("trn2", View{DType::fp32, {3, 3}, {1, 1}}, 0.0f);
      },
      {"fill", "overlaps itself"});
  PointwiseExpr one = add();
  expect_invalid(
      [&] {
        pointwise("trn2", one, two, std::vector<View>{f, f});
      },
      {"pointwise", "1 outputs for 2 output views"});
  one.set_outputs({0, 1});
  expect_invalid(
      [&] {
        pointwise("trn2", one, two, std::vector<View>{f, contiguous(DType::fp32, {5, 4})});
      },
      {"pointwise", "out1 has sizes [5, 4], not [4, 5]"});
  PointwiseExpr bad_position;
  bad_position.position({1});
  expect_invalid([&] { pointwise("trn2", bad_position, {}, f); },
                 {"pointwise", "position with 1 weights for 2 output dims"});
}

TEST(Coalesce, MergesContiguousDimsAndDropsOnes) {
  const View a = contiguous(DType::fp32, {2, 1, 3, 4});
  const View b{DType::fp32, {2, 1, 3, 4}, {0, 7, 0, 1}};  // broadcast over dims 0 and 2
  const std::vector<View> both = coalesce(std::vector<View>{a, b});
  EXPECT_EQ(both[0].sizes, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(both[0].strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(both[1].strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(coalesce(std::vector<View>{a})[0].sizes, (std::vector<int64_t>{24}));
  const View s{DType::fp32, {}, {}};
  EXPECT_EQ(coalesce(std::vector<View>{s})[0].sizes, (std::vector<int64_t>{1}));
  EXPECT_EQ((View{DType::fp32, {4, 5}, {1, 8}}.extent_elems()), 36);
  EXPECT_THROW(coalesce(std::vector<View>{a, contiguous(DType::fp32, {2, 3, 4})}),
               std::invalid_argument);
}

}  // namespace
}  // namespace neuronsim::kernels
