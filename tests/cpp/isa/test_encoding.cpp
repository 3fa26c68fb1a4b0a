#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/encoding.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/instruction.h"

namespace neuronsim::isa {
namespace {

using ::testing::HasSubstr;

TEST(OpcodeTable, IsIndexedByOpcodeAndNamesAreUnique) {
  std::set<std::string_view> names;
  ASSERT_EQ(all_opcodes().size(), static_cast<size_t>(kNumOpcodes));
  for (int i = 0; i < kNumOpcodes; ++i) {
    const auto op = static_cast<Opcode>(i);
    const OpcodeInfo& info = opcode_info(op);
    EXPECT_EQ(info.opcode, op);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(parse_opcode(info.name), op);
    EXPECT_FALSE(info.engines.empty()) << info.name;
    std::set<std::string_view> keys;
    for (const RoleInfo& r : info.roles) EXPECT_TRUE(keys.insert(role_name(r.role)).second);
    for (const ParamInfo& p : info.params)
      EXPECT_TRUE(keys.insert(p.name).second || p.name == "scale" || p.name == "initial" ||
                  p.name == "on_false")
          << p.name;
  }
}

TEST(Names, RoundTrip) {
  for (int i = 0; i < kNumAluOps; ++i)
    EXPECT_EQ(parse_alu_op(alu_op_name(static_cast<AluOp>(i))), static_cast<AluOp>(i));
  for (int i = 0; i < kNumActFuncs; ++i)
    EXPECT_EQ(parse_act_func(act_func_name(static_cast<ActFunc>(i))), static_cast<ActFunc>(i));
  for (int i = 0; i < kNumEngines; ++i) {
    EXPECT_EQ(parse_engine(engine_name(static_cast<Engine>(i))), static_cast<Engine>(i));
    EXPECT_EQ(parse_engine(engine_neff_name(static_cast<Engine>(i))), static_cast<Engine>(i));
  }
  EXPECT_FALSE(parse_alu_op("plus"));
  EXPECT_FALSE(parse_act_func("swish"));
  EXPECT_FALSE(parse_engine("tpb"));
}

TEST(ActivationFunctions, MatchReferenceValues) {
  // References computed independently (closed forms / published constants).
  struct Case {
    ActFunc f;
    float x;
    double want;
  };
  const Case cases[] = {
      {ActFunc::identity, -2.5f, -2.5},
      {ActFunc::exp, 1.0f, 2.718281828459045},
      {ActFunc::log, 10.0f, 2.302585092994046},
      {ActFunc::tanh, 0.5f, 0.46211715726000974},
      {ActFunc::sigmoid, 0.0f, 0.5},
      {ActFunc::sigmoid, 2.0f, 0.8807970779778823},
      {ActFunc::relu, -1.0f, 0.0},
      {ActFunc::relu, 3.0f, 3.0},
      {ActFunc::gelu, 1.0f, 0.8413447460685429},
      {ActFunc::gelu_tanh, 1.0f, 0.8411919906082768},
      {ActFunc::silu, 1.0f, 0.7310585786300049},
      {ActFunc::softplus, 0.0f, 0.6931471805599453},
      {ActFunc::softplus, 50.0f, 50.0},
      {ActFunc::sqrt, 2.0f, 1.4142135623730951},
      {ActFunc::rsqrt, 4.0f, 0.5},
      {ActFunc::reciprocal, 8.0f, 0.125},
      {ActFunc::square, -3.0f, 9.0},
      {ActFunc::sin, 1.0f, 0.8414709848078965},
      {ActFunc::cos, 1.0f, 0.5403023058681398},
      {ActFunc::erf, 0.5f, 0.5204998778130465},
      {ActFunc::abs, -7.0f, 7.0},
      {ActFunc::sign, -3.0f, -1.0},
      {ActFunc::sign, 0.0f, 0.0},
      {ActFunc::negate, 2.0f, -2.0},
      {ActFunc::arctan, 1.0f, 0.7853981633974483},
      {ActFunc::mish, 1.0f, 0.8650983882673103},
  };
  for (const Case& c : cases)
    EXPECT_NEAR(apply_act_func(c.f, c.x), c.want, 1e-6 * std::max(1.0, std::fabs(c.want)))
        << act_func_name(c.f) << "(" << c.x << ")";
  EXPECT_TRUE(std::isnan(apply_act_func(ActFunc::sqrt, -1.0f)));
}

Instruction memset_inst() {
  const Program p =
      assemble(".target trn2\ndve memset dst=sbuf.fp32[0:128]+0[[1,512]] value=3 signal=S[2]+=1\n");
  return p.stream(Engine::DVE)[0];
}

std::vector<uint8_t> two_memsets() {
  std::vector<uint8_t> bytes;
  encode(memset_inst(), bytes);
  encode(memset_inst(), bytes);
  return bytes;
}

std::string decode_error(const std::vector<uint8_t>& bytes) {
  try {
    decode_stream(bytes, "k.neff sg00/DVE.bin");
  } catch (const IsaError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Encoding, UsesFixed64ByteSlots) {
  const auto bytes = two_memsets();
  EXPECT_EQ(bytes.size(), 4 * kSlotBytes);  // header + one operand slot, twice
  EXPECT_EQ(bytes[0], static_cast<uint8_t>(Opcode::memset));
  EXPECT_EQ(bytes[2], kIsaVersion);
  const auto back = decode_stream(bytes, "x");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1], memset_inst());
}

// An HBM pattern's rows take 32 bits (an embedding table over a 262,144-token vocabulary):
// the high half goes to operand bytes 10-11, and it round-trips.
TEST(Encoding, HbmRowsPast65535RoundTrip) {
  Instruction in;
  in.opcode = Opcode::dma_copy;
  in.engine = Engine::SP;
  AccessPattern table;
  table.space = MemSpace::HBM;
  table.dtype = DType::bf16;
  table.tensor = 1;
  table.num_partitions = 262144 + 3;
  table.partition_stride = 4096;
  table.dims[0] = {1, 4096};
  AccessPattern tile = table;
  tile.space = MemSpace::SBUF;
  tile.tensor = 0;
  tile.num_partitions = 128;
  tile.partition_stride = 0;
  in.operands = {{Role::dst, tile}, {Role::src, table}};
  std::vector<uint8_t> bytes;
  encode(in, bytes);
  EXPECT_EQ(bytes[2 * kSlotBytes + 8], 3);   // 262147 = 0x40003: low half 3 ...
  EXPECT_EQ(bytes[2 * kSlotBytes + 10], 4);  // ... high half 4
  const auto back = decode_stream(bytes, "x");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].operand(Role::src)->num_partitions, 262147u);
  EXPECT_EQ(back[0], in);
}

// A partition broadcast is operand byte 12 = 1, and it round-trips; other operands keep 0.
TEST(Encoding, PartitionBroadcastIsOperandByte12) {
  const Program p = assemble(
      ".target trn2\n"
      "sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[3:128:0]+4096[[1,512]]\n");
  const Instruction& in = p.stream(Engine::SP)[0];
  ASSERT_TRUE(in.operand(Role::src)->partition_broadcast);
  std::vector<uint8_t> bytes;
  encode(in, bytes);
  ASSERT_EQ(bytes.size(), 3 * kSlotBytes);
  EXPECT_EQ(bytes[kSlotBytes + 12], 0);      // dst
  EXPECT_EQ(bytes[2 * kSlotBytes + 12], 1);  // src
  const auto back = decode_stream(bytes, "x");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], in);
  EXPECT_EQ(encode_stream(back), bytes);
  AccessPattern consecutive = *in.operand(Role::src);
  consecutive.partition_broadcast = false;
  EXPECT_NE(consecutive, *in.operand(Role::src));  // the field takes part in equality
}

TEST(Encoding, BadStreamsNameTheStreamTheOffsetAndTheProblem) {
  auto second = [](size_t byte) { return 2 * kSlotBytes + byte; };
  struct Case {
    size_t at;
    uint8_t value;
    const char* message;
  };
  const Case cases[] = {
      {second(0), 200, "unknown opcode 0xc8"},
      {second(1), 9, "invalid engine 9"},
      {second(2), 7, "encoding version 7"},
      {second(3), 5, "past the end of the stream"},
      {second(4), 3, "invalid semaphore wait condition"},
      {second(20), 1, "does not use an activation function"},
      {second(21), 99, "invalid ALU operation"},
      {second(30), 0x40, "does not use imm1"},
      {second(50), 1, "reserved header bytes"},
      {second(kSlotBytes + 0), 0x80 | 40, "invalid operand role"},
      {second(kSlotBytes + 0), 0x80 | 1, "has no operand 'src'"},
      {second(kSlotBytes + 0), 0x13, "unknown slot kind"},
      {second(kSlotBytes + 1), 9, "invalid memory space"},
      {second(kSlotBytes + 2), 13, "invalid dtype 13"},
      {second(kSlotBytes + 3), 5, "5 free dims"},
      {second(kSlotBytes + 12), 2, "partition broadcast byte 2 (0 or 1)"},
      {second(kSlotBytes + 13), 1, "reserved operand bytes"},
      {second(kSlotBytes + 60), 1, "unused dims are not zero"},
  };
  for (const Case& c : cases) {
    auto bytes = two_memsets();
    bytes[c.at] = c.value;
    const std::string err = decode_error(bytes);
    // Header problems point at the instruction, operand problems at the operand's slot.
    const size_t slot = c.at / kSlotBytes;
    const bool whole_instruction = std::string_view(c.message).starts_with("has no operand");
    const size_t at = whole_instruction ? 2 : slot;
    EXPECT_THAT(err,
                HasSubstr(fmt::format("k.neff sg00/DVE.bin: offset {:#x} (instruction slot {})",
                                      at * kSlotBytes, at)))
        << c.message;
    EXPECT_THAT(err, HasSubstr(c.message));
  }
  auto truncated = two_memsets();
  truncated.resize(truncated.size() - 10);
  EXPECT_THAT(decode_error(truncated), HasSubstr("not a multiple of 64"));
  auto missing_operand = two_memsets();
  missing_operand[second(3)] = 0;
  missing_operand.resize(second(kSlotBytes));
  EXPECT_THAT(decode_error(missing_operand), HasSubstr("missing operand 'dst'"));
}

TEST(Encoding, RandomSlotsNeverCrashTheDecoder) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bytes(kSlotBytes * (1 + rng() % 4));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : 0);
    bytes[0] = static_cast<uint8_t>(rng() % (kNumOpcodes + 2));
    bytes[2] = kIsaVersion;
    try {
      const auto decoded = decode_stream(bytes, "random");
      EXPECT_EQ(encode_stream(decoded), bytes);  // a stream that decodes has exactly one encoding
    } catch (const IsaError&) {
    }
  }
}

}  // namespace
}  // namespace neuronsim::isa
