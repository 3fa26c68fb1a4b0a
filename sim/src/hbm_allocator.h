// First-fit allocator over one chip's HBM address space, with the device times at which
// each allocation was last read and last written (when that work finished), so that work
// starts no earlier than the bytes it reads are written (RAW), and writes no earlier than
// earlier work has finished reading or writing them (WAR, WAW).
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

  // When work may read / may write the allocation holding `addr` (0 outside any).
  uint64_t readable_ps(uint64_t addr) const;
  uint64_t writable_ps(uint64_t addr) const;
  // Work that finished at `ps` read or wrote the allocation holding `addr` (times only grow).
  void touched(uint64_t addr, bool write, uint64_t ps);

 private:
  struct Taken {
    uint64_t size = 0;
    uint64_t read_ps = 0, write_ps = 0;
  };
  const Taken* containing(uint64_t addr) const;
  uint64_t capacity_;
  uint64_t used_ = 0, peak_ = 0;
  std::map<uint64_t, uint64_t> free_;  // start -> size
  std::map<uint64_t, Taken> taken_;    // start -> allocation
};

}  // namespace neuronsim::sim
