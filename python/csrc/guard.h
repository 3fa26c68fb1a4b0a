// Device selection, streams, events, generators and the PrivateUse1 hooks of "neuron".
//
// Every stream of a device is the device's core queue: kernels run in the order they
// are issued (each completes before the call returns), which is a valid schedule for
// any set of streams. An event records the device clock when it is recorded, so that
// Event.elapsed_time() gives simulated milliseconds.
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace neuronsim::pytorch {

c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);  // checks the index

// Makes a device current for a scope (the allocator places memory on the current device).
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex index) : previous_(current_device()) {
    set_current_device(index);
  }
  ~DeviceScope() { set_current_device(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// The default generator of a device: a (seed, offset) pair, whose state bytes end with
// the int64 seed and the int64 offset as CUDA's Philox generator (DTensor reads them).
const at::Generator& default_generator(c10::DeviceIndex index);
// A CPU generator for one random op on a neuron device: seeded from the neuron
// generator's (seed, offset), whose offset then advances by `numel`, so each op
// draws a fresh deterministic stream.
at::Generator cpu_generator_for(at::Generator neuron, uint64_t numel);
// The key of the next `numel` random values of a neuron generator, advancing its
// offset as CUDA's Philox generators do (four values per step); equal (seed, offset)
// give equal keys, so manual_seed makes device randomness repeatable.
uint64_t next_random_key(at::Generator neuron, uint64_t numel);
bool is_neuron_generator(const at::Generator& g);

}  // namespace neuronsim::pytorch
