// The functional plane: what each instruction does to memory, computed in FP32
// and rounded to the destination dtype as the engines do (docs/isa.md gives the
// semantics). Timing lives elsewhere; this code only moves and computes values.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/sim/memory.h"
#include "neuronsim/sim/random.h"
#include "neuronsim/sim/types.h"

namespace neuronsim::sim {

// The memories one NeuronCore's instructions see.
struct CoreState {
  CoreState(const isa::Target& target, SparseMemory& hbm);
  OnChipMemory sbuf;
  OnChipMemory psum;
  SparseMemory& hbm;                                    // shared by the cores of a chip
  std::unordered_map<uint16_t, TensorBinding> tensors;  // by var_id
  isa::Fp8Config fp8;
  bool fail_on_nan = false;  // a NaN written to memory raises ExecError(Kind::nan)
  UndoLog* undo = nullptr;   // when set, keeps what each HBM write overwrites
  // The generators of VectorE ([0]) and GpSimd ([1]), one per partition. They keep
  // their state from one execution to the next, as the engines do until a reset;
  // until rand_set_state, lane p of engine e starts from a fixed state of (e, p).
  std::array<std::vector<Xorwow>, 2> rng;
  // VectorE's accumulator, one FP32 value per partition: the instructions with a reduce_cmd
  // fold their results into it, and it keeps its value from one of them to the next.
  std::vector<float> accumulator;
};

// Places the program's tensors in HBM from `base` upwards (aligned to 64 bytes),
// records them in state.tensors and writes the constants. Returns the end address.
uint64_t bind_tensors(const isa::Program& program, CoreState& state, uint64_t base);

// Applies one instruction's effect on memory. Semaphore instructions have none.
// Collectives need the other ranks of their job, so they cannot run here: they
// throw ExecError(unsupported); Simulator::run executes them (simulator.h).
// `program`, where given, names the instruction's tensors in messages.
void execute(const isa::Instruction& inst, CoreState& state, const isa::Program* program = nullptr);

// The elements of one operand of `inst`, packed in walk order (partition-major,
// then dims outermost first), bytes as stored. Collectives exchange these.
std::vector<uint8_t> read_operand(const isa::Instruction& inst, isa::Role role, CoreState& state,
                                  const isa::Program* program = nullptr);
// Writes packed elements (walk order, the operand's dtype) to one operand of `inst`;
// ExecError when `bytes` is not exactly the operand's size, or on a NaN when
// state.fail_on_nan is set.
void write_operand(const isa::Instruction& inst, isa::Role role, CoreState& state,
                   std::span<const uint8_t> bytes, const isa::Program* program = nullptr);

// Runs a whole program functionally: engines take turns, each running until its
// next unsatisfied semaphore wait; DMA transfers complete when triggered.
// Throws ExecError(deadlock) when every engine waits on a semaphore nobody signals.
// (schedule.cpp holds the turns, with the rules the timed run shares.)
void run_functional(const isa::Program& program, CoreState& state);

}  // namespace neuronsim::sim
