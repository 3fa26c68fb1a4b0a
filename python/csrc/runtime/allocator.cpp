// A caching allocator over the simulated HBM. Freed blocks stay reserved in a per-device
// cache and are handed out again for requests of nearly the same size, so that a
// training loop does not go back to the device allocator every step; empty_cache()
// returns them. When the device is full the cache is emptied and the allocation
// retried before it fails with an OutOfMemoryError that says what was asked, what is
// allocated, what is cached and what is free.
#include "runtime/allocator.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "profiler/profiler.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/op_tracking.h"

namespace neuronsim::pytorch {

namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kRound = 512;              // allocation granularity, as CUDA's allocator
constexpr size_t kSmall = size_t{1} << 20;  // blocks up to 1 MiB count as the small pool

size_t round_up(size_t n) {
  return (n + kRound - 1) / kRound * kRound;
}

void stat_add(Stat& s, int64_t amount) {
  s.current += amount;
  s.peak = std::max(s.peak, s.current);
  if (amount > 0)
    s.allocated += amount;
  else
    s.freed -= amount;
}

void stats_add(c10::CachingAllocator::StatArray& a, size_t size, int64_t amount) {
  stat_add(a[static_cast<size_t>(StatType::AGGREGATE)], amount);
  stat_add(a[static_cast<size_t>(size <= kSmall ? StatType::SMALL_POOL : StatType::LARGE_POOL)],
           amount);
}

void free_block(void* context);

// "1.50 GiB": sizes in an out-of-memory message, as PyTorch's allocators write them.
std::string human_bytes(size_t n) {
  if (n < (size_t{1} << 20)) return fmt::format("{:.2f} KiB", static_cast<double>(n) / 1024);
  if (n < (size_t{1} << 30)) return fmt::format("{:.2f} MiB", static_cast<double>(n) / (1 << 20));
  return fmt::format("{:.2f} GiB", static_cast<double>(n) / (1 << 30));
}

class HbmAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = current_device();
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    op_tracking::device_works();
    if (n == 0) return c10::DataPtr(nullptr, nullptr, &free_block, where);
    std::lock_guard lock(mu_);
    Block* block = take_cached(device, n);
    if (block == nullptr) {
      block = reserve(device, n);
      note(device, "segment_alloc", block->address, block->size);
    }
    block->requested = n;
    note(device, "alloc", block->address, block->size);
    PerDevice& d = devices_[device];
    stats_add(d.stats.allocation, block->size, 1);
    stats_add(d.stats.allocated_bytes, block->size, static_cast<int64_t>(block->size));
    stats_add(d.stats.active, block->size, 1);
    stats_add(d.stats.active_bytes, block->size, static_cast<int64_t>(block->size));
    stats_add(d.stats.requested_bytes, block->size, static_cast<int64_t>(n));
    live_[block->host] = block;
    return c10::DataPtr(block->host, block, &free_block, where);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  // Device bytes are host bytes, so a copy between two of them is a host copy.
  void copy_data(void* dst, const void* src, size_t count) const override {
    std::memcpy(dst, src, count);
  }

  void release(Block* block) {
    std::lock_guard lock(mu_);
    PerDevice& d = devices_[block->device];
    stats_add(d.stats.allocated_bytes, block->size, -static_cast<int64_t>(block->size));
    stats_add(d.stats.allocation, block->size, -1);
    stats_add(d.stats.active, block->size, -1);
    stats_add(d.stats.active_bytes, block->size, -static_cast<int64_t>(block->size));
    stats_add(d.stats.requested_bytes, block->size, -static_cast<int64_t>(block->requested));
    live_.erase(block->host);
    d.cache.emplace(block->size, block);
    note(block->device, "free_requested", block->address, block->size);
    note(block->device, "free_completed", block->address, block->size);
  }

  void record_history(bool enabled, size_t max_entries) {
    std::lock_guard lock(mu_);
    history_on_ = enabled;
    history_max_ = max_entries;
    if (!enabled) history_.clear();
  }

  std::vector<MemoryEvent> history() const {
    std::lock_guard lock(mu_);
    return {history_.begin(), history_.end()};
  }

  std::vector<MemoryBlock> blocks() const {
    std::lock_guard lock(mu_);
    std::vector<MemoryBlock> out;
    for (const auto& [host, b] : live_)
      out.push_back({b->device, b->address, b->size, b->requested, true});
    for (const auto& [device, d] : devices_)
      for (const auto& [size, b] : d.cache)
        out.push_back({b->device, b->address, b->size, 0, false});
    return out;
  }

  const Block* find(const void* host) const {
    std::lock_guard lock(mu_);
    auto it = live_.upper_bound(static_cast<const uint8_t*>(host));
    if (it == live_.begin()) return nullptr;
    --it;
    const Block* b = it->second;
    return static_cast<const uint8_t*>(host) < b->host + b->size ? b : nullptr;
  }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t /*pool*/) override {
    std::lock_guard lock(mu_);
    for (auto& [device, d] : devices_) empty_cache(d);
  }

  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {
    // Every stream of a device is one in-order queue here, so no block can be reused
    // while another stream still reads it.
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    std::lock_guard lock(mu_);
    return devices_[device].stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    std::lock_guard lock(mu_);
    DeviceStats& s = devices_[device].stats;
    for (auto* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                    &s.active_bytes, &s.requested_bytes})
      for (Stat& st : *a) st.allocated = st.freed = 0;
    s.num_alloc_retries = s.num_ooms = 0;
    s.num_device_alloc = s.num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    std::lock_guard lock(mu_);
    DeviceStats& s = devices_[device].stats;
    for (auto* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                    &s.active_bytes, &s.requested_bytes})
      for (Stat& st : *a) st.peak = st.current;
  }

  // (free, total) bytes of the HBM stack beside the device's core (hbm_stack_bytes).
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    Backend& b = Backend::get();
    b.check_index(device);
    const size_t total = hbm_stack_bytes();
    std::lock_guard lock(mu_);
    return {total - std::min(total, reserved_on_stack(device)), total};
  }

 private:
  struct PerDevice {
    std::multimap<size_t, Block*> cache;  // reserved, not in use, by size
    DeviceStats stats;
  };

  // A cached block of at least n bytes and at most a quarter more (or 4 KiB more for
  // small requests), so that a big block is not spent on a small tensor.
  Block* take_cached(c10::DeviceIndex device, size_t n) {
    auto& cache = devices_[device].cache;
    const size_t want = round_up(n);
    auto it = cache.lower_bound(want);
    if (it == cache.end() || it->first > std::max(want + want / 4, want + 4096)) return nullptr;
    Block* block = it->second;
    cache.erase(it);
    return block;
  }

  size_t reserved(c10::DeviceIndex device) {
    const auto& r = devices_[device].stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)];
    return static_cast<size_t>(r.current);
  }
  // Bytes held in `device`'s HBM stack by this process's devices whose cores share it: their
  // reserved blocks and their loaded programs' constants and scratch (the compiler's buffers).
  size_t reserved_on_stack(c10::DeviceIndex device) {
    Backend& b = Backend::get();
    size_t sum = 0;
    for (int other = 0; other < b.device_count(); ++other)
      if (hbm_stack_of(static_cast<c10::DeviceIndex>(other)) == hbm_stack_of(device))
        sum += reserved(static_cast<c10::DeviceIndex>(other)) + b.program_bytes(other);
    return sum;
  }

  Block* reserve(c10::DeviceIndex device, size_t n) {
    Backend& b = Backend::get();
    b.check_index(device);
    const size_t size = round_up(n);
    const uint32_t chip = b.chip_of(device);
    const size_t stack = hbm_stack_bytes();
    PerDevice& d = devices_[device];
    // What cannot fit in the core's HBM stack fails before any host memory is taken for it.
    const auto fits = [&] {
      const sim::Device::MemoryUse use = b.device().memory(chip);
      return size <= use.capacity - use.used && reserved_on_stack(device) + size <= stack;
    };
    if (!fits()) {
      ++d.stats.num_alloc_retries;
      for (auto& [other, od] : devices_) empty_cache(od);
    }
    void* host = nullptr;
    std::optional<uint64_t> address;
    if (fits()) {
      host = std::aligned_alloc(64, size);
      TORCH_CHECK(host != nullptr, "neuron: the host has no memory left for ", size,
                  " bytes of simulated HBM");
      address = b.device().allocate(chip, size, static_cast<uint8_t*>(host));
    }
    if (!address) {
      std::free(host);
      ++d.stats.num_ooms;
      const sim::Device::MemoryUse use = b.device().memory(chip);
      const auto& a = d.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)];
      const size_t held = reserved_on_stack(device);
      TORCH_CHECK_WITH(
          OutOfMemoryError, false,
          fmt::format(
              "neuron:{}: out of memory (NRT_RESOURCE): tried to allocate {} ({} bytes); "
              "the HBM stack of neuron:{} (physical core {}) holds {}, of which {} is "
              "held (this device: {} reserved, {} in tensors, {} in its programs' buffers) and "
              "{} bytes free; the HBM of chip {} has {} in use of {}",
              device, human_bytes(n), n, device, b.core_of(device), human_bytes(stack),
              human_bytes(held), human_bytes(reserved(device)),
              human_bytes(static_cast<size_t>(a.current)), human_bytes(b.program_bytes(device)),
              stack - std::min(stack, held), chip, human_bytes(use.used),
              human_bytes(use.capacity)));
    }
    ++d.stats.num_device_alloc;
    stats_add(d.stats.segment, size, 1);
    stats_add(d.stats.reserved_bytes, size, static_cast<int64_t>(size));
    return new Block{device, chip, *address, static_cast<uint8_t*>(host), size, n};
  }

  // Appends to the history when it is recorded (mu_ held).
  void note(c10::DeviceIndex device, const char* action, uint64_t address, size_t size) {
    if (!history_on_) return;
    history_.push_back({device, action, address, size, profiling::host_now_ns() / 1000});
    while (history_max_ > 0 && history_.size() > history_max_) history_.pop_front();
  }

  void empty_cache(PerDevice& d) {
    Backend& b = Backend::get();
    for (auto& [size, block] : d.cache) {
      note(block->device, "segment_free", block->address, size);
      b.device().free(block->chip, block->address);
      std::free(block->host);
      ++d.stats.num_device_free;
      stats_add(d.stats.segment, size, -1);
      stats_add(d.stats.reserved_bytes, size, -static_cast<int64_t>(size));
      delete block;
    }
    d.cache.clear();
  }

  mutable std::mutex mu_;
  std::unordered_map<c10::DeviceIndex, PerDevice> devices_;
  std::map<const uint8_t*, Block*> live_;  // by host address, for getDeviceFromPtr
  bool history_on_ = false;
  size_t history_max_ = 0;
  std::deque<MemoryEvent> history_;
};

HbmAllocator g_allocator;

void free_block(void* context) {
  if (context != nullptr) g_allocator.release(static_cast<Block*>(context));
}

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

c10::DeviceAllocator& hbm_allocator() {
  return g_allocator;
}

size_t hbm_stack_bytes() {
  const spec::GenerationConfig& g = Backend::get().env().generation;
  return static_cast<size_t>(g.hbm_bytes / std::max<uint32_t>(1, g.hbm_stacks));
}

uint32_t cores_per_hbm_stack() {
  const sim::Environment& env = Backend::get().env();
  return std::max<uint32_t>(
      1, env.instance.cores_per_chip / std::max<uint32_t>(1, env.generation.hbm_stacks));
}

uint32_t hbm_stack_of(c10::DeviceIndex device) {
  const Backend& b = Backend::get();
  const uint32_t per_chip = std::max<uint32_t>(1, b.env().instance.cores_per_chip);
  const uint32_t per_stack = cores_per_hbm_stack();
  const uint32_t core = b.core_of(device);
  return core / per_chip * (per_chip / per_stack) + core % per_chip / per_stack;
}

const Block& block_of(const c10::DataPtr& ptr) {
  TORCH_CHECK(ptr.get_deleter() == &free_block && ptr.get_context() != nullptr,
              "neuron: a tensor's storage was not allocated on the neuron device");
  return *static_cast<const Block*>(ptr.get_context());
}

const Block* find_block(const void* host) {
  return g_allocator.find(host);
}

void record_memory_history(bool enabled, size_t max_entries) {
  g_allocator.record_history(enabled, max_entries);
}

std::vector<MemoryBlock> memory_blocks() {
  return g_allocator.blocks();
}

std::vector<MemoryEvent> memory_history() {
  return g_allocator.history();
}

}  // namespace neuronsim::pytorch
