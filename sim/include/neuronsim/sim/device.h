// sim::Device, the front hall of the simulator: one simulated instance that
// every entrance (libnrt, the neuron-sim CLI, the benchmarks, the PyTorch
// backend, the tests) uses instead of the Simulator's rooms behind it.
//
// A Device owns its instance's spec, the HBM of each chip with an allocator
// (an allocation may be backed by host bytes, so a device pointer's bytes are
// reachable without a copy), the programs loaded onto its cores, one work
// queue per core and a monotonic simulated clock. Work is enqueued and
// identified by a sequence number that can be polled or waited for. One worker
// thread per Device takes the head of every queue that can run and simulates
// them together in one window (so cores contend for HBM), each starting when
// its queue and its inputs allow; it is the only thread that drives the
// simulator for this Device (timed windows take the process-wide SystemC lock,
// functional-only windows never touch SystemC).
//
// A trace session spans many executions: each recorded window is appended,
// shifted onto the device clock, with the execution's name, up to the limits
// the session sets, so that a long run cannot exhaust memory.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/run_result.h"
#include "neuronsim/sim/types.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {

struct DeviceOptions {
  Mode mode = Mode::functional_and_timing;
  bool fail_on_nan = false;  // a NaN written to memory faults the execution
  // Each execution first pays the runtime's launch cost (GenerationConfig::launch_*_ns), a
  // slice of its own in traces; off for studies of kernel bodies alone.
  bool launch = true;
  // Called now and then with (instructions done, instructions in total) during long windows.
  std::function<void(uint64_t, uint64_t)> progress;
};

// A program placed on one core: its constants and scratch live in HBM from load
// to unload (when the last reference goes). Inputs and outputs are bound per
// execution.
class LoadedProgram {
 public:
  const isa::Program& program() const { return program_; }
  uint32_t core() const { return core_; }
  const std::string& name() const { return name_; }
  // The HBM place of a tensor by name; throws std::invalid_argument naming the
  // program and listing its tensors when there is none.
  const isa::TensorDecl& tensor(std::string_view name) const;
  ~LoadedProgram();
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;

 private:
  friend class Device;
  LoadedProgram() = default;
  isa::Program program_;
  isa::Fp8Config fp8_;
  uint32_t core_ = 0;
  std::string name_;
  std::unordered_map<uint16_t, TensorBinding> fixed_;  // constants and scratch
  std::function<void()> release_;                      // frees fixed_ on the device
};
using ProgramRef = std::shared_ptr<const LoadedProgram>;

// Input and output tensors of one execution, by var_id.
using Bindings = std::unordered_map<uint16_t, TensorBinding>;

struct Execution {
  ProgramRef program;
  Bindings tensors;  // every input and output of the program
  std::string name;  // shown on the trace (an op name, a model name)
};

// A copy between two places of HBM (the same or different chips), in order on a core's queue.
struct Copy {
  uint32_t src_chip = 0, dst_chip = 0;
  uint64_t src = 0, dst = 0, bytes = 0;
  std::string name;
  uint32_t lnc = 1;  // physical cores whose DMA engines carry it (a logical core's)
};

// Time a core spends on work outside the simulator (a collective whose data another process
// moves) until the device clock reaches `until_ps`; it moves no data. With no `touches`, it
// holds the core's queue, after what is ahead of it. With `touches` (HBM of the core's chip), it
// runs on the core's side queue, beside the kernels, as a collective's DMA rings do: work that
// reads or writes those bytes waits for it, other work does not. In functional-only mode it
// takes no time.
struct Hold {
  uint64_t until_ps = 0;
  std::string name;
  std::vector<TensorBinding> touches;
};

// What one piece of work did, once it is done.
struct Completion {
  uint64_t seq = 0;
  uint32_t core = 0;
  std::string name;
  uint64_t start_ps = 0, end_ps = 0;  // on the device clock
  uint64_t launch_ps = 0;             // of which the launch, from start_ps
  // How long the core, ready for this work, waited for the host to submit it (the host's
  // dispatch left the device idle).
  uint64_t host_bound_ps = 0;
  // The simulated window the execution ran in, shared with the executions that ran
  // beside it (null for copies). Its records are relative to run->start_ps.
  std::shared_ptr<const RunResult> run;
  ProgramRef program;        // keeps the records' instructions alive (null for copies)
  std::exception_ptr error;  // the fault, when it failed
  // Set when the execution first ran in a window with `batch_size` executions that faulted,
  // and so ran again alone to find which one faulted: that window's fault (`error` and
  // `run` are from the run alone). The window's writes to HBM were undone before the runs
  // alone, so each execution's effect on memory is applied once.
  std::exception_ptr batch_fault;
  uint32_t batch_size = 0;
};

// What a trace session keeps. Zero means no limit.
struct TraceLimits {
  uint64_t max_events = 0;           // instruction, DMA and flow records together
  uint64_t max_events_per_core = 0;  // the same, of each core
  uint64_t from_ps = 0;              // only windows that end after this device time...
  uint64_t to_ps = 0;                // ...and start before this one
  // Only executions of these programs (empty: all).
  std::vector<const LoadedProgram*> programs;
};

// Every recorded window of a session on one time axis (RunResult::start_ps = 0), the
// executions named, and what the limits left out.
struct TraceSession {
  RunResult result;
  std::vector<ProgramRef> programs;  // keeps the records' instructions alive
  uint64_t dropped_events = 0;
};

// One program run from its inputs to its outputs (Device::run_program).
struct ProgramRun {
  ProgramRef program;
  Completion completion;
  std::optional<TraceSession> trace;  // the run's records, when asked for
  // Every output's bytes by name (none in timing-only mode, where no values are computed).
  std::map<std::string, std::vector<uint8_t>> outputs;
};

// Whether the host waits for the work it takes the completion of. A caller that simulates
// each op at once but stands for a host that queues ops and goes on (TorchNeuron's default,
// as CUDA's) takes completions with Host::runs_ahead: the host clock stays where it was.
enum class Host { waits, runs_ahead };

class Device {
 public:
  // The named instance from the spec (spec/configs), loaded once.
  static std::unique_ptr<Device> open(const std::string& instance, DeviceOptions options = {});
  // The smallest one-chip instance of a generation; where none is configured, one chip
  // of it on its own (named "<generation>-chip").
  static std::unique_ptr<Device> open_generation(const std::string& generation,
                                                 DeviceOptions options = {});
  Device(spec::InstanceConfig instance, spec::GenerationConfig generation,
         DeviceOptions options = {});
  ~Device();  // waits for the work in the queues
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const spec::InstanceConfig& instance() const;
  const spec::GenerationConfig& generation() const;
  uint32_t num_cores() const;
  uint32_t chip_of(uint32_t core) const;  // throws std::out_of_range naming the instance
  Mode mode() const;

  // ---- memory -------------------------------------------------------------
  // `size` bytes of the chip's HBM (64-byte aligned, never at 0), or nullopt when
  // they do not fit. With `host`, the range is those host bytes: reads and writes
  // of the device go to them, and the caller keeps them alive until free().
  std::optional<uint64_t> allocate(uint32_t chip, uint64_t size, uint8_t* host = nullptr);
  void free(uint32_t chip, uint64_t address);  // no-op for an address not allocated
  struct MemoryUse {
    uint64_t used = 0, peak = 0, capacity = 0;
  };
  MemoryUse memory(uint32_t chip) const;
  // Host access to HBM, in host order (not on a queue). Throws std::out_of_range
  // when the range leaves the chip's HBM.
  void write(uint32_t chip, uint64_t address, std::span<const uint8_t> bytes);
  void read(uint32_t chip, uint64_t address, std::span<uint8_t> bytes) const;

  // ---- programs -----------------------------------------------------------
  // Validates `program` against the core's generation, places its constants and
  // scratch in HBM. Throws std::invalid_argument (wrong generation, bad core) or
  // std::runtime_error when HBM is full.
  ProgramRef load(uint32_t core, isa::Program program, std::string name = "",
                  isa::Fp8Config fp8 = {});
  // The same from a NEFF in neuronsim's ISA (isa::from_neff's errors pass through).
  ProgramRef load(uint32_t core, const isa::neff::Neff& neff, std::string name);
  // Allocates every input and output of a loaded program (for callers that own no
  // buffers: the CLI, tests, benchmarks). Freed when the device goes.
  Bindings allocate_io(const LoadedProgram& program);
  // Host access to a bound tensor by name.
  void write_tensor(const LoadedProgram& program, const Bindings& bindings, std::string_view name,
                    std::span<const uint8_t> bytes);
  std::vector<uint8_t> read_tensor(const LoadedProgram& program, const Bindings& bindings,
                                   std::string_view name) const;

  // ---- queues -------------------------------------------------------------
  // Each returns the work's sequence number (increasing, device-wide). The work
  // runs after what is ahead of it on its core's queue and after earlier work on
  // any queue that touches what it touches (one writes what the other reads or
  // writes; host-mapped bytes are compared by host address). On the device clock
  // it starts no earlier than that work's end, than the last reads and writes of
  // the allocations it touches, and than any completion the host waited for.
  uint64_t enqueue(Execution execution);
  uint64_t enqueue(uint32_t core, Copy copy);
  uint64_t enqueue(uint32_t core, Hold hold);
  // Executions that run together, alone in one window, with a collective binding
  // (the cores of a collective job). Returns their sequence numbers in order.
  std::vector<uint64_t> enqueue_group(std::vector<Execution> executions,
                                      CollectiveBinding collectives);
  // When a hold beside the kernels of `core` touching `touches` could start: after the host
  // clock, the holds on the side queue and the finished work that reads or writes those bytes.
  uint64_t side_ready_ps(uint32_t core, const std::vector<TensorBinding>& touches) const;
  // Whether the work is done (true for numbers whose completion was taken).
  bool done(uint64_t seq) const;
  // Blocks until the work is done and hands its completion over (once).
  Completion wait(uint64_t seq, Host host = Host::waits);
  // Enqueues, waits and hands the completion over (its fault in `error`). On an idle
  // functional-only device the execution runs on the caller's thread.
  Completion complete(Execution execution, Host host = Host::waits);
  // The same, rethrowing the work's fault.
  Completion run(Execution execution);
  // The whole of one run, as `neuron-sim run` and the NKI runner do it: loads `program` on
  // `core`, binds every input and output, writes `inputs` (by name; inputs not given stay as
  // HBM holds them), runs it (in a trace session of its own when `record`), and reads every
  // output back. Load and run errors pass through as load and run throw them.
  ProgramRun run_program(uint32_t core, isa::Program program, std::string name,
                         const std::map<std::string, std::vector<uint8_t>>& inputs,
                         bool record = false, isa::Fp8Config fp8 = {});
  // Blocks until every queue is empty; with Host::waits the host has waited for all of it.
  void synchronize(Host host = Host::waits);
  // The latest time any finished work reached on the device clock.
  uint64_t now_ps() const;

  // ---- the host -----------------------------------------------------------
  // The simulated host thread that enqueues the work (one per Device). Work starts on the
  // device no earlier than the host clock when it was enqueued; the clock moves on by the
  // host's own work and, when the host waits (wait, complete and run with Host::waits,
  // synchronize), to the end of what it waited for. In functional-only mode it stays at 0.
  // `ps` of host work named `name` (a framework's dispatch of an op): a slice on the host
  // row of the trace sessions that record every program.
  void host_work(uint64_t ps, std::string name);
  uint64_t host_ps() const;

  // ---- traces -------------------------------------------------------------
  // Starts a session; the windows that finish from now on are recorded.
  uint64_t start_trace(TraceLimits limits = {});
  // Ends a session (after the work queued before it is done) and hands it over.
  TraceSession stop_trace(uint64_t session);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared: loaded programs free their HBM through a weak reference
};

}  // namespace neuronsim::sim
