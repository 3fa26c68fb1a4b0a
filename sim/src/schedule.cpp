// The scheduling rules both runs share, and the functional run's turns (schedule.h).
#include "schedule.h"

#include <vector>

#include <fmt/format.h>

#include "neuronsim/isa/assembler.h"

namespace neuronsim::sim {

using isa::Engine;
using isa::Instruction;
using Block = CoreStreams::Block;

namespace {

uint16_t existing(const Instruction& in, uint16_t sem) {
  if (sem >= isa::kNumSemaphores)
    throw ExecError(ExecError::Kind::out_of_bounds,
                    fmt::format("{}: semaphore {} does not exist (a core has {})",
                                isa::format_instruction(in), sem, isa::kNumSemaphores));
  return sem;
}

std::string blocked_line(const CoreStreams& c, Engine e, bool name_core,
                         const CollectiveWait& collective_wait) {
  const Instruction& in = c.next(e);
  const std::string why =
      c.blocked[CoreStreams::index(e)] == Block::collective
          ? collective_wait(c, e)
          : fmt::format("waits for S[{}] {} {}, which is {}", in.wait.sem,
                        in.wait.cond == isa::WaitCond::ge ? ">=" : "==", in.wait.value,
                        c.sem[in.wait.sem]);
  return fmt::format("\n  {} {}: {}", engine_at(c, e, name_core), why,
                     isa::format_instruction(in, c.program));
}

// The functional run: each engine in turn runs until it finishes or must wait; the rounds go
// on while any engine advances.
struct Turns {
  std::span<const FunctionalCore> cores;
  std::vector<CoreStreams> streams;
  CollectiveStepper* collectives;  // null: a collective fails in execute()
  bool name_cores;                 // messages start with "core N"

  // Runs e's next instruction; false when it is a collective that must wait.
  bool run_one(size_t ci, Engine e) {
    CoreStreams& s = streams[ci];
    const Instruction& in = s.next(e);
    if (collectives && isa::is_collective(in.opcode)) {
      s.blocked[CoreStreams::index(e)] = Block::collective;
      if (!collectives->step(ci, e, s.pc[CoreStreams::index(e)])) return false;
      s.blocked[CoreStreams::index(e)] = Block::none;
      return true;
    }
    try {
      execute(in, *cores[ci].state, cores[ci].program);
    } catch (const ExecError& err) {
      throw ExecError(err.kind(), fmt::format("{}: {}", engine_at(s, e, name_cores), err.what()));
    }
    return true;
  }

  // Runs e until it finishes or must wait; returns whether it advanced.
  bool advance(size_t ci, Engine e) {
    CoreStreams& s = streams[ci];
    const size_t i = CoreStreams::index(e);
    const uint32_t start = s.pc[i];
    while (!s.finished(e)) {
      if (!s.may_start(e)) {
        s.blocked[i] = Block::semaphore;
        break;
      }
      if (s.blocked[i] == Block::semaphore) s.blocked[i] = Block::none;
      if (!run_one(ci, e)) break;
      s.signal(s.next(e));
      ++s.pc[i];
    }
    return s.pc[i] != start;
  }

  void run() {
    for (;;) {
      bool progressed = false, done = true;
      for (size_t ci = 0; ci < streams.size(); ++ci)
        for (int e = 0; e < isa::kNumEngines; ++e) {
          progressed |= advance(ci, static_cast<Engine>(e));
          done &= streams[ci].finished(static_cast<Engine>(e));
        }
      if (done) return;
      if (!progressed) throw deadlock();
    }
  }

  ExecError deadlock() const {
    std::vector<const CoreStreams*> all;
    for (const CoreStreams& s : streams) all.push_back(&s);
    CollectiveWait waiting;
    if (collectives)
      waiting = [this](const CoreStreams& s, Engine e) {
        return collectives->waiting(static_cast<size_t>(&s - streams.data()), e);
      };
    return deadlock_error(all, name_cores, waiting);
  }
};

void run_turns(std::span<const FunctionalCore> cores, CollectiveStepper* collectives,
               bool name_cores) {
  Turns turns{cores, std::vector<CoreStreams>(cores.size()), collectives, name_cores};
  for (size_t i = 0; i < cores.size(); ++i) {
    turns.streams[i].core_id = cores[i].id;
    turns.streams[i].program = cores[i].program;
  }
  turns.run();
}

}  // namespace

bool CoreStreams::may_start(Engine e) const {
  if (blocked[index(e)] == Block::collective) return true;  // its wait is behind it
  const isa::SemWait& w = next(e).wait;
  if (w.cond == isa::WaitCond::none) return true;
  const uint32_t value = sem[existing(next(e), w.sem)];
  return w.cond == isa::WaitCond::ge ? value >= w.value : value == w.value;
}

void CoreStreams::signal(const Instruction& in) {
  const isa::SemSignal& s = in.signal;
  if (s.op == isa::SemOp::none) return;
  uint32_t& value = sem[existing(in, s.sem)];
  value = s.op == isa::SemOp::add ? value + s.value : s.value;
}

std::string engine_at(const CoreStreams& c, Engine e, bool name_core) {
  const std::string at = fmt::format("{}[{}]", isa::engine_name(e), c.pc[CoreStreams::index(e)]);
  return name_core ? fmt::format("core {} {}", c.core_id, at) : at;
}

ExecError deadlock_error(std::span<const CoreStreams* const> cores, bool name_cores,
                         const CollectiveWait& collective_wait) {
  std::string out = fmt::format(
      "deadlock: no engine can go on; each one with work left waits on a semaphore that nobody "
      "will signal{}:",
      collective_wait ? ", or at a collective that not every rank reaches" : "");
  for (const CoreStreams* c : cores)
    for (int i = 0; i < isa::kNumEngines; ++i) {
      const auto e = static_cast<Engine>(i);
      if (!c->finished(e) && c->blocked[static_cast<size_t>(i)] != Block::none)
        out += blocked_line(*c, e, name_cores, collective_wait);
    }
  return ExecError(ExecError::Kind::deadlock, out);
}

void run_functional(const isa::Program& program, CoreState& state) {
  const FunctionalCore core{0, &program, &state};
  run_turns({&core, 1}, nullptr, false);
}

void run_functional(std::span<const FunctionalCore> cores, CollectiveStepper& collectives) {
  run_turns(cores, &collectives, true);
}

}  // namespace neuronsim::sim
