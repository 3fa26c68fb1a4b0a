// elementwise: exact results. The engines compute in FP32 and round to the
// destination dtype (docs/isa.md, numeric model), so the reference computes the
// same single FP32 operation and rounding; no tolerance is needed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "neuronsim/kernels/kernels.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

struct ElementwiseCase {
  ElementwiseOp op;
  int64_t rows, cols;
  DType dtype;
};

std::string name_of(const ElementwiseCase& c) {
  return fmt::format("{}_{}x{}_{}", c.op == ElementwiseOp::add ? "add" : "multiply", c.rows, c.cols,
                     isa::dtype_name(c.dtype));
}
std::string case_name(const ::testing::TestParamInfo<ElementwiseCase>& info) {
  return name_of(info.param);
}
void PrintTo(const ElementwiseCase& c, std::ostream* os) {
  *os << name_of(c);
}

class ElementwiseTest : public ::testing::TestWithParam<ElementwiseCase> {};

TEST_P(ElementwiseTest, MatchesFp32Reference) {
  const ElementwiseCase& c = GetParam();
  const isa::Program p = elementwise("trn2", c.op, c.rows, c.cols, c.dtype);
  const size_t n = static_cast<size_t>(c.rows * c.cols);
  const float lo = isa::is_float(c.dtype) ? -4.0f : -1000.0f, hi = -lo;
  const std::vector<float> x = test::random_values(n, 3, lo, hi, c.dtype);
  const std::vector<float> y = test::random_values(n, 4, lo, hi, c.dtype);
  const std::vector<float> got = test::run(p, {{"x", x}, {"y", y}}).at("out");

  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) {
    const float r = c.op == ElementwiseOp::add ? x[i] + y[i] : x[i] * y[i];  // one FP32 operation
    want[i] = test::round_to(c.dtype, r);
  }
  test::expect_close(got, want, static_cast<size_t>(c.cols), [](size_t) { return 0.0; });
}

constexpr ElementwiseOp kAdd = ElementwiseOp::add, kMul = ElementwiseOp::multiply;

INSTANTIATE_TEST_SUITE_P(
    Shapes, ElementwiseTest,
    ::testing::Values(ElementwiseCase{kAdd, 256, 1024, DType::fp32},   // one full tile
                      ElementwiseCase{kMul, 1024, 1024, DType::fp32},  // 4 tiles, 2 engines
                      ElementwiseCase{kAdd, 300, 777, DType::bf16},    // partial tile, tail
                      ElementwiseCase{kMul, 513, 1000, DType::bf16},
                      ElementwiseCase{kAdd, 7, 5, DType::int32},  // under 128 elements
                      ElementwiseCase{kAdd, 1, 1, DType::fp32}),
    case_name);

// Tiles alternate between VectorE and GpSimdE.
TEST(Elementwise, AlternatesVectorAndGpSimd) {
  const isa::Program p =
      elementwise("trn2", ElementwiseOp::add, 1024, 1024, DType::fp32);  // 4 tiles
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::tensor_tensor), 4u);
  EXPECT_EQ(test::count_opcode(p, isa::Engine::DVE, isa::Opcode::tensor_tensor), 2u);
  EXPECT_EQ(test::count_opcode(p, isa::Engine::POOL, isa::Opcode::tensor_tensor), 2u);
}

}  // namespace
}  // namespace neuronsim::kernels
