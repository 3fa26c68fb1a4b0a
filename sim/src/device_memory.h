// A device's memory: each chip's HBM allocator, with the device times at which each allocation
// was last read and written, and host buffers mapped into HBM. It answers when work that reads
// and writes some bytes may start, and places a program's constants and scratch. Thread-safe:
// the device's callers allocate while its worker runs.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "hbm_allocator.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/sim/simulator.h"

namespace neuronsim::sim {

// A place in device memory that work reads or writes. Host-mapped bytes are named by their
// host address (the runtime maps one host buffer at a new HBM address per request, and those
// are the same bytes); other HBM by chip and address.
struct Range {
  static constexpr uint64_t kHost = ~uint64_t{0};
  uint64_t space = 0;  // chip, or kHost
  uint64_t addr = 0, size = 0;
  uint32_t chip = 0;  // where it is bound (for the allocator's times)
  uint64_t hbm_addr = 0;
  bool overlaps(const Range& o) const {
    return space == o.space && addr < o.addr + o.size && o.addr < addr + size;
  }
};

bool any_overlap(const std::vector<Range>& a, const std::vector<Range>& b);

class DeviceMemory {
 public:
  explicit DeviceMemory(Simulator& sim);

  void check_chip(uint32_t chip) const;
  // An address for `size` bytes on `chip`, mapped to `host` when given; none when full.
  std::optional<uint64_t> allocate(uint32_t chip, uint64_t size, uint8_t* host);
  void free(uint32_t chip, uint64_t address);
  Device::MemoryUse use(uint32_t chip) const;

  // The place `size` bytes at `addr` of `chip` are, as work touches them.
  Range range(uint32_t chip, uint64_t addr, uint64_t size) const;
  // When work may start that reads `reads` and writes `writes`: after the last writes of what
  // it reads and the last reads and writes of what it writes.
  uint64_t ready_ps(const std::vector<Range>& reads, const std::vector<Range>& writes) const;
  // Work that read `reads` and wrote `writes` finished at `end_ps`.
  void touched(const std::vector<Range>& reads, const std::vector<Range>& writes, uint64_t end_ps);

  // Places the constants (with their data) and scratch of `program`, named `name`, on `chip`;
  // their bindings go to `fixed`. Returns the addresses taken, to free with the program. Throws,
  // having freed what it took, when one does not fit.
  std::vector<uint64_t> place_fixed(uint32_t chip, const isa::Program& program,
                                    const std::string& name, Bindings& fixed);

 private:
  Simulator& sim_;
  mutable std::mutex mu_;  // the allocators
  std::vector<HbmAllocator> allocators_;
};

}  // namespace neuronsim::sim
