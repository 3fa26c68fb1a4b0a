// The timed model of a Trainium instance, on the SystemC kernel.
//
// Each loaded NeuronCore runs its five engine streams as SystemC threads at
// instruction granularity: an engine waits for its semaphore condition, stays
// busy for the instruction's cost (cost_model.h), applies its effect on memory
// (functional.h) and signals. dma_copy hands its transfers to the core's DMA
// engines, which share the chip's HBM bandwidth; a transfer's data and signal
// land when it completes. Nothing in the model reads the wall clock, and ties
// are broken by program order, so a run's simulated time is exact and
// repeatable.
//
// Collective instructions (all_reduce, all_gather, reduce_scatter, all_to_all,
// send, recv) run through a cc::Communicator bound in RunOptions: an engine that
// reaches one waits until every rank of the job has reached its matching
// collective, the communicator moves the data and gives each rank its finish
// time, and the engine resumes then (docs/simulator.md, "Collectives").
//
// SystemC has one kernel per process, so timed runs are serialised: Simulator::run
// takes a process-wide lock. Each core's SystemC processes (coroutines, not OS
// processes: one per engine and one for its DMA) are spawned at its first timed run
// and kept, asleep between runs, until the Simulator goes; a process may hold
// Simulators for different instances and run each many times. Functional-only runs
// never touch SystemC.
// Simulator is the engine room: callers use sim::Device (device.h), which owns one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "neuronsim/isa/program.h"
#include "neuronsim/sim/functional.h"
#include "neuronsim/sim/memory.h"
#include "neuronsim/sim/run_result.h"
#include "neuronsim/sim/types.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {

class Simulator {
 public:
  Simulator(spec::InstanceConfig instance, spec::GenerationConfig generation);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  const spec::InstanceConfig& instance() const { return instance_; }
  const spec::GenerationConfig& generation() const { return generation_; }
  uint32_t num_cores() const { return instance_.total_cores(); }

  // The HBM of a chip (sparse; shared by its cores).
  SparseMemory& hbm(uint32_t chip);
  // The memories of a core (instance-wide index), allocated on first use.
  CoreState& core(uint32_t core);

  // Puts `program` on `core`; its HBM tensors must already be bound in
  // core(core).tensors (see bind_tensors). The program must outlive the runs.
  void load(uint32_t core, const isa::Program& program);
  void unload(uint32_t core);
  bool loaded(uint32_t core) const;

  // Runs every loaded core's program once, all starting together, until all
  // finish. Throws ExecError on a fault or a deadlock (naming core, engine,
  // instruction and semaphore, or the ranks a collective waits for), and
  // std::invalid_argument on a binding that does not fit the loaded cores.
  // Errors of the communicator (e.g. cc::CommError) pass through unchanged.
  RunResult run(const RunOptions& options = {});

 private:
  struct Impl;
  spec::InstanceConfig instance_;
  spec::GenerationConfig generation_;
  std::vector<std::unique_ptr<SparseMemory>> hbm_;
  std::vector<std::unique_ptr<CoreState>> cores_;
  std::vector<const isa::Program*> programs_;
  std::unique_ptr<Impl> impl_;  // the SystemC processes of each core, kept across runs
};

}  // namespace neuronsim::sim
