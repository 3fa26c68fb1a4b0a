// The words every entrance to the simulator shares with it: how a run is simulated (Mode,
// spelled as NEURONSIM_MODE spells it), how a fault is reported (ExecError), where a program's
// HBM tensors and collective ranks are bound, and the options of a run. The engine room
// (simulator.h, functional.h) includes this; callers need nothing else of it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace neuronsim::cc {
class Communicator;
}

namespace neuronsim::sim {

enum class Mode {
  functional_and_timing,  // values and time (default)
  functional_only,        // values only: engines interleave at semaphores, no clock
  timing_only,            // time only: memory contents are not touched
};
// "functional-and-timing", "functional-only", "timing-only": the names NEURONSIM_MODE, the
// NKI runner's sim_mode and the docs use.
std::string_view mode_name(Mode mode);
// The mode a name gives (any case; "default" is functional-and-timing), or nothing.
std::optional<Mode> parse_mode(std::string_view name);

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

// The cores of a run that are ranks of one collective job, and the communicator
// that runs their collective instructions. A collective on a core not listed here
// is an ExecError.
struct CollectiveBinding {
  cc::Communicator* communicator = nullptr;  // not owned; must outlive the run
  // Instance-wide core -> rank. Every core must have a program loaded, and the
  // ranks must be exactly communicator->local_ranks().
  std::map<uint32_t, int> ranks;
};

struct RunOptions {
  Mode mode = Mode::functional_and_timing;
  bool record = false;  // keep every instruction, transfer and semaphore hand-off (for traces)
  // Called now and then with (instructions done, instructions in total).
  std::function<void(uint64_t, uint64_t)> progress;
  CollectiveBinding collectives;
  // When each core starts, after the start of the run (instance-wide core -> ps); cores
  // not listed start at once. sim::Device uses it to start every execution when its
  // queue and inputs allow.
  std::map<uint32_t, uint64_t> core_start_ps;
};

}  // namespace neuronsim::sim
