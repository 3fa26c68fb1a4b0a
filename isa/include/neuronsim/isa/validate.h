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

// Names an instruction in error messages: a text, or "<prefix> <engine>[<index>]", formatted
// only when a rule fails, so that validating a valid instruction formats nothing.
class Where {
 public:
  // Implicit: any text names a place. The text must outlive the Where (a call's argument).
  Where(std::string_view text) : text_(text) {}    // NOLINT
  Where(const char* text) : text_(text) {}         // NOLINT
  Where(const std::string& text) : text_(text) {}  // NOLINT
  Where(std::string_view prefix, Engine engine, size_t index)
      : text_(prefix), engine_(engine), index_(index), indexed_(true) {}
  std::string str() const;

 private:
  std::string_view text_;
  Engine engine_ = Engine::SP;
  size_t index_ = 0;
  bool indexed_ = false;
};

// Throws IsaError "<where>: <opcode>: operand <role>: <rule>" on the first violation.
void validate(const Instruction& inst, const Target& target, const Where& where);
// The same, plus: HBM operands name tensors declared in `program` and stay inside them.
void validate(const Instruction& inst, const Program& program, const Where& where);
// Only the synchronisation fields: the semaphores waited on and updated exist, and unused
// fields hold their defaults (for code that changes just those of valid instructions).
void validate_sync(const Instruction& inst, const Where& where);
// A tensor declaration: reserved names, sizes that fit (at most 2^48 bytes), constant data.
void validate(const TensorDecl& tensor);
// Validates the tensor declarations and every instruction of every stream.
void validate(const Program& program);

}  // namespace neuronsim::isa
