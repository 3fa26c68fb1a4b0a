#include "neuronsim/sim/memory.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::sim {

OnChipMemory::OnChipMemory(uint32_t partitions, uint32_t partition_bytes)
    : partitions_(partitions),
      partition_bytes_(partition_bytes),
      bytes_(size_t{partitions} * partition_bytes, 0) {}

void OnChipMemory::clear() { std::fill(bytes_.begin(), bytes_.end(), uint8_t{0}); }

SparseMemory::SparseMemory(uint64_t capacity) : capacity_(capacity) {}

void SparseMemory::check(uint64_t addr, uint64_t n) const {
  // Written so that addr + n cannot overflow.
  if (n > capacity_ || addr > capacity_ - n)
    throw std::out_of_range(fmt::format("HBM access of {} bytes at {:#x} leaves the {:#x}-byte memory", n,
                                        addr, capacity_));
}

void SparseMemory::read(uint64_t addr, void* dst, uint64_t n) const {
  check(addr, n);
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t in_page = addr % kPageBytes;
    const uint64_t chunk = std::min(n, kPageBytes - in_page);
    const auto it = pages_.find(addr / kPageBytes);
    if (it == pages_.end())
      std::memset(out, 0, chunk);
    else
      std::memcpy(out, it->second.get() + in_page, chunk);
    out += chunk;
    addr += chunk;
    n -= chunk;
  }
}

namespace {

// The page holding `page_index`, allocated (zeroed) on first use.
uint8_t* page_for_write(std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>>& pages, uint64_t page_index) {
  auto& page = pages[page_index];
  if (!page) page = std::make_unique<uint8_t[]>(SparseMemory::kPageBytes);
  return page.get();
}

}  // namespace

void SparseMemory::write(uint64_t addr, const void* src, uint64_t n) {
  check(addr, n);
  const auto* in = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const uint64_t in_page = addr % kPageBytes;
    const uint64_t chunk = std::min(n, kPageBytes - in_page);
    std::memcpy(page_for_write(pages_, addr / kPageBytes) + in_page, in, chunk);
    in += chunk;
    addr += chunk;
    n -= chunk;
  }
}

void SparseMemory::fill(uint64_t addr, uint8_t value, uint64_t n) {
  check(addr, n);
  while (n > 0) {
    const uint64_t in_page = addr % kPageBytes;
    const uint64_t chunk = std::min(n, kPageBytes - in_page);
    std::memset(page_for_write(pages_, addr / kPageBytes) + in_page, value, chunk);
    addr += chunk;
    n -= chunk;
  }
}

}  // namespace neuronsim::sim
