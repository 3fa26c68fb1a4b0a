// The allocator of "neuron" tensors: HBM of the device's chip, backed by host bytes
// (host-mapped), with a cache of freed blocks per device as CUDA's caching allocator
// keeps one, and the statistics torch.neuron.memory_* and torch.accelerator.memory
// report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// The runtime places a core's tensors in the HBM stack beside it, which the cores attached to
// that stack share (a Trn2 stack of 24 GiB: two physical cores, one logical core of LNC=2;
// a Trn1 stack of 16 GiB: one core). An allocation fails when the stack is full, however much
// the chip's other stacks hold. The bytes of one stack, and the instance-wide stack of a device.
size_t hbm_stack_bytes();
uint32_t cores_per_hbm_stack();  // physical cores
uint32_t hbm_stack_of(c10::DeviceIndex device);

// Memory history and snapshots, as CUDA's allocator gives them to PyTorch's memory tools
// (torch.cuda.memory._record_memory_history / _snapshot).
struct MemoryEvent {
  c10::DeviceIndex device = 0;
  const char* action = "";  // alloc, free_requested, free_completed, segment_alloc, segment_free
  uint64_t address = 0;     // in the chip's HBM
  size_t size = 0;
  int64_t time_us = 0;  // host time
};
struct MemoryBlock {
  c10::DeviceIndex device = 0;
  uint64_t address = 0;
  size_t size = 0, requested = 0;
  bool active = false;  // in use by a tensor; else cached (reserved, free)
};
// Starts (max_entries > 0 keeps the newest that many) or stops recording the history.
void record_memory_history(bool enabled, size_t max_entries);
// Every reserved block, in use or cached, and the history recorded so far.
std::vector<MemoryBlock> memory_blocks();
std::vector<MemoryEvent> memory_history();

}  // namespace neuronsim::pytorch
