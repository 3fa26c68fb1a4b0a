// The simulated instance behind PyTorch's "neuron" devices: the bottom of the runtime layer.
//
// One Backend per process: the machine the Neuron runtime's environment
// variables select (sim::Environment), opened as one sim::Device on first use.
// Torch device i is the i-th visible logical NeuronCore: its tensors live in the
// HBM of that core's chip, its kernels run on that core. Every kernel of the
// backend reaches the simulator through run_kernel(). The Backend knows no
// tensors: place.h turns a tensor into the place its bytes have on the device.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "neuronsim/isa/program.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/sim/environment.h"

namespace neuronsim::pytorch {

// Thrown (as c10::Error) for everything the user did wrong; the message names the op.
[[noreturn]] void fail(const std::string& message);

// A program's tensor, by name, bound to a range of device memory.
using NamedBinding = std::pair<std::string, sim::TensorBinding>;

class Backend {
 public:
  // The process's backend, opened on first use; throws c10::Error naming the bad
  // environment variable when the environment is invalid.
  static Backend& get();
  // The visible device count, or 0 when the environment is invalid (never throws).
  static int device_count_noexcept();
  // Whether get() has opened the backend (never opens it).
  static bool is_open();

  const sim::Environment& env() const { return env_; }
  sim::Device& device() { return *device_; }
  int device_count() const { return static_cast<int>(env_.visible.size()); }
  // Throws c10::Error naming the index and the count when the index is not a device.
  void check_index(int index) const;
  uint32_t core_of(int index) const { return env_.physical_core(static_cast<uint32_t>(index)); }
  uint32_t chip_of(int index) const { return env_.chip_of(static_cast<uint32_t>(index)); }
  std::string target() const { return env_.instance.generation; }

  // The program `build` makes, loaded once per (device, key) and kept; null when the
  // kernel refuses the case (std::invalid_argument), so that the op falls back. The
  // refusal is kept with the kernel's reason, which `refusal` (when given) receives.
  // The backend's kernels and compiled graphs are compiled for the device's logical core (its
  // physical cores share the work, as neuronx-cc's --lnc makes them); an NKI kernel
  // (`for_logical_core` false) runs on the first physical core, as it was written.
  sim::ProgramRef program(int index, const std::string& key,
                          const std::function<isa::Program()>& build,
                          std::string* refusal = nullptr, bool for_logical_core = true);
  // Loads `built` onto device `index`'s core, compiled for its logical core unless
  // `for_logical_core` is false (program()'s rule); for programs made for one call.
  sim::ProgramRef load(int index, isa::Program built, const std::string& name,
                       bool for_logical_core = true);
  // HBM the programs kept loaded for device `index` hold (their constants and scratch: the
  // compiler's buffers), which the core's HBM stack holds beside its tensors.
  uint64_t program_bytes(int index) const;
  // Runs `program` on its core with the named tensors bound to their device memory,
  // and waits. The execution is named `op` on traces; a fault is rethrown as c10::Error
  // naming the op. On the simulated clocks the host dispatches it (host_op_ns, a slice on
  // the host row) and goes on without waiting for it, as TorchNeuron's queue does, unless
  // NEURON_LAUNCH_BLOCKING=1.
  void run_kernel(const std::string& op, const sim::ProgramRef& program,
                  const std::vector<NamedBinding>& tensors);
  // A DMA copy of `bytes` between two device places, on the destination's queue (dispatched
  // as an op).
  void copy(int dst_index, uint64_t dst, int src_index, uint64_t src, uint64_t bytes);
  // The host's dispatch of one op, in picoseconds (0: left out).
  uint64_t host_op_ps() const { return host_op_ps_; }
  // Waits for the work queued, as the simulator's caller: the simulated host does not wait
  // (a collective's arrival, a profile's start), so its clock stays where it was.
  void drain() { device_->synchronize(sim::Host::runs_ahead); }
  // The host reads what the device computed (a copy to the CPU, .item(), an op run on the
  // CPU): on the simulated clocks it waits for the device's work first.
  void host_reads();
  // The device index of a physical core of this process; -1 when it sees no such core.
  int index_of_core(uint32_t core) const;
  // Hands finished work launched at host time `launched_ns` to the profiler (profiler.h).
  void profile(const sim::Completion& done, const char* kind, int64_t launched_ns);
  // Simulated time, in picoseconds: where the work of every core and the host's dispatch
  // have reached (the later of the device and host clocks).
  uint64_t now_ps() const { return std::max(device_->now_ps(), device_->host_ps()); }
  uint64_t kernels_run() const { return kernels_run_; }
  // Whether a program was ever loaded for device `index` (no kernel has run on the others).
  bool used(int index) const {
    std::lock_guard lock(mu_);
    return used_.count(index) != 0;
  }
  // Distinct programs built and loaded so far (a model's steady state builds none).
  size_t kernels_built() {
    std::lock_guard<std::mutex> lock(mu_);
    return programs_.size();
  }

 private:
  Backend();
  // The host's dispatch of one op named `op`, on the host clock.
  void dispatch(const std::string& op);
  sim::Host host_waits() const {
    return env_.launch_blocking ? sim::Host::waits : sim::Host::runs_ahead;
  }
  sim::Environment env_;
  std::unique_ptr<sim::Device> device_;
  uint64_t host_op_ps_ = 0;  // the host's dispatch of one op (0: left out)
  struct Built {
    sim::ProgramRef program;  // null: the kernel refused the case
    std::string refusal;      // its reason
  };
  mutable std::mutex mu_;  // guards programs_, program_bytes_ and used_
  std::unordered_map<std::string, Built> programs_;
  std::unordered_map<int, uint64_t> program_bytes_;  // by device index
  std::set<int> used_;                               // device indices a program was loaded for
  std::atomic<uint64_t> kernels_run_{0};
};

}  // namespace neuronsim::pytorch
