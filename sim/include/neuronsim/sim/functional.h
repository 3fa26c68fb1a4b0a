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
void execute(const isa::Instruction& inst, CoreState& state);

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
void run_functional(const isa::Program& program, CoreState& state);

// Several cores run functionally together (Simulator::run in functional-only mode):
// collective instructions are handed to a CollectiveStepper, which lets an engine
// go on only once every rank of the collective has reached it.
struct FunctionalCore {
  uint32_t id = 0;  // instance-wide core index, for messages
  const isa::Program* program = nullptr;
  CoreState* state = nullptr;
};

class CollectiveStepper {
 public:
  virtual ~CollectiveStepper() = default;
  // Engine `engine` of cores[core] is at collective instruction `index` (its wait
  // satisfied). Returns true once the instruction is done (its result written),
  // false while it waits for other ranks. Called again until it returns true.
  virtual bool step(size_t core, isa::Engine engine, uint32_t index) = 0;
  // Why that engine is still waiting, for the deadlock report.
  virtual std::string waiting(size_t core, isa::Engine engine, uint32_t index) const = 0;
};

// Interleaves the cores' engines until all finish. Throws ExecError(deadlock)
// naming every engine that waits (on a semaphore or at a collective) when none can
// advance.
void run_functional(std::span<const FunctionalCore> cores, CollectiveStepper& collectives);

}  // namespace neuronsim::sim
