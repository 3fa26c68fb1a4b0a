// The text assembly: one instruction per line, `<engine> <opcode> key=value ...`,
// with directives for the target and the HBM tensors. `assemble(disassemble(p)) == p`
// holds for every valid program. Grammar in docs/isa.md, "Assembly".
#pragma once

#include <string>
#include <string_view>

#include "neuronsim/isa/program.h"

namespace neuronsim::isa {

// Parses assembly text; `file` names it in errors ("kernel.s:12: ..."). Throws AsmError.
Program assemble(std::string_view text, const std::string& file = "<input>");
std::string disassemble(const Program& program);
// One instruction in assembly syntax (HBM tensors by name when `program` is given).
std::string format_instruction(const Instruction& inst, const Program* program = nullptr);
std::string format_access_pattern(const AccessPattern& ap, const Program* program = nullptr);

}  // namespace neuronsim::isa
