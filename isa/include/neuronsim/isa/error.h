// Errors raised by the isa layer. Messages name the file, member, instruction
// or operand at fault so the user can find the problem without a debugger.
#pragma once

#include <stdexcept>
#include <string>

namespace neuronsim::isa {

// A NEFF that cannot be read or written (bad header, bad archive, bad metadata).
class NeffError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An instruction that breaks an encoding or hardware rule.
class IsaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Assembly text that cannot be parsed; the message carries "file:line: ...".
class AsmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace neuronsim::isa
