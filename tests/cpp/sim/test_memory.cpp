// The simulated memories: dense on-chip SBUF/PSUM and page-sparse HBM.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuronsim/sim/memory.h"

namespace neuronsim::sim {
namespace {

using ::testing::HasSubstr;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kPage = SparseMemory::kPageBytes;

TEST(OnChipMemory, IsZeroedPartitionMajorAndClears) {
  OnChipMemory m(4, 256);
  EXPECT_EQ(m.partitions(), 4u);
  EXPECT_EQ(m.partition_bytes(), 256u);
  for (uint32_t p = 0; p < 4; ++p)
    for (uint32_t b = 0; b < 256; ++b) ASSERT_EQ(*m.at(p, b), 0) << p << " " << b;
  EXPECT_EQ(m.at(1, 0) - m.at(0, 0), 256);
  EXPECT_EQ(m.at(3, 17) - m.at(0, 0), 3 * 256 + 17);
  *m.at(2, 5) = 0xAB;
  *m.at(3, 255) = 0xCD;
  const OnChipMemory& cm = m;
  EXPECT_EQ(*cm.at(2, 5), 0xAB);
  m.clear();
  EXPECT_EQ(*m.at(2, 5), 0);
  EXPECT_EQ(*m.at(3, 255), 0);
}

TEST(SparseMemory, UnwrittenBytesReadAsZeroWithoutAllocating) {
  SparseMemory m(96 * kGiB);
  EXPECT_EQ(m.capacity(), 96 * kGiB);
  std::vector<uint8_t> buf(3 * kPage, 0xFF);
  m.read(10 * kGiB, buf.data(), buf.size());
  for (uint8_t b : buf) ASSERT_EQ(b, 0);
  EXPECT_EQ(m.bytes_allocated(), 0u);
}

TEST(SparseMemory, OneByteAt80GiBAllocatesOnePage) {
  SparseMemory m(96 * kGiB);
  const uint8_t v = 0x5A;
  m.write(80 * kGiB, &v, 1);
  EXPECT_EQ(m.bytes_allocated(), kPage);
  uint8_t back[3] = {1, 1, 1};
  m.read(80 * kGiB - 1, back, 3);
  EXPECT_EQ(back[0], 0);
  EXPECT_EQ(back[1], 0x5A);
  EXPECT_EQ(back[2], 0);
  // A second write to the same page allocates nothing more.
  m.write(80 * kGiB + 100, &v, 1);
  EXPECT_EQ(m.bytes_allocated(), kPage);
}

TEST(SparseMemory, WritesAndReadsAcrossPageBoundaries) {
  SparseMemory m(kGiB);
  std::vector<uint8_t> data(kPage + 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint64_t addr = 5 * kPage - 50;  // touches pages 4, 5 and 6
  m.write(addr, data.data(), data.size());
  EXPECT_EQ(m.bytes_allocated(), 3 * kPage);
  std::vector<uint8_t> back(data.size() + 20, 0xEE);
  m.read(addr - 10, back.data(), back.size());
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(back[i], 0);
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(back[10 + i], data[i]) << i;
  for (size_t i = 10 + data.size(); i < back.size(); ++i) EXPECT_EQ(back[i], 0);
}

TEST(SparseMemory, FillAllocatesTouchedPagesOnly) {
  SparseMemory m(kGiB);
  m.fill(2 * kPage + 10, 0x77, kPage);  // pages 2 and 3
  EXPECT_EQ(m.bytes_allocated(), 2 * kPage);
  uint8_t b[4];
  m.read(2 * kPage + 8, b, 4);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[1], 0);
  EXPECT_EQ(b[2], 0x77);
  EXPECT_EQ(b[3], 0x77);
  m.read(3 * kPage + 9, b, 2);
  EXPECT_EQ(b[0], 0x77);
  EXPECT_EQ(b[1], 0);
}

TEST(SparseMemory, AccessesOutsideTheCapacityThrowWithTheAddress) {
  SparseMemory m(kGiB);
  uint8_t b[8] = {};
  m.write(kGiB - 8, b, 8);  // the last bytes are fine
  m.read(kGiB - 8, b, 8);
  try {
    m.read(kGiB - 4, b, 8);
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_THAT(e.what(), HasSubstr("0x3ffffffc"));
  }
  EXPECT_THROW(m.write(kGiB, b, 1), std::out_of_range);
  EXPECT_THROW(m.fill(kGiB + 5, 0, 1), std::out_of_range);
  // A size that would wrap the address space around is caught too.
  EXPECT_THROW(m.read(16, b, ~uint64_t{0} - 8), std::out_of_range);
  EXPECT_EQ(m.bytes_allocated(), kPage);
}

TEST(UndoLog, PutsBackWhatWritesOverwroteInHbmAndHostBytes) {
  SparseMemory m(kGiB);
  std::vector<uint8_t> host(16, 0x11);
  m.map(kPage, host.data(), host.size());
  const std::vector<uint8_t> before = {1, 2, 3, 4, 5, 6, 7, 8};
  m.write(kPage - 4, before.data(), 8);  // half in the pages, half in the host bytes
  UndoLog undo;
  const uint8_t ones[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  const uint8_t twos[4] = {7, 7, 7, 7};
  undo.save(m, kPage - 4, 8);
  m.write(kPage - 4, ones, 8);
  undo.save(m, kPage - 2, 4);  // overlaps the first: restored newest first
  m.write(kPage - 2, twos, 4);
  EXPECT_THROW(undo.save(m, kGiB - 2, 4), std::out_of_range);
  undo.restore();
  EXPECT_TRUE(undo.empty());
  std::vector<uint8_t> after(8);
  m.read(kPage - 4, after.data(), 8);
  EXPECT_EQ(after, before);
  EXPECT_EQ(host[0], 5);
  EXPECT_EQ(host[4], 0x11);
}

}  // namespace
}  // namespace neuronsim::sim
