// First-fit allocator over one chip's HBM address space, with the time each
// allocation's bytes are ready on the device clock (when the work that last
// wrote them finished), so that an execution starts no earlier than its inputs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace neuronsim::sim {

class HbmAllocator {
 public:
  explicit HbmAllocator(uint64_t capacity);
  // 64-byte aligned; never address 0 (the first page stays unused).
  std::optional<uint64_t> allocate(uint64_t size);
  // Returns the freed size (0 when `addr` starts no allocation).
  uint64_t free(uint64_t addr);
  uint64_t used() const { return used_; }
  uint64_t peak() const { return peak_; }
  uint64_t capacity() const { return capacity_; }

  // The device time the bytes at `addr` (inside an allocation) were last written; 0 outside.
  uint64_t ready_ps(uint64_t addr) const;
  void set_ready_ps(uint64_t addr, uint64_t ps);

 private:
  struct Taken {
    uint64_t size = 0;
    uint64_t ready_ps = 0;
  };
  const Taken* containing(uint64_t addr) const;
  uint64_t capacity_;
  uint64_t used_ = 0, peak_ = 0;
  std::map<uint64_t, uint64_t> free_;  // start -> size
  std::map<uint64_t, Taken> taken_;    // start -> allocation
};

}  // namespace neuronsim::sim
