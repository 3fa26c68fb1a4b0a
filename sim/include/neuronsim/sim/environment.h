// The simulated machine a process sees, chosen the way the Neuron runtime's
// environment variables choose the real one: which instance (NEURONSIM_INSTANCE),
// how many physical cores make one logical core (NEURON_RT_VIRTUAL_CORE_SIZE),
// which logical cores are visible (NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES),
// the simulation mode (NEURONSIM_MODE), NaN checking (NEURON_FAIL_ON_NAN), whether
// executions pay the runtime's launch cost (NEURONSIM_LAUNCH), whether a framework's ops
// cost the host their dispatch (NEURONSIM_HOST_DISPATCH) and whether the framework's host
// waits for each op (NEURON_LAUNCH_BLOCKING, TorchNeuron's switch).
// libnrt and the PyTorch backend both read it here, so both see the same cores.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/sim/types.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {

struct Environment {
  std::string instance_name;
  spec::InstanceConfig instance;
  spec::GenerationConfig generation;
  uint32_t lnc = 1;               // physical cores per logical core
  std::vector<uint32_t> visible;  // absolute logical core ids, visible index -> id
  Mode mode = Mode::functional_and_timing;
  bool fail_on_nan = false;
  bool launch = true;  // executions pay the runtime's launch cost (NEURONSIM_LAUNCH, default 1)
  // Each op a framework runs costs the host its dispatch (NEURONSIM_HOST_DISPATCH, default 1).
  bool host_dispatch = true;
  // The framework's host waits for each op's kernel before the next (NEURON_LAUNCH_BLOCKING,
  // default 0: it queues them and goes on, as TorchNeuron does).
  bool launch_blocking = false;

  // Logical cores of the instance, visible or not.
  uint32_t total_logical_cores() const { return instance.total_cores() / lnc; }
  // The instance-wide (first) physical core and the chip of a visible logical core.
  uint32_t physical_core(uint32_t vnc) const { return visible.at(vnc) * lnc; }
  uint32_t chip_of(uint32_t vnc) const { return physical_core(vnc) / instance.cores_per_chip; }
};

// The instance a process gets when NEURONSIM_INSTANCE is not set.
inline constexpr const char* kDefaultInstance = "trn2.3xlarge";

// Reads the variables above into `out`. Returns a message naming the variable and
// its value when one is invalid.
std::optional<std::string> read_environment(Environment& out);

// Parsers the runtime's other settings share. "1"/"true"/"yes"/"on" and their
// opposites (unset or empty is false); nullopt when the text is neither.
std::optional<bool> parse_env_bool(const char* value);
// A decimal count without sign (leading and trailing blanks allowed).
std::optional<uint64_t> parse_env_count(const std::string& text);

}  // namespace neuronsim::sim
