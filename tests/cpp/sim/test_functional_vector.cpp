// The functional plane, part 2: the engines' elementwise and reduction instructions
// (ALU operations, rounding into every dtype, activation, tensor_scalar, tensor_reduce,
// select, copy_predicated, bn_stats/bn_aggr, scans) and the GpSimd index and
// cross-partition instructions. Expected values are closed-form numbers or plain
// double-precision loops written here.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_functional_support.h"

namespace neuronsim::sim::test {
namespace {

using isa::Role;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Kind = ExecError::Kind;

constexpr float kInf = std::numeric_limits<float>::infinity();

void expect_near_rel(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * (1.0 + std::fabs(want[i]))) << "element " << i;
}

// Equal values, NaN matching NaN.
void expect_same(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": " << got[i];
    else
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
  }
}

// ---------------------------------------------------------------------------
// ALU operations

struct AluCase {
  const char* op;
  std::vector<float> a, b, want;
};

TEST(TensorTensor, EveryAluOperationOnFp32) {
  const float nan = NAN;
  const std::vector<AluCase> cases = {
      {"bypass", {7, -1}, {9, 3}, {7, -1}},
      {"add", {1.5, -1, kInf}, {2.25, 1, -kInf}, {3.75, 0, nan}},
      {"subtract", {5, 1e30f}, {7.5, -1e30f}, {-2.5, 2e30f}},
      {"multiply", {3, 1e30f}, {-4, 1e30f}, {-12, kInf}},
      {"divide", {1, 1, -1, 0}, {4, 0, 0, 0}, {0.25, kInf, -kInf, nan}},
      {"max", {3, -0.5, nan, 1}, {-7, -0.25, 1, nan}, {3, -0.25, nan, nan}},
      {"min", {3, -0.5, nan, 1}, {-7, -0.25, 1, nan}, {-7, -0.5, nan, nan}},
      {"pow", {2, 9, 2}, {10, 0.5, -1}, {1024, 3, 0.5}},
      {"mod", {7, -7, 7, -7, 5.5, -5.5, 6}, {3, 3, -3, -3, 2, 2, 3}, {1, 2, -2, -1, 1.5, 0.5, 0}},
      {"abs_max", {-5, 2, -1}, {3, -4, -1}, {5, 4, 1}},
      {"is_equal", {2, 2, nan}, {2, 3, nan}, {1, 0, 0}},
      {"not_equal", {2, 2, nan}, {2, 3, nan}, {0, 1, 1}},
      {"is_gt", {3, 2, 1}, {2, 2, 2}, {1, 0, 0}},
      {"is_ge", {3, 2, 1}, {2, 2, 2}, {1, 1, 0}},
      {"is_lt", {3, 2, 1}, {2, 2, 2}, {0, 0, 1}},
      {"is_le", {3, 2, 1}, {2, 2, 2}, {0, 1, 1}},
      {"logical_and", {2, 0, 0.5, 0}, {-3, 5, 0, 0}, {1, 0, 0, 0}},
      {"logical_or", {2, 0, 0.5, 0}, {-3, 5, 0, 0}, {1, 1, 1, 0}},
      {"logical_xor", {2, 0, 0.5, 0}, {-3, 5, 0, 0}, {0, 1, 1, 0}},
      // Operands round to the nearest int32 (ties to even) and saturate.
      {"bitwise_and", {12, 2.5, 3.5, -1, 3e9f}, {10, 3, 7, 255, -1}, {8, 2, 4, 255, 2147483648.0f}},
      {"bitwise_or", {12, -16}, {10, 3}, {14, -13}},
      {"bitwise_xor", {12, -1}, {10, 5}, {6, -6}},
      {"left_shift", {3, 1, -1, 1}, {4, 33, 4, 31}, {48, 2, -16, -2147483648.0f}},
      {"arith_shift_right", {-16, 16, -1}, {2, 2, 31}, {-4, 4, -1}},
      {"logical_shift_right", {-16, 16, -1}, {28, 2, 1}, {15, 4, 2147483648.0f}},
  };
  ASSERT_EQ(cases.size(), static_cast<size_t>(isa::kNumAluOps));
  for (const AluCase& c : cases) {
    Core core;
    const std::string n = std::to_string(c.a.size());
    const auto in =
        parse("dve tensor_tensor dst=sbuf.fp32[0:1]+512[[1," + n + "]] in0=sbuf.fp32[0:1]+0[[1," +
              n + "]] in1=sbuf.fp32[0:1]+256[[1," + n + "]] op=" + c.op);
    put(core.st, operand(in, Role::in0), c.a);
    put(core.st, operand(in, Role::in1), c.b);
    execute(in, core.st);
    expect_same(get(core.st, operand(in, Role::dst)), c.want, c.op);
  }
}

TEST(TensorTensor, BitwiseOperationsOnInt32Tensors) {
  struct Case {
    const char* op;
    std::vector<int32_t> a, b, want;
  };
  // Magnitudes stay below 2^24, where int32 values pass through FP32 exactly.
  const std::vector<Case> cases = {
      {"bitwise_and",
       {0x00F0F0, 0x1234, -4096},
       {0x0FF00F, 0x0FF0, 0x7FFF},
       {0x00F000, 0x0230, 0x7000}},
      {"bitwise_or", {0x00F0F0, 0x1234, -4096}, {0x0FF00F, 0x0FF0, 0x7FFF}, {0x0FF0FF, 0x1FF4, -1}},
      {"bitwise_xor",
       {0x00F0F0, 0x1234, -4096},
       {0x0FF00F, 0x0FF0, 0x7FFF},
       {0x0F00FF, 0x1DC4, -28673}},
      {"left_shift", {0x00F0F0, 0x1234, -4096}, {8, 40, 11}, {0xF0F000, 0x123400, -8388608}},
      {"arith_shift_right", {0x00F0F0, 0x1234, -4096}, {4, 36, 3}, {0x0F0F, 0x123, -512}},
      {"logical_shift_right", {-256, -4096, 0x1234}, {24, 20, 4}, {0xFF, 0xFFF, 0x123}},
  };
  for (const Case& c : cases) {
    Core core;
    const auto in = parse(
        std::string("pool tensor_tensor dst=sbuf.i32[0:1]+512[[1,3]] in0=sbuf.i32[0:1]+0[[1,3]] "
                    "in1=sbuf.i32[0:1]+256[[1,3]] op=") +
        c.op);
    put_bits(core.st, operand(in, Role::in0), c.a);
    put_bits(core.st, operand(in, Role::in1), c.b);
    execute(in, core.st);
    EXPECT_THAT(get_bits<int32_t>(core.st, operand(in, Role::dst)), ElementsAreArray(c.want))
        << c.op;
  }
}

// dst (of dtype `dt`, raw bits T) = a + b for FP32 inputs.
template <typename T>
void check_add_into(const std::string& dt, const std::vector<float>& a, const std::vector<float>& b,
                    const std::vector<T>& want, isa::Fp8Config fp8 = {}) {
  Core core;
  core.st.fp8 = fp8;
  const std::string n = std::to_string(a.size());
  const auto in =
      parse("dve tensor_tensor dst=sbuf." + dt + "[0:1]+512[[1," + n +
            "]] in0=sbuf.fp32[0:1]+0[[1," + n + "]] in1=sbuf.fp32[0:1]+256[[1," + n + "]] op=add");
  put(core.st, operand(in, Role::in0), a);
  put(core.st, operand(in, Role::in1), b);
  execute(in, core.st);
  EXPECT_THAT(get_bits<T>(core.st, operand(in, Role::dst)), ElementsAreArray(want)) << dt;
}

TEST(TensorTensor, ResultsRoundToNearestEvenAndSaturateInEveryDtype) {
  check_add_into<uint16_t>("bf16", {1, 1, 1}, {0x1p-8f, 3 * 0x1p-8f, 0x1p-8f + 0x1p-20f},
                           {0x3f80, 0x3f82, 0x3f81});
  check_add_into<uint16_t>("fp16", {1, 65504, 6e-8f, 1e-8f}, {0x1p-11f, 16, 0, 0},
                           {0x3c00, 0x7c00, 0x0001, 0x0000});
  check_add_into<uint8_t>("fp8e4", {300, 1, -1, 0.25}, {300, 0.0625, -0.1875, 0.05},
                          {0x7e, 0x38, 0xba, 0x2a});
  check_add_into<uint8_t>("fp8e5", {1, 40000, -1, -1}, {0.125, 40000, -0.375, -0.3125},
                          {0x3c, 0x7b, 0xbe, 0xbd});
  check_add_into<int8_t>("i8", {100, -100, 1.5, -0.5}, {100, -100, 1, 0}, {127, -128, 2, 0});
  check_add_into<uint8_t>("u8", {-3, 200, 0.5, 1.5}, {1, 100, 0, 0}, {0, 255, 0, 2});
  check_add_into<int16_t>("i16", {30000, -0.5, -30000}, {30000, -1, -30000}, {32767, -2, -32768});
  check_add_into<uint16_t>("u16", {60000, -1}, {60000, 0.25}, {65535, 0});
  check_add_into<int32_t>("i32", {2e9f, -2.5, -3e9f}, {2e9f, 0, 0},
                          {2147483647, -2, -2147483647 - 1});
  check_add_into<uint32_t>("u32", {-5, 4e9f, 3e9f}, {1, 1e9f, 0}, {0, 4294967295u, 3000000000u});
  check_add_into<uint8_t>("bool", {0, 0.5, -1, NAN}, {0, 0, 1, 0}, {0, 1, 0, 1});
  // FP8 without saturation: e4m3 (fn layout) overflows to NaN, e5m2 to Inf.
  isa::Fp8Config no_sat;
  no_sat.saturate = false;
  check_add_into<uint8_t>("fp8e4", {1000, -1000}, {0, 0}, {0x7f, 0xff}, no_sat);
  check_add_into<uint8_t>("fp8e5", {1e5f}, {0}, {0x7c}, no_sat);
  // e4m3 with emax 7 is IEEE-style: max 240.
  isa::Fp8Config emax7;
  emax7.emax_e4m3 = 7;
  check_add_into<uint8_t>("fp8e4", {300, 240}, {0, 0}, {0x77, 0x77}, emax7);
}

TEST(TensorTensor, MixedInputDtypesAndInPlaceOperation) {
  Core core;
  // in0 bf16, in1 int16 from PSUM, dst overwrites in0.
  const auto in = parse(
      "dve tensor_tensor dst=sbuf.bf16[0:2]+0[[1,3]] in0=sbuf.bf16[0:2]+0[[1,3]] "
      "in1=psum.i16[0:2]+64[[1,3]] "
      "op=multiply");
  put(core.st, operand(in, Role::in0), {1.5, -2, 0.25, 3, 4, 5});
  put(core.st, operand(in, Role::in1), {2, 3, -4, 100, -1, 0});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(3, -6, -1, 300, -4, 0));
}

TEST(TensorTensor, Fp32TilesInPlaceAndPartlyOverlappingGiveThePackedResult) {
  Core core;
  // dst is in0 exactly: each element reads its inputs before it is written.
  const auto same = parse(
      "dve tensor_tensor dst=sbuf.fp32[0:2]+0[[1,4]] in0=sbuf.fp32[0:2]+0[[1,4]] "
      "in1=sbuf.fp32[0:2]+64[[1,4]] op=add");
  put(core.st, operand(same, Role::in0), iota_values(8));
  put(core.st, operand(same, Role::in1), iota_values(8, 10));
  execute(same, core.st);
  EXPECT_THAT(get(core.st, operand(same, Role::dst)), ElementsAre(10, 12, 14, 16, 18, 20, 22, 24));
  // dst overlaps in1 shifted by one element: the result is that of reading both inputs
  // whole before writing, as the instruction's semantics say.
  const auto shifted = parse(
      "dve tensor_tensor dst=sbuf.fp32[0:1]+132[[1,4]] in0=sbuf.fp32[0:1]+256[[1,4]] "
      "in1=sbuf.fp32[0:1]+128[[1,4]] op=add");
  put(core.st, operand(shifted, Role::in0), {0, 0, 0, 0});
  put(core.st, operand(shifted, Role::in1), {1, 2, 3, 4});
  execute(shifted, core.st);
  EXPECT_THAT(get(core.st, operand(shifted, Role::dst)), ElementsAre(1, 2, 3, 4));
}

// ---------------------------------------------------------------------------
// Casts and memset

template <typename T>
void check_copy(const std::string& from, const std::string& to, const std::vector<float>& src,
                const std::vector<T>& want) {
  Core core;
  const std::string n = std::to_string(src.size());
  const auto in = parse("act tensor_copy dst=sbuf." + to + "[0:1]+256[[1," + n + "]] src=sbuf." +
                        from + "[0:1]+0[[1," + n + "]]");
  put(core.st, operand(in, Role::src), src);
  execute(in, core.st);
  EXPECT_THAT(get_bits<T>(core.st, operand(in, Role::dst)), ElementsAreArray(want))
      << from << "->" << to;
}

TEST(TensorCopy, CastsBetweenDtypes) {
  check_copy<uint16_t>("fp32", "bf16", {1.00390625f, 0.1f, -65504.0f}, {0x3f80, 0x3dcd, 0xc780});
  check_copy<uint16_t>("fp32", "fp16", {0.1f, -2.0f, 1e6f}, {0x2e66, 0xc000, 0x7c00});
  check_copy<uint8_t>("fp32", "fp8e4", {1, 0.3f, 1000, -1000, 0x1p-9f},
                      {0x38, 0x2a, 0x7e, 0xfe, 0x01});
  check_copy<uint8_t>("fp32", "fp8e5", {1, 0.3f, 1e5f, -0.75f}, {0x3c, 0x35, 0x7b, 0xba});
  check_copy<int8_t>("fp32", "i8", {2.5, 3.5, -2.5, 300, -300, NAN}, {2, 4, -2, 127, -128, 0});
  check_copy<uint8_t>("fp32", "u8", {-1, 255.5, 254.5, 7.49f}, {0, 255, 254, 7});
  check_copy<int16_t>("bf16", "i16", {-3.5, 40000, 1.5}, {-4, 32767, 2});
  check_copy<int32_t>("fp32", "i32", {3e9f, -0.5, 16777216}, {2147483647, 0, 16777216});
  check_copy<uint32_t>("fp32", "u32", {-5, 1e10f, 123.5}, {0, 4294967295u, 124});
  check_copy<uint8_t>("fp32", "bool", {0, -0.0f, 0.5, NAN, -3}, {0, 0, 1, 1, 1});
  // Reads: every dtype converts exactly to FP32.
  check_copy<float>("fp8e4", "fp32", {448, -1, 0x1p-9f, 0.3125}, {448, -1, 0x1p-9f, 0.3125});
  check_copy<float>("i16", "fp32", {-32768, 12345}, {-32768, 12345});
  check_copy<float>("u32", "fp32", {3000000000.0f}, {3000000000.0f});
  check_copy<float>("fp16", "fp32", {65504, 0x1p-24f}, {65504, 0x1p-24f});
  Core core;
  const auto b = parse("dve tensor_copy dst=sbuf.fp32[0:1]+64[[1,3]] src=sbuf.bool[0:1]+0[[1,3]]");
  put_bits<uint8_t>(core.st, operand(b, Role::src), {0, 7, 255});
  execute(b, core.st);
  EXPECT_THAT(get(core.st, operand(b, Role::dst)), ElementsAre(0, 1, 1));
}

TEST(TensorCopy, OverlappingShiftReadsBeforeWriting) {
  Core core;
  const auto in = parse("pool tensor_copy dst=sbuf.fp32[0:1]+4[[1,8]] src=sbuf.fp32[0:1]+0[[1,8]]");
  put(core.st, operand(in, Role::src), iota_values(8, 1));
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
}

template <typename T>
void check_memset(const std::string& dst, float value, T want) {
  Core core;
  const auto in = parse("pool memset dst=" + dst + " value=" + fmt::format("{}", value));
  execute(in, core.st);
  const auto got = get_bits<T>(core.st, operand(in, Role::dst));
  ASSERT_FALSE(got.empty());
  for (T v : got) ASSERT_EQ(v, want) << dst;
}

TEST(Memset, WritesTheValueInEveryDtype) {
  check_memset<int16_t>("sbuf.i16[0:128]+0[[1,512]]", 7, 7);
  check_memset<float>("psum.fp32[0:128]+8192[[1,512]]", -2.5, -2.5f);
  check_memset<uint16_t>("sbuf.bf16[0:64]+64[[2,3],[1,2]]", 1.0f / 3, 0x3eab);
  check_memset<uint8_t>("sbuf.u8[32:32]+0[[1,5]]", 300, 255);
  check_memset<uint8_t>("sbuf.bool[0:1]+0[[1,5]]", 2, 1);
  check_memset<uint8_t>("sbuf.fp8e5[0:1]+0[[1,5]]", 0.3f, 0x35);
  check_memset<int32_t>("sbuf.i32[96:32]+12[[-1,3]]", -7, -7);
  // Only the pattern's elements change.
  Core core;
  const auto in = parse("dve memset dst=sbuf.fp32[0:1]+0[[2,3]] value=5");
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(parse("dve memset dst=sbuf.fp32[0:1]+0[[1,6]]"), Role::dst)),
              ElementsAre(5, 0, 5, 0, 5, 0));
}

// ---------------------------------------------------------------------------
// activation, tensor_scalar

TEST(Activation, ScaleAndBiasOperandsAndAddReduction) {
  Core core;
  const auto in = parse(
      "act activation dst=sbuf.fp32[0:4]+0[[1,16]] src=sbuf.fp32[0:4]+64[[1,16]] func=exp "
      "scale=sbuf.fp32[0:4]+128[[1,1]] bias=sbuf.bf16[0:4]+132[[1,1]] "
      "reduce_dst=sbuf.fp32[0:4]+136[[1,1]] "
      "reduce=add");
  const auto x = random_values(64, -2, 2, 7);
  const std::vector<float> s = {0.5, -1, 2, 0.25}, b = {0, 1, -0.5, 0.125};
  put(core.st, operand(in, Role::src), x);
  put(core.st, operand(in, Role::scale), s);
  put(core.st, operand(in, Role::bias), b);
  execute(in, core.st);
  std::vector<double> want(64), sums(4, 0.0);
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < 16; ++j) {
      want[p * 16 + j] = std::exp(double{x[p * 16 + j]} * s[p] + b[p]);
      sums[p] += want[p * 16 + j];
    }
  expect_near_rel(get(core.st, operand(in, Role::dst)), want, 1e-6);
  expect_near_rel(get(core.st, operand(in, Role::reduce_dst)), sums, 1e-5);
}

TEST(Activation, ImmediateScaleMaxMinReductionsAndFunctions) {
  Core core;
  const auto relu = parse(
      "act activation dst=sbuf.fp32[0:2]+0[[1,4]] src=sbuf.fp32[0:2]+64[[1,4]] func=relu scale=2 "
      "reduce_dst=sbuf.fp32[0:2]+128[[1,1]] reduce=max");
  put(core.st, operand(relu, Role::src), {-1, 3, 0.5, -4, -1, -2, -3, -0.5});
  execute(relu, core.st);
  EXPECT_THAT(get(core.st, operand(relu, Role::dst)), ElementsAre(0, 6, 1, 0, 0, 0, 0, 0));
  EXPECT_THAT(get(core.st, operand(relu, Role::reduce_dst)), ElementsAre(6, 0));
  const auto sq = parse(
      "act activation dst=sbuf.fp32[0:2]+0[[1,4]] src=sbuf.fp32[0:2]+64[[1,4]] func=square "
      "scale=-1 "
      "bias=sbuf.fp32[0:2]+132[[1,1]] reduce_dst=sbuf.fp32[0:2]+128[[1,1]] reduce=min");
  put(core.st, operand(sq, Role::bias), {1, 10});
  execute(sq, core.st);
  // (-x + bias)^2
  EXPECT_THAT(get(core.st, operand(sq, Role::dst)),
              ElementsAre(4, 4, 0.25, 25, 121, 144, 169, 110.25));
  EXPECT_THAT(get(core.st, operand(sq, Role::reduce_dst)), ElementsAre(0.25, 110.25));
  // The immediate scale is used as given, 0 included: dst = func(bias).
  const auto zero = parse(
      "act activation dst=sbuf.fp32[0:2]+0[[1,4]] src=sbuf.fp32[0:2]+64[[1,4]] func=identity "
      "scale=0 "
      "bias=sbuf.fp32[0:2]+132[[1,1]]");
  execute(zero, core.st);
  EXPECT_THAT(get(core.st, operand(zero, Role::dst)), ElementsAre(1, 1, 1, 1, 10, 10, 10, 10));
}

TEST(Activation, ReductionUsesTheUnroundedResults) {
  Core core;
  const auto in = parse(
      "act activation dst=sbuf.bf16[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+64[[1,4]] func=identity "
      "scale=1 "
      "reduce_dst=sbuf.fp32[0:1]+128[[1,1]] reduce=add");
  const float x = 1.0f + 0x1p-10f;  // rounds to 1 in bf16
  put(core.st, operand(in, Role::src), {x, x, x, x});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(get(core.st, operand(in, Role::reduce_dst)), ElementsAre(4.00390625f));
}

TEST(TensorScalar, ImmediatesReverseFlagsAndPerPartitionOperands) {
  Core core;
  const std::string io = "dst=sbuf.fp32[0:2]+0[[1,3]] src=sbuf.fp32[0:2]+64[[1,3]]";
  const std::vector<float> x = {1, 2, 3, -1, -2, 0.5};
  put(core.st, operand(parse("dve tensor_copy " + io), Role::src), x);
  const auto run = [&](const std::string& params) {
    const auto in = parse("dve tensor_scalar " + io + " " + params);
    execute(in, core.st);
    return get(core.st, operand(in, Role::dst));
  };
  EXPECT_THAT(run("op0=multiply imm0=-1.5 op1=add imm1=0.25"),
              ElementsAre(-1.25, -2.75, -4.25, 1.75, 3.25, -0.5));
  EXPECT_THAT(run("op0=subtract imm0=10"), ElementsAre(-9, -8, -7, -11, -12, -9.5));
  EXPECT_THAT(run("op0=subtract imm0=10 reverse0=true"), ElementsAre(9, 8, 7, 11, 12, 9.5));
  EXPECT_THAT(run("op0=add imm0=1 op1=divide imm1=12 reverse1=true"),
              ElementsAre(6, 4, 3, kInf, -12, 8));
  EXPECT_THAT(run("op0=add imm0=1 op1=divide imm1=4"), ElementsAre(0.5, 0.75, 1, 0, -0.25, 0.375));
  EXPECT_THAT(run("op0=pow imm0=2 op1=bypass imm1=100"), ElementsAre(1, 4, 9, 1, 4, 0.25));
  // Per-partition scalars: c0 = {10, 20}, c1 = {8, 21}; dst = max(c0 - x, c1).
  const auto in = parse("pool tensor_scalar " + io +
                        " op0=subtract operand0=sbuf.fp32[0:2]+128[[1,1]] reverse0=true "
                        "op1=max operand1=sbuf.fp32[0:2]+132[[1,1]]");
  put(core.st, operand(in, Role::operand0), {10, 20});
  put(core.st, operand(in, Role::operand1), {8, 21});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(9, 8, 8, 21, 22, 21));
}

// ---------------------------------------------------------------------------
// tensor_reduce

std::vector<float> small_ints(size_t n, unsigned seed) {
  auto v = random_values(n, -8, 8, seed);
  for (float& x : v) x = std::round(x);
  return v;
}

TEST(TensorReduce, OneAxisTwoAxesAndNegate) {
  Core core;
  const std::string src = "src=sbuf.fp32[0:2]+0[[8,4],[1,8]]";  // [2][4][8]
  const auto x = small_ints(64, 11);
  put(core.st, operand(parse("dve tensor_copy dst=sbuf.fp32[0:2]+1024[[1,32]] " + src), Role::src),
      x);
  const auto run = [&](const std::string& dst, const std::string& params) {
    const auto in = parse("dve tensor_reduce dst=" + dst + " " + src + " " + params);
    execute(in, core.st);
    return get(core.st, operand(in, Role::dst));
  };
  std::vector<float> inner(8), outer(16), all(2), neg_max(2);
  for (int p = 0; p < 2; ++p) {
    all[p] = 0;
    neg_max[p] = -kInf;
    for (int i = 0; i < 4; ++i) {
      inner[p * 4 + i] = 0;
      for (int j = 0; j < 8; ++j) {
        const float v = x[p * 32 + i * 8 + j];
        inner[p * 4 + i] += v;
        outer[p * 8 + j] = i == 0 ? v : std::min(outer[p * 8 + j], v);
        all[p] += v;
        neg_max[p] = std::max(neg_max[p], v);
      }
    }
    all[p] = -all[p];
    neg_max[p] = -neg_max[p];
  }
  EXPECT_THAT(run("sbuf.fp32[0:2]+512[[1,4]]", "op=add axes=0x2"), ElementsAreArray(inner));
  EXPECT_THAT(run("sbuf.fp32[0:2]+512[[1,8]]", "op=min axes=0x1"), ElementsAreArray(outer));
  EXPECT_THAT(run("sbuf.fp32[0:2]+512[[1,1]]", "op=add axes=0x3 negate=true"),
              ElementsAreArray(all));
  EXPECT_THAT(run("sbuf.fp32[0:2]+512[[1,1],[1,1]]", "op=max axes=0x3 negate=true keepdims=true"),
              ElementsAreArray(neg_max));
}

TEST(TensorReduce, MiddleAxisOfThreeWithMultiply) {
  Core core;
  const auto in = parse(
      "pool tensor_reduce dst=sbuf.bf16[0:2]+512[[4,2],[1,1],[1,4]] "
      "src=sbuf.fp32[0:2]+0[[12,2],[4,3],[1,4]] "
      "op=multiply axes=0x2 keepdims=true");
  std::vector<float> x(48);
  const float vals[] = {-2, -1, 0.5, 1, 2, 1.5};
  for (int i = 0; i < 48; ++i) x[i] = vals[(i * 7) % 6];
  put(core.st, operand(in, Role::src), x);
  execute(in, core.st);
  std::vector<float> want;
  for (int p = 0; p < 2; ++p)
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 4; ++c) {
        double prod = 1;
        for (int b = 0; b < 3; ++b) prod *= x[p * 24 + a * 12 + b * 4 + c];
        want.push_back(static_cast<float>(prod));
      }
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAreArray(want));
}

// ---------------------------------------------------------------------------
// select, copy_predicated

TEST(Select, PicksByPredicateAcrossDtypes) {
  Core core;
  const auto in = parse(
      "dve select dst=sbuf.fp16[0:2]+0[[1,3]] predicate=sbuf.u8[0:2]+64[[1,3]] "
      "on_true=sbuf.fp32[0:2]+128[[1,3]] "
      "on_false=sbuf.bf16[0:2]+256[[1,3]]");
  put_bits<uint8_t>(core.st, operand(in, Role::predicate), {0, 1, 2, 0, 0, 255});
  put(core.st, operand(in, Role::on_true), {1, 2, 3, 4, 5, 6});
  put(core.st, operand(in, Role::on_false), {-1, -2, -3, -4, -5, -6});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(-1, 2, 3, -4, -5, 6));
}

TEST(Select, ScalarOrPerPartitionOnFalseReversedPredicateAndMaxReduction) {
  Core core;
  const std::string io =
      "dst=sbuf.fp32[0:2]+0[[1,3]] predicate=sbuf.u8[0:2]+64[[1,3]] "
      "on_true=sbuf.fp32[0:2]+128[[1,3]]";
  const auto first = parse("dve select " + io + " on_false=-7");
  put_bits<uint8_t>(core.st, operand(first, Role::predicate), {0, 1, 2, 0, 0, 255});
  put(core.st, operand(first, Role::on_true), {1, 2, 3, 4, 5, 6});
  execute(first, core.st);
  EXPECT_THAT(get(core.st, operand(first, Role::dst)), ElementsAre(-7, 2, 3, -7, -7, 6));
  // reverse: on_true where the predicate is zero; on_false one value per partition.
  const auto per_partition = parse("dve select " + io +
                                   " on_false=sbuf.fp32[0:2]+256[[1,1]] reverse=true "
                                   "reduce_dst=sbuf.fp32[0:2]+512[[1,1]] reduce=max reduce_cmd=3");
  put(core.st, operand(per_partition, Role::on_false), {-1, -2});
  execute(per_partition, core.st);
  EXPECT_THAT(get(core.st, operand(per_partition, Role::dst)), ElementsAre(1, -1, -1, 4, 5, -2));
  EXPECT_THAT(get(core.st, operand(per_partition, Role::reduce_dst)), ElementsAre(1, 5));
}

TEST(Accumulator, CommandsResetFoldLoadAndCarryAcrossInstructionsAndKinds) {
  Core core;
  const std::string io = "dst=sbuf.fp32[0:2]+0[[1,3]] src=sbuf.fp32[0:2]+64[[1,3]]";
  const std::string rd = " reduce_dst=sbuf.fp32[0:2]+256[[1,1]]";
  const auto copy = parse("dve tensor_copy " + io);
  put(core.st, operand(copy, Role::src), {1, 2, 3, -1, -2, 0.5});
  const auto run = [&](const std::string& params) {
    const auto in = parse("dve tensor_scalar " + io + " op0=multiply imm0=2 " + params);
    execute(in, core.st);
    return in;
  };
  const auto reduce_of = [&](const std::string& params) {
    return get(core.st, operand(run(params + rd), Role::reduce_dst));
  };
  // tensor_scalar_reduce: dst = 2x; sums 12 and -5.
  EXPECT_THAT(reduce_of("reduce=add reduce_cmd=3"), ElementsAre(12, -5));
  // reduce: folds into what the accumulator holds.
  EXPECT_THAT(reduce_of("reduce=add reduce_cmd=2"), ElementsAre(24, -10));
  // A chain without reduce_dst keeps its value in the accumulator for the next instruction.
  run("reduce=add reduce_cmd=2");
  EXPECT_THAT(reduce_of("reduce=add reduce_cmd=2"), ElementsAre(48, -20));
  // load_reduce starts from the initial operand; max keeps the largest.
  const auto load =
      parse("dve tensor_scalar " + io + " op0=multiply imm0=2 reduce=max reduce_cmd=4" + rd +
            " initial=sbuf.fp32[0:2]+260[[1,1]]");
  put(core.st, operand(load, Role::initial), {100, -100});
  execute(load, core.st);
  EXPECT_THAT(get(core.st, operand(load, Role::reduce_dst)), ElementsAre(100, 1));
  // reset: the identity, nothing folded; the max then continues in a select.
  run("reduce=max reduce_cmd=1");
  const auto sel = parse(
      "dve select dst=sbuf.fp32[0:2]+0[[1,3]] predicate=sbuf.u8[0:2]+128[[1,3]] "
      "on_true=sbuf.fp32[0:2]+64[[1,3]] on_false=-50 reduce=max reduce_cmd=2" +
      rd);
  put_bits<uint8_t>(core.st, operand(sel, Role::predicate), {0, 0, 0, 1, 0, 0});
  execute(sel, core.st);
  EXPECT_THAT(get(core.st, operand(sel, Role::reduce_dst)), ElementsAre(-50, -1));
  // Partitions 32..33 have their own lanes: untouched by all of the above.
  EXPECT_EQ(core.st.accumulator[32], 0.0f);
}

TEST(ScalarTensorTensor, ScalarThenTensorWithReverseFlagsAndReduction) {
  Core core;
  const std::string io =
      "dst=sbuf.fp32[0:2]+0[[1,3]] in0=sbuf.fp32[0:2]+64[[1,3]] in1=sbuf.fp32[0:2]+128[[1,3]]";
  const auto first = parse("dve scalar_tensor_tensor " + io + " op0=subtract imm0=1 op1=multiply");
  put(core.st, operand(first, Role::in0), {1, 2, 3, 4, 5, 6});
  put(core.st, operand(first, Role::in1), {2, 2, 2, -1, -1, -1});
  execute(first, core.st);
  EXPECT_THAT(get(core.st, operand(first, Role::dst)), ElementsAre(0, 2, 4, -3, -4, -5));
  // (c0 - x) then in1 / t, c0 per partition = {10, 20}; row sums into reduce_dst.
  const auto second = parse("dve scalar_tensor_tensor " + io +
                            " operand0=sbuf.fp32[0:2]+256[[1,1]] op0=subtract reverse0=true "
                            "op1=divide reverse1=true reduce_dst=sbuf.fp32[0:2]+260[[1,1]] "
                            "reduce=add reduce_cmd=3");
  put(core.st, operand(second, Role::operand0), {10, 20});
  execute(second, core.st);
  // t = {9, 8, 7, 16, 15, 14}; in1 / t.
  const std::vector<float> want = {2.0f / 9,   2.0f / 8,   2.0f / 7,
                                   -1.0f / 16, -1.0f / 15, -1.0f / 14};
  EXPECT_THAT(get(core.st, operand(second, Role::dst)), ElementsAreArray(want));
  const auto sums = get(core.st, operand(second, Role::reduce_dst));
  EXPECT_FLOAT_EQ(sums[0], want[0] + want[1] + want[2]);
  EXPECT_FLOAT_EQ(sums[1], want[3] + want[4] + want[5]);
}

TEST(RangeSelect, KeepsIndicesBetweenPerPartitionBoundsAndReducesTheMaximum) {
  Core core;
  // Causal rows: partition p keeps indices range_start + j <= p (bound1), >= 0 (bound0).
  const auto in = parse(
      "dve range_select dst=sbuf.bf16[0:3]+0[[1,4]] on_true=sbuf.fp32[0:3]+64[[1,4]] "
      "operand0=sbuf.fp32[0:3]+128[[1,1]] operand1=sbuf.fp32[0:3]+132[[1,1]] cmp0=is_ge "
      "cmp1=is_le range_start=2 on_false=-3.4028235e+38 reduce_dst=sbuf.fp32[0:3]+256[[1,1]] "
      "reduce=max reduce_cmd=3");
  put(core.st, operand(in, Role::on_true), {5, 6, 7, 8, 1, 2, 3, 4, -1, -2, -3, -4});
  put(core.st, operand(in, Role::operand0), {0, 0, 3});
  put(core.st, operand(in, Role::operand1), {2, 4, 5});
  execute(in, core.st);
  const float low = -std::numeric_limits<float>::infinity();  // FP32_MIN rounds to -inf in bf16
  EXPECT_THAT(get(core.st, operand(in, Role::dst)),
              ElementsAre(5, low, low, low, 1, 2, 3, low, low, -2, -3, -4));
  // The reduction sees the FP32 values: an all-false row gives FP32_MIN, not -inf.
  const auto acc = get(core.st, operand(in, Role::reduce_dst));
  EXPECT_THAT(acc, ElementsAre(5, 3, -2));
  put(core.st, operand(in, Role::operand0), {10, 10, 10});
  execute(in, core.st);
  EXPECT_EQ(get(core.st, operand(in, Role::reduce_dst))[0], -std::numeric_limits<float>::max());
}

TEST(CopyPredicated, CopiesSelectedElementsAndLeavesOthersBitExact) {
  Core core;
  const std::string ops =
      "dst=sbuf.bf16[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+64[[1,4]] "
      "predicate=sbuf.fp32[0:1]+128[[1,4]]";
  const auto in = parse("dve copy_predicated " + ops);
  const auto rev = parse("pool copy_predicated " + ops + " reverse=true");
  put_bits<uint16_t>(core.st, operand(in, Role::dst),
                     {0x4120, 0x41a0, 0x7f81, 0x4220});  // 10, 20, sNaN, 40
  put(core.st, operand(in, Role::src), {1, 2, 3, 1.00390625f});
  put(core.st, operand(in, Role::predicate), {1, 0, 0, -0.5});
  execute(in, core.st);
  EXPECT_THAT(get_bits<uint16_t>(core.st, operand(in, Role::dst)),
              ElementsAre(0x3f80, 0x41a0, 0x7f81, 0x3f80));
  execute(rev, core.st);
  EXPECT_THAT(get_bits<uint16_t>(core.st, operand(in, Role::dst)),
              ElementsAre(0x3f80, 0x4000, 0x4040, 0x3f80));
}

// ---------------------------------------------------------------------------
// bn_stats, bn_aggr

struct Stats {
  double count, mean, m2;
};

Stats numpy_stats(const float* x, size_t n) {
  if (n == 0) return {0, 0, 0};
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double m2 = 0;
  for (size_t i = 0; i < n; ++i) m2 += (x[i] - mean) * (x[i] - mean);
  return {static_cast<double>(n), mean, m2};
}

TEST(BnStats, OddSizeSplitsIntoCeilAndFloorHalves) {
  Core core;
  const auto in = parse("dve bn_stats dst=sbuf.fp32[0:2]+0[[1,6]] src=sbuf.fp32[0:2]+64[[1,7]]");
  put(core.st, operand(in, Role::src), {1, 2, 3, 4, 10, 20, 60, 5, 5, 5, 5, -1, 1, 0});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)),
              ElementsAre(4, 2.5, 5, 3, 30, 1400, 4, 5, 0, 3, 0, 2));
  const auto one = parse("dve bn_stats dst=sbuf.fp32[0:1]+0[[1,6]] src=sbuf.fp32[0:1]+64[[1,1]]");
  execute(one, core.st);
  EXPECT_THAT(get(core.st, operand(one, Role::dst)), ElementsAre(1, 1, 0, 0, 0, 0));
}

TEST(BnStats, RandomRowsMatchADoubleComputation) {
  Core core;
  const auto in =
      parse("dve bn_stats dst=sbuf.fp32[0:128]+0[[1,6]] src=sbuf.fp32[0:128]+64[[1,511]]");
  const auto x = random_values(128 * 511, -3, 5, 21);
  put(core.st, operand(in, Role::src), x);
  execute(in, core.st);
  std::vector<double> want;
  for (int p = 0; p < 128; ++p) {
    const Stats a = numpy_stats(x.data() + p * 511, 256),
                b = numpy_stats(x.data() + p * 511 + 256, 255);
    for (double v : {a.count, a.mean, a.m2, b.count, b.mean, b.m2}) want.push_back(v);
  }
  expect_near_rel(get(core.st, operand(in, Role::dst)), want, 1e-5);
}

TEST(BnAggr, CombinesRecordsIntoMeanAndPopulationVariance) {
  Core core;
  // bn_stats of two 512-element chunks per partition, then bn_aggr of both records.
  const auto s0 =
      parse("dve bn_stats dst=sbuf.fp32[0:128]+0[[1,6]] src=sbuf.fp32[0:128]+1024[[1,512]]");
  const auto s1 =
      parse("dve bn_stats dst=sbuf.fp32[0:128]+24[[1,6]] src=sbuf.fp32[0:128]+3072[[1,512]]");
  const auto ag =
      parse("dve bn_aggr dst=sbuf.bf16[0:128]+512[[1,2]] src=sbuf.fp32[0:128]+0[[1,12]]");
  const auto agf =
      parse("dve bn_aggr dst=sbuf.fp32[0:128]+520[[1,2]] src=sbuf.fp32[0:128]+0[[1,12]]");
  const auto x = random_values(128 * 1024, -1, 3, 5);
  put(core.st, operand(parse("dve memset dst=sbuf.fp32[0:128]+1024[[1,1024]]"), Role::dst), x);
  for (const auto* in : {&s0, &s1, &ag, &agf}) execute(*in, core.st);
  std::vector<double> want;
  for (int p = 0; p < 128; ++p) {
    const Stats s = numpy_stats(x.data() + p * 1024, 1024);
    want.push_back(s.mean);
    want.push_back(s.m2 / s.count);
  }
  expect_near_rel(get(core.st, operand(agf, Role::dst)), want, 1e-5);
  expect_near_rel(get(core.st, operand(ag, Role::dst)), want, 1.0 / 128);  // bf16 rounding
}

TEST(BnAggr, ClosedFormEmptyGroupsAndZeroCount) {
  Core core;
  const auto in = parse("dve bn_aggr dst=sbuf.fp32[0:3]+0[[1,2]] src=sbuf.fp32[0:3]+64[[1,12]]");
  put(core.st, operand(in, Role::src),
      {4, 2.5, 5, 3, 30, 1400, 0, 0,  0, 0, 0, 0,    // {1,2,3,4,10,20,60} and two empty groups
       1, 7,   0, 0, 0,  0,    2, -1, 8, 0, 0, 0,    // {7} and {-3, 1}
       0, 0,   0, 0, 0,  0,    0, 0,  0, 0, 0, 0});  // nothing
  execute(in, core.st);
  const double v0[] = {1, 2, 3, 4, 10, 20, 60}, v1[] = {7, -3, 1};
  const auto popvar = [](const double* v, int n) {
    double m = 0, q = 0;
    for (int i = 0; i < n; ++i) m += v[i] / n;
    for (int i = 0; i < n; ++i) q += (v[i] - m) * (v[i] - m) / n;
    return std::pair{m, q};
  };
  const auto [m0, q0] = popvar(v0, 7);
  const auto [m1, q1] = popvar(v1, 3);
  expect_near_rel(get(core.st, operand(in, Role::dst)), {m0, q0, m1, q1, 0, 0}, 1e-6);
}

// ---------------------------------------------------------------------------
// tensor_tensor_scan

TEST(TensorTensorScan, LinearRecurrenceWithImmediateInitial) {
  Core core;
  const auto in = parse(
      "dve tensor_tensor_scan dst=sbuf.fp32[0:2]+0[[1,6]] in0=sbuf.fp32[0:2]+64[[1,6]] "
      "in1=sbuf.fp32[0:2]+128[[1,6]] "
      "op0=multiply op1=add initial=1");
  const auto a = random_values(12, 0.5, 1.5, 8), b = random_values(12, -1, 1, 9);
  put(core.st, operand(in, Role::in0), a);
  put(core.st, operand(in, Role::in1), b);
  execute(in, core.st);
  std::vector<double> want;
  for (int p = 0; p < 2; ++p) {
    double s = 1;
    for (int j = 0; j < 6; ++j) want.push_back(s = s * a[p * 6 + j] + b[p * 6 + j]);
  }
  expect_near_rel(get(core.st, operand(in, Role::dst)), want, 1e-6);
}

TEST(TensorTensorScan, InitialOperandMaxAddInPlace) {
  Core core;
  const auto in = parse(
      "dve tensor_tensor_scan dst=sbuf.fp32[0:2]+64[[1,4]] in0=sbuf.fp32[0:2]+64[[1,4]] "
      "in1=sbuf.fp32[0:2]+128[[1,4]] "
      "op0=max op1=add initial=sbuf.fp32[0:2]+256[[1,1]]");
  put(core.st, operand(in, Role::in0), {5, 1, 9, 2, 0, 0, 0, 0});
  put(core.st, operand(in, Role::in1), {1, 1, 1, 1, -1, -1, -1, -1});
  put(core.st, operand(in, Role::initial), {3, 10});
  execute(in, core.st);
  // p0: s=max(3,5)+1=6, max(6,1)+1=7, max(7,9)+1=10, max(10,2)+1=11; p1: 9, 8, 7, 6.
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(6, 7, 10, 11, 9, 8, 7, 6));
}

TEST(TensorTensorScan, EachElementIsOp0sFirstOperandAsInNki) {
  // NKI: s = op1(op0(in0[j], s), in1[j]). With subtract the order shows: from 10 over
  // 1, 2, 3 (in1 = 0): 1 - 10 = -9, 2 - -9 = 11, 3 - 11 = -8; reverse0 gives 9, 7, 4.
  for (const bool reverse : {false, true}) {
    Core core;
    const auto in = parse(fmt::format(
        "dve tensor_tensor_scan dst=sbuf.fp32[0:1]+0[[1,3]] in0=sbuf.fp32[0:1]+64[[1,3]] "
        "in1=sbuf.fp32[0:1]+128[[1,3]] op0=subtract op1=add initial=10{}",
        reverse ? " reverse0=true" : ""));
    put(core.st, operand(in, Role::in0), {1, 2, 3});
    put(core.st, operand(in, Role::in1), {0, 0, 0});
    execute(in, core.st);
    if (reverse)
      EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(9, 7, 4));
    else
      EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(-9, 11, -8));
  }
}

TEST(TensorTensorScan, Reverse1PutsIn1First) {
  Core core;
  const auto in = parse(
      "dve tensor_tensor_scan dst=sbuf.fp32[0:1]+0[[1,2]] in0=sbuf.fp32[0:1]+64[[1,2]] "
      "in1=sbuf.fp32[0:1]+128[[1,2]] op0=add op1=subtract initial=0 reverse1=true");
  put(core.st, operand(in, Role::in0), {1, 2});
  put(core.st, operand(in, Role::in1), {5, 5});
  execute(in, core.st);
  // s = 5 - (1 + 0) = 4, then 5 - (2 + 4) = -1.
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(4, -1));
}

// ---------------------------------------------------------------------------
// iota, affine_select

TEST(Iota, PatternOffsetAndChannelMultiplier) {
  Core core;
  const auto in = parse(
      "pool iota dst=sbuf.i32[0:128]+0[[1,64]] pattern=pattern[[8,8],[1,8]] offset=-3 "
      "channel_multiplier=64");
  execute(in, core.st);
  std::vector<int32_t> want;
  for (int p = 0; p < 128; ++p)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) want.push_back(-3 + 64 * p + 8 * i + j);
  EXPECT_EQ(get_bits<int32_t>(core.st, operand(in, Role::dst)), want);
}

TEST(Iota, NegativeStepsFloatIntegerSaturationAndLargeValues) {
  Core core;
  const auto f = parse(
      "pool iota dst=sbuf.fp32[32:3]+0[[1,5]] pattern=pattern[[-2,5]] offset=1 "
      "channel_multiplier=-1");
  execute(f, core.st);
  std::vector<float> want;
  for (int p = 0; p < 3; ++p)
    for (int j = 0; j < 5; ++j) want.push_back(static_cast<float>(1 - p - 2 * j));
  EXPECT_EQ(get(core.st, operand(f, Role::dst)), want);
  const auto i8 = parse(
      "pool iota dst=sbuf.i8[0:4]+0[[1,2]] pattern=pattern[[-300,2]] offset=100 "
      "channel_multiplier=10");
  execute(i8, core.st);
  EXPECT_THAT(get_bits<int8_t>(core.st, operand(i8, Role::dst)),
              ElementsAre(100, -128, 110, -128, 120, -128, 127, -128));
  // 2^24 + 1 is exact in int32 (an FP32 detour would give 2^24); 257 rounds to even in bf16.
  const auto big =
      parse("pool iota dst=sbuf.i32[0:1]+64[[1,2]] pattern=pattern[[1,2]] offset=16777217");
  execute(big, core.st);
  EXPECT_THAT(get_bits<int32_t>(core.st, operand(big, Role::dst)), ElementsAre(16777217, 16777218));
  const auto bf =
      parse("pool iota dst=sbuf.bf16[0:1]+128[[1,2]] pattern=pattern[[2,2]] offset=257");
  execute(bf, core.st);
  EXPECT_THAT(get(core.st, operand(bf, Role::dst)), ElementsAre(256, 260));
}

TEST(AffineSelect, CausalMask) {
  Core core;
  const auto in = parse(
      "pool affine_select dst=sbuf.fp32[0:128]+0[[1,128]] on_true=sbuf.fp32[0:128]+512[[1,128]] "
      "pattern=pattern[[-1,128]] channel_multiplier=1 cmp=is_ge on_false=-inf");
  const auto x = random_values(128 * 128, -5, 5, 13);
  put(core.st, operand(in, Role::on_true), x);
  execute(in, core.st);
  const auto got = get(core.st, operand(in, Role::dst));
  for (int p = 0; p < 128; ++p)
    for (int j = 0; j < 128; ++j)
      ASSERT_EQ(got[p * 128 + j], j <= p ? x[p * 128 + j] : -kInf) << p << "," << j;
}

TEST(AffineSelect, EveryComparison) {
  // v = j - 2 for j in 0..4.
  const std::vector<std::pair<const char*, std::vector<float>>> cases = {
      {"is_gt", {9, 9, 9, 3, 4}}, {"is_ge", {9, 9, 2, 3, 4}},    {"is_lt", {0, 1, 9, 9, 9}},
      {"is_le", {0, 1, 2, 9, 9}}, {"is_equal", {9, 9, 2, 9, 9}}, {"not_equal", {0, 1, 9, 3, 4}}};
  for (const auto& [cmp, want] : cases) {
    Core core;
    const auto in =
        parse(std::string(
                  "pool affine_select dst=sbuf.i16[0:1]+0[[1,5]] on_true=sbuf.fp32[0:1]+64[[1,5]] "
                  "pattern=pattern[[1,5]] offset=-2 on_false=9 cmp=") +
              cmp);
    put(core.st, operand(in, Role::on_true), {0, 1, 2, 3, 4});
    execute(in, core.st);
    EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAreArray(want)) << cmp;
  }
}

// ---------------------------------------------------------------------------
// partition_reduce, partition_shuffle, local_gather

TEST(PartitionReduce, ReducesAcrossPartitions) {
  const auto x = small_ints(8 * 16, 17);
  for (const char* op : {"add", "multiply", "max", "min"}) {
    Core core;
    const auto in = parse(std::string("pool partition_reduce dst=sbuf.fp32[32:1]+0[[1,16]] "
                                      "src=sbuf.fp32[0:8]+0[[1,16]] op=") +
                          op);
    put(core.st, operand(in, Role::src), x);
    execute(in, core.st);
    std::vector<float> want(16);
    for (int f = 0; f < 16; ++f) {
      double acc = x[f];
      for (int p = 1; p < 8; ++p) {
        const double v = x[p * 16 + f];
        const std::string o = op;
        acc = o == "add"        ? acc + v
              : o == "multiply" ? acc * v
              : o == "max"      ? std::max(acc, v)
                                : std::min(acc, v);
      }
      want[f] = static_cast<float>(acc);
    }
    EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAreArray(want)) << op;
  }
}

TEST(PartitionShuffle, MasksPartitionsEvenInPlace) {
  Core core;
  const auto in = parse(
      "pool partition_shuffle dst=sbuf.bf16[0:4]+0[[1,2]] src=sbuf.fp32[32:4]+0[[1,2]] "
      "mask=[3,2,1]");
  put(core.st, operand(in, Role::src), {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(3, 3.5, 2, 2.5, 1, 1.5, 0, 0.5));
  const auto rev = parse(
      "pool partition_shuffle dst=sbuf.bf16[0:4]+0[[1,2]] src=sbuf.bf16[0:4]+0[[1,2]] "
      "mask=[3,2,1,0]");
  execute(rev, core.st);
  EXPECT_THAT(get(core.st, operand(rev, Role::dst)), ElementsAre(0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5));
}

TEST(LocalGather, GathersElementGroupsPerPartition) {
  Core core;
  const auto in = parse(
      "pool local_gather dst=sbuf.fp32[0:32]+0[[1,8]] src=sbuf.fp32[0:32]+64[[1,64]] "
      "index=sbuf.u16[0:32]+512[[1,4]] elems_per_index=2 num_indices=4");
  std::vector<float> src(32 * 64);
  for (int p = 0; p < 32; ++p)
    for (int f = 0; f < 64; ++f) src[p * 64 + f] = static_cast<float>(100 * p + f);
  std::vector<uint16_t> idx(32 * 4);
  for (int i = 0; i < 128; ++i) idx[i] = static_cast<uint16_t>((i * 13 + 5) % 32);
  put(core.st, operand(in, Role::src), src);
  put_bits(core.st, operand(in, Role::index), idx);
  execute(in, core.st);
  std::vector<float> want;
  for (int p = 0; p < 32; ++p)
    for (int j = 0; j < 4; ++j)
      for (int e = 0; e < 2; ++e)
        want.push_back(static_cast<float>(100 * p + 2 * idx[p * 4 + j] + e));
  EXPECT_EQ(get(core.st, operand(in, Role::dst)), want);
}

TEST(LocalGather, UsesOnlyNumIndicesAndRejectsIndicesOutOfRange) {
  Core core;
  const auto in = parse(
      "pool local_gather dst=sbuf.fp32[0:1]+0[[1,3]] src=sbuf.fp32[0:1]+64[[1,6]] "
      "index=sbuf.i32[0:1]+512[[1,4]] elems_per_index=1 num_indices=3");
  put(core.st, operand(in, Role::src), {10, 11, 12, 13, 14, 15});
  put_bits<int32_t>(core.st, operand(in, Role::index), {5, 0, 2, 99});  // the 4th index is unused
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAre(15, 10, 12));
  put_bits<int32_t>(core.st, operand(in, Role::index), {5, 6, 2, 0});
  ExecError e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("pool local_gather"));
  EXPECT_THAT(e.what(), HasSubstr("index[0, 1] = 6"));
  put_bits<int32_t>(core.st, operand(in, Role::index), {-1, 0, 0, 0});
  EXPECT_EQ(exec_error(core, in).kind(), Kind::out_of_bounds);
}

// ---------------------------------------------------------------------------
// Semaphore instructions

TEST(SemaphoreInstructions, TouchNoMemory) {
  Core core;
  for (const char* line : {"sp sem_wait wait=S[9]>=100", "act sem_signal signal=S[4]+=2",
                           "pool sem_set signal=S[5]=0"})
    EXPECT_NO_THROW(execute(parse(line), core.st));
  for (uint32_t p = 0; p < 128; p += 17)
    for (uint64_t b = 0; b < 229376; b += 4099) ASSERT_EQ(*core.st.sbuf.at(p, b), 0);
  EXPECT_EQ(core.hbm.bytes_allocated(), 0u);
}

// ---------------------------------------------------------------------------
// max8, find_index8, match_replace8

TEST(TopEight, Max8ListsTheLargestInDescendingOrderWithRepeatsAndNanFirst) {
  Core core;
  const auto in = parse("dve max8 dst=sbuf.fp32[0:2]+0[[1,8]] src=sbuf.bf16[0:2]+64[[1,10]]");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  put(core.st, operand(in, Role::src),
      {3,  -1,  7,  7,  0,  5,  -2, 9,  1,  2,  // partition 0: 7 twice
       -4, nan, -8, -5, -3, -9, -7, -6, -1, -2});
  execute(in, core.st);
  const std::vector<float> got = get(core.st, operand(in, Role::dst));
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 8),
            (std::vector<float>{9, 7, 7, 5, 3, 2, 1, 0}));
  EXPECT_TRUE(std::isnan(got[8]));
  EXPECT_EQ(std::vector<float>(got.begin() + 9, got.end()),
            (std::vector<float>{-1, -2, -3, -4, -5, -6, -7}));
}

TEST(TopEight, FindIndex8GivesFirstMatchesAndFaultsOnAMissingValue) {
  Core core;
  const auto in = parse(
      "dve find_index8 dst=sbuf.u32[0:1]+0[[1,8]] src=sbuf.fp32[0:1]+64[[1,10]] "
      "vals=sbuf.fp32[0:1]+32[[1,8]]");
  put(core.st, operand(in, Role::src), {3, -1, 7, 7, 0, 5, -2, 9, 1, 2});
  put(core.st, operand(in, Role::vals), {9, 7, 7, 5, 3, 2, 1, 0});
  execute(in, core.st);
  EXPECT_EQ(get_bits<uint32_t>(core.st, operand(in, Role::dst)),
            (std::vector<uint32_t>{7, 2, 2, 5, 0, 9, 8, 4}));
  put(core.st, operand(in, Role::vals), {9, 7, 7, 5, 3, 2, 1, 4});
  const ExecError e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("vals[0, 7] = 4 is not in partition 0 of src"));
}

TEST(TopEight, MatchReplace8MatchesSuccessiveElementsOfEqualValues) {
  Core core;
  const auto in = parse(
      "dve match_replace8 dst=sbuf.fp32[0:1]+64[[1,12]] src=sbuf.fp32[0:1]+64[[1,12]] "
      "vals=sbuf.fp32[0:1]+32[[1,8]] dst_index=sbuf.u16[0:1]+0[[1,8]] imm=-inf");
  put(core.st, operand(in, Role::src), {1, 4, 4, 0, 4, 2, 3, 8, 6, 5, 7, 4});
  put(core.st, operand(in, Role::vals), {8, 7, 6, 5, 4, 4, 4, 4});
  execute(in, core.st);
  EXPECT_EQ(get_bits<uint16_t>(core.st, operand(in, Role::dst_index)),
            (std::vector<uint16_t>{7, 10, 8, 9, 1, 2, 4, 11}));
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(get(core.st, operand(in, Role::dst)),
            (std::vector<float>{1, ninf, ninf, 0, ninf, 2, 3, ninf, ninf, ninf, ninf, ninf}));
  // The next 8: max8 of what is left.
  const auto next = parse("dve max8 dst=sbuf.fp32[0:1]+32[[1,8]] src=sbuf.fp32[0:1]+64[[1,12]]");
  execute(next, core.st);
  EXPECT_EQ(std::vector<float>(get(core.st, operand(next, Role::dst))).front(), 3.0f);
}

// ---------------------------------------------------------------------------
// rng, rand_set_state

namespace {

// Marsaglia's XORWOW step, written out from the paper's definition (not the simulator's).
uint32_t xorwow_reference(std::array<uint32_t, 6>& s) {
  const uint32_t x = s[0], t = s[4] ^ (s[4] >> 2);
  s = {t ^ (t << 1) ^ x ^ (x << 4), s[0], s[1], s[2], s[3], s[5] + 362437u};
  return s[0] + s[5];
}

std::array<uint32_t, 6> lane_seeds(uint32_t lane) {
  return {123456789u + lane, 362436069u, 521288629u ^ lane, 88675123u, 5783321u, 6615241u * lane};
}

// Writes lane_seeds(p) into partitions [0, parts) of the u32 [P, 6] tile at byte 0, and
// runs rand_set_state from it on `engine`.
void seed_lanes(Core& core, const std::string& engine, int parts) {
  const auto in =
      parse(fmt::format("{} rand_set_state src=sbuf.u32[0:{}]+0[[1,6]]", engine, parts));
  for (int p = 0; p < parts; ++p) {
    const auto words = lane_seeds(static_cast<uint32_t>(p));
    std::memcpy(core.st.sbuf.at(static_cast<uint32_t>(p), 0), words.data(), 24);
  }
  execute(in, core.st);
}

}  // namespace

TEST(Rng, DrawsEachLanesXorwowSequenceInWalkOrder) {
  Core core;
  seed_lanes(core, "pool", 4);
  const auto in = parse("pool rng dst=sbuf.u32[0:4]+64[[1,8]]");
  execute(in, core.st);
  std::vector<uint32_t> want;
  for (uint32_t p = 0; p < 4; ++p) {
    auto s = lane_seeds(p);
    for (int i = 0; i < 8; ++i) want.push_back(xorwow_reference(s));
  }
  EXPECT_EQ(get_bits<uint32_t>(core.st, operand(in, Role::dst)), want);
}

TEST(Rng, NarrowDtypesKeepTheLowBitsAndTheStateCarriesOn) {
  Core core;
  seed_lanes(core, "dve", 2);
  const auto a = parse("dve rng dst=sbuf.u16[0:2]+64[[1,3]]");
  const auto b = parse("dve rng dst=sbuf.i8[0:2]+128[[1,2]]");
  execute(a, core.st);
  execute(b, core.st);
  std::vector<uint16_t> want_a;
  std::vector<int8_t> want_b;
  for (uint32_t p = 0; p < 2; ++p) {
    auto s = lane_seeds(p);
    for (int i = 0; i < 3; ++i) want_a.push_back(static_cast<uint16_t>(xorwow_reference(s)));
    for (int i = 0; i < 2; ++i) want_b.push_back(static_cast<int8_t>(xorwow_reference(s) & 0xFF));
  }
  EXPECT_EQ(get_bits<uint16_t>(core.st, operand(a, Role::dst)), want_a);
  EXPECT_EQ(get_bits<int8_t>(core.st, operand(b, Role::dst)), want_b);
}

TEST(Rng, EnginesAndLanesHaveTheirOwnGenerators) {
  Core core;
  seed_lanes(core, "dve", 1);  // lane 0 of VectorE only
  const auto dve = parse("dve rng dst=sbuf.u32[0:2]+64[[1,4]]");
  const auto pool = parse("pool rng dst=sbuf.u32[0:2]+128[[1,4]]");
  execute(dve, core.st);
  execute(pool, core.st);
  const auto d = get_bits<uint32_t>(core.st, operand(dve, Role::dst));
  const auto g = get_bits<uint32_t>(core.st, operand(pool, Role::dst));
  auto s = lane_seeds(0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d[i], xorwow_reference(s));
  // Lane 1 of VectorE and both lanes of GpSimd run from their own fixed start states.
  EXPECT_NE(std::vector(d.begin() + 4, d.end()), std::vector(d.begin(), d.begin() + 4));
  EXPECT_NE(std::vector(g.begin(), g.begin() + 4), std::vector(d.begin(), d.begin() + 4));
  EXPECT_NE(std::vector(g.begin(), g.begin() + 4), std::vector(g.begin() + 4, g.end()));
  // The same fixed start on a fresh core: deterministic.
  Core fresh;
  execute(pool, fresh.st);
  EXPECT_EQ(get_bits<uint32_t>(fresh.st, operand(pool, Role::dst)), g);
}

TEST(Rng, SixteenBitDrawsAreUniform) {
  Core core;
  const auto in = parse("dve rng dst=sbuf.u16[0:128]+0[[1,2048]]");
  execute(in, core.st);
  const auto bits = get_bits<uint16_t>(core.st, operand(in, Role::dst));
  std::array<int, 16> buckets{};
  for (uint16_t v : bits) ++buckets[v >> 12];
  const double expected = static_cast<double>(bits.size()) / 16;  // 16384 per bucket
  for (int b : buckets) EXPECT_NEAR(b, expected, 5 * std::sqrt(expected)) << b;
}
}  // namespace
}  // namespace neuronsim::sim::test
