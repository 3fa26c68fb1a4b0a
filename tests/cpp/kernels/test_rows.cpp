// The row kernels (softmax, log_softmax, rmsnorm, layernorm) against double-precision
// references computed from the dtype-rounded inputs.
//
// Tolerances follow the FP32 error analysis of each kernel (u = 2^-24, C = cols,
// u_out = unit roundoff of the output dtype: 2^-8 bf16, 2^-24 fp32); each is
// orders of magnitude below the effect of any tiling or indexing bug:
//   softmax    relative (C + R + 16) u + 2 u_out: a C-term FP32 sum of positive
//              terms (C u), the rounding of x - max enlarged by exp (R u, with R the
//              input range), exp/reciprocal/multiply (a few u), the final rounding.
//   rmsnorm    relative (C + 16) u + 2 u_out: the C-term sum of squares, pow(-0.5)
//              halving its error, two multiplies, the final rounding.
//   layernorm  absolute 32 u ((|x| + |mean|) rstd |gamma| + |beta|) + 2 u_out |y|:
//              x*rstd + (-mean*rstd) cancels, so the error scales with the
//              operands, not the result; mean and variance come from bn_stats/
//              bn_aggr (accurate to a few u).
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "neuronsim/kernels/kernels.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

using test::kU32;

struct RowCase {
  int64_t rows, cols;
  DType dtype;
  float lo = -4.0f, hi = 4.0f;  // input range
};

std::string name_of(const RowCase& c) {
  return fmt::format("{}x{}_{}{}", c.rows, c.cols, isa::dtype_name(c.dtype),
                     c.lo >= 0 ? "_large" : "");
}
std::string case_name(const ::testing::TestParamInfo<RowCase>& info) {
  return name_of(info.param);
}
void PrintTo(const RowCase& c, std::ostream* os) {
  *os << name_of(c);
}

const auto kRowCases = ::testing::Values(
    RowCase{256, 1000, DType::fp32},  // 2 tiles, cols not a power of 2
    RowCase{256, 1024, DType::bf16}, RowCase{300, 333, DType::fp32},  // partial last tile
    RowCase{130, 4096, DType::bf16},                // wide rows, 8 bn_stats chunks
    RowCase{5, 1, DType::fp32},                     // one column
    RowCase{64, 700, DType::fp32, 60.0f, 100.0f});  // exp would overflow

// ---------------------------------------------------------------------------

// A case's input and, per row, its max and sum(exp(x - max)) in double.
struct SoftmaxRows {
  std::vector<float> x;
  std::vector<double> max, sum;
};

SoftmaxRows softmax_rows(const RowCase& c) {
  const auto R = static_cast<size_t>(c.rows), C = static_cast<size_t>(c.cols);
  SoftmaxRows s{test::random_values(R * C, 5, c.lo, c.hi, c.dtype), {}, {}};
  for (size_t r = 0; r < R; ++r) {
    const float* row = s.x.data() + r * C;
    s.max.push_back(*std::max_element(row, row + C));
    double sum = 0;
    for (size_t j = 0; j < C; ++j) sum += std::exp(row[j] - s.max[r]);
    s.sum.push_back(sum);
  }
  return s;
}

class SoftmaxTest : public ::testing::TestWithParam<RowCase> {};

TEST_P(SoftmaxTest, MatchesDoubleReference) {
  const RowCase& c = GetParam();
  const auto C = static_cast<size_t>(c.cols);
  const SoftmaxRows s = softmax_rows(c);
  const std::vector<float> got =
      test::run(softmax("trn2", c.rows, c.cols, c.dtype), {{"x", s.x}}).at("out");

  std::vector<double> want(s.x.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::exp(s.x[i] - s.max[i / C]) / s.sum[i / C];
  const double rel =
      double(C + 16) * kU32 + double(c.hi - c.lo) * kU32 + 2 * test::rounding(c.dtype);
  test::expect_close(got, want, C, [&](size_t i) { return rel * want[i]; });
}

// log_softmax: y = x - max - log(sum), absolute error (C + 16) u from the log of
// the FP32 sum, a few u of the terms |x - max| and log(sum) from the two adds, and
// the final rounding.
TEST_P(SoftmaxTest, LogSoftmaxMatchesDoubleReference) {
  const RowCase& c = GetParam();
  const auto C = static_cast<size_t>(c.cols);
  const SoftmaxRows s = softmax_rows(c);
  const std::vector<float> got =
      test::run(log_softmax("trn2", c.rows, c.cols, c.dtype), {{"x", s.x}}).at("out");

  std::vector<double> want(s.x.size()), tol(s.x.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double shifted = s.x[i] - s.max[i / C], lse = std::log(s.sum[i / C]);
    want[i] = shifted - lse;
    tol[i] = double(C + 16) * kU32 + 4 * kU32 * (std::fabs(shifted) + lse) +
             2 * test::rounding(c.dtype) * std::fabs(want[i]);
  }
  test::expect_close(got, want, C, [&](size_t i) { return tol[i]; });
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxTest, kRowCases, case_name);
// Rows too long for SBUF (an LM's logits over its vocabulary): two passes over blocks of
// 4096 columns, the running max and sum rescaled from block to block.
INSTANTIATE_TEST_SUITE_P(LongRows, SoftmaxTest,
                         ::testing::Values(RowCase{130, 40000, DType::fp32},  // 10 blocks, 2 tiles
                                           RowCase{3, 70001, DType::bf16},    // a partial block
                                           RowCase{2, 30000, DType::fp32, 60.0f, 100.0f}),
                         case_name);

// A long row whose max rises from block to block (a ramp over 0..30): the running sum is
// rescaled by exp(old max - new max) at every block, which a bug would show in every
// element of the row.
TEST(SoftmaxLongRows, RunningSumFollowsARisingMax) {
  const size_t C = 5 * 4096 + 7;
  std::vector<float> x(2 * C);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 30.0f * static_cast<float>(i % C) / static_cast<float>(C) + (i < C ? 0.0f : -3.0f);
  const std::vector<float> got = test::run(softmax("trn2", 2, C), {{"x", x}}).at("out");
  std::vector<double> want(x.size());
  for (size_t r = 0; r < 2; ++r) {
    const double max = x[r * C + C - 1];
    double sum = 0;
    for (size_t j = 0; j < C; ++j) sum += std::exp(x[r * C + j] - max);
    for (size_t j = 0; j < C; ++j) want[r * C + j] = std::exp(x[r * C + j] - max) / sum;
  }
  const double rel = double(C + 16 + 30) * kU32;
  test::expect_close(got, want, C, [&](size_t i) { return rel * want[i]; });
}

// ---------------------------------------------------------------------------

class RmsNormTest : public ::testing::TestWithParam<RowCase> {};

TEST_P(RmsNormTest, MatchesDoubleReference) {
  const RowCase& c = GetParam();
  const auto R = static_cast<size_t>(c.rows), C = static_cast<size_t>(c.cols);
  const float eps = 1e-6f;
  const std::vector<float> x = test::random_values(R * C, 6, c.lo, c.hi, c.dtype);
  const std::vector<float> gamma = test::random_values(C, 7, 0.5f, 1.5f, c.dtype);
  const std::vector<float> got =
      test::run(rmsnorm("trn2", c.rows, c.cols, eps, c.dtype), {{"x", x}, {"gamma", gamma}})
          .at("out");

  std::vector<double> want(R * C);
  for (size_t r = 0; r < R; ++r) {
    double ss = 0;
    for (size_t j = 0; j < C; ++j) ss += double{x[r * C + j]} * x[r * C + j];
    const double rstd = 1.0 / std::sqrt(ss / double(C) + double{eps});
    for (size_t j = 0; j < C; ++j) want[r * C + j] = x[r * C + j] * rstd * gamma[j];
  }
  const double rel = double(C + 16) * kU32 + 2 * test::rounding(c.dtype);
  test::expect_close(got, want, C, [&](size_t i) { return rel * std::fabs(want[i]); });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest, kRowCases, case_name);

// ---------------------------------------------------------------------------

class LayerNormTest : public ::testing::TestWithParam<RowCase> {};

TEST_P(LayerNormTest, MatchesDoubleReference) {
  const RowCase& c = GetParam();
  const auto R = static_cast<size_t>(c.rows), C = static_cast<size_t>(c.cols);
  const float eps = 1e-5f;
  // Shifted inputs: a non-zero mean exercises the cancellation in x - mean.
  const std::vector<float> x = test::random_values(R * C, 8, c.lo + 1.0f, c.hi + 2.0f, c.dtype);
  const std::vector<float> gamma = test::random_values(C, 9, 0.5f, 1.5f, c.dtype);
  const std::vector<float> beta = test::random_values(C, 10, -1.0f, 1.0f, c.dtype);
  const std::vector<float> got = test::run(layernorm("trn2", c.rows, c.cols, eps, c.dtype),
                                           {{"x", x}, {"gamma", gamma}, {"beta", beta}})
                                     .at("out");

  std::vector<double> want(R * C), tol(R * C);
  for (size_t r = 0; r < R; ++r) {
    const float* row = x.data() + r * C;
    double mean = 0, var = 0;
    for (size_t j = 0; j < C; ++j) mean += row[j];
    mean /= double(C);
    for (size_t j = 0; j < C; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= double(C);
    const double rstd = 1.0 / std::sqrt(var + double{eps});
    for (size_t j = 0; j < C; ++j) {
      const size_t i = r * C + j;
      want[i] = (row[j] - mean) * rstd * gamma[j] + beta[j];
      const double operands =
          (std::fabs(row[j]) + std::fabs(mean)) * rstd * std::fabs(gamma[j]) + std::fabs(beta[j]);
      tol[i] = 32 * kU32 * operands + 2 * test::rounding(c.dtype) * std::fabs(want[i]);
    }
  }
  test::expect_close(got, want, C, [&](size_t i) { return tol[i]; });
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormTest, kRowCases, case_name);

}  // namespace
}  // namespace neuronsim::kernels
