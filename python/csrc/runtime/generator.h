// The random number generators of "neuron" devices.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace neuronsim::pytorch {

// The default generator of a device: a (seed, offset) pair, whose state bytes end with
// the int64 seed and the int64 offset as CUDA's Philox generator (DTensor reads them).
const at::Generator& default_generator(c10::DeviceIndex index);
// A new generator of a device (index -1: the current one), seeded with the default seed.
at::Generator new_generator(c10::DeviceIndex index);
// A CPU generator for one random op on a neuron device: seeded from the neuron
// generator's (seed, offset), whose offset then advances by `numel`, so each op
// draws a fresh deterministic stream.
at::Generator cpu_generator_for(at::Generator neuron, uint64_t numel);
// The key of the next `numel` random values of a neuron generator, advancing its
// offset as CUDA's Philox generators do (four values per step); equal (seed, offset)
// give equal keys, so manual_seed makes device randomness repeatable.
uint64_t next_random_key(at::Generator neuron, uint64_t numel);
bool is_neuron_generator(const at::Generator& g);

// Where random ops on "neuron" devices draw from. `device`, the default: the device's own
// generators on the engines, streams of their own as CUDA's are. `cpu`: the host draws with
// the CPU's generator exactly as the CPU op would, and copies the values to the device, as
// TorchNeuron does today, so that a run seeded with torch.manual_seed gives the CPU's numbers.
// Set by NEURONSIM_RNG (device or cpu) and neuronsim.set_rng_source.
enum class RngSource { device, cpu };
RngSource rng_source();
void set_rng_source(RngSource source);
// "device" or "cpu"; throws c10::Error naming the accepted names for anything else.
RngSource parse_rng_source(const std::string& name, const char* where);

}  // namespace neuronsim::pytorch
