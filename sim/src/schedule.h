// What may run next on a core's engine streams, and why nothing can: the rules that the
// functional run (run_functional, schedule.cpp) and the timed run (Simulator, simulator.cpp)
// share. An engine runs its stream in order; an instruction may start once its semaphore wait
// holds; it signals when its effect has landed; when no engine can go on, the run is a deadlock
// and the report names every engine with work left and what it waits for. The two runs differ
// only in how an engine waits: the functional run gives the engines turns in a fixed order,
// the timed run sleeps on SystemC events until a semaphore changes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/functional.h"
#include "neuronsim/sim/types.h"

namespace neuronsim::sim {

using Semaphores = std::array<uint32_t, isa::kNumSemaphores>;

// One core's engine streams during a run.
struct CoreStreams {
  // What an engine with work left is waiting for.
  enum class Block : uint8_t { none, semaphore, collective };

  uint32_t core_id = 0;  // instance-wide, for messages
  const isa::Program* program = nullptr;
  Semaphores sem{};
  std::array<uint32_t, isa::kNumEngines> pc{};
  std::array<Block, isa::kNumEngines> blocked{};

  bool finished(isa::Engine e) const { return pc[index(e)] >= program->stream(e).size(); }
  const isa::Instruction& next(isa::Engine e) const { return program->stream(e)[pc[index(e)]]; }
  // Whether e's next instruction may start: it is at a collective it has already passed its
  // wait for, or its wait holds. A semaphore that does not exist is an ExecError.
  bool may_start(isa::Engine e) const;
  // Applies the signal of `in`, an instruction whose effect has landed.
  void signal(const isa::Instruction& in);

  static size_t index(isa::Engine e) { return static_cast<size_t>(e); }
};

// Where an engine is, as messages name it: "core 3 act[5]", or "act[5]" without the core.
std::string engine_at(const CoreStreams& c, isa::Engine e, bool name_core);

// Why a run that cannot go on stopped: every engine with work left and what it waits for,
// a semaphore (with its value) or a collective (`collective_wait` says for whom).
using CollectiveWait = std::function<std::string(const CoreStreams&, isa::Engine)>;
ExecError deadlock_error(std::span<const CoreStreams* const> cores, bool name_cores,
                         const CollectiveWait& collective_wait);

// Several cores run functionally together (Simulator::run in functional-only mode):
// collective instructions are handed to a CollectiveStepper, which lets an engine go on only
// once every rank of the collective has reached it.
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
  // For whom that engine is still waiting, for the deadlock report.
  virtual std::string waiting(size_t core, isa::Engine engine) const = 0;
};

// Gives the cores' engines turns until all finish. Throws deadlock_error when none can go on.
void run_functional(std::span<const FunctionalCore> cores, CollectiveStepper& collectives);

}  // namespace neuronsim::sim
