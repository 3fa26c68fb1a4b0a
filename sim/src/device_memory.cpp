#include "device_memory.h"

#include <algorithm>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::sim {

bool any_overlap(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (const Range& x : a)
    for (const Range& y : b)
      if (x.overlaps(y)) return true;
  return false;
}

DeviceMemory::DeviceMemory(Simulator& sim) : sim_(sim) {
  for (uint32_t c = 0; c < sim.instance().chips; ++c)
    allocators_.emplace_back(sim.generation().hbm_bytes);
  for (uint32_t c = 0; c < sim.instance().chips; ++c) sim.hbm(c);  // before other threads
}

void DeviceMemory::check_chip(uint32_t chip) const {
  if (chip >= allocators_.size())
    throw std::out_of_range(
        fmt::format("{} has {} chips, no chip {}", sim_.instance().name, allocators_.size(), chip));
}

std::optional<uint64_t> DeviceMemory::allocate(uint32_t chip, uint64_t size, uint8_t* host) {
  check_chip(chip);
  std::lock_guard lock(mu_);
  auto addr = allocators_[chip].allocate(size);
  if (addr && host) {
    try {
      sim_.hbm(chip).map(*addr, host, size);
    } catch (...) {
      allocators_[chip].free(*addr);
      throw;
    }
  }
  return addr;
}

void DeviceMemory::free(uint32_t chip, uint64_t address) {
  check_chip(chip);
  std::lock_guard lock(mu_);
  if (allocators_[chip].free(address)) sim_.hbm(chip).unmap(address);
}

Device::MemoryUse DeviceMemory::use(uint32_t chip) const {
  check_chip(chip);
  std::lock_guard lock(mu_);
  const HbmAllocator& a = allocators_[chip];
  return {a.used(), a.peak(), a.capacity()};
}

Range DeviceMemory::range(uint32_t chip, uint64_t addr, uint64_t size) const {
  if (const uint8_t* host = sim_.hbm(chip).host_at(addr))
    return {Range::kHost, reinterpret_cast<uintptr_t>(host), size, chip, addr};
  return {chip, addr, size, chip, addr};
}

uint64_t DeviceMemory::ready_ps(const std::vector<Range>& reads,
                                const std::vector<Range>& writes) const {
  uint64_t ready = 0;
  std::lock_guard lock(mu_);
  for (const Range& r : reads) ready = std::max(ready, allocators_[r.chip].readable_ps(r.hbm_addr));
  for (const Range& r : writes)
    ready = std::max(ready, allocators_[r.chip].writable_ps(r.hbm_addr));
  return ready;
}

void DeviceMemory::touched(const std::vector<Range>& reads, const std::vector<Range>& writes,
                           uint64_t end_ps) {
  std::lock_guard lock(mu_);
  for (const Range& r : reads) allocators_[r.chip].touched(r.hbm_addr, false, end_ps);
  for (const Range& r : writes) allocators_[r.chip].touched(r.hbm_addr, true, end_ps);
}

std::vector<uint64_t> DeviceMemory::place_fixed(uint32_t chip, const isa::Program& program,
                                                const std::string& name, Bindings& fixed) {
  std::vector<uint64_t> placed;
  for (const isa::TensorDecl& t : program.tensors) {
    if (t.kind != isa::TensorKind::constant && t.kind != isa::TensorKind::scratch) continue;
    const auto addr = allocate(chip, t.size_bytes(), nullptr);
    if (!addr) {
      for (uint64_t a : placed) free(chip, a);
      const Device::MemoryUse m = use(chip);
      throw std::runtime_error(fmt::format(
          "program '{}': {} '{}' needs {} bytes of HBM, but chip {} has {} of {} in use", name,
          isa::tensor_kind_name(t.kind), t.name, t.size_bytes(), chip, m.used, m.capacity));
    }
    placed.push_back(*addr);
    if (!t.data.empty()) {
      const auto data = std::span(t.data).first(std::min(t.data.size(), t.size_bytes()));
      sim_.hbm(chip).write(*addr, data.data(), data.size());
    }
    fixed[t.var_id] = TensorBinding{*addr, t.size_bytes()};
  }
  return placed;
}

}  // namespace neuronsim::sim
