// GraphProgram: stages of the eager kernels in one program, exchanging values through
// scratch tensors and views with offsets, against host references; SBUF freed between
// stages; places that do not fit their tensor refused with the operand named.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "neuronsim/kernels/graph.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;
using isa::TensorKind;
using test::contiguous;

Place at(const std::string& tensor, int64_t offset, const View& v) {
  return {tensor, offset, v};
}

TEST(GraphProgram, StagesShareValuesThroughScratchAndViewsWithOffsets) {
  constexpr int64_t M = 8, K = 32, N = 16;
  GraphProgram g("trn2");
  g.tensor("x", DType::fp32, M * K, TensorKind::input);
  g.tensor("w", DType::fp32, K * N, TensorKind::input);
  g.tensor("e", DType::fp32, M * K, TensorKind::scratch);
  g.tensor("y", DType::fp32, M * N, TensorKind::output);
  g.tensor("rowsum", DType::fp32, M, TensorKind::output);
  g.tensor("p", DType::fp32, 4 * N, TensorKind::output);

  PointwiseExpr twice_exp;  // e = exp(x) * 2
  twice_exp.alu_imm(isa::AluOp::multiply,
                    twice_exp.activation(isa::ActFunc::exp, twice_exp.load(0)), 2.0f);
  const Place x = at("x", 0, contiguous(DType::fp32, {M, K}));
  const Place e = at("e", 0, contiguous(DType::fp32, {M, K}));
  g.pointwise(twice_exp, {&x, 1}, {&e, 1});
  g.matmul(e, at("w", 0, contiguous(DType::fp32, {K, N})),
           at("y", 0, contiguous(DType::fp32, {M, N})));
  g.reduce(ReduceOp::sum, at("y", 0, contiguous(DType::fp32, {M, N})), 1,
           at("rowsum", 0, contiguous(DType::fp32, {M})));
  // softmax of y's last four rows: a place 4 rows into its tensor.
  g.softmax(at("y", 4 * N, contiguous(DType::fp32, {4, N})),
            at("p", 0, contiguous(DType::fp32, {4, N})),
            /*log=*/false);
  EXPECT_EQ(g.stages(), 4u);
  const isa::Program program = g.finish();

  const std::vector<float> xs = test::random_values(M * K, 1, -1.0f, 1.0f, DType::fp32);
  const std::vector<float> ws = test::random_values(K * N, 2, -0.5f, 0.5f, DType::fp32);
  auto out = test::run(program, {{"x", xs}, {"w", ws}});

  std::vector<double> y(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        y[m * N + n] += 2.0 * std::exp(double{xs[m * K + k]}) * ws[k * N + n];
  for (int64_t i = 0; i < M * N; ++i) EXPECT_NEAR(out["y"][i], y[i], 1e-4 * (1 + std::abs(y[i])));
  for (int64_t m = 0; m < M; ++m) {
    double sum = 0.0;
    for (int64_t n = 0; n < N; ++n) sum += y[m * N + n];
    EXPECT_NEAR(out["rowsum"][m], sum, 1e-3 * (1 + std::abs(sum)));
  }
  for (int64_t r = 0; r < 4; ++r) {
    double max = -INFINITY, total = 0.0;
    for (int64_t n = 0; n < N; ++n) max = std::max(max, y[(4 + r) * N + n]);
    for (int64_t n = 0; n < N; ++n) total += std::exp(y[(4 + r) * N + n] - max);
    for (int64_t n = 0; n < N; ++n)
      EXPECT_NEAR(out["p"][r * N + n], std::exp(y[(4 + r) * N + n] - max) / total, 1e-5);
  }
}

TEST(GraphProgram, AMatmulEpilogueComputesOnTheProductBeforeItIsStored) {
  // out = silu(x @ w) * u + bias, batched (two batches, 130 rows: a partial row tile), with
  // u [B, M, N] and bias [N] broadcast; the product never goes to HBM.
  constexpr int64_t B = 2, M = 130, K = 48, N = 40;
  GraphProgram g("trn2");
  g.tensor("x", DType::fp32, B * M * K, TensorKind::input);
  g.tensor("w", DType::fp32, K * N, TensorKind::input);
  g.tensor("u", DType::fp32, B * M * N, TensorKind::input);
  g.tensor("bias", DType::fp32, N, TensorKind::input);
  g.tensor("y", DType::bf16, B * M * N, TensorKind::output);
  PointwiseExpr ep;
  const auto gated =
      ep.alu(isa::AluOp::multiply, ep.activation(isa::ActFunc::silu, ep.load(0)), ep.load(1));
  ep.alu(isa::AluOp::add, gated, ep.load(2));
  const Place inputs[] = {at("u", 0, contiguous(DType::fp32, {B, M, N})),
                          at("bias", 0, contiguous(DType::fp32, {N}))};
  View w = contiguous(DType::fp32, {1, K, N});
  w.strides[0] = 0;  // one weight for both batches
  g.matmul(at("x", 0, contiguous(DType::fp32, {B, M, K})), at("w", 0, w),
           at("y", 0, contiguous(DType::bf16, {B, M, N})), &ep, inputs);
  const isa::Program program = g.finish();
  EXPECT_EQ(test::count_dma(program, isa::Engine::POOL), static_cast<size_t>(B * 2))
      << "one store per row tile";

  const auto xs = test::random_values(B * M * K, 4, -1.0f, 1.0f, DType::fp32);
  const auto ws = test::random_values(K * N, 5, -0.3f, 0.3f, DType::fp32);
  const auto us = test::random_values(B * M * N, 6, -1.0f, 1.0f, DType::fp32);
  const auto bs = test::random_values(N, 7, -1.0f, 1.0f, DType::fp32);
  auto out = test::run(program, {{"x", xs}, {"w", ws}, {"u", us}, {"bias", bs}});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double p = 0.0;
        for (int64_t k = 0; k < K; ++k) p += double{xs[(b * M + m) * K + k]} * ws[k * N + n];
        const double want = p / (1.0 + std::exp(-p)) * us[(b * M + m) * N + n] + bs[n];
        EXPECT_NEAR(out["y"][(b * M + m) * N + n], want, 1e-2 * (1 + std::abs(want)));
      }
}

TEST(GraphProgram, AMatmulEpilogueEndsInASoftmaxOfEachRow) {
  // Attention's probabilities: softmax(q @ k^T * 0.25 + mask) per row, the scores never
  // stored; and log_softmax of a bare product.
  constexpr int64_t B = 3, S = 20, D = 16;
  GraphProgram g("trn2");
  g.tensor("q", DType::fp32, B * S * D, TensorKind::input);
  g.tensor("kt", DType::fp32, B * D * S, TensorKind::input);
  g.tensor("mask", DType::fp32, S * S, TensorKind::input);
  g.tensor("p", DType::fp32, B * S * S, TensorKind::output);
  g.tensor("lp", DType::fp32, B * S * S, TensorKind::output);
  PointwiseExpr ep;
  ep.alu(isa::AluOp::add, ep.alu_imm(isa::AluOp::multiply, ep.load(0), 0.25f), ep.load(1));
  const Place mask = at("mask", 0, contiguous(DType::fp32, {S, S}));
  const Place q = at("q", 0, contiguous(DType::fp32, {B, S, D}));
  const Place kt = at("kt", 0, contiguous(DType::fp32, {B, D, S}));
  g.matmul(q, kt, at("p", 0, contiguous(DType::fp32, {B, S, S})), &ep, {&mask, 1},
           /*softmax_rows=*/true);
  g.matmul(q, kt, at("lp", 0, contiguous(DType::fp32, {B, S, S})), nullptr, {},
           /*softmax_rows=*/true, /*log=*/true);
  const auto qs = test::random_values(B * S * D, 9, -1.0f, 1.0f, DType::fp32);
  const auto ks = test::random_values(B * D * S, 10, -1.0f, 1.0f, DType::fp32);
  std::vector<float> ms(S * S);
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) ms[i * S + j] = j > i ? -INFINITY : 0.0f;
  auto out = test::run(g.finish(), {{"q", qs}, {"kt", ks}, {"mask", ms}});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i) {
      std::vector<double> s(S), l(S);
      double max = -INFINITY, lmax = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d)
          dot += double{qs[(b * S + i) * D + d]} * ks[(b * D + d) * S + j];
        l[j] = dot;
        s[j] = dot * 0.25 + ms[i * S + j];
        max = std::max(max, s[j]);
        lmax = std::max(lmax, l[j]);
      }
      double total = 0.0, ltotal = 0.0;
      for (int64_t j = 0; j < S; ++j)
        total += std::exp(s[j] - max), ltotal += std::exp(l[j] - lmax);
      for (int64_t j = 0; j < S; ++j) {
        EXPECT_NEAR(out["p"][(b * S + i) * S + j], std::exp(s[j] - max) / total, 1e-5);
        EXPECT_NEAR(out["lp"][(b * S + i) * S + j], l[j] - lmax - std::log(ltotal), 1e-4);
      }
    }
}

TEST(GraphProgram, AMatmulStoresTheResidualStreamAndItsNormInOneStage) {
  // h2 = x @ w + h (the residual add as the epilogue), and from the stored h2 in SBUF,
  // rows = h2 * rsqrt(mean(h2 * h2) + eps) * g: the next layer's normalised input.
  constexpr int64_t M = 150, K = 32, N = 48;
  GraphProgram g("trn2");
  g.tensor("x", DType::fp32, M * K, TensorKind::input);
  g.tensor("w", DType::fp32, K * N, TensorKind::input);
  g.tensor("h", DType::fp32, M * N, TensorKind::input);
  g.tensor("gain", DType::fp32, N, TensorKind::input);
  g.tensor("h2", DType::fp32, M * N, TensorKind::output);
  g.tensor("normed", DType::bf16, M * N, TensorKind::output);
  PointwiseExpr residual;
  residual.alu(isa::AluOp::add, residual.load(0), residual.load(1));
  PointwiseExpr square;
  square.alu(isa::AluOp::multiply, square.load(0), square.load(0));
  PointwiseExpr norm;
  const auto r =
      norm.activation(isa::ActFunc::rsqrt, norm.alu_imm(isa::AluOp::add, norm.load(1), 1e-6f));
  norm.alu(isa::AluOp::multiply, norm.alu(isa::AluOp::multiply, norm.load(0), r), norm.load(2));
  const Place h = at("h", 0, contiguous(DType::fp32, {M, N}));
  RowNorm rn{ReduceOp::mean,
             &square,
             &norm,
             {at("gain", 0, contiguous(DType::fp32, {N}))},
             at("normed", 0, contiguous(DType::bf16, {M, N}))};
  g.matmul(at("x", 0, contiguous(DType::fp32, {M, K})), at("w", 0, contiguous(DType::fp32, {K, N})),
           at("h2", 0, contiguous(DType::fp32, {M, N})), &residual, {&h, 1}, false, false, &rn);
  EXPECT_EQ(g.stages(), 1u);
  const auto xs = test::random_values(M * K, 17, -1.0f, 1.0f, DType::fp32);
  const auto ws = test::random_values(K * N, 18, -0.5f, 0.5f, DType::fp32);
  const auto hs = test::random_values(M * N, 19, -1.0f, 1.0f, DType::fp32);
  const auto gs = test::random_values(N, 20, 0.5f, 1.5f, DType::fp32);
  auto out = test::run(g.finish(), {{"x", xs}, {"w", ws}, {"h", hs}, {"gain", gs}});
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> h2(N);
    double ms = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) h2[n] += double{xs[m * K + k]} * ws[k * N + n];
      h2[n] += hs[m * N + n];
      ms += h2[n] * h2[n] / N;
      EXPECT_NEAR(out["h2"][m * N + n], h2[n], 1e-4);
    }
    for (int64_t n = 0; n < N; ++n) {
      const double want = h2[n] / std::sqrt(ms + 1e-6) * gs[n];
      EXPECT_NEAR(out["normed"][m * N + n], want, 1e-2 * (1 + std::abs(want)));
    }
  }
}

TEST(GraphProgram, AReductionPrologueComputesTheReducedValuesOnChip) {
  // mean(x * x) over the last dim (an RMS norm's), rows longer than one chunk.
  constexpr int64_t R = 6, C = 5000;
  GraphProgram g("trn2");
  g.tensor("x", DType::bf16, R * C, TensorKind::input);
  g.tensor("ms", DType::fp32, R, TensorKind::output);
  PointwiseExpr square;
  const auto x = square.load(0);
  square.alu(isa::AluOp::multiply, x, x);
  g.reduce(ReduceOp::mean, at("x", 0, contiguous(DType::bf16, {R, C})), 1,
           at("ms", 0, contiguous(DType::fp32, {R})), &square);
  const auto xs = test::random_values(R * C, 8, -2.0f, 2.0f, DType::bf16);
  auto out = test::run(g.finish(), {{"x", xs}});
  for (int64_t r = 0; r < R; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += double{xs[r * C + c]} * xs[r * C + c];
    // FP32 sums of C terms: within C units of FP32 roundoff.
    EXPECT_NEAR(out["ms"][r], sum / C, C * test::kU32 * sum / C);
  }
}

TEST(GraphProgram, AReductionEpilogueNormalisesTheRowsInTheSameStage) {
  // An RMS norm in one stage: ms = mean(x * x) per row, rows = x * rsqrt(ms + eps) * w.
  constexpr int64_t B = 2, T = 70, C = 64;
  GraphProgram g("trn2");
  g.tensor("x", DType::fp32, B * T * C, TensorKind::input);
  g.tensor("w", DType::fp32, C, TensorKind::input);
  g.tensor("ms", DType::fp32, B * T, TensorKind::scratch);
  g.tensor("y", DType::bf16, B * T * C, TensorKind::output);
  PointwiseExpr square;
  square.alu(isa::AluOp::multiply, square.load(0), square.load(0));
  PointwiseExpr norm;  // load(0): x, load(1): the row's mean square, load(2): w
  const auto r =
      norm.activation(isa::ActFunc::rsqrt, norm.alu_imm(isa::AluOp::add, norm.load(1), 1e-6f));
  norm.alu(isa::AluOp::multiply, norm.alu(isa::AluOp::multiply, norm.load(0), r), norm.load(2));
  const Place w = at("w", 0, contiguous(DType::fp32, {C}));
  const Place y = at("y", 0, contiguous(DType::bf16, {B, T, C}));
  g.reduce(ReduceOp::mean, at("x", 0, contiguous(DType::fp32, {B, T, C})), 2,
           at("ms", 0, contiguous(DType::fp32, {B, T, 1})), &square, &norm, {&w, 1}, &y);
  EXPECT_EQ(g.stages(), 1u);
  const auto xs = test::random_values(B * T * C, 11, -2.0f, 2.0f, DType::fp32);
  const auto ws = test::random_values(C, 12, 0.5f, 1.5f, DType::fp32);
  auto out = test::run(g.finish(), {{"x", xs}, {"w", ws}});
  for (int64_t row = 0; row < B * T; ++row) {
    double ms = 0.0;
    for (int64_t c = 0; c < C; ++c) ms += double{xs[row * C + c]} * xs[row * C + c];
    ms /= C;
    for (int64_t c = 0; c < C; ++c) {
      const double want = xs[row * C + c] / std::sqrt(ms + 1e-6) * ws[c];
      EXPECT_NEAR(out["y"][row * C + c], want, 1e-2 * (1 + std::abs(want)));  // bf16 rows
    }
  }
}

TEST(GraphProgram, FusedStagesTooBigForSbufAreEmittedOneByOne) {
  // Rows of 16384 FP32 values: a plain matmul fits, its epilogue's tiles beside it do not;
  // nor does a norm's epilogue over rows of 40000. Each becomes the stages it fuses.
  constexpr int64_t M = 4, K = 8, N = 16384, C = 40000;
  GraphProgram g("trn2");
  g.tensor("a", DType::fp32, M * K, TensorKind::input);
  g.tensor("b", DType::fp32, K * N, TensorKind::input);
  g.tensor("bias", DType::fp32, N, TensorKind::input);
  g.tensor("y", DType::fp32, M * N, TensorKind::output);
  g.tensor("x", DType::fp32, 2 * C, TensorKind::input);
  g.tensor("sum", DType::fp32, 2, TensorKind::scratch);
  g.tensor("rows", DType::fp32, 2 * C, TensorKind::output);
  PointwiseExpr ep;  // y = 2 * (a @ b) + bias
  ep.alu(isa::AluOp::add, ep.alu_imm(isa::AluOp::multiply, ep.load(0), 2.0f), ep.load(1));
  const Place bias = at("bias", 0, contiguous(DType::fp32, {N}));
  g.matmul(at("a", 0, contiguous(DType::fp32, {M, K})), at("b", 0, contiguous(DType::fp32, {K, N})),
           at("y", 0, contiguous(DType::fp32, {M, N})), &ep, {&bias, 1});
  EXPECT_EQ(g.stages(), 2u);
  PointwiseExpr centre;  // rows = x - sum(x) / C
  centre.alu(isa::AluOp::subtract, centre.load(0),
             centre.alu_imm(isa::AluOp::divide, centre.load(1), float{C}));
  const Place rows = at("rows", 0, contiguous(DType::fp32, {2, C}));
  g.reduce(ReduceOp::sum, at("x", 0, contiguous(DType::fp32, {2, C})), 1,
           at("sum", 0, contiguous(DType::fp32, {2})), nullptr, &centre, {}, &rows);
  EXPECT_EQ(g.stages(), 4u);
  const auto as = test::random_values(M * K, 13, -1.0f, 1.0f, DType::fp32);
  const auto bs = test::random_values(K * N, 14, -1.0f, 1.0f, DType::fp32);
  const auto cs = test::random_values(N, 15, -1.0f, 1.0f, DType::fp32);
  const auto xs = test::random_values(2 * C, 16, 0.0f, 1.0f, DType::fp32);
  auto out = test::run(g.finish(), {{"a", as}, {"b", bs}, {"bias", cs}, {"x", xs}});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; n += 61) {
      double p = 0.0;
      for (int64_t k = 0; k < K; ++k) p += double{as[m * K + k]} * bs[k * N + n];
      EXPECT_NEAR(out["y"][m * N + n], 2 * p + cs[n], 1e-4);
    }
  for (int64_t r = 0; r < 2; ++r) {
    double mean = 0.0;
    for (int64_t c = 0; c < C; ++c) mean += xs[r * C + c];
    mean /= C;
    for (int64_t c = 0; c < C; c += 97)
      EXPECT_NEAR(out["rows"][r * C + c], xs[r * C + c] - mean, 1e-4);
  }
}

TEST(GraphProgram, EachStageFindsTheSbufOfTheLastFreeAgain) {
  // Twelve stages of full [128, 2048] tiles: each takes 16 KiB or more per partition,
  // together more than the 224 KiB a trn2 partition holds.
  constexpr int64_t n = 128 * 2048;
  GraphProgram g("trn2");
  g.tensor("a", DType::fp32, n, TensorKind::input);
  g.tensor("b", DType::fp32, n, TensorKind::output);
  const Place a = at("a", 0, contiguous(DType::fp32, {n})),
              b = at("b", 0, contiguous(DType::fp32, {n}));
  g.pointwise(PointwiseExpr::copy(), {&a, 1}, {&b, 1});
  for (int i = 0; i < 11; ++i) {
    PointwiseExpr plus_one = PointwiseExpr::scalar(isa::AluOp::add, 1.0f);
    g.pointwise(plus_one, {&b, 1}, {&b, 1});
  }
  const std::vector<float> as = test::random_values(n, 3, -1.0f, 1.0f, DType::fp32);
  auto out = test::run(g.finish(), {{"a", as}});
  for (int64_t i = 0; i < n; i += 997) EXPECT_FLOAT_EQ(out["b"][i], as[i] + 11.0f);
}

TEST(GraphProgram, AGroupedProductReadsItsGroupEndsOnTheDevice) {
  // Two groups' ends at elements 2..3 of an int32 input; the product then feeds a
  // reduction stage, which waits for the scattered rows.
  constexpr int64_t S = 20, K = 16, N = 8, G = 2;
  GraphProgram g("trn2");
  g.tensor("x", DType::fp32, S * K, TensorKind::input);
  g.tensor("w", DType::fp32, G * K * N, TensorKind::input);
  g.tensor("ends", DType::int32, 4, TensorKind::input);
  g.tensor("y", DType::fp32, S * N, TensorKind::scratch);
  g.tensor("sums", DType::fp32, S, TensorKind::output);
  const Place y = at("y", 0, contiguous(DType::fp32, {S, N}));
  g.grouped_matmul(at("x", 0, contiguous(DType::fp32, {S, K})),
                   at("w", 0, contiguous(DType::fp32, {G, K, N})),
                   at("ends", 2, contiguous(DType::int32, {G})), y);
  g.reduce(ReduceOp::sum, y, 1, at("sums", 0, contiguous(DType::fp32, {S})));
  const isa::Program program = g.finish();
  const std::vector<float> xs = test::random_values(S * K, 3, -1.0f, 1.0f, DType::fp32);
  const std::vector<float> ws = test::random_values(G * K * N, 4, -1.0f, 1.0f, DType::fp32);
  auto out = test::run(program, {{"x", xs}, {"w", ws}, {"ends", {99, 99, 7, 18}}});
  for (int64_t r = 0; r < S; ++r) {
    const int64_t group = r < 7 ? 0 : r < 18 ? 1 : -1;  // rows 18, 19: past the last end
    double sum = 0.0;
    for (int64_t n = 0; group >= 0 && n < N; ++n)
      for (int64_t k = 0; k < K; ++k) sum += double{xs[r * K + k]} * ws[(group * K + k) * N + n];
    EXPECT_NEAR(out["sums"][r], sum, 1e-3) << "row " << r;
  }
}

TEST(GraphProgram, PlacesThatDoNotFitTheirTensorAreRefusedNamingTheOperand) {
  GraphProgram g("trn2");
  g.tensor("x", DType::fp32, 64, TensorKind::input);
  g.tensor("y", DType::fp32, 64, TensorKind::output);
  const PointwiseExpr copy = PointwiseExpr::copy();
  const Place y = at("y", 0, contiguous(DType::fp32, {64}));
  const Place past_end = at("x", 8, contiguous(DType::fp32, {64}));
  test::expect_invalid(
      [&] {
        g.pointwise(copy, {&past_end, 1}, {&y, 1});
      },
      {"in0 reaches elements 8..71 of tensor x, which has 64"});
  const Place x = at("x", 0, contiguous(DType::fp32, {64}));
  test::expect_invalid(
      [&] {
        g.pointwise(copy, {&y, 1}, {&x, 1});
      },
      {"out0 would write tensor x, an input of the graph"});
  const Place nowhere = at("z", 0, contiguous(DType::fp32, {64}));
  test::expect_invalid(
      [&] {
        g.pointwise(copy, {&nowhere, 1}, {&y, 1});
      },
      {"in0 is in tensor z, which the graph does not declare"});
  const Place as_bf16 = at("x", 0, contiguous(DType::bf16, {64}));
  test::expect_invalid(
      [&] {
        g.pointwise(copy, {&as_bf16, 1}, {&y, 1});
      },
      {"in0 is bfloat16, its tensor x is float32"});
  test::expect_invalid([&] { g.tensor("x", DType::fp32, 4, TensorKind::scratch); },
                       {"tensor x is declared twice"});
  test::expect_invalid([&] { GraphProgram("trn2").finish(); }, {"at least one stage"});
}

}  // namespace
}  // namespace neuronsim::kernels
