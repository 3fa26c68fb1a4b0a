#include "neuronsim/isa/encoding.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "neuronsim/isa/error.h"

namespace neuronsim::isa {
namespace {

// Slot kinds in byte 0 of the slots that follow a header slot.
constexpr uint8_t kOperandSlot = 0x80;  // | role
constexpr uint8_t kMaskSlot = 0x40;

using Slot = std::array<uint8_t, kSlotBytes>;

template <typename T>
void put(Slot& s, size_t at, T v) {
  static_assert(std::endian::native == std::endian::little,
                "encoding assumes a little-endian host");
  std::memcpy(s.data() + at, &v, sizeof(T));
}

template <typename T>
T get(const uint8_t* s, size_t at) {
  T v;
  std::memcpy(&v, s + at, sizeof(T));
  return v;
}

bool all_zero(const uint8_t* s, size_t from, size_t to) {
  return std::all_of(s + from, s + to, [](uint8_t b) { return b == 0; });
}

Slot header_slot(const Instruction& in, size_t extra_slots) {
  Slot s{};
  s[0] = static_cast<uint8_t>(in.opcode);
  s[1] = static_cast<uint8_t>(in.engine);
  s[2] = kIsaVersion;
  s[3] = static_cast<uint8_t>(extra_slots);
  s[4] = static_cast<uint8_t>(in.wait.cond);
  s[5] = static_cast<uint8_t>(in.signal.op);
  put<uint16_t>(s, 6, in.wait.sem);
  put<uint32_t>(s, 8, in.wait.value);
  put<uint16_t>(s, 12, in.signal.sem);
  put<uint16_t>(s, 14, in.flags);
  put<uint32_t>(s, 16, in.signal.value);
  s[20] = static_cast<uint8_t>(in.func);
  s[21] = static_cast<uint8_t>(in.alu0);
  s[22] = static_cast<uint8_t>(in.alu1);
  s[23] = in.axes;
  put<float>(s, 24, in.imm0);
  put<float>(s, 28, in.imm1);
  for (size_t i = 0; i < in.ints.size(); ++i) put<int32_t>(s, 32 + 4 * i, in.ints[i]);
  s[48] = static_cast<uint8_t>(in.alu2);
  return s;
}

Slot operand_slot(const Operand& op) {
  const AccessPattern& ap = op.ap;
  Slot s{};
  s[0] = static_cast<uint8_t>(kOperandSlot | static_cast<uint8_t>(op.role));
  s[1] = static_cast<uint8_t>(ap.space);
  s[2] = static_cast<uint8_t>(ap.dtype);
  s[3] = ap.num_dims;
  put<uint16_t>(s, 4, ap.tensor);
  put<uint16_t>(s, 6, ap.start_partition);
  put<uint16_t>(s, 8, static_cast<uint16_t>(ap.num_partitions));
  put<uint16_t>(s, 10, static_cast<uint16_t>(ap.num_partitions >> 16));
  s[12] = ap.partition_broadcast ? 1 : 0;
  put<uint64_t>(s, 16, ap.offset);
  put<int64_t>(s, 24, ap.partition_stride);
  for (size_t i = 0; i < std::min<size_t>(ap.num_dims, kMaxDims); ++i) {
    put<int32_t>(s, 32 + 8 * i, ap.dims[i].stride);
    put<uint32_t>(s, 36 + 8 * i, ap.dims[i].size);
  }
  return s;
}

bool uses_mask(const Instruction& in) {
  return in.opcode == Opcode::partition_shuffle;
}

// Reads one instruction starting at `at`; `fail` throws with the offset of the bad slot.
class Decoder {
 public:
  Decoder(std::span<const uint8_t> bytes, const std::string& where)
      : bytes_(bytes), where_(where) {}

  std::vector<Instruction> run() {
    if (bytes_.size() % kSlotBytes != 0)
      fail(bytes_.size() - bytes_.size() % kSlotBytes,
           fmt::format("stream size {} is not a multiple of {} bytes", bytes_.size(), kSlotBytes));
    std::vector<Instruction> out;
    for (size_t at = 0; at < bytes_.size();) out.push_back(instruction(at));
    return out;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw IsaError(fmt::format("{}: offset {:#x} (instruction slot {}): {}", where_, at,
                               at / kSlotBytes, what));
  }

  template <typename E>
  E enum_field(size_t at, uint8_t raw, int count, const char* what) const {
    if (raw >= count) fail(at, fmt::format("invalid {} {}", what, raw));
    return static_cast<E>(raw);
  }

  Instruction instruction(size_t& at) {
    const uint8_t* s = bytes_.data() + at;
    const size_t start = at;
    seen_mask_ = false;
    if (s[0] >= kNumOpcodes) fail(at, fmt::format("unknown opcode {:#04x}", s[0]));
    if (s[2] != kIsaVersion)
      fail(at, fmt::format("encoding version {} (this build reads version {})", s[2], kIsaVersion));
    Instruction in;
    in.opcode = static_cast<Opcode>(s[0]);
    in.engine = enum_field<Engine>(at, s[1], kNumEngines, "engine");
    const size_t extra = s[3];
    if (start + (extra + 1) * kSlotBytes > bytes_.size())
      fail(at,
           fmt::format("instruction claims {} operand slots past the end of the stream", extra));
    in.wait.cond = enum_field<WaitCond>(at, s[4], 3, "semaphore wait condition");
    in.signal.op = enum_field<SemOp>(at, s[5], 3, "semaphore update");
    in.wait.sem = get<uint16_t>(s, 6);
    in.wait.value = get<uint32_t>(s, 8);
    in.signal.sem = get<uint16_t>(s, 12);
    in.flags = get<uint16_t>(s, 14);
    in.signal.value = get<uint32_t>(s, 16);
    in.func = enum_field<ActFunc>(at, s[20], kNumActFuncs, "activation function");
    in.alu0 = enum_field<AluOp>(at, s[21], kNumAluOps, "ALU operation (op0)");
    in.alu1 = enum_field<AluOp>(at, s[22], kNumAluOps, "ALU operation (op1)");
    in.axes = s[23];
    in.imm0 = get<float>(s, 24);
    in.imm1 = get<float>(s, 28);
    for (size_t i = 0; i < in.ints.size(); ++i) in.ints[i] = get<int32_t>(s, 32 + 4 * i);
    in.alu2 = enum_field<AluOp>(at, s[48], kNumAluOps, "ALU operation (reduce)");
    if (!all_zero(s, 49, kSlotBytes)) fail(at, "reserved header bytes 49-63 are not zero");
    at += kSlotBytes;
    for (size_t i = 0; i < extra; ++i, at += kSlotBytes) {
      if (seen_mask_) fail(at, "the mask slot must be the last slot of its instruction");
      trailing_slot(at, in);
    }
    if (uses_mask(in) && !seen_mask_)
      fail(start, fmt::format("{} has no mask slot", opcode_info(in.opcode).name));
    check_roles(start, in);
    check_unused_params(start, in);
    return in;
  }

  void trailing_slot(size_t at, Instruction& in) {
    const uint8_t* s = bytes_.data() + at;
    if (s[0] == kMaskSlot && uses_mask(in)) {
      if (seen_mask_) fail(at, "a second mask slot");
      seen_mask_ = true;
      if (!all_zero(s, 1, 32)) fail(at, "reserved mask-slot bytes are not zero");
      std::memcpy(in.mask.data(), s + 32, in.mask.size());
      return;
    }
    if ((s[0] & kOperandSlot) == 0) fail(at, fmt::format("unknown slot kind {:#04x}", s[0]));
    Operand op;
    op.role = enum_field<Role>(at, static_cast<uint8_t>(s[0] & 0x7f), kNumRoles, "operand role");
    AccessPattern& ap = op.ap;
    ap.space = enum_field<MemSpace>(at, s[1], 4, "memory space");
    ap.dtype = enum_field<DType>(at, s[2], kNumDTypes, "dtype");
    ap.num_dims = s[3];
    if (ap.num_dims < 1 || ap.num_dims > kMaxDims)
      fail(at, fmt::format("operand {}: {} free dims (1 to {} allowed)", role_name(op.role),
                           ap.num_dims, kMaxDims));
    ap.tensor = get<uint16_t>(s, 4);
    ap.start_partition = get<uint16_t>(s, 6);
    ap.num_partitions = get<uint16_t>(s, 8) | uint32_t{get<uint16_t>(s, 10)} << 16;
    if (s[12] > 1)
      fail(at, fmt::format("operand {}: partition broadcast byte {} (0 or 1)", role_name(op.role),
                           s[12]));
    ap.partition_broadcast = s[12] == 1;
    if (!all_zero(s, 13, 16)) fail(at, "reserved operand bytes 13-15 are not zero");
    ap.offset = get<uint64_t>(s, 16);
    ap.partition_stride = get<int64_t>(s, 24);
    for (size_t i = 0; i < ap.num_dims; ++i) {
      ap.dims[i].stride = get<int32_t>(s, 32 + 8 * i);
      ap.dims[i].size = get<uint32_t>(s, 36 + 8 * i);
    }
    if (!all_zero(s, 32 + 8 * ap.num_dims, kSlotBytes))
      fail(at, "bytes of unused dims are not zero");
    if (in.operand(op.role)) fail(at, fmt::format("operand {} given twice", role_name(op.role)));
    in.operands.push_back(op);
  }

  // Operands must be the ones the opcode defines, with every required one present.
  void check_roles(size_t at, const Instruction& in) const {
    const OpcodeInfo& info = opcode_info(in.opcode);
    for (const Operand& op : in.operands) {
      bool known = std::any_of(info.roles.begin(), info.roles.end(),
                               [&](const RoleInfo& r) { return r.role == op.role; });
      if (!known) fail(at, fmt::format("{} has no operand '{}'", info.name, role_name(op.role)));
    }
    for (const RoleInfo& r : info.roles)
      if (r.required && !in.operand(r.role))
        fail(at, fmt::format("{} is missing operand '{}'", info.name, role_name(r.role)));
  }

  // Fields an opcode does not use must hold their defaults, so that every
  // stream has exactly one meaning and disassembles to the same bytes.
  void check_unused_params(size_t at, const Instruction& in) const {
    const Instruction defaults;
    uint16_t allowed_flags = 0;
    std::array<bool, 13> used{};
    for (const ParamInfo& p : opcode_info(in.opcode).params) {
      used[static_cast<size_t>(p.field)] = true;
      allowed_flags = static_cast<uint16_t>(allowed_flags | p.flag);
    }
    auto check = [&](ParamField f, bool is_default, const char* what) {
      if (!used[static_cast<size_t>(f)] && !is_default)
        fail(at,
             fmt::format("{} does not use {}, but it is set", opcode_info(in.opcode).name, what));
    };
    check(ParamField::func, in.func == defaults.func, "an activation function");
    check(ParamField::alu0, in.alu0 == defaults.alu0, "op0");
    check(ParamField::alu1, in.alu1 == defaults.alu1, "op1");
    check(ParamField::alu2, in.alu2 == defaults.alu2, "a reduction");
    check(ParamField::axes, in.axes == 0, "axes");
    check(ParamField::imm0, std::bit_cast<uint32_t>(in.imm0) == 0, "imm0");
    check(ParamField::imm1, std::bit_cast<uint32_t>(in.imm1) == 0, "imm1");
    for (size_t i = 0; i < in.ints.size(); ++i)
      check(static_cast<ParamField>(static_cast<size_t>(ParamField::int0) + i), in.ints[i] == 0,
            "an integer field");
    if ((in.flags & ~allowed_flags) != 0)
      fail(at, fmt::format("{} has unknown flag bits {:#x}", opcode_info(in.opcode).name,
                           in.flags & ~allowed_flags));
  }

  std::span<const uint8_t> bytes_;
  const std::string& where_;
  bool seen_mask_ = false;
};

}  // namespace

void encode(const Instruction& inst, std::vector<uint8_t>& out) {
  const size_t extra = inst.operands.size() + (uses_mask(inst) ? 1 : 0);
  if (extra > 255)
    throw IsaError(fmt::format("{}: too many operands", opcode_info(inst.opcode).name));
  auto append = [&](const Slot& s) { out.insert(out.end(), s.begin(), s.end()); };
  append(header_slot(inst, extra));
  for (const Operand& op : inst.operands) append(operand_slot(op));
  if (uses_mask(inst)) {
    Slot s{};
    s[0] = kMaskSlot;
    std::copy(inst.mask.begin(), inst.mask.end(), s.begin() + 32);
    append(s);
  }
}

std::vector<uint8_t> encode_stream(std::span<const Instruction> stream) {
  std::vector<uint8_t> out;
  out.reserve(stream.size() * 4 * kSlotBytes);
  for (const Instruction& in : stream) encode(in, out);
  return out;
}

std::vector<Instruction> decode_stream(std::span<const uint8_t> bytes, const std::string& where) {
  return Decoder(bytes, where).run();
}

}  // namespace neuronsim::isa
