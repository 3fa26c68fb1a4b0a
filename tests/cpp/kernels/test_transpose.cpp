// transpose: bit-exact against the transposed input bytes, including values that
// an arithmetic path would change (-0, infinities, subnormals).
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "neuronsim/kernels/kernels.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

struct TransposeCase {
  int64_t rows, cols;
  DType dtype;
};

std::string name_of(const TransposeCase& c) {
  return fmt::format("{}x{}_{}", c.rows, c.cols, isa::dtype_name(c.dtype));
}
std::string case_name(const ::testing::TestParamInfo<TransposeCase>& info) {
  return name_of(info.param);
}
void PrintTo(const TransposeCase& c, std::ostream* os) {
  *os << name_of(c);
}

class TransposeTest : public ::testing::TestWithParam<TransposeCase> {};

TEST_P(TransposeTest, IsBitExact) {
  const TransposeCase& c = GetParam();
  const auto R = static_cast<size_t>(c.rows), C = static_cast<size_t>(c.cols);
  std::vector<float> values = test::random_values(R * C, 11, -1e3f, 1e3f, c.dtype);
  const float specials[] = {-0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(), 1e-40f};
  for (size_t i = 0; i < std::size(specials) && i * 37 < values.size(); ++i)
    values[i * 37] = test::round_to(c.dtype, specials[i]);
  const std::vector<uint8_t> x = test::encode(c.dtype, values);
  const std::vector<uint8_t> got =
      test::run_raw(transpose("trn2", c.rows, c.cols, c.dtype), {{"x", x}}).at("out");

  const size_t es = isa::dtype_size(c.dtype);
  ASSERT_EQ(got.size(), x.size());
  size_t bad = 0;
  for (size_t r = 0; r < R; ++r)
    for (size_t j = 0; j < C; ++j)
      if (std::memcmp(got.data() + (j * R + r) * es, x.data() + (r * C + j) * es, es) != 0 &&
          bad++ < 5)
        ADD_FAILURE() << "out[" << j << ", " << r << "] differs from x[" << r << ", " << j << "]";
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TransposeTest,
    ::testing::Values(TransposeCase{256, 384, DType::fp32},   // whole 128x128 blocks
                      TransposeCase{1024, 640, DType::bf16},  // one full PSUM bank group
                      TransposeCase{300, 700, DType::fp32},   // partial blocks both ways
                      TransposeCase{1000, 130, DType::fp16}, TransposeCase{1, 1, DType::fp32},
                      TransposeCase{3, 1000, DType::fp32}),
    case_name);

}  // namespace
}  // namespace neuronsim::kernels
