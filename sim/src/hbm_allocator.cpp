#include "hbm_allocator.h"

#include <algorithm>
#include <iterator>

namespace neuronsim::sim {

HbmAllocator::HbmAllocator(uint64_t capacity) : capacity_(capacity) {
  if (capacity > 4096) free_[4096] = capacity - 4096;
}

std::optional<uint64_t> HbmAllocator::allocate(uint64_t size) {
  const uint64_t need = (std::max<uint64_t>(size, 1) + 63) / 64 * 64;
  if (need < size) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const uint64_t addr = it->first, left = it->second - need;
    free_.erase(it);
    if (left > 0) free_[addr + need] = left;
    taken_[addr] = {need, 0, 0};
    used_ += need;
    peak_ = std::max(peak_, used_);
    return addr;
  }
  return std::nullopt;
}

uint64_t HbmAllocator::free(uint64_t addr) {
  auto t = taken_.find(addr);
  if (t == taken_.end()) return 0;
  uint64_t start = addr, size = t->second.size;
  const uint64_t freed = size;
  used_ -= size;
  taken_.erase(t);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      prev->second += size;
      return freed;
    }
  }
  free_[start] = size;
  return freed;
}

const HbmAllocator::Taken* HbmAllocator::containing(uint64_t addr) const {
  auto it = taken_.upper_bound(addr);
  if (it == taken_.begin()) return nullptr;
  --it;
  return addr < it->first + it->second.size ? &it->second : nullptr;
}

uint64_t HbmAllocator::readable_ps(uint64_t addr) const {
  const Taken* t = containing(addr);
  return t ? t->write_ps : 0;
}

uint64_t HbmAllocator::writable_ps(uint64_t addr) const {
  const Taken* t = containing(addr);
  return t ? std::max(t->read_ps, t->write_ps) : 0;
}

void HbmAllocator::touched(uint64_t addr, bool write, uint64_t ps) {
  if (Taken* t = const_cast<Taken*>(containing(addr))) {
    uint64_t& when = write ? t->write_ps : t->read_ps;
    when = std::max(when, ps);
  }
}

}  // namespace neuronsim::sim
