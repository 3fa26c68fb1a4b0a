// libnrt.so.1: tensors and tensor sets, including bad input.
#include "nrt_test_util.h"

using namespace nrt_test;

namespace {

using NrtTensor = NrtTest;

TEST_F(NrtTensor, AllocateIsZeroFilledAndReadWriteAtOffsets) {
  nrt_tensor_t* t = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 256, "t", &t), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_size(t), 256u);
  std::vector<uint8_t> buf(256, 0xff);
  ASSERT_EQ(nrt_tensor_read(t, buf.data(), 0, 256), NRT_SUCCESS);
  EXPECT_EQ(buf, std::vector<uint8_t>(256, 0));
  const uint8_t data[4] = {1, 2, 3, 4};
  ASSERT_EQ(nrt_tensor_write(t, data, 252, 4), NRT_SUCCESS);
  uint8_t back[4] = {};
  ASSERT_EQ(nrt_tensor_read(t, back, 252, 4), NRT_SUCCESS);
  EXPECT_EQ(std::memcmp(back, data, 4), 0);
  ASSERT_EQ(nrt_tensor_memset(t, 10, 0x5a, 6), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_read(t, buf.data(), 0, 256), NRT_SUCCESS);
  EXPECT_EQ(buf[9], 0);
  EXPECT_EQ(buf[10], 0x5a);
  EXPECT_EQ(buf[15], 0x5a);
  EXPECT_EQ(buf[16], 0);
  nrt_tensor_free(&t);
  EXPECT_EQ(t, nullptr);
  nrt_tensor_free(&t);  // NULL: no-op
}

TEST_F(NrtTensor, BadInput) {
  nrt_tensor_t* t = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", nullptr), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 0, "t", &t), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 8, 64, "t", &t), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, -1, 64, "t", &t), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(static_cast<nrt_tensor_placement_t>(3), 0, 64, "t", &t),
            NRT_INVALID);
  EXPECT_EQ(t, nullptr);
  // Larger than the 96 GiB HBM of a trn2 chip.
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, size_t{200} << 30, "huge", &t),
            NRT_RESOURCE);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, nullptr, &t),
            NRT_SUCCESS);  // NULL name
  uint8_t buf[128] = {};
  EXPECT_EQ(nrt_tensor_read(nullptr, buf, 0, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, nullptr, 0, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, 0, 65), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, 64, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, 65, 0), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, SIZE_MAX, 2), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, 64, 0), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_write(t, buf, 1, SIZE_MAX), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_write(nullptr, buf, 0, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_memset(t, 60, 0, 5), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_memset(nullptr, 0, 0, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_copy(t, 0, nullptr, 0, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_copy(t, 0, t, 32, 33), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_get_size(nullptr), 0u);
  EXPECT_EQ(nrt_tensor_get_va(nullptr), nullptr);
  nrt_tensor_t* alias = t;
  nrt_tensor_free(&t);
  nrt_tensor_free(&alias);  // double free through a stale copy: detected, logged, no crash
  EXPECT_EQ(nrt_tensor_read(alias, buf, 0, 1), NRT_INVALID);
}

TEST_F(NrtTensor, CopyBetweenTensors) {
  nrt_tensor_t *a = nullptr, *b = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "a", &a), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 16, "b", &b), NRT_SUCCESS);
  const char msg[] = "0123456789abcdef";
  ASSERT_EQ(nrt_tensor_write(a, msg, 0, 16), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_copy(a, 4, b, 8, 8), NRT_SUCCESS);
  char out[16] = {};
  ASSERT_EQ(nrt_tensor_read(b, out, 0, 16), NRT_SUCCESS);
  EXPECT_EQ(std::string(out + 8, 8), "456789ab");
  EXPECT_EQ(std::string(out, 8), std::string(8, '\0'));
  nrt_tensor_free(&a);
  nrt_tensor_free(&b);
}

TEST_F(NrtTensor, SlicesShareStorageAndOutliveTheSource) {
  nrt_tensor_t* t = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t), NRT_SUCCESS);
  nrt_tensor_t *s = nullptr, *ss = nullptr;
  ASSERT_EQ(nrt_tensor_allocate_slice(t, 16, 32, "s", &s), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate_slice(s, 8, 8, nullptr, &ss),
            NRT_SUCCESS);  // slices of slices compose
  EXPECT_EQ(nrt_tensor_get_size(s), 32u);
  EXPECT_EQ(static_cast<uint8_t*>(nrt_tensor_get_va(ss)),
            static_cast<uint8_t*>(nrt_tensor_get_va(t)) + 24);
  const uint32_t v = 0xdeadbeef;
  ASSERT_EQ(nrt_tensor_write(ss, &v, 0, 4), NRT_SUCCESS);
  uint32_t r = 0;
  ASSERT_EQ(nrt_tensor_read(t, &r, 24, 4), NRT_SUCCESS);
  EXPECT_EQ(r, v);
  EXPECT_EQ(nrt_tensor_allocate_slice(t, 60, 8, "bad", &s), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate_slice(t, 0, 0, "bad", &s), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate_slice(nullptr, 0, 8, "bad", &s), NRT_INVALID);
  nrt_tensor_free(&t);  // the slices keep the storage
  r = 0;
  ASSERT_EQ(nrt_tensor_read(ss, &r, 0, 4), NRT_SUCCESS);
  EXPECT_EQ(r, v);
  nrt_tensor_free(&ss);
  nrt_tensor_free(&s);
}

TEST_F(NrtTensor, EmptyAndAttachBuffer) {
  nrt_tensor_t* t = nullptr;
  ASSERT_EQ(nrt_tensor_allocate_empty("e", &t), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_size(t), 0u);
  uint8_t b = 0;
  EXPECT_EQ(nrt_tensor_read(t, &b, 0, 1), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_get_va(t), nullptr);
  std::vector<float> mine(32, 1.5f);
  EXPECT_EQ(nrt_tensor_attach_buffer(t, nullptr, 4), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_attach_buffer(nullptr, mine.data(), 4), NRT_INVALID);
  ASSERT_EQ(nrt_tensor_attach_buffer(t, mine.data(), mine.size() * 4), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_va(t), mine.data());
  EXPECT_EQ(nrt_tensor_get_size(t), 128u);
  const float two = 2.0f;
  ASSERT_EQ(nrt_tensor_write(t, &two, 4, 4), NRT_SUCCESS);
  EXPECT_EQ(mine[1], 2.0f);
  nrt_tensor_free(&t);
  EXPECT_EQ(mine[0], 1.5f);  // caller-owned: untouched by free
  EXPECT_EQ(nrt_tensor_allocate_empty("e", nullptr), NRT_INVALID);
}

TEST_F(NrtTensor, VaIsStableHostMemoryAndDeviceInfo) {
  nrt_tensor_t* t = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 1, 4096, "t", &t), NRT_SUCCESS);
  auto* va = static_cast<uint8_t*>(nrt_tensor_get_va(t));
  ASSERT_NE(va, nullptr);
  va[100] = 42;
  uint8_t r = 0;
  ASSERT_EQ(nrt_tensor_read(t, &r, 100, 1), NRT_SUCCESS);
  EXPECT_EQ(r, 42);
  const uint8_t seven = 7;
  ASSERT_EQ(nrt_memcpy_to_device(va + 5, &seven, 1), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_read(t, &r, 5, 1), NRT_SUCCESS);
  EXPECT_EQ(r, 7);
  nrt_tensor_device_allocation_info_t info{};
  ASSERT_EQ(nrt_tensor_get_device_allocation_info(t, &info), NRT_SUCCESS);
  EXPECT_GT(info.physical_address, 0u);
  EXPECT_GE(info.size, 4096u);
  int lnc = -2;
  ASSERT_EQ(nrt_tensor_get_lnc_index(t, &lnc), NRT_SUCCESS);
  EXPECT_EQ(lnc, 1);
  nrt_tensor_t* h = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 64, "h", &h), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_device_allocation_info(h, &info), NRT_INVALID);
  nrt_vnc_memory_stats_t stats{};
  size_t out = 0;
  ASSERT_EQ(nrt_get_vnc_memory_stats(1, &stats, sizeof stats, &out), NRT_SUCCESS);
  EXPECT_EQ(out, sizeof stats);
  EXPECT_GE(stats.bytes_used, 4096u);
  EXPECT_GT(stats.bytes_limit, stats.bytes_used);
  nrt_tensor_free(&t);
  nrt_tensor_free(&h);
}

TEST_F(NrtTensor, BatchReadWrite) {
  nrt_tensor_t *a = nullptr, *b = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 32, "a", &a), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 32, "b", &b), NRT_SUCCESS);
  uint32_t x = 1, y = 2, z = 3;
  nrt_tensor_batch_op_t ops_a[2] = {{0, 4, &x}, {28, 4, &y}};
  nrt_tensor_batch_op_t ops_b[1] = {{8, 4, &z}};
  nrt_tensor_batch_t batches[2] = {{a, ops_a, 2}, {b, ops_b, 1}};
  ASSERT_EQ(nrt_tensor_write_batch(batches, 2, false), NRT_SUCCESS);
  uint32_t rx = 0, ry = 0, rz = 0;
  nrt_tensor_batch_op_t rops_a[2] = {{0, 4, &rx}, {28, 4, &ry}};
  nrt_tensor_batch_op_t rops_b[1] = {{8, 4, &rz}};
  nrt_tensor_batch_t rb[2] = {{a, rops_a, 2}, {b, rops_b, 1}};
  ASSERT_EQ(nrt_tensor_read_batch(rb, 2, false), NRT_SUCCESS);
  EXPECT_EQ(rx, 1u);
  EXPECT_EQ(ry, 2u);
  EXPECT_EQ(rz, 3u);
  nrt_tensor_batch_op_t bad[1] = {{30, 4, &rx}};
  nrt_tensor_batch_t badb[1] = {{a, bad, 1}};
  EXPECT_EQ(nrt_tensor_read_batch(badb, 1, false), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read_batch(nullptr, 1, false), NRT_INVALID);
  nrt_tensor_free(&a);
  nrt_tensor_free(&b);
}

TEST_F(NrtTensor, TensorSets) {
  nrt_tensor_set_t* set = nullptr;
  ASSERT_EQ(nrt_allocate_tensor_set(&set), NRT_SUCCESS);
  EXPECT_EQ(nrt_allocate_tensor_set(nullptr), NRT_INVALID);
  nrt_tensor_t *t = nullptr, *u = nullptr, *got = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 8, "t", &t), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 8, "u", &u), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(set, "key", t),
            NRT_SUCCESS);  // key differs from the tensor's name
  ASSERT_EQ(nrt_get_tensor_from_tensor_set(set, "key", &got), NRT_SUCCESS);
  EXPECT_EQ(got, t);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(set, "key", u), NRT_SUCCESS);  // replaces
  ASSERT_EQ(nrt_get_tensor_from_tensor_set(set, "key", &got), NRT_SUCCESS);
  EXPECT_EQ(got, u);
  got = reinterpret_cast<nrt_tensor_t*>(0x1);
  EXPECT_EQ(nrt_get_tensor_from_tensor_set(set, "missing", &got), NRT_FAILURE);
  EXPECT_EQ(got, reinterpret_cast<nrt_tensor_t*>(0x1));  // untouched
  EXPECT_EQ(nrt_add_tensor_to_tensor_set(nullptr, "k", t), NRT_INVALID);
  EXPECT_EQ(nrt_add_tensor_to_tensor_set(set, nullptr, t), NRT_INVALID);
  EXPECT_EQ(nrt_add_tensor_to_tensor_set(set, "k", nullptr), NRT_INVALID);
  EXPECT_EQ(nrt_get_tensor_from_tensor_set(set, "key", nullptr), NRT_INVALID);
  nrt_destroy_tensor_set(&set);
  EXPECT_EQ(set, nullptr);
  nrt_destroy_tensor_set(&set);  // NULL: no-op
  nrt_destroy_tensor_set(nullptr);
  // The set did not own its tensors.
  EXPECT_EQ(nrt_tensor_write(u, "12345678", 0, 8), NRT_SUCCESS);
  nrt_tensor_free(&t);
  nrt_tensor_free(&u);
}

}  // namespace
