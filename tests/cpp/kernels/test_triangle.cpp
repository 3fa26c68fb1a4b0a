// triangle (tril/triu) against a host reference: square and wide matrices, more rows
// than partitions, more columns than one tile, positive and negative diagonals, bool.
#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

void check(DType dtype, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal, bool upper) {
  const isa::Program p = triangle("trn2", dtype, batch, rows, cols, diagonal, upper);
  const size_t n = static_cast<size_t>(batch * rows * cols);
  std::vector<float> x = test::random_values(n, 9, -3.0f, 3.0f, dtype);
  if (dtype == DType::boolean)
    for (float& v : x) v = v > 0 ? 1.0f : 0.0f;
  std::vector<float> want(n);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const size_t at = static_cast<size_t>((b * rows + i) * cols + j);
        const bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
        want[at] = keep ? x[at] : 0.0f;
      }
  const auto out = test::run(p, {{"in", x}});
  EXPECT_EQ(out.at("out"), want) << (upper ? "triu" : "tril") << " diagonal " << diagonal;
}

TEST(Triangle, LowerAndUpperOfASquare) {
  for (int64_t d : {0, 1, -1}) {
    check(DType::fp32, 1, 8, 8, d, false);
    check(DType::fp32, 1, 8, 8, d, true);
  }
}

TEST(Triangle, ManyRowsWideColumnsAndBatches) {
  check(DType::bf16, 2, 200, 2100, 5, false);
  check(DType::fp32, 3, 130, 40, -7, true);
}

TEST(Triangle, BoolCausalMask) {
  check(DType::boolean, 1, 64, 64, 0, false);
}

TEST(Triangle, RefusesBadShapes) {
  EXPECT_THROW(triangle("trn2", DType::fp32, 1, 0, 4, 0, false), std::invalid_argument);
}

}  // namespace
}  // namespace neuronsim::kernels
