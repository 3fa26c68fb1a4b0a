// SparseMemory::map/unmap: host buffers mapped into simulated HBM (used by libnrt.so.1
// so that nrt_tensor_get_va is coherent with the simulated memory).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "neuronsim/sim/memory.h"

using neuronsim::sim::SparseMemory;

namespace {

TEST(SparseMemoryMap, ReadsAndWritesGoToTheHostBuffer) {
  SparseMemory m(1 << 24);
  std::vector<uint8_t> host(1000, 0);
  m.map(0x10000, host.data(), host.size());
  EXPECT_EQ(m.mapped_ranges(), 1u);
  const uint32_t v = 0x11223344;
  m.write(0x10000 + 8, &v, 4);
  uint32_t w = 0;
  std::memcpy(&w, host.data() + 8, 4);
  EXPECT_EQ(w, v);
  host[500] = 77;
  uint8_t r = 0;
  m.read(0x10000 + 500, &r, 1);
  EXPECT_EQ(r, 77);
  m.fill(0x10000 + 10, 0xab, 5);
  EXPECT_EQ(host[10], 0xab);
  EXPECT_EQ(host[14], 0xab);
  EXPECT_EQ(host[15], 0);
  EXPECT_EQ(m.bytes_allocated(), 0u);  // no sparse page was touched
}

TEST(SparseMemoryMap, AccessesSpanningMappedAndUnmappedBytes) {
  SparseMemory m(1 << 24);
  std::vector<uint8_t> h1(100), h2(100);
  std::iota(h1.begin(), h1.end(), uint8_t{1});
  std::iota(h2.begin(), h2.end(), uint8_t{101});
  m.map(1000, h1.data(), 100);
  m.map(1150, h2.data(), 100);  // a 50-byte gap of sparse memory between them
  std::vector<uint8_t> gap(50, 9);
  m.write(1100, gap.data(), gap.size());
  std::vector<uint8_t> all(300);
  m.read(990, all.data(), all.size());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(all[i], 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(all[10 + i], h1[i]);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(all[110 + i], 9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(all[160 + i], h2[i]);
  for (int i = 260; i < 300; ++i) EXPECT_EQ(all[i], 0);
  std::vector<uint8_t> ones(300, 1);
  m.write(990, ones.data(), ones.size());
  EXPECT_EQ(h1, std::vector<uint8_t>(100, 1));
  EXPECT_EQ(h2, std::vector<uint8_t>(100, 1));
}

TEST(SparseMemoryMap, UnmapRestoresSparseMemoryAndOverlapsAreRefused) {
  SparseMemory m(1 << 20);
  std::vector<uint8_t> host(64, 5);
  const uint8_t seven = 7;
  m.write(100, &seven, 1);  // sparse byte under the future mapping
  m.map(64, host.data(), 64);
  uint8_t r = 0;
  m.read(100, &r, 1);
  EXPECT_EQ(r, 5);
  EXPECT_THROW(m.map(100, host.data(), 10), std::invalid_argument);
  EXPECT_THROW(m.map(0, host.data(), 65), std::invalid_argument);
  EXPECT_THROW(m.map(200, host.data(), 0), std::invalid_argument);
  EXPECT_THROW(m.map((1 << 20) - 10, host.data(), 64), std::out_of_range);
  m.map(128, host.data(), 64);  // adjacent is fine
  m.unmap(64);
  m.unmap(64);  // no-op
  m.read(100, &r, 1);
  EXPECT_EQ(r, 7);
  EXPECT_EQ(m.mapped_ranges(), 1u);
  EXPECT_THROW(m.read((1 << 20) - 1, &r, 2), std::out_of_range);
}

}  // namespace
