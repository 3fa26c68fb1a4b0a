// The functional plane: what each instruction does to memory, computed in FP32
// and rounded to the destination dtype as the engines do (docs/isa.md gives the
// semantics). Timing lives elsewhere; this code only moves and computes values.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/sim/memory.h"

namespace neuronsim::sim {

// A fault while executing: the message names the instruction and what went wrong.
class ExecError : public std::runtime_error {
 public:
  enum class Kind { out_of_bounds, nan, unsupported, deadlock };
  ExecError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// Where one HBM tensor of a program lives.
struct TensorBinding {
  uint64_t address = 0;
  uint64_t size = 0;
};

// The memories one NeuronCore's instructions see.
struct CoreState {
  CoreState(const isa::Target& target, SparseMemory& hbm);
  OnChipMemory sbuf;
  OnChipMemory psum;
  SparseMemory& hbm;                                   // shared by the cores of a chip
  std::unordered_map<uint16_t, TensorBinding> tensors;  // by var_id
  isa::Fp8Config fp8;
  bool fail_on_nan = false;  // a NaN written to memory raises ExecError(Kind::nan)
};

// Places the program's tensors in HBM from `base` upwards (aligned to 64 bytes),
// records them in state.tensors and writes the constants. Returns the end address.
uint64_t bind_tensors(const isa::Program& program, CoreState& state, uint64_t base);

// Applies one instruction's effect on memory. Semaphore instructions have none;
// collectives throw ExecError(unsupported) until the collectives layer runs them.
void execute(const isa::Instruction& inst, CoreState& state);

// Runs a whole program functionally: engines take turns, each running until its
// next unsatisfied semaphore wait; DMA transfers complete when triggered.
// Throws ExecError(deadlock) when every engine waits on a semaphore nobody signals.
void run_functional(const isa::Program& program, CoreState& state);

}  // namespace neuronsim::sim
