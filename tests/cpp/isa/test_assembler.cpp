#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/encoding.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/validate.h"
#include "test_support.h"

namespace neuronsim::isa {
namespace {

using ::testing::HasSubstr;

// The message assembling `text` fails with ("<none>" when it does not fail).
std::string assemble_error(const std::string& text) {
  try {
    assemble(text);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<none>";
}

std::string every_opcode_source() {
  return test::read_file(test::source_dir() / "tests/data/every_opcode.s");
}

TEST(Assembler, EveryOpcodeIsCovered) {
  const Program p = assemble(every_opcode_source(), "every_opcode.s");
  std::set<Opcode> seen;
  for (const auto& stream : p.streams)
    for (const Instruction& in : stream) seen.insert(in.opcode);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kNumOpcodes));
}

TEST(Assembler, AsmBinDisasmAsmRoundTripIsExact) {
  const Program p = assemble(every_opcode_source(), "every_opcode.s");
  // asm -> bin -> (decode) -> disasm -> asm
  for (int e = 0; e < kNumEngines; ++e) {
    const auto bytes = encode_stream(p.streams[e]);
    EXPECT_EQ(decode_stream(bytes, "test"), p.streams[e]) << engine_name(static_cast<Engine>(e));
  }
  const std::string text = disassemble(p);
  const Program again = assemble(text, "disassembled.s");
  EXPECT_EQ(again, p);
  EXPECT_EQ(disassemble(again), text);
  for (int e = 0; e < kNumEngines; ++e)
    EXPECT_EQ(encode_stream(again.streams[e]), encode_stream(p.streams[e]));
}

TEST(Assembler, RoundTripThroughNeffBytes) {
  const Program p = assemble(every_opcode_source(), "every_opcode.s");
  const auto bytes = neff::write_neff(to_neff(p, "every.neff"));
  const Program back = from_neff(neff::read_neff(bytes, "every.neff"), "every.neff");
  EXPECT_EQ(back, p);
  EXPECT_EQ(neff::write_neff(to_neff(back, "every.neff")), bytes);
}

TEST(Assembler, ParsesTheDocumentedSyntax) {
  const Program p = assemble(R"(
    .target trn1            # NeuronCore-v2
    .tensor x bf16 [4, 8] input
    act activation dst=sbuf.fp32[0:4]+64[[1,8]] src=sbuf.bf16[0:4]+0[[1,8]] func=silu scale=2 wait=S[3]>=2 signal=S[1]+=1
    sp dma_copy dst=sbuf.bf16[0:4]+0[[1,8]] src=hbm.bf16(x)+0[[8,4],[1,8]] queue=5
  )");
  EXPECT_EQ(p.target, "trn1");
  ASSERT_EQ(p.tensors.size(), 1u);
  EXPECT_EQ(p.tensors[0].dtype, DType::bf16);
  ASSERT_EQ(p.stream(Engine::ACT).size(), 1u);
  const Instruction& act = p.stream(Engine::ACT)[0];
  EXPECT_EQ(act.func, ActFunc::silu);
  EXPECT_EQ(act.imm0, 2.0f);
  EXPECT_EQ(act.wait, (SemWait{WaitCond::ge, 3, 2}));
  EXPECT_EQ(act.signal, (SemSignal{SemOp::add, 1, 1}));
  const AccessPattern* dst = act.operand(Role::dst);
  ASSERT_NE(dst, nullptr);
  EXPECT_EQ(dst->space, MemSpace::SBUF);
  EXPECT_EQ(dst->offset, 64u);
  EXPECT_EQ(dst->num_partitions, 4);
  const Instruction& dma = p.stream(Engine::SP)[0];
  EXPECT_EQ(dma.ints[0], 5);
  const AccessPattern* src = dma.operand(Role::src);
  EXPECT_EQ(src->space, MemSpace::HBM);
  EXPECT_EQ(src->tensor, 1);
  EXPECT_EQ(src->partition_stride, 8);
  EXPECT_EQ(src->num_partitions, 4);
  EXPECT_EQ(src->num_dims, 1);
}

// [start:count:0] is a partition broadcast; it prints back as written, and consecutive
// partitions keep their two-field spelling.
TEST(Assembler, PartitionBroadcastRoundTrips) {
  const std::string line =
      "sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=psum.fp32[127:128:0]+64[[1,512]]";
  const Program p = assemble(".target trn2\n" + line + "\n");
  const Instruction& in = p.stream(Engine::SP)[0];
  const AccessPattern& src = *in.operand(Role::src);
  EXPECT_TRUE(src.partition_broadcast);
  EXPECT_EQ(src.start_partition, 127);
  EXPECT_EQ(src.num_partitions, 128u);
  EXPECT_EQ(src.partition_footprint(), 1u);
  EXPECT_FALSE(in.operand(Role::dst)->partition_broadcast);
  EXPECT_EQ(format_instruction(in), line);
  const Program again = assemble(disassemble(p));
  EXPECT_EQ(again, p);
  EXPECT_EQ(disassemble(again), disassemble(p));
}

struct BadSource {
  const char* text;
  const char* message;
};

class BadAssembly : public ::testing::TestWithParam<BadSource> {};

TEST_P(BadAssembly, IsRejectedWithLineAndReason) {
  try {
    assemble(std::string(".target trn2\n.tensor x fp32 [128,512] input\n") + GetParam().text,
             "bad.s");
    FAIL() << "accepted: " << GetParam().text;
  } catch (const AsmError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.s:3")) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(GetParam().message)) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadAssembly,
    ::testing::Values(
        BadSource{"xyz memset dst=sbuf.fp32[0:1]+0[[1,1]]", "unknown engine 'xyz'"},
        BadSource{"dve frobnicate dst=sbuf.fp32[0:1]+0[[1,1]]", "unknown opcode 'frobnicate'"},
        BadSource{"dve memset dst=sbuf.fp99[0:1]+0[[1,1]]", "unknown dtype 'fp99'"},
        BadSource{"dve memset dst=dram.fp32[0:1]+0[[1,1]]", "unknown memory space 'dram'"},
        BadSource{"dve memset dst=sbuf.fp32[0:1]+0[[1,1]] colour=red", "has no argument 'colour'"},
        BadSource{"dve memset dst=sbuf.fp32[0:1]+0[[1,1]] value=abc", "'abc' is not a number"},
        BadSource{"dve memset dst=sbuf.fp32[0:1]+0[1,1]", "expected '['"},
        BadSource{"dve memset dst=sbuf.fp32[0:1]+0[[1,1]] dst=sbuf.fp32[0:1]+0[[1,1]]",
                  "'dst' given twice"},
        BadSource{"dve memset", "operand dst: missing"},
        BadSource{"act memset dst=sbuf.fp32[0:1]+0[[1,1]] wait=S[1]<3", "expected >= or =="},
        BadSource{"dve memset dst=sbuf.fp32[0:129]+0[[1,1]]", "exceed the 128 partitions"},
        BadSource{"dve memset dst=sbuf.fp32[16:32]+0[[1,1]]", "cannot start at partition 16"},
        BadSource{"dve memset dst=sbuf.fp32[64:65]+0[[1,1]]", "exceed the 128 partitions"},
        BadSource{"dve memset dst=sbuf.fp32[0:128]+229372[[1,2]]", "outside sbuf"},
        BadSource{"dve memset dst=sbuf.u8[0:128]+0[[1,70000]]", "at most 65536"},
        BadSource{"pe memset dst=sbuf.fp32[0:1]+0[[1,1]]", "cannot run on engine pe"},
        BadSource{
            "pe matmul dst=psum.fp32[0:128]+1024[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
            "moving=sbuf.bf16[0:128]+0[[1,512]]",
            "span two PSUM banks"},
        BadSource{
            "pe matmul dst=psum.fp32[0:128]+0[[1,1024]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
            "moving=sbuf.bf16[0:128]+0[[1,1024]]",
            "free size 1024 exceeds 512"},
        BadSource{
            "pe matmul dst=sbuf.fp32[0:128]+0[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
            "moving=sbuf.bf16[0:128]+0[[1,512]]",
            "must be in psum"},
        BadSource{"pe matmul dst=psum.fp32[0:64]+0[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
                  "moving=sbuf.bf16[0:128]+0[[1,512]]",
                  "is not [stationary free 128, moving free 512]"},
        BadSource{"pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.bf16[0:64]+0[[1,128]] "
                  "moving=sbuf.bf16[0:128]+0[[1,512]]",
                  "contraction partitions"},
        BadSource{
            "pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
            "moving=sbuf.bf16[0:128]+0[[1,512]] row=16",
            "tile position row=16"},
        BadSource{"dve tensor_tensor dst=sbuf.fp32[0:128]+0[[1,8]] in0=sbuf.fp32[0:128]+0[[1,8]] "
                  "in1=sbuf.fp32[0:128]+0[[1,9]]",
                  "operand in1: shape [128, 9] differs"},
        BadSource{"dve tensor_reduce dst=sbuf.fp32[0:128]+0[[1,1]] src=sbuf.fp32[0:128]+0[[1,8]] "
                  "op=divide axes=1",
                  "op=divide is not a reduction"},
        BadSource{
            "sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=hbm.fp32(nope)+0[[512,128],[1,512]]",
            "unknown tensor 'nope'"},
        BadSource{
            "sp dma_copy dst=sbuf.fp32[0:128]+0[[1,513]] src=hbm.fp32(x)+4[[512,128],[1,513]]",
            "fall outside tensor 'x'"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] "
                  "src=hbm.fp32(x)+0[[512,128],[1,512]] queue=16",
                  "queue=16"},
        BadSource{
            "dve tensor_copy dst=hbm.fp32(x)+0[[512,128],[1,512]] src=sbuf.fp32[0:128]+0[[1,512]]",
            "engines reach HBM only through dma_copy"},
        BadSource{".tensor x fp32 [1] input", "declared twice"},
        BadSource{".tensor c fp32 [2] constant data=00", "has 1 bytes of data, its shape needs 8"},
        BadSource{".frob", "unknown directive '.frob'"},
        BadSource{"dve memset dst=sbuf.fp32[0:1]+010x[[1,1]]", "'010x' is not an integer"},
        BadSource{
            "sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=hbm.fp32(1abc)+0[[512,128],[1,512]]",
            "'1abc' is not an integer"},
        BadSource{
            "act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] reduce=max",
            "reduce=max needs a reduce_dst operand"},
        BadSource{"pe transpose dst=psum.fp32[0:32]+2040[[1,128]] src=sbuf.fp32[0:128]+0[[1,32]]",
                  "span two PSUM banks"},
        BadSource{
            "pe matmul dst=psum.bf16[0:128]+0[[1,128]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
            "moving=sbuf.bf16[0:128]+0[[1,128]] transpose=true accumulate=true",
            "transpose mode cannot accumulate"},
        BadSource{"dve rng dst=sbuf.fp32[0:128]+0[[1,8]]",
                  "must have an integer dtype, not float32"},
        BadSource{"pool rng dst=psum.u32[0:128]+0[[1,8]]", "GpSimd reaches SBUF only"},
        BadSource{"act rng dst=sbuf.u32[0:128]+0[[1,8]]", "cannot run on engine act"},
        BadSource{"dve rand_set_state src=sbuf.i32[0:128]+0[[1,6]]", "must be uint32, not int32"},
        BadSource{"dve max8 dst=sbuf.fp32[0:1]+0[[1,8]] src=sbuf.fp32[0:1]+64[[1,7]]",
                  "holds 7 elements per partition; the top-8 instructions take 8 to 16384"},
        BadSource{"dve max8 dst=sbuf.fp32[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+64[[1,9]]",
                  "must be [1, 8], got [1, 4]"},
        BadSource{"dve find_index8 dst=sbuf.fp32[0:1]+0[[1,8]] src=sbuf.fp32[0:1]+64[[1,9]] "
                  "vals=sbuf.fp32[0:1]+32[[1,8]]",
                  "indices are uint16 or uint32, not float32"},
        BadSource{"pool max8 dst=sbuf.fp32[0:1]+0[[1,8]] src=sbuf.fp32[0:1]+64[[1,9]]",
                  "cannot run on engine pool"},
        BadSource{"pool rand_set_state src=sbuf.u32[0:128]+0[[1,5]]",
                  "holds 5 words per lane; a XORWOW state is 6"},
        BadSource{"act tensor_scalar dst=sbuf.fp32[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+0[[1,4]] "
                  "op0=add reduce=add reduce_cmd=3",
                  "only VectorE has the accumulator"},
        BadSource{"dve tensor_scalar dst=sbuf.fp32[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+0[[1,4]] "
                  "op0=add reduce_dst=sbuf.fp32[0:1]+64[[1,1]]",
                  "need a reduce_cmd"},
        BadSource{"dve tensor_scalar dst=sbuf.fp32[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+0[[1,4]] "
                  "op0=add reduce=add reduce_cmd=7",
                  "reduce_cmd=7 (0 to 4)"},
        BadSource{"dve tensor_scalar dst=sbuf.fp32[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+0[[1,4]] "
                  "op0=add reduce=add reduce_cmd=4",
                  "load_reduce, and only load_reduce, reads an initial operand"},
        BadSource{"dve tensor_scalar dst=sbuf.fp32[0:1]+0[[1,4]] src=sbuf.fp32[0:1]+0[[1,4]] "
                  "op0=add op1=add reduce=add reduce_cmd=3",
                  "has one operation"},
        BadSource{"dve scalar_tensor_tensor dst=sbuf.fp32[0:1]+0[[1,4]] "
                  "in0=psum.fp32[0:1]+0[[1,4]] in1=psum.fp32[0:1]+64[[1,4]] op0=add op1=add",
                  "cannot both be in PSUM"},
        BadSource{"dve range_select dst=sbuf.fp32[0:1]+0[[1,4]] on_true=sbuf.fp32[0:1]+0[[1,4]] "
                  "operand0=sbuf.fp32[0:1]+64[[1,1]] operand1=sbuf.fp32[0:1]+68[[1,1]] "
                  "cmp0=add cmp1=is_lt",
                  "add is not one of is_equal"},
        BadSource{"dve range_select dst=sbuf.fp32[0:1]+0[[1,4]] on_true=sbuf.fp32[0:1]+0[[1,4]] "
                  "operand0=sbuf.bf16[0:1]+64[[1,1]] operand1=sbuf.fp32[0:1]+68[[1,1]] "
                  "cmp0=is_ge cmp1=is_lt",
                  "a bound is fp32"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] "
                  "src=hbm.fp32(x)+0[[512,128],[1,512]] transpose=true",
                  "2-byte elements"},
        BadSource{"sp dma_copy dst=sbuf.bf16[0:128]+0[[1,8]] src=sbuf.bf16[0:4]+0[[1,256]] "
                  "transpose=true",
                  "has 128 partitions; a DMA transpose makes src's outermost free dim (256 "
                  "elements) the partitions"},
        BadSource{
            "sp dma_copy dst=hbm.fp32(x)+0[[512,128],[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] "
            "transpose=true",
            "a DMA transpose writes SBUF"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=sbuf.fp32[3:128:1]+64[[1,16]]",
                  "partition step 1: only 0 (a broadcast of the start partition)"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=sbuf.fp32[3:128:]+64[[1,16]]",
                  "expected an integer"},
        BadSource{"sp dma_copy dst=sbuf.fp32[3:128:0]+0[[1,16]] src=sbuf.fp32[0:128]+64[[1,16]]",
                  "dma_copy: operand dst: only the src of dma_copy can broadcast a partition"},
        BadSource{
            "dve tensor_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=sbuf.fp32[3:128:0]+64[[1,16]]",
            "tensor_copy: operand src: only the src of dma_copy can broadcast a partition"},
        BadSource{"pe transpose dst=psum.fp32[0:32]+0[[1,128]] src=sbuf.fp32[5:128:0]+0[[1,32]]",
                  "transpose: operand src: only the src of dma_copy can broadcast a partition"},
        BadSource{"sp dma_copy dst=sbuf.bf16[0:128]+0[[1,64]] src=sbuf.bf16[3:64:0]+4096[[1,128]] "
                  "transpose=true",
                  "dma_copy: operand src: a DMA transpose cannot broadcast a partition"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=sbuf.fp32[3:129:0]+64[[1,16]]",
                  "operand src: broadcasts partition 3 to 129 partitions (at most 128)"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:1]+0[[1,16]] src=sbuf.fp32[128:1:0]+64[[1,16]]",
                  "operand src: partitions 128..128 exceed the 128 partitions"},
        BadSource{"sp dma_copy dst=sbuf.fp16[0:128]+0[[1,16]] src=sbuf.fp16[0:128]+64[[1,16]] "
                  "add=true",
                  "the DMA adds into FP32 or BF16 only"},
        BadSource{"sp dma_copy dst=psum.fp32[0:128]+0[[1,16]] src=sbuf.fp32[0:128]+64[[1,16]] "
                  "add=true",
                  "the DMA adds into HBM or SBUF, not PSUM"},
        BadSource{"pool dma_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=sbuf.fp32[0:128]+64[[1,16]] "
                  "hwdge=true",
                  "the hardware DGE (hwdge) is triggered by sp or act"},
        BadSource{"sp dma_copy dst=sbuf.fp32[0:4]+0[[1,16]] src=sbuf.fp32[0:128]+64[[1,16]] "
                  "index=sbuf.i32[0:4]+128[[1,1]] hwdge=true",
                  "the hardware DGE (hwdge) does not gather or scatter"}));

TEST(Assembler, NeuronCoreV2HasNoGpSimdGeneratorAndNoStateSetting) {
  EXPECT_THAT(assemble_error(".target trn1\npool rng dst=sbuf.u16[0:128]+0[[1,8]]\n"),
              HasSubstr("GpSimd has no random number generator on trn1"));
  EXPECT_THAT(assemble_error(".target trn1\ndve rand_set_state src=sbuf.u32[0:128]+0[[1,6]]\n"),
              HasSubstr("rand_set_state needs NeuronCore-v3 or later"));
  EXPECT_NO_THROW(assemble(".target trn1\ndve rng dst=sbuf.u16[0:128]+0[[1,8]]\n"));
}

TEST(Assembler, NeuronCoreV2HasNoHardwareDge) {
  const std::string copy =
      "act dma_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=sbuf.fp32[0:128]+64[[1,16]] hwdge=true\n";
  EXPECT_THAT(assemble_error(".target trn1\n" + copy),
              HasSubstr("the hardware DGE (hwdge) needs NeuronCore-v3 or newer; trn1 is "
                        "NeuronCore-v2"));
  const Program p = assemble(".target trn2\n" + copy);
  EXPECT_TRUE(p.stream(Engine::ACT)[0].has_flag(kHwDge));
  EXPECT_THAT(disassemble(p), HasSubstr("hwdge=true"));
}

TEST(Assembler, ActivationScaleDefaultsToOne) {
  const Program p = assemble(
      ".target trn2\nact activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] "
      "func=exp\n");
  EXPECT_EQ(p.stream(Engine::ACT)[0].imm0, 1.0f);
  EXPECT_EQ(disassemble(p).find("scale="), std::string::npos);
  const Program zero = assemble(
      ".target trn2\nact activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] "
      "scale=0\n");
  EXPECT_EQ(zero.stream(Engine::ACT)[0].imm0, 0.0f);
  EXPECT_EQ(assemble(disassemble(zero)), zero);
}

TEST(Assembler, TilePositionsFollowTheGeneration) {
  const std::string mm =
      "pe matmul dst=psum.fp32[0:32]+0[[1,64]] stationary=sbuf.bf16[0:32]+0[[1,32]] "
      "moving=sbuf.bf16[0:32]+64[[1,64]] row=32 col=32\n";
  EXPECT_NO_THROW(assemble(".target trn2\n" + mm));
  EXPECT_THROW(assemble(".target trn1\n" + mm), AsmError);
}

// nc_matmul's perf_mode=double_row: FP8 on NeuronCore-v3 and newer, [K, 2, M] x [K, 2, N].
TEST(Assembler, DoubleRowIsFp8OnNeuronCoreV3AndNewer) {
  const std::string mm =
      "pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.fp8e4[0:128]+0[[1,256]] "
      "moving=sbuf.fp8e5[0:128]+1024[[1,1024]] double_row=true\n";
  const Program p = assemble(".target trn2\n" + mm);
  EXPECT_TRUE(p.stream(Engine::PE)[0].has_flag(kDoubleRow));
  EXPECT_THAT(disassemble(p), HasSubstr("double_row=true"));
  EXPECT_NO_THROW(assemble(".target trn3\n" + mm));
  EXPECT_THAT(assemble_error(".target trn1\n" + mm),
              HasSubstr("double_row needs NeuronCore-v3 or newer; trn1 has no performance mode"));
  EXPECT_THAT(assemble_error(
                  ".target trn2\npe matmul dst=psum.fp32[0:128]+0[[1,512]] "
                  "stationary=sbuf.bf16[0:128]+0[[1,256]] moving=sbuf.bf16[0:128]+1024[[1,1024]] "
                  "double_row=true\n"),
              HasSubstr("double_row multiplies FP8, not bfloat16"));
  EXPECT_THAT(assemble_error(
                  ".target trn2\npe matmul dst=psum.fp32[0:128]+0[[1,512]] "
                  "stationary=sbuf.fp8e4[0:128]+0[[1,255]] moving=sbuf.fp8e4[0:128]+1024[[1,1024]] "
                  "double_row=true\n"),
              HasSubstr("double_row needs [K, 2, *]: 255 free elements is odd"));
  // dst is [M, N] of the halves: [128, 1024] is not.
  EXPECT_THAT(assemble_error(
                  ".target trn2\npe matmul dst=psum.fp32[0:128]+0[[1,1024]] "
                  "stationary=sbuf.fp8e4[0:128]+0[[1,256]] moving=sbuf.fp8e4[0:128]+1024[[1,1024]] "
                  "double_row=true\n"),
              HasSubstr("is not [stationary free 128, moving free 512]"));
  EXPECT_THAT(
      assemble_error(".target trn2\npe matmul dst=psum.fp32[0:32]+0[[1,64]] "
                     "stationary=sbuf.fp8e4[0:32]+0[[1,64]] moving=sbuf.fp8e4[0:32]+1024[[1,128]] "
                     "double_row=true col=32\n"),
      HasSubstr("double_row cannot be combined with column tiling"));
}

// Targets beyond the built-in table (a generation described only by its spec file).
TEST(Targets, AddedTargetsAssembleAndAreListed) {
  EXPECT_EQ(find_target_name("inf2"), "trn1");
  EXPECT_EQ(find_target_name("cayman"), "trn2");
  EXPECT_THAT(assemble_error(".target trnt\n"),
              HasSubstr("unknown target 'trnt' (trn1, trn2, trn3, inf2)"));
  Target t = target_by_name("trn2");
  t.name = "trnt";
  t.neff_target = "trnt-kelf";
  t.sbuf_partition_bytes = 64 * 1024;
  const Target& added = add_target(t);
  EXPECT_EQ(&add_target(t), &added);  // the same figures again: the same target
  EXPECT_EQ(&target_by_name("trnt"), &added);
  EXPECT_EQ(find_target_name("trnt-kelf"), "trnt");
  EXPECT_EQ(added.sbuf_partition_bytes, 64u * 1024);
  EXPECT_THAT(target_names(), ::testing::ElementsAre("trn1", "trn2", "trn3", "trnt", "inf2"));
  const Program p = assemble(".target trnt\ndve memset dst=sbuf.fp32[0:1]+0[[1,1]]\n");
  EXPECT_EQ(p.target, "trnt");
  // The target's own limits apply: 64 KiB of SBUF per partition.
  EXPECT_THAT(assemble_error(".target trnt\ndve memset dst=sbuf.fp32[0:1]+65536[[1,1]]\n"),
              HasSubstr("outside sbuf (65536 bytes per partition)"));
  EXPECT_NO_THROW(assemble(".target trn2\ndve memset dst=sbuf.fp32[0:1]+65536[[1,1]]\n"));
  // Other figures under a known name, or a NEFF target that names another target.
  Target other = t;
  other.pe_moving_fmax = 256;
  EXPECT_THROW(add_target(other), IsaError);
  Target trn2 = target_by_name("trn2");
  trn2.bn_stats_fmax = 256;
  EXPECT_THROW(add_target(trn2), IsaError);
  Target clash = t;
  clash.name = "trnu";
  clash.neff_target = "cayman";
  EXPECT_THROW(add_target(clash), IsaError);
  EXPECT_FALSE(find_target_name("trnu"));
}

TEST(Validation, NonCanonicalFieldsAreRejected) {
  Program p = assemble(".target trn2\ndve memset dst=sbuf.fp32[0:1]+0[[1,1]]\n");
  Instruction in = p.stream(Engine::DVE)[0];
  const Target& t = target_by_name("trn2");
  Instruction bad = in;
  bad.wait.sem = 3;  // no condition
  EXPECT_THROW(validate(bad, t, "x"), IsaError);
  bad = in;
  bad.mask[0] = 1;
  EXPECT_THROW(validate(bad, t, "x"), IsaError);
  bad = in;
  bad.operands[0].ap.tensor = 2;
  EXPECT_THROW(validate(bad, t, "x"), IsaError);
  bad = in;
  bad.operands[0].ap.num_dims = 0;
  EXPECT_THROW(validate(bad, t, "x"), IsaError);
  EXPECT_NO_THROW(validate(in, t, "x"));
}

// The message validating `in` fails with ("<none>" when it passes).
std::string validate_error(const Instruction& in) {
  try {
    validate(in, target_by_name("trn2"), "x");
  } catch (const IsaError& e) {
    return e.what();
  }
  return "<none>";
}

// A partition broadcast is an SBUF/PSUM operand, the src of dma_copy: the text form cannot
// put one on HBM or on a pattern, so these are built as the decoder could.
TEST(Validation, PartitionBroadcastOnlyOnChip) {
  const Program p = assemble(
      ".target trn2\n.tensor x fp32 [128,16] input\n"
      "sp dma_copy dst=sbuf.fp32[0:128]+0[[1,16]] src=hbm.fp32(x)+0[[16,128],[1,16]]\n"
      "pool iota dst=sbuf.i32[0:128]+0[[1,64]] pattern=pattern[[8,8],[1,8]]\n");
  Instruction dma = p.stream(Engine::SP)[0];
  dma.operand(Role::src)->partition_broadcast = true;
  EXPECT_THAT(
      validate_error(dma),
      HasSubstr("dma_copy: operand src: a partition broadcast reads SBUF or PSUM, not hbm"));
  Instruction iota = p.stream(Engine::POOL)[0];
  iota.operand(Role::pattern)->partition_broadcast = true;
  EXPECT_THAT(validate_error(iota), HasSubstr("iota: operand pattern: a pattern has only dims"));
  // Onto HBM from a broadcast SBUF row, and from PSUM into SBUF, are fine.
  dma = p.stream(Engine::SP)[0];
  std::swap(dma.operands[0].ap, dma.operands[1].ap);
  dma.operand(Role::src)->start_partition = 7;
  dma.operand(Role::src)->partition_broadcast = true;
  EXPECT_EQ(validate_error(dma), "<none>");
  dma = p.stream(Engine::SP)[0];
  *dma.operand(Role::src) = *dma.operand(Role::dst);
  dma.operand(Role::src)->space = MemSpace::PSUM;
  dma.operand(Role::src)->start_partition = 100;
  dma.operand(Role::src)->partition_broadcast = true;
  EXPECT_EQ(validate_error(dma), "<none>");
}

}  // namespace
}  // namespace neuronsim::isa
