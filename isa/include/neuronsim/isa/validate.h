// Hardware rules for instructions: partition ranges and legal start partitions,
// PSUM banks, free-size limits, matmul operand limits, operand spaces and the
// engine each opcode runs on. Errors name the instruction, the operand and the rule.
#pragma once

#include <string>
#include <string_view>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"

namespace neuronsim::isa {

// Throws IsaError "<where>: <opcode>: operand <role>: <rule>" on the first violation.
void validate(const Instruction& inst, const Target& target, std::string_view where);
// The same, plus: HBM operands name tensors declared in `program` and stay inside them.
void validate(const Instruction& inst, const Program& program, std::string_view where);
// A tensor declaration: reserved names, sizes that fit (at most 2^48 bytes), constant data.
void validate(const TensorDecl& tensor);
// Validates the tensor declarations and every instruction of every stream.
void validate(const Program& program);

}  // namespace neuronsim::isa
