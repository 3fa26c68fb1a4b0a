// The allocator of "neuron" tensors: HBM of the device's chip, backed by host bytes
// (host-mapped), with a cache of freed blocks per device as CUDA's caching allocator
// keeps one, and the statistics torch.neuron.memory_* and torch.accelerator.memory
// report.
#pragma once

#include <cstddef>
#include <cstdint>

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

namespace neuronsim::pytorch {

// One allocation: `size` bytes at `address` in the HBM of `chip`, which are the host
// bytes at `host`.
struct Block {
  c10::DeviceIndex device = 0;
  uint32_t chip = 0;
  uint64_t address = 0;
  uint8_t* host = nullptr;
  size_t size = 0;       // bytes reserved (rounded up)
  size_t requested = 0;  // bytes asked for
};

// The block behind a neuron DataPtr; throws c10::Error when the pointer is not one.
const Block& block_of(const c10::DataPtr& ptr);

// The live block holding the host address `host`, or null.
const Block* find_block(const void* host);

// The allocator registered for PrivateUse1.
c10::DeviceAllocator& hbm_allocator();

}  // namespace neuronsim::pytorch
