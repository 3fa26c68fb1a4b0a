// gather_rows against a host lookup: contiguous and strided (int64 low words) indices,
// repeated and out-of-order rows, more indices than partitions, low-precision tables,
// and an index outside the table faulting with its position named. scatter_rows and
// scatter_add_rows against host scatters.
#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

std::vector<float> lookup(const std::vector<float>& table, int64_t cols,
                          const std::vector<int32_t>& ids) {
  std::vector<float> out;
  for (int32_t id : ids)
    out.insert(out.end(), table.begin() + id * cols, table.begin() + (id + 1) * cols);
  return out;
}

std::vector<uint8_t> words(const std::vector<int32_t>& ids, int64_t stride) {
  std::vector<int32_t> all(static_cast<size_t>((static_cast<int64_t>(ids.size()) - 1) * stride + 1),
                           0);
  for (size_t i = 0; i < ids.size(); ++i) all[i * static_cast<size_t>(stride)] = ids[i];
  const auto* p = reinterpret_cast<const uint8_t*>(all.data());
  return {p, p + all.size() * 4};
}

void check(DType dtype, int64_t rows, int64_t cols, const std::vector<int32_t>& ids,
           int64_t stride) {
  const isa::Program p =
      gather_rows("trn2", dtype, rows, cols, static_cast<int64_t>(ids.size()), stride);
  const std::vector<float> table =
      test::random_values(static_cast<size_t>(rows * cols), 3, -2.0f, 2.0f, dtype);
  const auto out =
      test::run_raw(p, {{"table", test::encode(dtype, table)}, {"index", words(ids, stride)}});
  EXPECT_EQ(test::decode(dtype, out.at("out")), lookup(table, cols, ids));
}

TEST(GatherRows, ContiguousIndices) {
  check(DType::fp32, 10, 7, {3, 0, 9, 3, 1}, 1);
}

TEST(GatherRows, Int64LowWordsAndManyTiles) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37) % 256);
  check(DType::bf16, 256, 64, ids, 2);
}

TEST(GatherRows, OneIndexOneColumn) {
  check(DType::fp16, 1, 1, {0}, 1);
}

TEST(GatherRows, AnIndexOutsideTheTableFaults) {
  const isa::Program p = gather_rows("trn2", DType::fp32, 4, 2, 3, 1);
  sim::DeviceOptions options;
  options.mode = sim::Mode::functional_only;
  auto device = sim::Device::open_generation("trn2", options);
  const sim::ProgramRef loaded = device->load(0, p, "gather");
  const sim::Bindings io = device->allocate_io(*loaded);
  device->write_tensor(*loaded, io, "index", words({1, 4, 0}, 1));
  const sim::Completion done = device->complete({loaded, io, "gather"});
  ASSERT_TRUE(done.error);
  try {
    std::rethrow_exception(done.error);
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("index 1 = 4"), std::string::npos) << e.what();
  }
}

// A table of more rows than 16 bits count (an LLM's vocabulary: 151,936 to 262,144
// tokens): rows past 65,535 are found.
TEST(GatherRows, TablesOfMoreThan65535Rows) {
  check(DType::bf16, 262144, 2, {262143, 0, 65535, 65536, 151935, 131072}, 2);
}

TEST(GatherRows, RefusesBadShapes) {
  EXPECT_THROW(gather_rows("trn2", DType::fp32, 0, 4, 1), std::invalid_argument);
  EXPECT_THROW(gather_rows("trn2", DType::fp32, 4, 4, 1, 0), std::invalid_argument);
}

// scatter_rows writes src's rows to the named rows of out in index order (the last of a
// repeated index wins) and leaves every other row's bytes as they were.
void check_scatter(DType dtype, int64_t rows, int64_t cols, const std::vector<int32_t>& ids,
                   int64_t stride) {
  const auto count = static_cast<int64_t>(ids.size());
  const isa::Program p = scatter_rows("trn2", dtype, rows, cols, count, stride);
  const std::vector<float> src =
      test::random_values(static_cast<size_t>(count * cols), 4, -2.0f, 2.0f, dtype);
  std::vector<float> want =
      test::random_values(static_cast<size_t>(rows * cols), 5, -2.0f, 2.0f, dtype);
  const auto out = test::run_raw(p, {{"src", test::encode(dtype, src)},
                                     {"index", words(ids, stride)},
                                     {"out", test::encode(dtype, want)}});
  for (size_t i = 0; i < ids.size(); ++i)
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(i) * cols, cols,
                want.begin() + ids[i] * cols);
  EXPECT_EQ(test::decode(dtype, out.at("out")), want);
}

TEST(ScatterRows, RowsInIndexOrderOthersKept) {
  check_scatter(DType::fp32, 10, 7, {3, 0, 9, 3, 1}, 1);
}

TEST(ScatterRows, TablesOfMoreThan65535Rows) {
  check_scatter(DType::fp32, 70000, 3, {69999, 65536, 2, 65535}, 1);
}

TEST(ScatterRows, Int64LowWordsAndManyTiles) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37) % 256);  // repeats across tiles
  check_scatter(DType::bf16, 256, 3, ids, 2);
}

// scatter_add_rows adds src's rows into the named rows of out in index order, each add in
// FP32 rounded to the dtype (as the CPU's index_add rounds), and leaves every other row.
void check_scatter_add(DType dtype, int64_t rows, int64_t cols, const std::vector<int32_t>& ids) {
  const auto count = static_cast<int64_t>(ids.size());
  const isa::Program p = scatter_add_rows("trn2", dtype, rows, cols, count);
  const std::vector<float> src =
      test::random_values(static_cast<size_t>(count * cols), 6, -2.0f, 2.0f, dtype);
  const std::vector<float> table =
      test::random_values(static_cast<size_t>(rows * cols), 7, -2.0f, 2.0f, dtype);
  const auto out = test::run_raw(p, {{"src", test::encode(dtype, src)},
                                     {"index", words(ids, 1)},
                                     {"out", test::encode(dtype, table)}});
  std::vector<float> want = table;
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float& w = want[static_cast<size_t>(ids[i] * cols + j)];
      w = test::decode(dtype, test::encode(dtype, {w + src[i * static_cast<size_t>(cols) + j]}))[0];
    }
  EXPECT_EQ(test::decode(dtype, out.at("out")), want);
}

TEST(ScatterAddRows, RepeatedRowsSumInIndexOrderOthersKept) {
  check_scatter_add(DType::fp32, 10, 7, {3, 0, 9, 3, 1, 3});
}

TEST(ScatterAddRows, Bf16RoundsEachAddAcrossTiles) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37) % 64);  // each row about five times
  check_scatter_add(DType::bf16, 70000, 3, ids);
}

TEST(ScatterAddRows, RefusesWhatTheDmaCannotAdd) {
  EXPECT_THROW(scatter_add_rows("trn2", DType::fp16, 4, 4, 2), std::invalid_argument);
  EXPECT_THROW(scatter_add_rows("trn2", DType::int32, 4, 4, 2), std::invalid_argument);
}

}  // namespace
}  // namespace neuronsim::kernels
