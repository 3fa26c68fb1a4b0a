// matmul: results against a double-precision reference computed from the
// dtype-rounded inputs, on multi-tile and remainder shapes, with B resident in
// SBUF and streamed.
//
// Tolerance, per element: (K + 2) * 2^-24 * sum_k |a_ik * b_kj| + 2 * u_out * |ref|.
// The first term is the classic bound for an FP32 sum of K products in any order
// (PSUM accumulates in FP32; bf16 products are exact in FP32, fp32 products add
// one rounding each, hence K + 2). The second covers the final rounding to
// out_dtype (u_out = 2^-8 for bf16, 2^-24 for fp32), doubled for the error of the
// value being rounded. For random inputs the bound is far below |C| (e.g.
// ~1e-3 against values of ~5 for K=256), so wrong tiling is always caught.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/kernels/kernels.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

using test::kU32;

struct MatmulCase {
  int64_t M, K, N;
  DType dtype, out_dtype;
  bool stream_b = false;  // force B to be streamed in panels instead of kept in SBUF
};

std::string name_of(const MatmulCase& c) {
  return fmt::format("{}x{}x{}_{}_{}{}", c.M, c.K, c.N, isa::dtype_name(c.dtype),
                     isa::dtype_name(c.out_dtype), c.stream_b ? "_streamed" : "");
}
std::string case_name(const ::testing::TestParamInfo<MatmulCase>& info) {
  return name_of(info.param);
}
void PrintTo(const MatmulCase& c, std::ostream* os) {
  *os << name_of(c);
}

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulTest, MatchesDoubleReference) {
  const MatmulCase& c = GetParam();
  const isa::Program p = c.stream_b ? detail::matmul("trn2", c.M, c.K, c.N, c.dtype, c.out_dtype, 0)
                                    : matmul("trn2", c.M, c.K, c.N, c.dtype, c.out_dtype);
  const auto M = static_cast<size_t>(c.M), K = static_cast<size_t>(c.K),
             N = static_cast<size_t>(c.N);
  const std::vector<float> a = test::random_values(M * K, 1, -1.0f, 1.0f, c.dtype);
  const std::vector<float> b = test::random_values(K * N, 2, -1.0f, 1.0f, c.dtype);
  const auto out = test::run(p, {{"a", a}, {"b", b}});

  std::vector<double> want(M * N), abs_sum(M * N);
  for (size_t i = 0; i < M; ++i)
    for (size_t k = 0; k < K; ++k) {
      const double aik = a[i * K + k];
      for (size_t j = 0; j < N; ++j) {
        const double prod = aik * b[k * N + j];
        want[i * N + j] += prod;
        abs_sum[i * N + j] += std::fabs(prod);
      }
    }
  const double u_out = test::rounding(c.out_dtype);
  test::expect_close(out.at("c"), want, N, [&](size_t i) {
    return double(K + 2) * kU32 * abs_sum[i] + 2.0 * u_out * std::fabs(want[i]);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Values(MatmulCase{256, 256, 1024, DType::bf16, DType::fp32},  // 2x2x2 tiles
                      MatmulCase{128, 128, 512, DType::fp32, DType::fp32},   // one tile of each
                      MatmulCase{384, 512, 1536, DType::bf16, DType::bf16},  // 3 M, 4 K, 3 N tiles
                      MatmulCase{200, 300, 700, DType::bf16, DType::fp32},  // remainders everywhere
                      MatmulCase{64, 96, 100, DType::fp16, DType::fp32},    // all below one tile
                      MatmulCase{1, 1, 1, DType::fp32, DType::fp32},        // degenerate
                      MatmulCase{128, 256, 512, DType::fp8_e4m3,
                                 DType::fp32},  // 16 blocks per bank
                      MatmulCase{256, 384, 1100, DType::bf16, DType::fp32, true},  // streamed B
                      MatmulCase{130, 200, 513, DType::fp32, DType::bf16, true}),
    case_name);

// The loop nest the kernel documents: one PE transpose per (M tile, K chunk), one
// matmul per (M tile, N tile, K chunk), accumulate on all but the first K chunk.
TEST(Matmul, TilesAsDocumented) {
  const isa::Program p = matmul("trn2", 256, 384, 1024);  // 2 M tiles, 3 K chunks, 2 N tiles
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::transpose), 2u * 3u);
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::matmul), 2u * 2u * 3u);
  size_t accumulating = 0;
  for (const isa::Instruction& in : p.stream(isa::Engine::PE))
    if (in.opcode == isa::Opcode::matmul) accumulating += in.has_flag(isa::kAccumulate);
  EXPECT_EQ(accumulating, 2u * 2u * 2u);
  // Loads: 2 A row blocks (SP) + 3 resident B chunks (ACT); stores: one per M tile (POOL).
  EXPECT_EQ(test::count_dma(p, isa::Engine::SP), 2u);
  EXPECT_EQ(test::count_dma(p, isa::Engine::ACT), 3u);
  EXPECT_EQ(test::count_dma(p, isa::Engine::POOL), 2u);
  EXPECT_EQ(p.find_tensor("a")->shape, (std::vector<int64_t>{256, 384}));
  EXPECT_EQ(p.find_tensor("b")->shape, (std::vector<int64_t>{384, 1024}));
  EXPECT_EQ(p.find_tensor("c")->shape, (std::vector<int64_t>{256, 1024}));
  EXPECT_EQ(p.find_tensor("c")->dtype, DType::fp32);
}

// Streamed B (here forced), the same product: both M tiles' A^T fit in SBUF, so they make
// one step and share each B panel, and B is read once; each (M tile, panel) block is stored.
TEST(Matmul, StreamedBServesAGroupOfMTiles) {
  const isa::Program p = detail::matmul("trn2", 256, 384, 1024, DType::bf16, DType::fp32, 0);
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::transpose), 2u * 3u);
  EXPECT_EQ(test::count_opcode(p, isa::Opcode::matmul), 2u * 2u * 3u);
  // Loads: 2 A row blocks + 2 B panels of 3 chunks (SP); stores: one per (M tile, panel).
  EXPECT_EQ(test::count_dma(p, isa::Engine::SP), 2u + 2u * 3u);
  EXPECT_EQ(test::count_dma(p, isa::Engine::ACT), 0u);
  EXPECT_EQ(test::count_dma(p, isa::Engine::POOL), 2u * 2u);
}

}  // namespace
}  // namespace neuronsim::kernels
