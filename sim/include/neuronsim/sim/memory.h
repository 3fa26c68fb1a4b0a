// Simulated memories. On-chip SBUF and PSUM are dense (tens of MiB per core);
// HBM is sparse, so host memory grows with the bytes a run touches rather than
// with the simulated capacity (96 GiB per Trainium2 chip).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace neuronsim::sim {

// SBUF or PSUM of one NeuronCore: `partitions` rows of `partition_bytes` bytes.
class OnChipMemory {
 public:
  OnChipMemory(uint32_t partitions, uint32_t partition_bytes);
  uint32_t partitions() const { return partitions_; }
  uint32_t partition_bytes() const { return partition_bytes_; }
  // Address of byte `offset` of `partition`; callers pass validated access patterns.
  uint8_t* at(uint32_t partition, uint64_t offset) {
    return bytes_.data() + index(partition, offset);
  }
  const uint8_t* at(uint32_t partition, uint64_t offset) const {
    return bytes_.data() + index(partition, offset);
  }
  void clear();

 private:
  size_t index(uint32_t partition, uint64_t offset) const {
    return size_t{partition} * partition_bytes_ + offset;
  }
  uint32_t partitions_;
  uint32_t partition_bytes_;
  std::vector<uint8_t> bytes_;
};

// Byte-addressed memory allocated in pages on first write; unwritten bytes read as zero.
// Thread-safe: each call is atomic, so a host thread may map, read and write while the
// device's worker runs a window over the same memory (accesses are whole operands or
// tensors, so one lock per call costs nothing worth measuring).
class SparseMemory {
 public:
  static constexpr uint64_t kPageBytes = 64 * 1024;
  explicit SparseMemory(uint64_t capacity);
  uint64_t capacity() const { return capacity_; }
  uint64_t bytes_allocated() const {
    std::lock_guard lock(mu_);
    return pages_.size() * kPageBytes;
  }
  // Throw std::out_of_range when [addr, addr + n) leaves the capacity.
  void read(uint64_t addr, void* dst, uint64_t n) const;
  void write(uint64_t addr, const void* src, uint64_t n);
  void fill(uint64_t addr, uint8_t value, uint64_t n);

  // Host-backed ranges: after map(addr, host, size), reads and writes of
  // [addr, addr + size) go to host[0, size) instead of the sparse pages (the
  // runtime shim maps its tensors' host storage this way, so the host view and
  // the simulated HBM are one memory). The caller keeps `host` alive until
  // unmap(addr). Throws std::out_of_range when the range leaves the capacity,
  // std::invalid_argument when it is empty or overlaps a mapped range.
  void map(uint64_t addr, uint8_t* host, uint64_t size);
  // Removes the mapping that starts at `addr` (no-op when none does).
  void unmap(uint64_t addr);
  // The host byte behind `addr` when it is in a mapped range, else null.
  const uint8_t* host_at(uint64_t addr) const;
  size_t mapped_ranges() const {
    std::lock_guard lock(mu_);
    return mapped_.size();
  }

 private:
  struct Mapping {
    uint8_t* host;
    uint64_t size;
  };
  void check(uint64_t addr, uint64_t n) const;
  void read_pages(uint64_t addr, uint8_t* dst, uint64_t n) const;
  void write_pages(uint64_t addr, const uint8_t* src, uint64_t n);
  void fill_pages(uint64_t addr, uint8_t value, uint64_t n);
  // Splits [addr, addr + n) into pieces that are wholly inside one mapping or
  // wholly outside all of them, calling mapped(host, offset, len) or
  // unmapped(addr, offset, len) for each (offset: from the start of the access).
  template <typename Mapped, typename Unmapped>
  void split(uint64_t addr, uint64_t n, Mapped mapped, Unmapped unmapped) const;
  uint64_t capacity_;
  mutable std::mutex mu_;
  std::map<uint64_t, Mapping> mapped_;  // by start address
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
};

// The bytes a run overwrote, kept so that its writes can be undone: sim::Device keeps one for
// a window of several executions, which it runs again one by one when the window faults.
// Used by one thread at a time (the window's).
class UndoLog {
 public:
  // Keeps the `n` bytes at `addr` of `memory`, about to be overwritten (std::out_of_range as
  // SparseMemory::read).
  void save(SparseMemory& memory, uint64_t addr, uint64_t n);
  // Writes every kept range back, newest first (so each byte gets its value from before the
  // first save), and empties the log.
  void restore();
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    SparseMemory* memory;
    uint64_t addr, size;
  };
  std::vector<Entry> entries_;
  std::vector<uint8_t> bytes_;  // the entries' old bytes, in order
};

}  // namespace neuronsim::sim
