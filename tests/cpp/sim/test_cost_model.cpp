// The cost model's rules (docs/cost-model.md), each checked where it changes:
// below and above MIN_II, with and without the performance modes, per generation.
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "neuronsim/sim/cost_model.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {
namespace {

using isa::AccessPattern;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;
using isa::Role;

// The built-in configs (the empty directory), whatever NEURONSIM_CONFIG_DIR says.
const spec::GenerationConfig& gen(const char* name) {
  static const spec::GenerationConfig t1 = spec::load_generation("trn1", std::filesystem::path());
  static const spec::GenerationConfig t2 = spec::load_generation("trn2", std::filesystem::path());
  static const spec::GenerationConfig t3 = spec::load_generation("trn3", std::filesystem::path());
  const std::string n = name;
  return n == "trn1" ? t1 : n == "trn2" ? t2 : t3;
}

// [P, F] on SBUF/PSUM starting at `start`, `offset` bytes into each partition,
// innermost stride `stride` (F elements `stride` apart).
AccessPattern tile(DType t, uint16_t p, uint32_t f, MemSpace space = MemSpace::SBUF,
                   uint16_t start = 0, uint64_t offset = 0, int32_t stride = 1) {
  AccessPattern ap;
  ap.space = space;
  ap.dtype = t;
  ap.start_partition = start;
  ap.num_partitions = p;
  ap.offset = offset;
  ap.num_dims = 1;
  ap.dims[0] = {stride, f};
  return ap;
}

AccessPattern sbuf(DType t, uint16_t p, uint32_t f) {
  return tile(t, p, f);
}
AccessPattern psum(DType t, uint16_t p, uint32_t f) {
  return tile(t, p, f, MemSpace::PSUM);
}

// An HBM tensor [rows, cols], row-major, contiguous: [[cols, rows], [1, cols]].
AccessPattern hbm(DType t, uint32_t rows, uint32_t cols) {
  AccessPattern ap;
  ap.space = MemSpace::HBM;
  ap.dtype = t;
  ap.num_partitions = 1;
  ap.num_dims = 2;
  ap.dims[0] = {static_cast<int32_t>(cols), rows};
  ap.dims[1] = {1, cols};
  return ap;
}

Instruction make(Opcode op, Engine e, std::initializer_list<isa::Operand> operands) {
  Instruction inst;
  inst.opcode = op;
  inst.engine = e;
  inst.operands = operands;
  return inst;
}

Instruction matmul(AccessPattern stationary, AccessPattern moving) {
  return make(Opcode::matmul, Engine::PE,
              {{Role::dst, psum(DType::fp32, static_cast<uint16_t>(stationary.free_elems()),
                                static_cast<uint32_t>(moving.free_elems()))},
               {Role::stationary, stationary},
               {Role::moving, moving}});
}

uint64_t cycles(const Instruction& inst, const char* g, IssueContext ctx = {}) {
  return instruction_cycles(inst, gen(g), ctx);
}

// Cycles of a matmul whose stationary is already loaded (previous PE instruction: same stationary).
uint64_t loaded_matmul_cycles(const Instruction& mm, const char* g) {
  IssueContext ctx;
  ctx.previous = &mm;
  return cycles(mm, g, ctx);
}

// ---------------------------------------------------------------- TensorE

TEST(CostMatmul, FollowsMaxMinInitIntervalMovingSize) {
  const std::vector<std::pair<uint32_t, uint64_t>> expected = {
      {32, 64}, {64, 64}, {128, 128}, {256, 256}, {512, 512}};
  for (const char* g : {"trn1", "trn2", "trn3"}) {
    for (auto [n, want] : expected) {
      const Instruction mm = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, n));
      EXPECT_EQ(loaded_matmul_cycles(mm, g), want) << g << " N=" << n;
    }
    // A short stationary lowers the initiation interval: max(min(64, 16), 8) = 16.
    EXPECT_EQ(
        loaded_matmul_cycles(matmul(sbuf(DType::bf16, 128, 16), sbuf(DType::bf16, 128, 8)), g), 16u)
        << g;
    EXPECT_EQ(
        loaded_matmul_cycles(matmul(sbuf(DType::bf16, 128, 16), sbuf(DType::bf16, 128, 40)), g),
        40u)
        << g;
  }
}

TEST(CostMatmul, Fp32IsFourTimesTf32IsNot) {
  for (auto [n, bf16] :
       std::vector<std::pair<uint32_t, uint64_t>>{{32, 64}, {128, 128}, {512, 512}}) {
    EXPECT_EQ(loaded_matmul_cycles(matmul(sbuf(DType::fp32, 128, 128), sbuf(DType::fp32, 128, n)),
                                   "trn2"),
              4 * bf16);
    EXPECT_EQ(loaded_matmul_cycles(matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::fp32, 128, n)),
                                   "trn1"),
              4 * bf16);
    EXPECT_EQ(loaded_matmul_cycles(matmul(sbuf(DType::tf32, 128, 128), sbuf(DType::tf32, 128, n)),
                                   "trn2"),
              bf16);
  }
}

TEST(CostMatmul, Fp8RunsAtTheBf16RateUnlessInDoubleRowMode) {
  // Plain FP8 runs at the BF16 rate on every generation (nc_matmul: the double rate needs the
  // double_row performance mode).
  const Instruction mm = matmul(sbuf(DType::fp8_e4m3, 128, 128), sbuf(DType::fp8_e5m2, 128, 512));
  for (const char* g : {"trn1", "trn2", "trn3"}) EXPECT_EQ(loaded_matmul_cycles(mm, g), 512u) << g;
  // double_row: stationary [128, 2, 128] x moving [128, 2, 512], a contraction of 256 in the
  // 512 cycles of N: twice the FLOPs of a BF16 matmul in the same time.
  Instruction dr = matmul(sbuf(DType::fp8_e4m3, 128, 256), sbuf(DType::fp8_e5m2, 128, 1024));
  dr.flags |= isa::kDoubleRow;
  EXPECT_EQ(loaded_matmul_cycles(dr, "trn2"), 512u);
  EXPECT_EQ(loaded_matmul_cycles(dr, "trn3"), 512u);
  EXPECT_EQ(instruction_flops(dr), 2u * instruction_flops(mm));
  // The initiation interval holds: N = 32 takes 64 cycles.
  Instruction short_dr = matmul(sbuf(DType::fp8_e4m3, 128, 256), sbuf(DType::fp8_e4m3, 128, 64));
  short_dr.flags |= isa::kDoubleRow;
  EXPECT_EQ(loaded_matmul_cycles(short_dr, "trn2"), 64u);
  // The weights fill 128 columns (a pair per PE): a 32-cycle load, as BF16's.
  EXPECT_EQ(cycles(dr, "trn2"), 512u + 32u);
}

TEST(CostMatmul, OneZeroHintsHalveTheFp32Passes) {
  Instruction mm = matmul(sbuf(DType::fp32, 128, 128), sbuf(DType::fp32, 128, 512));
  EXPECT_EQ(loaded_matmul_cycles(mm, "trn1"), 4u * 512u);
  mm.flags |= isa::kMovingOneZero;
  EXPECT_EQ(loaded_matmul_cycles(mm, "trn1"), 2u * 512u);
  mm.flags = isa::kStationaryOneZero;
  EXPECT_EQ(loaded_matmul_cycles(mm, "trn2"), 2u * 512u);
  // No effect on 16-bit operands.
  Instruction bf = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 512));
  bf.flags |= isa::kMovingOneZero;
  EXPECT_EQ(loaded_matmul_cycles(bf, "trn2"), 512u);
}

TEST(CostMatmul, WeightLoadHiddenBehindThePreviousPeInstruction) {
  const Instruction big = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 512));
  // No previous PE instruction: the 128-column load (128 / 4 = 32 cycles) shows.
  EXPECT_EQ(cycles(big, "trn2"), 512u + 32u);

  // A different stationary behind a long matmul: fully hidden.
  Instruction other = big;
  other.operand(Role::stationary)->offset = 4096;
  IssueContext after_other;
  after_other.previous = &other;
  EXPECT_EQ(cycles(big, "trn2", after_other), 512u);

  // Behind a short matmul (16 cycles) half of the 32-cycle load shows.
  const Instruction tiny = matmul(sbuf(DType::bf16, 128, 16), sbuf(DType::bf16, 128, 8));
  const Instruction short_moving = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 64));
  IssueContext after_tiny;
  after_tiny.previous = &tiny;
  EXPECT_EQ(cycles(short_moving, "trn1", after_tiny), 64u + (32u - 16u));

  // After a semaphore wait the engine was idle: nothing to hide behind.
  IssueContext waited = after_other;
  waited.waited_on_semaphore = true;
  EXPECT_EQ(cycles(big, "trn2", waited), 512u + 32u);
  // ...but a stationary that is still loaded needs no load, wait or not.
  IssueContext waited_same;
  waited_same.previous = &big;
  waited_same.waited_on_semaphore = true;
  EXPECT_EQ(cycles(big, "trn2", waited_same), 512u);

  // FP32 weights load 4x slower: 32 * 4 = 128 on top of 4 * 512.
  const Instruction fp32 = matmul(sbuf(DType::fp32, 128, 128), sbuf(DType::fp32, 128, 512));
  EXPECT_EQ(cycles(fp32, "trn1"), 4u * 512u + 128u);
  // A previous non-PE instruction hides nothing.
  const Instruction act =
      make(Opcode::activation, Engine::ACT,
           {{Role::dst, sbuf(DType::fp32, 128, 4096)}, {Role::src, sbuf(DType::fp32, 128, 4096)}});
  IssueContext after_act;
  after_act.previous = &act;
  EXPECT_EQ(cycles(big, "trn2", after_act), 512u + 32u);
}

TEST(CostMatmul, TransposeModeAndPeTranspose) {
  // A transpose is a matmul of the data [P, F] (the stationary) by an identity: max(P, min(64,
  // F)), behind a previous PE instruction that hides the data's load.
  const Instruction hide = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 512));
  IssueContext behind;
  behind.previous = &hide;
  Instruction tm_short = matmul(sbuf(DType::bf16, 32, 128), sbuf(DType::bf16, 32, 32));
  tm_short.flags |= isa::kTransposeMode;
  EXPECT_EQ(cycles(tm_short, "trn2", behind), 64u);
  Instruction tm_tiny = matmul(sbuf(DType::bf16, 16, 8), sbuf(DType::bf16, 16, 16));
  tm_tiny.flags |= isa::kTransposeMode;
  EXPECT_EQ(cycles(tm_tiny, "trn2", behind), 16u);
  const Instruction t128 =
      make(Opcode::transpose, Engine::PE,
           {{Role::dst, psum(DType::bf16, 16, 128)}, {Role::src, sbuf(DType::bf16, 128, 16)}});
  EXPECT_EQ(cycles(t128, "trn1", behind), 128u);

  // FP32 data: NC-v2 has no transpose mode, so the transpose is an FP32 matmul (x4); NC-v3's
  // transpose mode is twice as fast as that (x2).
  Instruction tm = matmul(sbuf(DType::fp32, 128, 128), sbuf(DType::fp32, 128, 32));
  tm.flags |= isa::kTransposeMode;
  EXPECT_EQ(cycles(tm, "trn2", behind), 2u * 128u);
  EXPECT_EQ(cycles(tm, "trn1", behind), 4u * 128u);
  const Instruction t32 =
      make(Opcode::transpose, Engine::PE,
           {{Role::dst, psum(DType::fp32, 128, 32)}, {Role::src, sbuf(DType::fp32, 32, 128)}});
  EXPECT_EQ(cycles(t32, "trn1", behind), 4u * 64u);
  EXPECT_EQ(cycles(t32, "trn2", behind), 2u * 64u);

  // The data is a new stationary every time: its load (ceil(F / 4), x the same FP32 factor)
  // shows where nothing runs before it, or where it waited (the engine sat idle).
  EXPECT_EQ(cycles(tm_short, "trn2"), 64u + 32u);
  EXPECT_EQ(cycles(t32, "trn2"), 2u * 64u + 2u * 32u);
  IssueContext waited = behind;
  waited.waited_on_semaphore = true;
  EXPECT_EQ(cycles(t128, "trn1", waited), 128u + 4u);  // and no access or dependent overhead
  // Behind a previous transpose of the same data it loads again, hidden by that transpose.
  IssueContext after_itself;
  after_itself.previous = &tm;
  EXPECT_EQ(cycles(tm, "trn1", after_itself), 4u * 128u);
}

// ---------------------------------------------------------------- ACT / DVE / POOL

class CostVector : public ::testing::Test {
 protected:
  // Fixed per-instruction overhead of ACT/DVE/POOL on `g`.
  static uint64_t ovh(const char* g) { return gen(g).access_overhead; }
};

TEST_F(CostVector, ConfigParameters) {
  // The rules below are written for these published values (§4.1, §4.2).
  for (const char* g : {"trn1", "trn2", "trn3"}) {
    EXPECT_EQ(gen(g).min_interval, 64u);
    EXPECT_EQ(gen(g).access_overhead, 60u);
    EXPECT_EQ(gen(g).pool_startup, 150u);
  }
}

TEST_F(CostVector, Activation) {
  auto act = [](uint32_t n, bool reduce) {
    Instruction inst =
        make(Opcode::activation, Engine::ACT,
             {{Role::dst, sbuf(DType::fp32, 128, n)}, {Role::src, sbuf(DType::fp32, 128, n)}});
    if (reduce) inst.operands.push_back({Role::reduce_dst, sbuf(DType::fp32, 128, 1)});
    return inst;
  };
  EXPECT_EQ(cycles(act(1, false), "trn1"), 64u + ovh("trn1"));  // MIN_II
  EXPECT_EQ(cycles(act(63, false), "trn1"), 64u + ovh("trn1"));
  EXPECT_EQ(cycles(act(65, false), "trn1"), 65u + ovh("trn1"));
  EXPECT_EQ(cycles(act(2048, false), "trn2"), 2048u + ovh("trn2"));
  EXPECT_EQ(cycles(act(2048, true), "trn2"), 2048u + 64u + ovh("trn2"));  // activation_reduce
  EXPECT_EQ(cycles(act(1, true), "trn1"), 128u + ovh("trn1"));
  // Partitions are free: 1 or 128 of them cost the same.
  Instruction one = act(1024, false);
  one.operand(Role::src)->num_partitions = 1;
  one.operand(Role::dst)->num_partitions = 1;
  EXPECT_EQ(cycles(one, "trn1"), cycles(act(1024, false), "trn1"));
}

TEST_F(CostVector, AccumulatingInstructions) {
  const uint32_t n = 512;
  // tensor_scalar_reduce: max(MIN_II, N) + MIN_II, without the 16-bit fast modes.
  Instruction ts =
      make(Opcode::tensor_scalar, Engine::DVE,
           {{Role::dst, sbuf(DType::bf16, 128, n)}, {Role::src, sbuf(DType::bf16, 128, n)}});
  ts.alu0 = isa::AluOp::multiply;
  const uint64_t plain = cycles(ts, "trn2");
  EXPECT_EQ(plain, n / 4 + ovh("trn2"));  // the 4x mode of a plain tensor_scalar
  ts.alu2 = isa::AluOp::add;
  ts.ints[3] = static_cast<int32_t>(isa::ReduceCmd::reset_reduce);
  EXPECT_EQ(cycles(ts, "trn2"), n + 64u + ovh("trn2"));
  ts.ints[3] = static_cast<int32_t>(isa::ReduceCmd::reset);  // nothing folded: the plain cost
  EXPECT_EQ(cycles(ts, "trn2"), plain);

  // scalar_tensor_tensor: N for BF16 subtract-then-multiply of even N, else 2N.
  Instruction stt = make(Opcode::scalar_tensor_tensor, Engine::DVE,
                         {{Role::dst, sbuf(DType::bf16, 128, n)},
                          {Role::in0, sbuf(DType::bf16, 128, n)},
                          {Role::in1, sbuf(DType::bf16, 128, n)}});
  stt.alu0 = isa::AluOp::subtract;
  stt.alu1 = isa::AluOp::multiply;
  EXPECT_EQ(cycles(stt, "trn1"), n + ovh("trn1"));
  stt.alu1 = isa::AluOp::add;
  EXPECT_EQ(cycles(stt, "trn1"), 2 * n + ovh("trn1"));
  stt.alu2 = isa::AluOp::max;
  stt.ints[3] = static_cast<int32_t>(isa::ReduceCmd::reduce);
  EXPECT_EQ(cycles(stt, "trn1"), 2 * n + 64u + ovh("trn1"));

  // range_select: max(MIN_II, N), the reduction included.
  Instruction rs = make(Opcode::range_select, Engine::DVE,
                        {{Role::dst, sbuf(DType::fp32, 128, n)},
                         {Role::on_true, sbuf(DType::fp32, 128, n)},
                         {Role::operand0, sbuf(DType::fp32, 128, 1)},
                         {Role::operand1, sbuf(DType::fp32, 128, 1)}});
  EXPECT_EQ(cycles(rs, "trn2"), n + ovh("trn2"));
  rs.operand(Role::on_true)->dims[0].size = 8;
  EXPECT_EQ(cycles(rs, "trn2"), 64u + ovh("trn2"));
}

TEST_F(CostVector, DependentOverhead) {
  const Instruction a = make(Opcode::activation, Engine::ACT,
                             {{Role::dst, sbuf(DType::fp32, 128, 1)},
                              {Role::src, tile(DType::fp32, 128, 1, MemSpace::SBUF, 0, 64)}});
  const uint64_t base = cycles(a, "trn1");
  EXPECT_EQ(base, 64u + ovh("trn1"));
  IssueContext waited;
  waited.waited_on_semaphore = true;
  EXPECT_EQ(cycles(a, "trn1", waited), base + gen("trn1").dependent_overhead);
  EXPECT_GT(gen("trn1").dependent_overhead, 0u);

  // Reading what the previous instruction of the engine wrote is dependent too.
  const Instruction b = make(Opcode::activation, Engine::ACT,
                             {{Role::dst, tile(DType::fp32, 128, 1, MemSpace::SBUF, 0, 64)},
                              {Role::src, sbuf(DType::fp32, 128, 1)}});
  IssueContext after_a;
  after_a.previous = &a;
  EXPECT_EQ(cycles(b, "trn1", after_a), base + gen("trn1").dependent_overhead);
  // Not when it reads elsewhere (other bytes, other partitions, PSUM)...
  Instruction c = b;
  c.operand(Role::src)->offset = 4;
  EXPECT_EQ(cycles(c, "trn1", after_a), base);
  c = b;
  *c.operand(Role::src) = tile(DType::fp32, 64, 1, MemSpace::SBUF, 64);
  Instruction a_low = a;
  a_low.operand(Role::dst)->num_partitions = 64;
  IssueContext after_low;
  after_low.previous = &a_low;
  EXPECT_EQ(cycles(c, "trn1", after_low), base);
  c = b;
  c.operand(Role::src)->space = MemSpace::PSUM;
  EXPECT_EQ(cycles(c, "trn1", after_a), base);
  // ...nor when the previous instruction only read the same place.
  IssueContext after_b;
  after_b.previous = &b;
  EXPECT_EQ(cycles(b, "trn1", after_b), base);

  // Calibration (§8.5 [N4]): dependent 1-element ScalarE instructions on NC-v2 issue
  // every ~189 ns = 264 ACT cycles.
  EXPECT_EQ(cycles(b, "trn1", after_a), 264u);
  EXPECT_NEAR(static_cast<double>(instruction_ps(b, gen("trn1"), after_a)), 189000.0,
              189000.0 * 0.01);
}

TEST_F(CostVector, TensorTensor) {
  auto tt = [](AccessPattern a, AccessPattern b, AccessPattern d, AluOp op = AluOp::add,
               Engine e = Engine::DVE) {
    Instruction inst =
        make(Opcode::tensor_tensor, e, {{Role::dst, d}, {Role::in0, a}, {Role::in1, b}});
    inst.alu0 = op;
    return inst;
  };
  const auto f32 = sbuf(DType::fp32, 128, 1024);
  // Two SBUF inputs: 2N; one PSUM + one SBUF: N.
  EXPECT_EQ(cycles(tt(f32, f32, f32), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(tt(psum(DType::fp32, 128, 1024), f32, f32), "trn1"), 1024u + ovh("trn1"));
  EXPECT_EQ(cycles(tt(f32, psum(DType::fp32, 128, 1024), f32, AluOp::max), "trn2"),
            1024u + ovh("trn2"));
  // MIN_II: 2 * 16 = 32 < 64.
  const auto small = sbuf(DType::fp32, 128, 16);
  EXPECT_EQ(cycles(tt(small, small, small), "trn1"), 64u + ovh("trn1"));
  // All-BF16 SBUF add/subtract/multiply with unit stride: N on NC-v2.
  const auto b16 = sbuf(DType::bf16, 128, 1024);
  EXPECT_EQ(cycles(tt(b16, b16, b16, AluOp::add), "trn1"), 1024u + ovh("trn1"));
  EXPECT_EQ(cycles(tt(b16, b16, b16, AluOp::multiply), "trn1"), 1024u + ovh("trn1"));
  EXPECT_EQ(cycles(tt(b16, b16, b16, AluOp::is_gt), "trn1"), 2048u + ovh("trn1"));
  const auto strided = tile(DType::bf16, 128, 1024, MemSpace::SBUF, 0, 0, 2);
  EXPECT_EQ(cycles(tt(strided, b16, b16, AluOp::add), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(tt(b16, b16, sbuf(DType::fp32, 128, 1024), AluOp::add), "trn1"),
            2048u + ovh("trn1"));
  // NC-v3 2x mode: both inputs SBUF, every tensor BF16/FP16.
  EXPECT_EQ(cycles(tt(b16, b16, b16, AluOp::add), "trn2"), 512u + ovh("trn2"));
  EXPECT_EQ(cycles(tt(b16, b16, b16, AluOp::is_gt), "trn2"), 1024u + ovh("trn2"));
  const auto h16 = sbuf(DType::fp16, 128, 1024);
  EXPECT_EQ(cycles(tt(h16, h16, b16, AluOp::max), "trn2"), 1024u + ovh("trn2"));
  EXPECT_EQ(cycles(tt(f32, f32, f32), "trn2"), 2048u + ovh("trn2"));
  // ...only on VectorE.
  EXPECT_EQ(cycles(tt(b16, b16, b16, AluOp::is_gt, Engine::POOL), "trn2"), 2048u + ovh("trn2"));
}

TEST_F(CostVector, TensorScalarAndCopyModes) {
  auto op = [](Opcode o, AccessPattern src, AccessPattern dst, Engine e = Engine::DVE) {
    return make(o, e, {{Role::dst, dst}, {Role::src, src}});
  };
  const auto b16 = sbuf(DType::bf16, 128, 4096);
  const auto h16 = sbuf(DType::fp16, 128, 4096);
  const auto f32 = sbuf(DType::fp32, 128, 4096);
  const auto strided = tile(DType::bf16, 128, 4096, MemSpace::SBUF, 0, 0, 2);
  const auto b16_psum = psum(DType::bf16, 128, 4096);
  const auto strided_psum = tile(DType::bf16, 128, 4096, MemSpace::PSUM, 0, 0, 2);
  for (Opcode o : {Opcode::tensor_copy, Opcode::tensor_scalar}) {
    SCOPED_TRACE(static_cast<int>(o));
    // NC-v2: N whatever the dtype.
    EXPECT_EQ(cycles(op(o, b16, b16), "trn1"), 4096u + ovh("trn1"));
    EXPECT_EQ(cycles(op(o, f32, f32), "trn1"), 4096u + ovh("trn1"));
    // NC-v3/v4: 4x SBUF->SBUF 16-bit unit stride (dtypes may differ)...
    EXPECT_EQ(cycles(op(o, b16, b16), "trn2"), 1024u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, b16, h16), "trn3"), 1024u + ovh("trn3"));
    // ...2x with a non-unit stride, or one side in PSUM...
    EXPECT_EQ(cycles(op(o, strided, b16), "trn2"), 2048u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, b16_psum, b16), "trn2"), 2048u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, b16, b16_psum), "trn2"), 2048u + ovh("trn2"));
    // ...1x for PSUM with a non-unit stride, any 32-bit side, or another engine.
    EXPECT_EQ(cycles(op(o, strided_psum, b16), "trn2"), 4096u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, f32, b16), "trn2"), 4096u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, b16, b16, Engine::ACT), "trn2"), 4096u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, b16, b16, Engine::POOL), "trn2"), 4096u + ovh("trn2"));
    // MIN_II after the speed-up: 128 / 4 = 32 -> 64; and small N on NC-v2.
    EXPECT_EQ(cycles(op(o, sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 128)), "trn2"),
              64u + ovh("trn2"));
    EXPECT_EQ(cycles(op(o, sbuf(DType::fp32, 128, 10), sbuf(DType::fp32, 128, 10)), "trn1"),
              64u + ovh("trn1"));
  }
}

TEST_F(CostVector, TensorReduce) {
  auto red = [](DType in, DType out, uint32_t n, AluOp o) {
    Instruction inst = make(Opcode::tensor_reduce, Engine::DVE,
                            {{Role::dst, sbuf(out, 128, 1)}, {Role::src, sbuf(in, 128, n)}});
    inst.alu0 = o;
    inst.axes = 1;
    return inst;
  };
  EXPECT_EQ(cycles(red(DType::bf16, DType::bf16, 2048, AluOp::add), "trn1"), 1024u + ovh("trn1"));
  EXPECT_EQ(cycles(red(DType::bf16, DType::bf16, 2048, AluOp::max), "trn2"), 1024u + ovh("trn2"));
  EXPECT_EQ(cycles(red(DType::bf16, DType::bf16, 2048, AluOp::min), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(red(DType::bf16, DType::fp32, 2048, AluOp::add), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(red(DType::fp32, DType::fp32, 2048, AluOp::add), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(red(DType::fp32, DType::fp32, 8, AluOp::add), "trn1"), 64u + ovh("trn1"));
}

TEST_F(CostVector, Memset) {
  auto ms = [](DType t, uint32_t n, float value) {
    Instruction inst = make(Opcode::memset, Engine::DVE, {{Role::dst, sbuf(t, 128, n)}});
    inst.imm0 = value;
    return inst;
  };
  EXPECT_EQ(cycles(ms(DType::bf16, 2048, 0.0f), "trn1"), 1024u + ovh("trn1"));
  EXPECT_EQ(cycles(ms(DType::fp16, 2048, 0.0f), "trn2"), 1024u + ovh("trn2"));
  EXPECT_EQ(cycles(ms(DType::bf16, 2048, 1.0f), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(ms(DType::fp32, 2048, 0.0f), "trn1"), 2048u + ovh("trn1"));
  EXPECT_EQ(cycles(ms(DType::bf16, 100, 0.0f), "trn1"), 64u + ovh("trn1"));
}

TEST_F(CostVector, RandomNumbersAssumeOneElementPerCycle) {
  // No published cost: assumed like memset on VectorE and iota on GpSimd.
  const Instruction dve =
      make(Opcode::rng, Engine::DVE, {{Role::dst, sbuf(DType::uint16, 128, 2048)}});
  EXPECT_EQ(cycles(dve, "trn2"), 2048u + ovh("trn2"));
  const Instruction dve_small =
      make(Opcode::rng, Engine::DVE, {{Role::dst, sbuf(DType::uint32, 128, 8)}});
  EXPECT_EQ(cycles(dve_small, "trn2"), 64u + ovh("trn2"));
  const Instruction pool =
      make(Opcode::rng, Engine::POOL, {{Role::dst, sbuf(DType::uint16, 128, 512)}});
  EXPECT_EQ(cycles(pool, "trn2"), 150u + 512u + ovh("trn2"));
  const Instruction seed =
      make(Opcode::rand_set_state, Engine::POOL, {{Role::src, sbuf(DType::uint32, 128, 6)}});
  EXPECT_EQ(cycles(seed, "trn2"), 150u + 6u + ovh("trn2"));
}

TEST_F(CostVector, TopEightInstructionsTakeOneCyclePerDataElement) {
  // nki.isa max8 / nc_find_index8 / nc_match_replace8: N cycles (§4.2 [N9]).
  const auto data = sbuf(DType::fp32, 128, 4096), eight = sbuf(DType::fp32, 128, 8);
  const Instruction m = make(Opcode::max8, Engine::DVE, {{Role::dst, eight}, {Role::src, data}});
  EXPECT_EQ(cycles(m, "trn2"), 4096u + ovh("trn2"));
  const Instruction f =
      make(Opcode::find_index8, Engine::DVE,
           {{Role::dst, sbuf(DType::uint32, 128, 8)}, {Role::src, data}, {Role::vals, eight}});
  EXPECT_EQ(cycles(f, "trn2"), 4096u + ovh("trn2"));
  const Instruction r = make(Opcode::match_replace8, Engine::DVE,
                             {{Role::dst, sbuf(DType::fp32, 128, 16)},
                              {Role::src, sbuf(DType::fp32, 128, 16)},
                              {Role::vals, eight}});
  EXPECT_EQ(cycles(r, "trn2"), 64u + ovh("trn2"));  // the MIN_II clamp
}

TEST_F(CostVector, SelectCopyPredicatedBnStats) {
  const auto f = sbuf(DType::fp32, 128, 1000);
  const Instruction sel =
      make(Opcode::select, Engine::DVE,
           {{Role::dst, f}, {Role::predicate, f}, {Role::on_true, f}, {Role::on_false, f}});
  EXPECT_EQ(cycles(sel, "trn1"), 1000u + ovh("trn1"));
  const Instruction sel_small = make(Opcode::select, Engine::POOL,
                                     {{Role::dst, sbuf(DType::fp32, 128, 3)},
                                      {Role::predicate, sbuf(DType::fp32, 128, 3)},
                                      {Role::on_true, sbuf(DType::fp32, 128, 3)},
                                      {Role::on_false, sbuf(DType::fp32, 128, 3)}});
  EXPECT_EQ(cycles(sel_small, "trn1"), 64u + ovh("trn1"));

  auto cp = [](AccessPattern src, AccessPattern pred) {
    return make(
        Opcode::copy_predicated, Engine::DVE,
        {{Role::dst, sbuf(DType::fp32, 128, 1000)}, {Role::src, src}, {Role::predicate, pred}});
  };
  EXPECT_EQ(cycles(cp(f, f), "trn1"), 2000u + ovh("trn1"));
  EXPECT_EQ(cycles(cp(psum(DType::fp32, 128, 1000), f), "trn1"), 1000u + ovh("trn1"));
  EXPECT_EQ(cycles(cp(f, psum(DType::fp32, 128, 1000)), "trn1"), 1000u + ovh("trn1"));
  EXPECT_EQ(cycles(cp(sbuf(DType::fp32, 128, 20), sbuf(DType::fp32, 128, 20)), "trn1"),
            64u + ovh("trn1"));

  const Instruction stats =
      make(Opcode::bn_stats, Engine::DVE,
           {{Role::dst, sbuf(DType::fp32, 128, 6)}, {Role::src, sbuf(DType::fp32, 128, 512)}});
  EXPECT_EQ(cycles(stats, "trn2"), 512u + ovh("trn2"));
  const Instruction stats_small =
      make(Opcode::bn_stats, Engine::DVE,
           {{Role::dst, sbuf(DType::fp32, 128, 6)}, {Role::src, sbuf(DType::fp32, 128, 8)}});
  EXPECT_EQ(cycles(stats_small, "trn2"), 64u + ovh("trn2"));
  // bn_aggr: 13 N / 3. N = 96 -> 416; N = 12 -> 52 -> MIN_II.
  const Instruction aggr =
      make(Opcode::bn_aggr, Engine::DVE,
           {{Role::dst, sbuf(DType::fp32, 128, 2)}, {Role::src, sbuf(DType::fp32, 128, 96)}});
  EXPECT_EQ(cycles(aggr, "trn1"), 416u + ovh("trn1"));
  const Instruction aggr_small =
      make(Opcode::bn_aggr, Engine::DVE,
           {{Role::dst, sbuf(DType::fp32, 128, 2)}, {Role::src, sbuf(DType::fp32, 128, 12)}});
  EXPECT_EQ(cycles(aggr_small, "trn1"), 64u + ovh("trn1"));
}

TEST_F(CostVector, ScanAndDveTranspose) {
  auto scan = [](uint32_t n) {
    return make(Opcode::tensor_tensor_scan, Engine::DVE,
                {{Role::dst, sbuf(DType::fp32, 128, n)},
                 {Role::in0, sbuf(DType::fp32, 128, n)},
                 {Role::in1, sbuf(DType::fp32, 128, n)}});
  };
  EXPECT_EQ(cycles(scan(1000), "trn2"), 2000u + ovh("trn2"));
  EXPECT_EQ(cycles(scan(10), "trn2"), 64u + ovh("trn2"));
  const Instruction t =
      make(Opcode::transpose, Engine::DVE,
           {{Role::dst, sbuf(DType::fp16, 32, 16)}, {Role::src, sbuf(DType::fp16, 16, 32)}});
  EXPECT_EQ(cycles(t, "trn1"), 64u + ovh("trn1"));
}

TEST_F(CostVector, GpSimdLibraryInstructions) {
  AccessPattern pattern;
  pattern.space = MemSpace::Pattern;
  pattern.dtype = DType::int32;
  pattern.num_dims = 1;
  pattern.dims[0] = {1, 512};
  const Instruction iota =
      make(Opcode::iota, Engine::POOL,
           {{Role::dst, sbuf(DType::int32, 128, 512)}, {Role::pattern, pattern}});
  EXPECT_EQ(cycles(iota, "trn1"), 150u + 512u + ovh("trn1"));
  const Instruction iota_small =
      make(Opcode::iota, Engine::POOL,
           {{Role::dst, sbuf(DType::int32, 128, 4)}, {Role::pattern, pattern}});
  EXPECT_EQ(cycles(iota_small, "trn1"), 150u + 4u + ovh("trn1"));  // no MIN_II: 150 + N
  const Instruction sel = make(Opcode::affine_select, Engine::POOL,
                               {{Role::dst, sbuf(DType::fp32, 128, 300)},
                                {Role::on_true, sbuf(DType::fp32, 128, 300)},
                                {Role::pattern, pattern}});
  EXPECT_EQ(cycles(sel, "trn2"), 150u + 300u + ovh("trn2"));
  const Instruction pr =
      make(Opcode::partition_reduce, Engine::POOL,
           {{Role::dst, sbuf(DType::fp32, 1, 64)}, {Role::src, sbuf(DType::fp32, 128, 64)}});
  EXPECT_EQ(cycles(pr, "trn1"), 150u + 64u + ovh("trn1"));
  const Instruction ps =
      make(Opcode::partition_shuffle, Engine::POOL,
           {{Role::dst, sbuf(DType::fp32, 32, 1000)}, {Role::src, sbuf(DType::fp32, 32, 1000)}});
  EXPECT_EQ(cycles(ps, "trn1"), 150u + 1000u + ovh("trn1"));

  // local_gather: 150 + nv*ne/C, C = ((28 + 4 ne) / (4 ne)) / min(4 / dtype_bytes, ne).
  auto lg = [](DType t, int32_t ne, int32_t nv) {
    Instruction inst = make(Opcode::local_gather, Engine::POOL,
                            {{Role::dst, sbuf(t, 32, static_cast<uint32_t>(ne * nv))},
                             {Role::src, sbuf(t, 32, 1024)},
                             {Role::index, sbuf(DType::uint16, 32, static_cast<uint32_t>(nv))}});
    inst.ints[0] = ne;
    inst.ints[1] = nv;
    return inst;
  };
  // fp32, ne=2: C = (36/8) / min(1, 2) = 4.5; nv=4: 8 / 4.5 = 1.8 -> 2.
  EXPECT_EQ(cycles(lg(DType::fp32, 2, 4), "trn2"), 150u + 2u + ovh("trn2"));
  // bf16, ne=1: C = (32/4) / min(2, 1) = 8; nv=64: 64 / 8 = 8.
  EXPECT_EQ(cycles(lg(DType::bf16, 1, 64), "trn2"), 150u + 8u + ovh("trn2"));
  // fp32, ne=16: C = (92/64) / 1 = 1.4375; nv=32: 512 / 1.4375 = 356.2 -> 357.
  EXPECT_EQ(cycles(lg(DType::fp32, 16, 32), "trn1"), 150u + 357u + ovh("trn1"));
}

// ---------------------------------------------------------------- control, errors, clocks

TEST(CostControl, SemaphoresDmaTriggersAndCollectives) {
  const Instruction wait = make(Opcode::sem_wait, Engine::DVE, {});
  EXPECT_EQ(cycles(wait, "trn2"), 1u);
  IssueContext waited;
  waited.waited_on_semaphore = true;
  EXPECT_EQ(cycles(wait, "trn2", waited), 1u);
  EXPECT_EQ(cycles(make(Opcode::sem_signal, Engine::PE, {}), "trn1"), 1u);
  EXPECT_EQ(cycles(make(Opcode::sem_set, Engine::SP, {}), "trn3"), 1u);

  const Instruction dma =
      make(Opcode::dma_copy, Engine::SP,
           {{Role::dst, sbuf(DType::bf16, 128, 128)}, {Role::src, hbm(DType::bf16, 128, 128)}});
  EXPECT_EQ(cycles(dma, "trn2"), 64u);  // the trigger only; the transfer is the DMA model's
  EXPECT_EQ(cycles(dma, "trn2", waited), 64u);

  const Instruction ar =
      make(Opcode::all_reduce, Engine::POOL,
           {{Role::dst, hbm(DType::fp32, 1, 1024)}, {Role::src, hbm(DType::fp32, 1, 1024)}});
  EXPECT_THROW(cycles(ar, "trn2"), std::invalid_argument);
  EXPECT_THROW(instruction_ps(ar, gen("trn2"), {}), std::invalid_argument);
  // An instruction on an engine that cannot run it.
  const Instruction act_on_sp =
      make(Opcode::activation, Engine::SP,
           {{Role::dst, sbuf(DType::fp32, 128, 8)}, {Role::src, sbuf(DType::fp32, 128, 8)}});
  EXPECT_THROW(cycles(act_on_sp, "trn2"), std::invalid_argument);
}

TEST(CostClock, PicosecondsFollowCyclesAndTheEngineClock) {
  const Instruction mm = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 512));
  IssueContext loaded;
  loaded.previous = &mm;
  // trn1 PE at 2.8 GHz: 512 cycles = 182.857 ns; trn2 PE at 2.4 GHz: 213.333 ns.
  EXPECT_EQ(instruction_ps(mm, gen("trn1"), loaded), 182857u);
  EXPECT_EQ(instruction_ps(mm, gen("trn2"), loaded), 213333u);
  // trn2 DVE at 0.96 GHz: 1024 + 60 cycles = 1129.167 ns; trn1 ACT at 1.4 GHz: 124 cycles = 88.571
  // ns.
  const Instruction copy =
      make(Opcode::tensor_copy, Engine::DVE,
           {{Role::dst, sbuf(DType::fp32, 128, 1024)}, {Role::src, sbuf(DType::fp32, 128, 1024)}});
  EXPECT_EQ(instruction_ps(copy, gen("trn2"), {}), 1129167u);
  const Instruction act =
      make(Opcode::activation, Engine::ACT,
           {{Role::dst, sbuf(DType::fp32, 128, 1)}, {Role::src, sbuf(DType::fp32, 128, 1)}});
  EXPECT_EQ(instruction_ps(act, gen("trn1"), {}), 88571u);

  // In general: llround(cycles * 1000 / GHz of the instruction's engine).
  struct Case {
    Instruction inst;
    double (*ghz)(const spec::GenerationConfig&);
  };
  Instruction copy_act = copy, copy_pool = copy;
  copy_act.engine = Engine::ACT;
  copy_pool.engine = Engine::POOL;
  const Instruction trigger =
      make(Opcode::dma_copy, Engine::SP,
           {{Role::dst, sbuf(DType::bf16, 128, 128)}, {Role::src, hbm(DType::bf16, 128, 128)}});
  const std::vector<Case> cases = {
      {mm, [](const spec::GenerationConfig& g) { return g.pe_ghz; }},
      {copy, [](const spec::GenerationConfig& g) { return g.dve_ghz; }},
      {copy_act, [](const spec::GenerationConfig& g) { return g.act_ghz; }},
      {copy_pool, [](const spec::GenerationConfig& g) { return g.pool_ghz; }},
      {trigger, [](const spec::GenerationConfig& g) { return g.sp_ghz; }},
  };
  for (const char* g : {"trn1", "trn2", "trn3"})
    for (const Case& c : cases) {
      const uint64_t cyc = instruction_cycles(c.inst, gen(g), {});
      EXPECT_EQ(
          instruction_ps(c.inst, gen(g), {}),
          static_cast<uint64_t>(std::llround(static_cast<double>(cyc) * 1000.0 / c.ghz(gen(g)))))
          << g << " " << isa::engine_name(c.inst.engine);
    }
}

// ---------------------------------------------------------------- DMA

Instruction dma(AccessPattern dst, AccessPattern src) {
  return make(Opcode::dma_copy, Engine::SP, {{Role::dst, dst}, {Role::src, src}});
}

TEST(CostDma, CalibrationOneEngine32KiBOnTrn2) {
  // §3, §8.5 [N6]: one [4, 4096] BF16 HBM->SBUF transfer, 32 KiB on one engine: 1,416 ns.
  // Four rows of 8 KiB are four descriptors: 1,424.7 ns of bytes + 4 x 9.37 ns = 1,462 ns (+3.3 %).
  const spec::GenerationConfig& g = gen("trn2");
  const uint64_t ps = dma_transfer_ps(32768, 4, g);
  EXPECT_NEAR(static_cast<double>(ps), 1416000.0, 1416000.0 * 0.05);
  // The formula: fixed + descriptors x per-descriptor + bytes / bandwidth.
  EXPECT_EQ(ps, static_cast<uint64_t>(std::llround((g.dma_fixed_ns + 4 * g.dma_descriptor_ns +
                                                    32768.0 / g.dma_engine_bytes_per_ns) *
                                                   1000)));
  EXPECT_EQ(dma_transfer_ps(0, 0, g), static_cast<uint64_t>(std::llround(g.dma_fixed_ns * 1000)));
  EXPECT_LT(dma_transfer_ps(32768, 4, gen("trn3")), ps);  // 33 B/ns
  EXPECT_GT(dma_transfer_ps(32768, 4, gen("trn1")), ps);  // 17 B/ns
}

TEST(CostDma, SmallRowsRunBelowTheSustainedRate) {
  // nki-dma-bandwidth-guide.rst [N5]: < 256 B per partition "a small fraction of peak",
  // 256 B - 2 KiB "improving but still below peak", >= 4 KiB saturates.
  for (const char* name : {"trn1", "trn2", "trn3"}) {
    const spec::GenerationConfig& g = gen(name);
    auto efficiency = [&](uint64_t row_bytes) {
      const double ideal = static_cast<double>(row_bytes) / g.dma_engine_bytes_per_ns * 1000;
      return ideal / static_cast<double>(dma_transfer_ps(row_bytes, 1, g));
    };
    EXPECT_LT(efficiency(64), 0.3) << name;
    EXPECT_LT(efficiency(256), 0.6) << name;
    EXPECT_GT(efficiency(2048), 0.85) << name;
    EXPECT_LT(efficiency(2048), 0.95) << name;
    EXPECT_NEAR(efficiency(4096), 0.95, 0.005) << name;
    EXPECT_GT(efficiency(65536), 0.99) << name;
    double last = 0;
    for (uint64_t b = 4; b <= 65536; b *= 2) {
      EXPECT_GT(efficiency(b), last) << name << " " << b;
      last = efficiency(b);
    }
  }
}

TEST(CostDma, DescriptorsAreContiguousPieces) {
  const spec::GenerationConfig& g = gen("trn2");
  // [128, 512] FP32 from a row-major HBM tensor: one 2 KiB piece per partition, 8 per engine.
  auto plan = plan_dma(dma(sbuf(DType::fp32, 128, 512), hbm(DType::fp32, 128, 512)), g);
  ASSERT_EQ(plan.size(), 16u);
  for (const DmaTransfer& t : plan) EXPECT_EQ(t.descriptors, 8u);
  // One row of 1 MiB in HBM is 16 descriptors of 64 KiB (the 16-bit length field).
  plan = plan_dma(dma(hbm(DType::fp32, 1, 262144), hbm(DType::fp32, 1, 262144)), g);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].descriptors, 16u);
  // A column of a [4, 4096] tile: every element is its own piece.
  AccessPattern column = sbuf(DType::bf16, 4, 64);
  column.dims[column.num_dims - 1].stride = 64;
  plan = plan_dma(dma(column, hbm(DType::bf16, 4, 64)), g);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].descriptors, 4u * 64u);
  // The same bytes in fewer pieces take less time.
  const auto rows = plan_dma(dma(sbuf(DType::bf16, 4, 64), hbm(DType::bf16, 4, 64)), g);
  EXPECT_EQ(rows[0].descriptors, 4u);
  EXPECT_GT(dma_transfer_ps(plan[0].bytes, plan[0].descriptors, g),
            dma_transfer_ps(rows[0].bytes, rows[0].descriptors, g));
}

TEST(CostDma, TransposeStreamsAtItsFractionOfACopyInTheDestinationsPieces) {
  const spec::GenerationConfig& g = gen("trn2");
  // [128, 128] BF16 from HBM, transposed: 128 destination pieces of 256 bytes, not one
  // descriptor per element, at 90 % of a copy's bandwidth.
  Instruction t = dma(sbuf(DType::bf16, 128, 128), hbm(DType::bf16, 128, 128));
  const auto copy = plan_dma(t, g);
  t.flags |= isa::kDmaTranspose;
  const auto transposed = plan_dma(t, g);
  ASSERT_EQ(transposed.size(), copy.size());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(transposed[i].bytes, copy[i].bytes);
    EXPECT_EQ(transposed[i].hbm_bytes, copy[i].hbm_bytes);
    EXPECT_EQ(transposed[i].descriptors, copy[i].descriptors);
    EXPECT_DOUBLE_EQ(transposed[i].bandwidth_fraction, 0.9);
  }
  const auto& c = copy[0];
  const double bytes_ns = static_cast<double>(c.bytes) / g.dma_engine_bytes_per_ns;
  EXPECT_NEAR(static_cast<double>(dma_transfer_ps(c.bytes, c.descriptors, g, 0.9)) -
                  static_cast<double>(dma_transfer_ps(c.bytes, c.descriptors, g)),
              (bytes_ns / 0.9 - bytes_ns) * 1000.0, 1.0);
  // From SBUF: half a copy's bandwidth.
  Instruction s = dma(sbuf(DType::bf16, 128, 64), sbuf(DType::bf16, 64, 128));
  s.flags |= isa::kDmaTranspose;
  for (const DmaTransfer& x : plan_dma(s, g)) EXPECT_DOUBLE_EQ(x.bandwidth_fraction, 0.5);
}

// A read-add-write (dma_copy add=true) streams at the generation's fraction of a copy (half on
// NeuronCore-v3, all of it on v4) and reads an HBM destination as well as writing it.
TEST(CostDma, AddIntoTheDestinationReadsItAndStreamsAtItsFraction) {
  Instruction copy = dma(hbm(DType::fp32, 128, 256), sbuf(DType::fp32, 128, 256));
  Instruction add = copy;
  add.flags |= isa::kAddToDst;
  for (const auto& [target, fraction] : {std::pair{"trn2", 0.5}, std::pair{"trn3", 1.0}}) {
    const auto plain = plan_dma(copy, gen(target));
    const auto added = plan_dma(add, gen(target));
    ASSERT_EQ(added.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(added[i].bytes, plain[i].bytes);
      EXPECT_EQ(added[i].descriptors, plain[i].descriptors);
      EXPECT_EQ(added[i].hbm_bytes, 2 * plain[i].hbm_bytes) << target;
      EXPECT_DOUBLE_EQ(added[i].bandwidth_fraction, fraction) << target;
    }
  }
}

TEST(CostDma, FourRowsGoToOneEngine) {
  const auto plan =
      plan_dma(dma(sbuf(DType::bf16, 4, 4096), hbm(DType::bf16, 4, 4096)), gen("trn2"));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].dma_engine, 0u);
  EXPECT_EQ(plan[0].bytes, 32768u);
  EXPECT_EQ(plan[0].hbm_bytes, 32768u);
  EXPECT_EQ(plan[0].descriptors, 4u);
  EXPECT_NEAR(static_cast<double>(dma_transfer_ps(plan[0].bytes, plan[0].descriptors, gen("trn2"))),
              1416000.0, 1416000.0 * 0.05);
}

TEST(CostDma, OneHundredTwentyEightRowsGoToSixteenEngines) {
  const auto plan =
      plan_dma(dma(sbuf(DType::bf16, 128, 128), hbm(DType::bf16, 128, 128)), gen("trn2"));
  ASSERT_EQ(plan.size(), 16u);
  for (uint32_t e = 0; e < 16; ++e) {
    EXPECT_EQ(plan[e].dma_engine, e);
    EXPECT_EQ(plan[e].bytes, 2048u);
    EXPECT_EQ(plan[e].hbm_bytes, 2048u);
  }
  // The store back to HBM splits by the source partitions.
  const auto store =
      plan_dma(dma(hbm(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 128)), gen("trn1"));
  ASSERT_EQ(store.size(), 16u);
  for (const DmaTransfer& t : store) {
    EXPECT_EQ(t.bytes, 2048u);
    EXPECT_EQ(t.hbm_bytes, 2048u);
  }
}

TEST(CostDma, EnginesFollowThePartitions) {
  // Partitions 96..99 belong to engine 12.
  auto plan = plan_dma(dma(tile(DType::fp32, 4, 256, MemSpace::SBUF, 96), hbm(DType::fp32, 4, 256)),
                       gen("trn2"));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].dma_engine, 12u);
  EXPECT_EQ(plan[0].bytes, 4096u);
  // Partitions 4..11 straddle engines 0 and 1.
  plan = plan_dma(dma(tile(DType::fp32, 8, 256, MemSpace::SBUF, 4), hbm(DType::fp32, 8, 256)),
                  gen("trn2"));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].dma_engine, 0u);
  EXPECT_EQ(plan[1].dma_engine, 1u);
  EXPECT_EQ(plan[0].bytes, 4096u);
  EXPECT_EQ(plan[1].bytes, 4096u);
  // SBUF -> SBUF: no HBM traffic.
  plan = plan_dma(dma(sbuf(DType::fp32, 16, 64), tile(DType::fp32, 16, 64, MemSpace::SBUF, 64)),
                  gen("trn2"));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].hbm_bytes, 0u);
  EXPECT_EQ(plan[0].bytes, 8u * 64u * 4u);
}

// A partition broadcast costs the copy of its walk from consecutive partitions: the same
// bytes, pieces and engines, onto SBUF and onto HBM (where the source's rows decide the split;
// from partition 100 a consecutive walk of 128 would not even fit).
TEST(CostDma, PartitionBroadcastCostsTheCopyOfItsWalk) {
  const spec::GenerationConfig& g = gen("trn2");
  AccessPattern bcast = tile(DType::fp32, 128, 512, MemSpace::SBUF, 100);
  bcast.partition_broadcast = true;
  const AccessPattern walk = sbuf(DType::fp32, 128, 512);
  const AccessPattern out = tile(DType::fp32, 128, 512, MemSpace::SBUF, 0, 4096);
  for (const AccessPattern& dst : {out, hbm(DType::fp32, 128, 512)}) {
    const auto copy = plan_dma(dma(dst, walk), g);
    const auto broadcast = plan_dma(dma(dst, bcast), g);
    ASSERT_EQ(broadcast.size(), copy.size());
    ASSERT_EQ(copy.size(), 16u);
    for (size_t i = 0; i < copy.size(); ++i) {
      EXPECT_EQ(broadcast[i].dma_engine, copy[i].dma_engine);
      EXPECT_EQ(broadcast[i].bytes, copy[i].bytes);
      EXPECT_EQ(broadcast[i].hbm_bytes, copy[i].hbm_bytes);
      EXPECT_EQ(broadcast[i].descriptors, copy[i].descriptors);
    }
  }
}

TEST(CostDma, CastsMoveTheLargerSide) {
  // FP32 in HBM -> BF16 in SBUF: 4 bytes read, 2 written per element; the transfer is the larger.
  const auto plan =
      plan_dma(dma(sbuf(DType::bf16, 128, 512), hbm(DType::fp32, 128, 512)), gen("trn2"));
  ASSERT_EQ(plan.size(), 16u);
  EXPECT_EQ(plan[0].bytes, 8u * 512u * 4u);
  EXPECT_EQ(plan[0].hbm_bytes, 8u * 512u * 4u);
  const auto store =
      plan_dma(dma(hbm(DType::fp32, 128, 512), sbuf(DType::bf16, 128, 512)), gen("trn2"));
  EXPECT_EQ(store[3].bytes, 8u * 512u * 4u);
  EXPECT_EQ(store[3].hbm_bytes, 8u * 512u * 4u);
}

TEST(CostDma, HbmToHbmSplitsRows) {
  // 32 rows: 4 engines of 8 rows; HBM counts the read and the write.
  auto plan = plan_dma(dma(hbm(DType::fp32, 32, 1024), hbm(DType::fp32, 32, 1024)), gen("trn2"));
  ASSERT_EQ(plan.size(), 4u);
  for (uint32_t e = 0; e < 4; ++e) {
    EXPECT_EQ(plan[e].dma_engine, e);
    EXPECT_EQ(plan[e].bytes, 8u * 4096u);
    EXPECT_EQ(plan[e].hbm_bytes, 2u * 8u * 4096u);
  }
  // 256 rows: 32 groups of 8 wrap around the 16 engines.
  plan = plan_dma(dma(hbm(DType::fp32, 256, 64), hbm(DType::fp32, 256, 64)), gen("trn2"));
  ASSERT_EQ(plan.size(), 16u);
  uint64_t total = 0;
  for (const DmaTransfer& t : plan) {
    EXPECT_EQ(t.bytes, 16u * 64u * 4u);
    total += t.bytes;
  }
  EXPECT_EQ(total, 256u * 64u * 4u);
  // One contiguous row is one transfer.
  plan = plan_dma(dma(hbm(DType::fp32, 1, 1000), hbm(DType::fp32, 1, 1000)), gen("trn1"));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].bytes, 4000u);
}

TEST(CostDma, IndirectSplitsByDestinationRows) {
  // Gather 4 rows of a [1024, 256] FP32 HBM table into SBUF partitions 0..3: one engine,
  // 4 rows * 1 KiB read from HBM (not the whole table).
  Instruction gather = dma(sbuf(DType::fp32, 4, 256), hbm(DType::fp32, 1024, 256));
  gather.operands.push_back({Role::index, sbuf(DType::int32, 4, 1)});
  auto plan = plan_dma(gather, gen("trn2"));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].dma_engine, 0u);
  EXPECT_EQ(plan[0].bytes, 4u * 1024u);
  EXPECT_EQ(plan[0].hbm_bytes, 4u * 1024u);
  EXPECT_EQ(plan[0].descriptors, 4u);  // a row per index
  // Gathered into contiguous HBM rows: still a piece per gathered row, not one for the block.
  Instruction into_hbm = dma(hbm(DType::fp32, 128, 64), hbm(DType::fp32, 1024, 64));
  into_hbm.operands.push_back({Role::index, sbuf(DType::int32, 128, 1)});
  plan = plan_dma(into_hbm, gen("trn2"));
  uint64_t pieces = 0;
  for (const DmaTransfer& t : plan) pieces += t.descriptors;
  EXPECT_EQ(pieces, 128u);
  // Scatter: the destination rows one by one.
  Instruction scatter = dma(hbm(DType::fp32, 1024, 64), sbuf(DType::fp32, 2, 256));
  scatter.operands.push_back({Role::index, sbuf(DType::int32, 2, 4)});
  scatter.flags |= isa::kScatter;
  pieces = 0;
  for (const DmaTransfer& t : plan_dma(scatter, gen("trn2"))) pieces += t.descriptors;
  EXPECT_EQ(pieces, 8u);
  // ... and the bytes of the 8 rows it writes (2 x 256 FP32), not of the whole table.
  uint64_t bytes = 0, hbm_bytes = 0;
  for (const DmaTransfer& t : plan_dma(scatter, gen("trn2"))) {
    bytes += t.bytes;
    hbm_bytes += t.hbm_bytes;
  }
  EXPECT_EQ(bytes, 2u * 256u * 4u);
  EXPECT_EQ(hbm_bytes, 2u * 256u * 4u);
  // Into 64 partitions: 8 engines.
  Instruction wide = dma(sbuf(DType::fp32, 64, 256), hbm(DType::fp32, 1024, 256));
  wide.operands.push_back({Role::index, sbuf(DType::int32, 64, 1)});
  plan = plan_dma(wide, gen("trn2"));
  ASSERT_EQ(plan.size(), 8u);
  EXPECT_EQ(plan[7].dma_engine, 7u);
  EXPECT_EQ(plan[7].bytes, 8u * 1024u);
}

TEST(CostDma, RejectsWhatIsNotADmaCopy) {
  const Instruction act =
      make(Opcode::activation, Engine::ACT,
           {{Role::dst, sbuf(DType::fp32, 128, 8)}, {Role::src, sbuf(DType::fp32, 128, 8)}});
  EXPECT_THROW(plan_dma(act, gen("trn2")), std::invalid_argument);
}

// ---------------------------------------------------------------- FLOPs

TEST(CostFlops, MatmulAndElementwise) {
  const Instruction mm = matmul(sbuf(DType::bf16, 128, 128), sbuf(DType::bf16, 128, 512));
  EXPECT_EQ(instruction_flops(mm), 2ull * 128 * 128 * 512);
  const Instruction small = matmul(sbuf(DType::bf16, 32, 64), sbuf(DType::bf16, 32, 100));
  EXPECT_EQ(instruction_flops(small), 2ull * 32 * 64 * 100);
  Instruction tm = mm;
  tm.flags |= isa::kTransposeMode;
  EXPECT_EQ(instruction_flops(tm), 0u);
  const Instruction act =
      make(Opcode::activation, Engine::ACT,
           {{Role::dst, sbuf(DType::fp32, 128, 512)}, {Role::src, sbuf(DType::fp32, 128, 512)}});
  EXPECT_EQ(instruction_flops(act), 128u * 512u);
  Instruction tt = make(Opcode::tensor_tensor, Engine::DVE,
                        {{Role::dst, sbuf(DType::fp32, 64, 10)},
                         {Role::in0, sbuf(DType::fp32, 64, 10)},
                         {Role::in1, sbuf(DType::fp32, 64, 10)}});
  EXPECT_EQ(instruction_flops(tt), 640u);
  const Instruction copy =
      make(Opcode::tensor_copy, Engine::DVE,
           {{Role::dst, sbuf(DType::fp32, 128, 512)}, {Role::src, sbuf(DType::fp32, 128, 512)}});
  EXPECT_EQ(instruction_flops(copy), 0u);
  EXPECT_EQ(instruction_flops(dma(sbuf(DType::bf16, 128, 128), hbm(DType::bf16, 128, 128))), 0u);
}

TEST(CostDevice, ALaunchIsAFixedCostAndOneDmaStartPerTensor) {
  // trn2: 20 us, then 1.3 us for each of three inputs and outputs (docs/cost-model.md §6).
  EXPECT_EQ(launch_ps(3, gen("trn2")), 23'900'000u);
  EXPECT_EQ(launch_ps(0, gen("trn2")), 20'000'000u);
}

TEST(CostDevice, ACopyTakesTheTriggerThenTheSlowerOfTheDmaAndHbm) {
  // trn2, 1 MiB: 1,300 ns, then 1,048,576 B at a core's 368 B/ns (HBM's 2 x bytes over 2,900
  // B/ns is faster); a logical core of two has twice the DMA rate.
  EXPECT_EQ(copy_ps(1 << 20, 1, gen("trn2")), 4'149'391u);
  EXPECT_EQ(copy_ps(1 << 20, 2, gen("trn2")), 2'724'696u);
  // trn1's core moves 103.5 B/ns (fitted, docs/cost-model.md §7): 1,300 + 1,048,576 / 103.5 ns.
  EXPECT_EQ(copy_ps(1 << 20, 1, gen("trn1")), 11'431'169u);
}

}  // namespace
}  // namespace neuronsim::sim
