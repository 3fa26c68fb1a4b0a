// The functional plane, part 1: core state and tensor binding, access-pattern walks,
// DMA (casts, bit-exact copies, indirect rows, bounds), TensorE (matmul, transposes),
// NaN checks, collectives and the engine scheduler of run_functional.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuronsim/isa/kernel_builder.h"
#include "test_functional_support.h"

namespace neuronsim::sim::test {
namespace {

using isa::Role;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using Kind = ExecError::Kind;

TEST(CoreState, IsSizedFromTheTarget) {
  SparseMemory hbm(1 << 20);
  CoreState trn1(isa::target_by_name("trn1"), hbm);
  EXPECT_EQ(trn1.sbuf.partitions(), 128u);
  EXPECT_EQ(trn1.sbuf.partition_bytes(), 196608u);
  EXPECT_EQ(trn1.psum.partitions(), 128u);
  EXPECT_EQ(trn1.psum.partition_bytes(), 16384u);
  CoreState trn2(isa::target_by_name("trn2"), hbm);
  EXPECT_EQ(trn2.sbuf.partition_bytes(), 229376u);
  EXPECT_EQ(&trn2.hbm, &hbm);
  EXPECT_FALSE(trn2.fail_on_nan);
}

TEST(BindTensors, PlacesTensorsAlignedInOrderAndWritesConstants) {
  const isa::Program p = isa::assemble(
      ".tensor a float32 [3] input\n"
      ".tensor b bfloat16 [2,3] constant data=803f0040404080400000a040\n"
      ".tensor c int8 [5] scratch\n");
  Core core;
  const uint64_t end = bind_tensors(p, core.st, 100);
  ASSERT_EQ(core.st.tensors.size(), 3u);
  EXPECT_EQ(core.st.tensors.at(1).address, 128u);
  EXPECT_EQ(core.st.tensors.at(1).size, 12u);
  EXPECT_EQ(core.st.tensors.at(2).address, 192u);
  EXPECT_EQ(core.st.tensors.at(2).size, 12u);
  EXPECT_EQ(core.st.tensors.at(3).address, 256u);
  EXPECT_EQ(core.st.tensors.at(3).size, 5u);
  EXPECT_EQ(end, 261u);
  uint16_t b[6];
  core.hbm.read(192, b, sizeof b);
  EXPECT_THAT(b, ElementsAre(0x3f80, 0x4000, 0x4040, 0x4080, 0x0000, 0x40a0));
}

TEST(BindTensors, RefusesTensorsBeyondTheCapacity) {
  const isa::Program p = isa::assemble(".tensor a float32 [1024] input\n");
  SparseMemory hbm(4096);
  CoreState st(isa::target_by_name("trn2"), hbm);
  EXPECT_THROW(bind_tensors(p, st, 1024), std::out_of_range);
}

// ---------------------------------------------------------------------------
// Access-pattern walks

TEST(AccessPatterns, WalkPartitionsThenDimsOutermostFirstWithNegativeStrides) {
  Core core;
  const auto in =
      parse("dve tensor_copy dst=sbuf.fp32[32:2]+256[[1,6]] src=sbuf.fp32[0:2]+8[[4,2],[-1,3]]");
  // Element e of partition p holds 100p + e; the src starts at element 2.
  const auto region = parse("dve memset dst=sbuf.fp32[0:2]+0[[1,16]]");
  std::vector<float> fillv;
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 16; ++e) fillv.push_back(static_cast<float>(100 * p + e));
  put(core.st, operand(region, Role::dst), fillv);
  execute(in, core.st);
  // Outer dim: elements 2, 6; inner dim counts down: 2,1,0 then 6,5,4.
  EXPECT_THAT(get(core.st, operand(in, Role::dst)),
              ElementsAre(2, 1, 0, 6, 5, 4, 102, 101, 100, 106, 105, 104));
}

TEST(AccessPatterns, FourDimsAndStrideZeroBroadcast) {
  Core core;
  const auto in = parse(
      "dve tensor_copy dst=sbuf.fp32[0:1]+0[[1,24]] "
      "src=sbuf.fp32[0:1]+1024[[0,2],[12,2],[1,3],[3,2]]");
  std::vector<float> v = iota_values(24);
  put(core.st, operand(parse("dve memset dst=sbuf.fp32[0:1]+1024[[1,24]]"), Role::dst), v);
  execute(in, core.st);
  std::vector<float> want;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)
        for (int d = 0; d < 2; ++d) want.push_back(static_cast<float>(12 * b + c + 3 * d));
  EXPECT_THAT(get(core.st, operand(in, Role::dst)), ElementsAreArray(want));
}

// ---------------------------------------------------------------------------
// DMA

const char* kDmaDecls =
    ".tensor x float32 [8,4] input\n"
    ".tensor y float32 [8,4] output\n"
    ".tensor h bfloat16 [4,4] input\n";

TEST(DmaCopy, HbmToSbufRoundsFp32ToBf16ToNearestEven) {
  Core core;
  auto [prog, in] = parse_with(
      "sp dma_copy dst=sbuf.bf16[0:2]+0[[1,4]] src=hbm.fp32(x)+0[[4,2],[1,4]]", kDmaDecls);
  bind_tensors(prog, core.st, 0);
  // 1+2^-8 is halfway between bf16 1 and 1+2^-7 (even: 1); 1+3*2^-8 halfway to even 1+2^-6;
  // 1+2^-8+2^-20 is above half (up); the largest float overflows to +inf.
  put(core.st, operand(in, Role::src),
      {1.00390625f, 1.01171875f, 1.00390625f + 0x1p-20f, -2.0f, 3.4028234e38f, -0.0f, 0.1f,
       65504.0f});
  execute(in, core.st);
  EXPECT_THAT(get_bits<uint16_t>(core.st, operand(in, Role::dst)),
              ElementsAre(0x3f80, 0x3f82, 0x3f81, 0xc000, 0x7f80, 0x8000, 0x3dcd, 0x4780));
}

TEST(DmaCopy, SameDtypeCopiesBytesExactlyIncludingNaNPayloads) {
  Core core;
  auto [prog, in] = parse_with(
      "sp dma_copy dst=sbuf.bf16[0:4]+64[[1,4]] src=hbm.bf16(h)+0[[4,4],[1,4]]", kDmaDecls);
  bind_tensors(prog, core.st, 0);
  // 0x7f81 is a signalling NaN: a trip through FP32 would set its quiet bit (0x7fc1).
  const std::vector<uint16_t> bits = {0x7f81, 0xffff, 0x0001, 0x8000, 0x7f80, 0x3f80,
                                      0x1234, 0xfe01, 0x0000, 0x7fc0, 0xff80, 0x4049,
                                      0xabcd, 0x7f8f, 0x00ff, 0xc2f7};
  put_bits(core.st, operand(in, Role::src), bits);
  execute(in, core.st);
  EXPECT_THAT(get_bits<uint16_t>(core.st, operand(in, Role::dst)), ElementsAreArray(bits));
}

TEST(DmaCopy, TransposeWalksTheSourceRowsInnermostBitExactly) {
  Core core;
  // h [4 rows, 4] read with its rows innermost: dst [4 partitions, 4] = h transposed.
  auto [prog, in] = parse_with(
      "sp dma_copy dst=sbuf.bf16[0:4]+64[[1,4]] src=hbm.bf16(h)+0[[4,4],[1,4]] transpose=true",
      kDmaDecls);
  bind_tensors(prog, core.st, 0);
  std::vector<uint16_t> bits(16);
  for (uint16_t i = 0; i < 16; ++i) bits[i] = static_cast<uint16_t>(0x7f81 + i);  // NaN payloads
  put_bits(core.st, operand(in, Role::src), bits);
  execute(in, core.st);
  std::vector<uint16_t> want(16);
  for (size_t r = 0; r < 4; ++r)
    for (size_t f = 0; f < 4; ++f) want[f * 4 + r] = bits[r * 4 + f];
  EXPECT_THAT(get_bits<uint16_t>(core.st, operand(in, Role::dst)), ElementsAreArray(want));
  // SBUF to SBUF: 2 partitions of 3 become 3 partitions of 2.
  const auto on_chip = parse(
      "sp dma_copy dst=sbuf.bf16[0:3]+256[[1,2]] src=sbuf.bf16[0:2]+128[[1,3]] transpose=true");
  put(core.st, operand(on_chip, Role::src), {1, 2, 3, 4, 5, 6});
  execute(on_chip, core.st);
  EXPECT_THAT(get(core.st, operand(on_chip, Role::dst)), ElementsAre(1, 4, 2, 5, 3, 6));
}

TEST(DmaCopy, CastsToIntegersSaturateAndRoundToEvenAndToBool) {
  Core core;
  auto [prog, in] =
      parse_with("sp dma_copy dst=sbuf.i8[0:1]+0[[1,8]] src=hbm.fp32(x)+0[[4,2],[1,4]]", kDmaDecls);
  bind_tensors(prog, core.st, 0);
  put(core.st, operand(in, Role::src), {2.5f, 3.5f, -2.5f, 300.0f, -300.0f, NAN, -0.4f, 126.6f});
  execute(in, core.st);
  EXPECT_THAT(get_bits<int8_t>(core.st, operand(in, Role::dst)),
              ElementsAre(2, 4, -2, 127, -128, 0, 0, 127));
  const auto to_bool = parse("sp dma_copy dst=sbuf.bool[0:1]+64[[1,8]] src=sbuf.i8[0:1]+0[[1,8]]");
  execute(to_bool, core.st);
  EXPECT_THAT(get_bits<uint8_t>(core.st, operand(to_bool, Role::dst)),
              ElementsAre(1, 1, 1, 1, 1, 0, 0, 1));
}

TEST(DmaCopy, StoresThroughATransposingHbmPattern) {
  Core core;
  auto [prog, in] = parse_with(
      "sp dma_copy dst=hbm.fp32(y)+0[[1,4],[4,8]] src=sbuf.fp32[0:4]+0[[1,8]]", kDmaDecls);
  bind_tensors(prog, core.st, 0);
  std::vector<float> src;
  for (int p = 0; p < 4; ++p)
    for (int f = 0; f < 8; ++f) src.push_back(static_cast<float>(10 * p + f));
  put(core.st, operand(in, Role::src), src);
  execute(in, core.st);
  float y[32];
  core.hbm.read(core.st.tensors.at(2).address, y, sizeof y);
  for (int f = 0; f < 8; ++f)
    for (int p = 0; p < 4; ++p) EXPECT_EQ(y[f * 4 + p], 10 * p + f) << f << "," << p;
}

TEST(DmaCopy, IndirectGathersHbmRowsInIndexOrder) {
  Core core;
  auto [prog, in] = parse_with(
      "pool dma_copy dst=sbuf.fp32[0:4]+64[[1,4]] src=hbm.fp32(x)+0[[4,8],[1,4]] "
      "index=sbuf.i32[0:4]+0[[1,1]]",
      kDmaDecls);
  bind_tensors(prog, core.st, 0);
  put(core.st, operand(in, Role::src), iota_values(32));  // x[r][c] = 4r + c
  put_bits<int32_t>(core.st, operand(in, Role::index), {3, 0, 7, 3});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)),
              ElementsAre(12, 13, 14, 15, 0, 1, 2, 3, 28, 29, 30, 31, 12, 13, 14, 15));
}

TEST(DmaCopy, IndirectGathersOnChipPartitionsAndCasts) {
  Core core;
  // Three u8 indices in one partition pick partitions 8 + index of src; dst is bf16.
  const auto in = parse(
      "sp dma_copy dst=sbuf.bf16[0:1]+0[[1,12]] src=sbuf.fp32[8:8]+0[[1,4]] "
      "index=sbuf.u8[0:1]+256[[1,3]]");
  std::vector<float> src;
  for (int p = 0; p < 8; ++p)
    for (int f = 0; f < 4; ++f)
      src.push_back(static_cast<float>(p) + 0.25f * static_cast<float>(f));
  put(core.st, operand(in, Role::src), src);
  put_bits<uint8_t>(core.st, operand(in, Role::index), {5, 7, 0});
  execute(in, core.st);
  EXPECT_THAT(get(core.st, operand(in, Role::dst)),
              ElementsAre(5, 5.25, 5.5, 5.75, 7, 7.25, 7.5, 7.75, 0, 0.25, 0.5, 0.75));
}

TEST(DmaCopy, IndirectScatterWritesDstRowsInIndexOrder) {
  Core core;
  // Four src rows of 4 go to rows 6, 1, 6, 0 of y (8 rows of 4); row 6 keeps the last one.
  auto [prog, in] = parse_with(
      "pool dma_copy dst=hbm.fp32(y)+0[[4,8],[1,4]] src=sbuf.fp32[0:4]+64[[1,4]] "
      "index=sbuf.i32[0:4]+0[[1,1]] scatter=true",
      kDmaDecls);
  bind_tensors(prog, core.st, 0);
  std::vector<float> before(32, -1.0f);
  core.hbm.write(core.st.tensors.at(2).address, before.data(), before.size() * sizeof(float));
  put(core.st, operand(in, Role::src), iota_values(16));
  put_bits<int32_t>(core.st, operand(in, Role::index), {6, 1, 6, 0});
  execute(in, core.st);
  float y[32];
  core.hbm.read(core.st.tensors.at(2).address, y, sizeof y);
  const std::vector<float> got(y, y + 32);
  std::vector<float> want(32, -1.0f);
  for (int c = 0; c < 4; ++c) {
    want[6 * 4 + c] = static_cast<float>(8 + c);
    want[1 * 4 + c] = static_cast<float>(4 + c);
    want[0 * 4 + c] = static_cast<float>(12 + c);
  }
  EXPECT_EQ(got, want);
  put_bits<int32_t>(core.st, operand(in, Role::index), {6, 8, 0, 0});
  const ExecError e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("not a row of dst"));
}

TEST(DmaCopy, IndirectIndexOutOfRangeIsAnExecError) {
  Core core;
  auto [prog, in] = parse_with(
      "pool dma_copy dst=sbuf.fp32[0:4]+64[[1,4]] src=hbm.fp32(x)+0[[4,8],[1,4]] "
      "index=sbuf.i32[0:4]+0[[1,1]]",
      kDmaDecls);
  bind_tensors(prog, core.st, 0);
  put_bits<int32_t>(core.st, operand(in, Role::index), {0, 8, 1, 2});
  ExecError e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("dma_copy"));
  EXPECT_THAT(e.what(), HasSubstr("= 8"));
  put_bits<int32_t>(core.st, operand(in, Role::index), {0, 1, -1, 2});
  e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("= -1"));
  // Indices are read as integers, not through FP32 (which would turn this into 16777216).
  put_bits<int32_t>(core.st, operand(in, Role::index), {0, 1, 16777217, 2});
  e = exec_error(core, in);
  EXPECT_THAT(e.what(), HasSubstr("= 16777217"));
}

TEST(DmaCopy, AFaultingLoadOrStoreWritesNothing) {
  // Same-dtype copies between HBM and a [P, F] tile move each run in place: a run outside
  // the binding must still fault before any byte of dst changes.
  Core core;
  auto [prog, load] = parse_with(
      "sp dma_copy dst=sbuf.fp32[0:8]+0[[1,4]] src=hbm.fp32(x)+0[[4,8],[1,4]]", kDmaDecls);
  bind_tensors(prog, core.st, 0);
  put(core.st, operand(load, Role::src), iota_values(32, 1));
  put(core.st, operand(load, Role::dst), std::vector<float>(32, -7.0f));
  core.st.tensors.at(1).size = 112;  // the last row is outside
  EXPECT_EQ(exec_error(core, load).kind(), Kind::out_of_bounds);
  EXPECT_EQ(get(core.st, operand(load, Role::dst)), std::vector<float>(32, -7.0f));
  core.st.tensors.at(1).size = 128;
  execute(load, core.st);
  EXPECT_EQ(get(core.st, operand(load, Role::dst)), iota_values(32, 1));

  const auto store =
      parse_with("sp dma_copy dst=hbm.fp32(y)+0[[4,8],[1,4]] src=sbuf.fp32[0:8]+0[[1,4]]",
                 kDmaDecls)
          .second;
  put(core.st, operand(store, Role::dst), std::vector<float>(32, 5.0f));
  core.st.tensors.at(2).size = 100;
  EXPECT_EQ(exec_error(core, store).kind(), Kind::out_of_bounds);
  core.st.tensors.at(2).size = 128;
  EXPECT_EQ(get(core.st, operand(store, Role::dst)), std::vector<float>(32, 5.0f));
  execute(store, core.st);
  EXPECT_EQ(get(core.st, operand(store, Role::dst)), iota_values(32, 1));
}

// One partition of a broadcast source for every partition of dst: partition 5 of a [1, 16]
// tile fills [128, 16], and partition 6 (the next one a consecutive walk would read) never
// appears. Each DMA path is taken: bytes on chip, a cast, and straight runs into HBM.
TEST(DmaCopy, PartitionBroadcastGivesEveryDstPartitionTheSourceRow) {
  Core core;
  const char* decls = ".tensor y float32 [128,16] output\n";
  auto [prog, in] = parse_with(
      "sp dma_copy dst=sbuf.fp32[0:128]+1024[[1,16]] src=sbuf.fp32[5:128:0]+64[[1,16]]", decls);
  bind_tensors(prog, core.st, 0);
  // Every partition at byte 64 holds its own values; partition 5 holds row5.
  isa::AccessPattern row = operand(in, Role::src);
  row.partition_broadcast = false;
  row.start_partition = 0;
  put(core.st, row, iota_values(128 * 16, -5000.0f));
  row.num_partitions = 1;
  row.start_partition = 5;
  const std::vector<float> row5 = iota_values(16, 100.0f);
  put(core.st, row, row5);
  row.start_partition = 6;
  const std::vector<float> row6 = get(core.st, row);
  std::vector<float> want;
  for (int p = 0; p < 128; ++p) want.insert(want.end(), row5.begin(), row5.end());

  execute(in, core.st);
  const std::vector<float> got = get(core.st, operand(in, Role::dst));
  EXPECT_EQ(got, want);
  for (float v : row6) EXPECT_THAT(got, Not(Contains(v)));

  const auto to_bf16 =
      parse("sp dma_copy dst=sbuf.bf16[0:128]+2048[[1,16]] src=sbuf.fp32[5:128:0]+64[[1,16]]");
  execute(to_bf16, core.st);
  EXPECT_EQ(get(core.st, operand(to_bf16, Role::dst)), want);  // 100..115 are exact in bf16

  const auto store = parse_with(
      "sp dma_copy dst=hbm.fp32(y)+0[[16,128],[1,16]] src=sbuf.fp32[5:128:0]+64[[1,16]]", decls);
  execute(store.second, core.st);
  EXPECT_EQ(get(core.st, operand(store.second, Role::dst)), want);
}

TEST(DmaCopy, HbmAccessOutsideTheBindingIsAnExecErrorNamingTheTensor) {
  Core core;
  auto [prog, in] = parse_with(
      "sp dma_copy dst=sbuf.fp32[0:8]+0[[1,4]] src=hbm.fp32(y)+0[[4,8],[1,4]]", kDmaDecls);
  bind_tensors(prog, core.st, 0);
  core.st.tensors.at(2).size = 64;  // the run-time binding is smaller than the declaration
  ExecError e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("tensor id 2"));
  EXPECT_THAT(e.what(), HasSubstr("sp dma_copy dst=sbuf.fp32[0:8]"));
  core.st.tensors.erase(2);
  e = exec_error(core, in);
  EXPECT_EQ(e.kind(), Kind::out_of_bounds);
  EXPECT_THAT(e.what(), HasSubstr("not bound"));
}

// ---------------------------------------------------------------------------
// TensorE

TEST(Matmul, SmallProductOverwritesThenAccumulates) {
  Core core;
  const std::string ops =
      "dst=psum.fp32[0:2]+0[[1,3]] stationary=sbuf.fp32[0:2]+0[[1,2]] "
      "moving=sbuf.fp32[0:2]+64[[1,3]]";
  const auto mm = parse("pe matmul " + ops);
  const auto acc = parse("pe matmul " + ops + " accumulate=true");
  put(core.st, operand(mm, Role::stationary), {1, 2, 3, 4});        // st[k][m]
  put(core.st, operand(mm, Role::moving), {1, 0, -1, 2, 1, 0});     // mv[k][n]
  put(core.st, operand(mm, Role::dst), {99, NAN, 99, 99, 99, 99});  // overwritten, NaN included
  execute(mm, core.st);
  EXPECT_THAT(get(core.st, operand(mm, Role::dst)), ElementsAre(7, 3, -1, 10, 4, -2));
  execute(acc, core.st);
  EXPECT_THAT(get(core.st, operand(mm, Role::dst)), ElementsAre(14, 6, -2, 20, 8, -4));
}

TEST(Matmul, Full128x128By128x512MatchesADoubleReference) {
  Core core;
  const auto mm = parse(
      "pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.fp32[0:128]+0[[1,128]] "
      "moving=sbuf.fp32[0:128]+512[[1,512]]");
  const auto a = random_values(128 * 128, -1, 1, 1);
  const auto b = random_values(128 * 512, -1, 1, 2);
  put(core.st, operand(mm, Role::stationary), a);
  put(core.st, operand(mm, Role::moving), b);
  execute(mm, core.st);
  const auto out = get(core.st, operand(mm, Role::dst));
  for (int m = 0; m < 128; ++m)
    for (int n = 0; n < 512; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < 128; ++k) {
        want += double{a[k * 128 + m]} * b[k * 512 + n];
        mag += std::fabs(double{a[k * 128 + m]} * b[k * 512 + n]);
      }
      ASSERT_NEAR(out[m * 512 + n], want, 2e-5 * mag + 1e-6) << m << "," << n;
    }
}

TEST(Matmul, Bf16AndFp8InputsAreUsedExactly) {
  Core core;
  const auto mm = parse(
      "pe matmul dst=psum.fp32[0:3]+0[[1,5]] stationary=sbuf.bf16[0:4]+0[[1,3]] "
      "moving=sbuf.bf16[0:4]+64[[1,5]]");
  // k/128 with |k| < 128 is exact in bf16; every product and sum is exact in FP32.
  std::vector<float> a(12), b(20);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>((i * 37) % 255 - 127) / 128.0f;
  for (int i = 0; i < 20; ++i) b[i] = static_cast<float>((i * 53) % 255 - 127) / 128.0f;
  // One value with all 8 bf16 significand bits set (1.9921875): a wrong decode would show.
  a[0] = 1.9921875f;
  put(core.st, operand(mm, Role::stationary), a);
  put(core.st, operand(mm, Role::moving), b);
  execute(mm, core.st);
  const auto out = get(core.st, operand(mm, Role::dst));
  for (int m = 0; m < 3; ++m)
    for (int n = 0; n < 5; ++n) {
      double want = 0;
      for (int k = 0; k < 4; ++k) want += double{a[k * 3 + m]} * b[k * 5 + n];
      EXPECT_EQ(out[m * 5 + n], want) << m << "," << n;
    }
  const auto f8 = parse(
      "pe matmul dst=psum.fp32[0:2]+2048[[1,2]] stationary=sbuf.fp8e4[0:2]+0[[1,2]] "
      "moving=sbuf.fp8e4[0:2]+64[[1,2]]");
  put(core.st, operand(f8, Role::stationary), {1.5f, -0.25f, 448.0f, 0.125f});
  put(core.st, operand(f8, Role::moving), {2.0f, 3.0f, -0.5f, 6.0f});
  execute(f8, core.st);
  // [m][n] = st[0][m]*mv[0][n] + st[1][m]*mv[1][n]
  EXPECT_THAT(get(core.st, operand(f8, Role::dst)),
              ElementsAre(1.5 * 2 + 448 * -0.5, 1.5 * 3 + 448 * 6, -0.25 * 2 + 0.125 * -0.5,
                          -0.25 * 3 + 0.125 * 6));
}

TEST(Matmul, DoubleRowContractsTwoRowsInEveryPartition) {
  // stationary [K=2, 2, M=2], moving [K=2, 2, N=3]: dst[m, n] = sum over k and r.
  Core core;
  const auto mm = parse(
      "pe matmul dst=psum.fp32[0:2]+0[[1,3]] stationary=sbuf.fp8e4[0:2]+0[[1,4]] "
      "moving=sbuf.fp8e5[0:2]+64[[1,6]] double_row=true");
  const std::vector<float> st = {1, 2, -0.5f, 4, 0.25f, 8, 3, -1};
  const std::vector<float> mv = {2, -4, 0.5f, 1, 6, -8, 16, 0.75f, -2, 3, 1, 0.5f};
  put(core.st, operand(mm, Role::stationary), st);
  put(core.st, operand(mm, Role::moving), mv);
  execute(mm, core.st);
  const auto out = get(core.st, operand(mm, Role::dst));
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) {
      double want = 0;
      for (int k = 0; k < 2; ++k)
        for (int r = 0; r < 2; ++r) want += double{st[k * 4 + r * 2 + m]} * mv[k * 6 + r * 3 + n];
      EXPECT_EQ(out[m * 3 + n], want) << m << "," << n;
    }
}

TEST(Matmul, OneZeroHintsChangeNoValueAndRefuseOtherValues) {
  Core core;
  const auto mm = parse(
      "pe matmul dst=psum.fp32[0:2]+0[[1,2]] stationary=sbuf.fp32[0:2]+0[[1,2]] "
      "moving=sbuf.fp32[0:2]+64[[1,2]] moving_onezero=true");
  put(core.st, operand(mm, Role::stationary), {1.5f, -2, 3, 0.25f});
  put(core.st, operand(mm, Role::moving), {1, 0, 1, 1});
  execute(mm, core.st);
  EXPECT_THAT(get(core.st, operand(mm, Role::dst)), ElementsAre(1.5 + 3, 3, -2 + 0.25, 0.25));
  put(core.st, operand(mm, Role::moving), {1, 0, 2, 1});
  try {
    execute(mm, core.st);
    FAIL() << "a moving of other values than 0 and 1 ran under moving_onezero";
  } catch (const sim::ExecError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("moving_onezero says moving holds only 0 and 1, but element 2 is 2"));
  }
}

TEST(Matmul, TransposeModeIsBitExactIncludingNaN) {
  // NKI's is_transpose: the data is the stationary [K=4, M=8], moving the identity.
  Core core;
  const auto mm = parse(
      "pe matmul dst=psum.bf16[0:8]+0[[1,4]] stationary=sbuf.bf16[0:4]+0[[1,8]] "
      "moving=sbuf.bf16[0:4]+64[[1,4]] "
      "transpose=true");
  std::vector<uint16_t> bits(32);
  for (int i = 0; i < 32; ++i) bits[i] = static_cast<uint16_t>(0x3f00 + 3 * i);
  bits[1] = 0x7f81;   // signalling NaN
  bits[10] = 0xffc3;  // negative quiet NaN with payload
  bits[20] = 0x8000;  // -0
  put_bits(core.st, operand(mm, Role::stationary), bits);
  put(core.st, operand(mm, Role::moving), {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  execute(mm, core.st);
  const auto out = get_bits<uint16_t>(core.st, operand(mm, Role::dst));
  for (int m = 0; m < 8; ++m)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(out[m * 4 + k], bits[k * 8 + m]) << m << "," << k;
}

TEST(Matmul, TransposeModeRefusesAMovingThatIsNotTheIdentity) {
  Core core;
  const auto mm = parse(
      "pe matmul dst=psum.fp32[0:2]+0[[1,2]] stationary=sbuf.fp32[0:2]+0[[1,2]] "
      "moving=sbuf.fp32[0:2]+64[[1,2]] transpose=true");
  put(core.st, operand(mm, Role::moving), {1, 0, 2, 1});
  try {
    execute(mm, core.st);
    FAIL() << "a non-identity moving ran";
  } catch (const sim::ExecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("moving must be the identity; moving[1, 0] is 2"));
  }
}

TEST(Transpose, PeTransposes128x32IntoPsum) {
  Core core;
  const auto in =
      parse("pe transpose dst=psum.fp32[0:32]+0[[1,128]] src=sbuf.fp32[0:128]+0[[1,32]]");
  std::vector<float> src;
  for (int p = 0; p < 128; ++p)
    for (int f = 0; f < 32; ++f) src.push_back(static_cast<float>(1000 * p + f));
  put(core.st, operand(in, Role::src), src);
  execute(in, core.st);
  const auto out = get(core.st, operand(in, Role::dst));
  for (int f = 0; f < 32; ++f)
    for (int p = 0; p < 128; ++p) ASSERT_EQ(out[f * 128 + p], 1000 * p + f);
}

TEST(Transpose, DveTransposesInPlaceBitExact) {
  Core core;
  const auto in =
      parse("dve transpose dst=sbuf.fp16[32:32]+64[[1,32]] src=sbuf.fp16[32:32]+64[[1,32]]");
  std::vector<uint16_t> bits(32 * 32);
  for (int i = 0; i < 1024; ++i) bits[i] = static_cast<uint16_t>(i * 61 + 7);
  bits[3] = 0x7c01;  // fp16 signalling NaN
  put_bits(core.st, operand(in, Role::src), bits);
  execute(in, core.st);
  const auto out = get_bits<uint16_t>(core.st, operand(in, Role::dst));
  for (int f = 0; f < 32; ++f)
    for (int p = 0; p < 32; ++p) ASSERT_EQ(out[f * 32 + p], bits[p * 32 + f]) << f << "," << p;
}

// ---------------------------------------------------------------------------
// NaN checks, collectives, semaphores

TEST(FailOnNan, ComputeInstructionsWritingNaNThrow) {
  Core core;
  const auto act = parse(
      "act activation dst=sbuf.fp32[0:2]+0[[1,4]] src=sbuf.fp32[0:2]+64[[1,4]] func=log scale=1");
  put(core.st, operand(act, Role::src), {1, 2, 3, 4, 5, -1, 7, 8});
  execute(act, core.st);  // off by default: the NaN is stored
  EXPECT_TRUE(std::isnan(get(core.st, operand(act, Role::dst))[5]));
  core.st.fail_on_nan = true;
  const ExecError e = exec_error(core, act);
  EXPECT_EQ(e.kind(), Kind::nan);
  EXPECT_THAT(e.what(), HasSubstr("act activation"));
  EXPECT_THAT(e.what(), HasSubstr("partition 1, element 1"));
  const auto div = parse(
      "dve tensor_tensor dst=sbuf.bf16[0:1]+0[[1,2]] in0=sbuf.fp32[0:1]+64[[1,2]] "
      "in1=sbuf.fp32[0:1]+128[[1,2]] "
      "op=divide");
  put(core.st, operand(div, Role::in0), {1, 0});
  put(core.st, operand(div, Role::in1), {0, 0});
  EXPECT_EQ(exec_error(core, div).kind(), Kind::nan);
}

TEST(FailOnNan, DmaOfExistingNaNAndUntouchedElementsDoNotThrow) {
  Core core;
  core.st.fail_on_nan = true;
  const auto dma = parse("sp dma_copy dst=sbuf.fp32[0:1]+0[[1,2]] src=sbuf.fp32[0:1]+64[[1,2]]");
  put(core.st, operand(dma, Role::src), {NAN, 1});
  EXPECT_NO_THROW(execute(dma, core.st));
  // copy_predicated leaves dst[0] (a NaN) alone and writes only dst[1].
  const auto cp = parse(
      "dve copy_predicated dst=sbuf.fp32[0:1]+0[[1,2]] src=sbuf.fp32[0:1]+128[[1,2]] "
      "predicate=sbuf.u8[0:1]+192[[1,2]]");
  put(core.st, operand(cp, Role::src), {NAN, 2});
  put_bits<uint8_t>(core.st, operand(cp, Role::predicate), {0, 1});
  EXPECT_NO_THROW(execute(cp, core.st));
  put_bits<uint8_t>(core.st, operand(cp, Role::predicate), {1, 0});
  EXPECT_EQ(exec_error(core, cp).kind(), Kind::nan);
  // An integer destination cannot hold a NaN.
  const auto to_int =
      parse("dve tensor_copy dst=sbuf.i32[0:1]+256[[1,2]] src=sbuf.fp32[0:1]+64[[1,2]]");
  EXPECT_NO_THROW(execute(to_int, core.st));
}

TEST(Collectives, NeedTheSimulatorAndACommunicator) {
  Core core;
  for (const char* line :
       {"sp all_reduce dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] op=add",
        "sp send src=sbuf.fp32[0:128]+0[[1,512]] peer=1",
        "pool recv dst=sbuf.fp32[0:128]+0[[1,512]] peer=0"}) {
    const ExecError e = exec_error(core, parse(line));
    EXPECT_EQ(e.kind(), Kind::unsupported) << line;
    EXPECT_THAT(e.what(),
                HasSubstr("runs only inside Simulator::run, on a core bound to a communicator"));
  }
}

TEST(Execute, EveryOpcodeOfTheExampleFileRuns) {
  const isa::Program p = isa::assemble(
      test::read_text(std::string(NEURONSIM_SOURCE_DIR) + "/tests/data/every_opcode.s"),
      "every_opcode.s");
  Core core;
  bind_tensors(p, core.st, 4096);
  int ran = 0, collectives = 0;
  for (const auto& stream : p.streams)
    for (const isa::Instruction& in : stream) {
      // Zeroed memories keep every run-time index in range.
      core.st.sbuf.clear();
      core.st.psum.clear();
      if (in.opcode == isa::Opcode::matmul && in.has_flag(isa::kTransposeMode)) {
        const isa::AccessPattern& mv = operand(in, Role::moving);
        std::vector<float> identity(size_t{mv.num_partitions} * mv.num_partitions, 0.0f);
        for (size_t k = 0; k < mv.num_partitions; ++k) identity[k * mv.num_partitions + k] = 1;
        put(core.st, mv, identity);  // transpose mode multiplies by the identity
      }
      if (isa::is_collective(in.opcode)) {
        EXPECT_THROW(execute(in, core.st), ExecError);
        ++collectives;
      } else {
        EXPECT_NO_THROW(execute(in, core.st)) << isa::format_instruction(in);
        ++ran;
      }
    }
  EXPECT_EQ(collectives, 6);
  EXPECT_GT(ran, 30);
}

// ---------------------------------------------------------------------------
// run_functional

TEST(RunFunctional, KernelBuilderProgramComputesTheRightOutput) {
  isa::KernelBuilder kb("trn2");
  const auto a = kb.input("a", isa::DType::fp32, {128, 64});
  const auto b = kb.input("b", isa::DType::bf16, {128, 96});
  const auto out = kb.output("out", isa::DType::fp32, {64, 96});
  const auto ta = kb.sbuf_tile(isa::DType::fp32, 128, 64);
  const auto tb = kb.sbuf_tile(isa::DType::fp32, 128, 96);
  const auto ps = kb.psum_tile(isa::DType::fp32, 64, 96);
  const auto y = kb.sbuf_tile(isa::DType::fp32, 64, 96);
  kb.dma_copy(ta, a);
  kb.dma_copy(tb, b);                                                 // bf16 -> fp32 on the way
  kb.matmul(ps, ta, tb);                                              // PE
  kb.activation(y, ps, isa::ActFunc::identity, 0.5f);                 // ACT: y = 0.5 * ps
  kb.tensor_tensor(isa::Engine::DVE, y, y, y, isa::AluOp::multiply);  // DVE, in place: y = y*y
  kb.dma_copy(out, y);
  const isa::Program prog = kb.finish();

  Core core;
  bind_tensors(prog, core.st, 0);
  const auto av = random_values(128 * 64, -1, 1, 3);
  std::vector<float> bv = random_values(128 * 96, -1, 1, 4);
  for (float& v : bv) v = isa::bf16_to_float(isa::float_to_bf16(v));  // what the bf16 tensor holds
  put(core.st, a, av);
  put(core.st, b, bv);
  run_functional(prog, core.st);
  const auto got = get(core.st, out);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 96; ++n) {
      double s = 0;
      for (int k = 0; k < 128; ++k) s += double{av[k * 64 + m]} * bv[k * 96 + n];
      const double want = (0.5 * s) * (0.5 * s);
      ASSERT_NEAR(got[m * 96 + n], want, 1e-4 * (1 + std::fabs(want))) << m << "," << n;
    }
}

TEST(RunFunctional, HonoursEqualityWaitsAndSemaphoreSets) {
  const isa::Program p = isa::assemble(
      ".target trn2\n"
      "sp sem_set signal=S[0]=5\n"
      "act memset dst=sbuf.fp32[0:1]+0[[1,2]] value=1 wait=S[0]==5 signal=S[0]=7\n"
      "dve tensor_scalar dst=sbuf.fp32[0:1]+0[[1,2]] src=sbuf.fp32[0:1]+0[[1,2]] op0=add imm0=10 "
      "wait=S[0]==7 signal=S[1]+=2\n"
      "pool tensor_scalar dst=sbuf.fp32[0:1]+0[[1,2]] src=sbuf.fp32[0:1]+0[[1,2]] op0=multiply "
      "imm0=3 "
      "wait=S[1]>=2\n"
      "pe sem_wait wait=S[1]==2\n");
  Core core;
  run_functional(p, core.st);
  EXPECT_THAT(get(core.st, operand(p.stream(isa::Engine::ACT)[0], Role::dst)), ElementsAre(33, 33));
}

TEST(RunFunctional, DeadlockNamesEachBlockedEngineAndItsCondition) {
  const isa::Program p = isa::assemble(
      ".target trn2\n"
      "pe sem_wait wait=S[1]>=1\n"
      "act memset dst=sbuf.fp32[0:128]+0[[1,4]] value=1 wait=S[0]>=1 signal=S[1]+=1\n"
      "dve memset dst=sbuf.fp32[0:128]+64[[1,4]] value=2 signal=S[2]+=2\n"
      "pool memset dst=sbuf.fp32[0:128]+128[[1,4]] value=3 wait=S[2]==1\n");
  Core core;
  try {
    run_functional(p, core.st);
    FAIL() << "no deadlock reported";
  } catch (const ExecError& e) {
    EXPECT_EQ(e.kind(), Kind::deadlock);
    const std::string msg = e.what();
    EXPECT_THAT(msg, HasSubstr("pe[0] waits for S[1] >= 1, which is 0: pe sem_wait"));
    EXPECT_THAT(msg, HasSubstr("act[0] waits for S[0] >= 1, which is 0: act memset"));
    EXPECT_THAT(msg, HasSubstr("pool[0] waits for S[2] == 1, which is 2: pool memset"));
    EXPECT_THAT(msg, Not(HasSubstr("dve[")));
  }
  // DVE was free to run before the deadlock.
  EXPECT_EQ(get(core.st, operand(p.stream(isa::Engine::DVE)[0], Role::dst))[0], 2.0f);
}

TEST(RunFunctional, ErrorsNameTheEngineAndInstructionIndex) {
  const isa::Program p = isa::assemble(
      ".target trn2\n"
      ".tensor x float32 [8,4] input\n"
      "pool memset dst=sbuf.i32[0:4]+0[[1,1]] value=9\n"
      "pool dma_copy dst=sbuf.fp32[0:4]+64[[1,4]] src=hbm.fp32(x)+0[[4,8],[1,4]] "
      "index=sbuf.i32[0:4]+0[[1,1]]\n");
  Core core;
  bind_tensors(p, core.st, 0);
  try {
    run_functional(p, core.st);
    FAIL() << "no error";
  } catch (const ExecError& e) {
    EXPECT_EQ(e.kind(), Kind::out_of_bounds);
    EXPECT_THAT(e.what(), HasSubstr("pool[1]: pool dma_copy"));
    EXPECT_THAT(e.what(), HasSubstr("index 0 = 9"));
  }
}

}  // namespace
}  // namespace neuronsim::sim::test
