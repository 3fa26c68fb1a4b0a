// The binary encoding: every instruction is a header slot of 64 bytes followed
// by one 64-byte slot per operand (and one for a shuffle mask). Layout in
// docs/isa.md, "Binary encoding".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "neuronsim/isa/instruction.h"

namespace neuronsim::isa {

inline constexpr size_t kSlotBytes = 64;

// Appends the encoding of `inst` to `out`.
void encode(const Instruction& inst, std::vector<uint8_t>& out);
std::vector<uint8_t> encode_stream(std::span<const Instruction> stream);

// Decodes a whole stream; `where` names it in errors ("model.neff sg00/PE.bin"),
// which also give the byte offset of the faulty slot. Throws IsaError.
std::vector<Instruction> decode_stream(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace neuronsim::isa
