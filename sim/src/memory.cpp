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

void OnChipMemory::clear() {
  std::fill(bytes_.begin(), bytes_.end(), uint8_t{0});
}

SparseMemory::SparseMemory(uint64_t capacity) : capacity_(capacity) {}

void SparseMemory::check(uint64_t addr, uint64_t n) const {
  // Written so that addr + n cannot overflow.
  if (n > capacity_ || addr > capacity_ - n)
    throw std::out_of_range(fmt::format(
        "HBM access of {} bytes at {:#x} leaves the {:#x}-byte memory", n, addr, capacity_));
}

template <typename Mapped, typename Unmapped>
void SparseMemory::split(uint64_t addr, uint64_t n, Mapped mapped, Unmapped unmapped) const {
  uint64_t done = 0;
  while (done < n) {
    const uint64_t a = addr + done;
    auto it = mapped_.upper_bound(a);  // first mapping starting after a
    if (it != mapped_.begin()) {
      auto prev = std::prev(it);
      if (a < prev->first + prev->second.size) {
        const uint64_t len = std::min(n - done, prev->first + prev->second.size - a);
        mapped(prev->second.host + (a - prev->first), done, len);
        done += len;
        continue;
      }
    }
    const uint64_t len = it == mapped_.end() ? n - done : std::min(n - done, it->first - a);
    unmapped(a, done, len);
    done += len;
  }
}

void SparseMemory::map(uint64_t addr, uint8_t* host, uint64_t size) {
  std::lock_guard lock(mu_);
  if (size == 0 || host == nullptr) throw std::invalid_argument("HBM mapping of an empty range");
  check(addr, size);
  auto it = mapped_.lower_bound(addr);
  if (it != mapped_.end() && it->first < addr + size)
    throw std::invalid_argument(
        fmt::format("HBM mapping at {:#x} overlaps the one at {:#x}", addr, it->first));
  if (it != mapped_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > addr)
      throw std::invalid_argument(
          fmt::format("HBM mapping at {:#x} overlaps the one at {:#x}", addr, prev->first));
  }
  mapped_.emplace(addr, Mapping{host, size});
}

void SparseMemory::unmap(uint64_t addr) {
  std::lock_guard lock(mu_);
  mapped_.erase(addr);
}

const uint8_t* SparseMemory::host_at(uint64_t addr) const {
  std::lock_guard lock(mu_);
  auto it = mapped_.upper_bound(addr);
  if (it == mapped_.begin()) return nullptr;
  --it;
  return addr < it->first + it->second.size ? it->second.host + (addr - it->first) : nullptr;
}

void SparseMemory::read(uint64_t addr, void* dst, uint64_t n) const {
  std::lock_guard lock(mu_);
  check(addr, n);
  auto* out = static_cast<uint8_t*>(dst);
  if (mapped_.empty()) return read_pages(addr, out, n);
  split(
      addr, n,
      [&](const uint8_t* host, uint64_t off, uint64_t len) { std::memcpy(out + off, host, len); },
      [&](uint64_t a, uint64_t off, uint64_t len) { read_pages(a, out + off, len); });
}

void SparseMemory::read_pages(uint64_t addr, uint8_t* out, uint64_t n) const {
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
uint8_t* page_for_write(std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>>& pages,
                        uint64_t page_index) {
  auto& page = pages[page_index];
  if (!page) page = std::make_unique<uint8_t[]>(SparseMemory::kPageBytes);
  return page.get();
}

}  // namespace

void SparseMemory::write(uint64_t addr, const void* src, uint64_t n) {
  std::lock_guard lock(mu_);
  check(addr, n);
  const auto* in = static_cast<const uint8_t*>(src);
  if (mapped_.empty()) return write_pages(addr, in, n);
  split(
      addr, n, [&](uint8_t* host, uint64_t off, uint64_t len) { std::memcpy(host, in + off, len); },
      [&](uint64_t a, uint64_t off, uint64_t len) { write_pages(a, in + off, len); });
}

void SparseMemory::write_pages(uint64_t addr, const uint8_t* in, uint64_t n) {
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
  std::lock_guard lock(mu_);
  check(addr, n);
  if (mapped_.empty()) return fill_pages(addr, value, n);
  split(
      addr, n, [&](uint8_t* host, uint64_t, uint64_t len) { std::memset(host, value, len); },
      [&](uint64_t a, uint64_t, uint64_t len) { fill_pages(a, value, len); });
}

void SparseMemory::fill_pages(uint64_t addr, uint8_t value, uint64_t n) {
  while (n > 0) {
    const uint64_t in_page = addr % kPageBytes;
    const uint64_t chunk = std::min(n, kPageBytes - in_page);
    std::memset(page_for_write(pages_, addr / kPageBytes) + in_page, value, chunk);
    addr += chunk;
    n -= chunk;
  }
}

void UndoLog::save(SparseMemory& memory, uint64_t addr, uint64_t n) {
  if (n == 0) return;
  const size_t at = bytes_.size();
  bytes_.resize(at + n);
  try {
    memory.read(addr, bytes_.data() + at, n);
  } catch (...) {
    bytes_.resize(at);
    throw;
  }
  Entry& last = entries_.empty() ? entries_.emplace_back(Entry{&memory, addr, 0}) : entries_.back();
  if (last.memory == &memory && last.addr + last.size == addr)
    last.size += n;  // the next run of one operand
  else
    entries_.push_back({&memory, addr, n});
}

void UndoLog::restore() {
  size_t end = bytes_.size();
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    end -= it->size;
    it->memory->write(it->addr, bytes_.data() + end, it->size);
  }
  entries_.clear();
  bytes_.clear();
}

}  // namespace neuronsim::sim
