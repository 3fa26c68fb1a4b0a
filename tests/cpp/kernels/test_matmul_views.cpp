// The eager matmul over strided views: contiguous, transposed (a.t(), linear's
// weight.t()), sliced and batched operands with a broadcast batch, against a
// double-precision reference on the dtype-rounded inputs. Tolerance as in
// test_matmul.cpp: (K + 2) u32 sum_k |a_ik b_kj| + 2 u_out |ref|.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;
using test::contiguous;
using test::swapped;

// a: [(B,) M, K], b: [(B,) K, N], out: [(B,) M, N]; out's storage starts as a
// sentinel so that writes outside the view show.
void check(const View& a, const View& b, const View& out) {
  const isa::Program p = matmul("trn2", a, b, out);
  const std::vector<float> av = test::storage(a, 1, -1.0f, 1.0f);
  const std::vector<float> bv = test::storage(b, 2, -1.0f, 1.0f);
  const float sentinel = test::round_to(out.dtype, 77.0f);
  std::vector<float> init(static_cast<size_t>(out.extent_elems()), sentinel);
  std::vector<double> want(init.begin(), init.end()), bound(init.size(), 0.0);
  const int64_t K = a.sizes.back();
  test::for_each_index(out.sizes, [&](const std::vector<int64_t>& idx) {
    const size_t r = idx.size();
    double sum = 0, abs_sum = 0;
    std::vector<int64_t> ai = idx, bi = idx;
    for (int64_t k = 0; k < K; ++k) {
      ai[r - 1] = k;
      bi[r - 2] = k;
      const double prod = double{av[static_cast<size_t>(test::offset_of(a, ai))]} *
                          bv[static_cast<size_t>(test::offset_of(b, bi))];
      sum += prod;
      abs_sum += std::fabs(prod);
    }
    const auto o = static_cast<size_t>(test::offset_of(out, idx));
    want[o] = sum;
    bound[o] =
        double(K + 2) * test::kU32 * abs_sum + 2.0 * test::rounding(out.dtype) * std::fabs(sum);
  });
  const std::vector<float> got = test::run(p, {{"a", av}, {"b", bv}, {"out", init}}).at("out");
  test::expect_close(got, want, want.size(), [&](size_t i) { return bound[i]; });
}

TEST(MatmulViews, Contiguous) {
  check(contiguous(DType::bf16, {200, 300}), contiguous(DType::bf16, {300, 700}),
        contiguous(DType::fp32, {200, 700}));
  check(contiguous(DType::fp32, {1, 1}), contiguous(DType::fp32, {1, 1}),
        contiguous(DType::fp32, {1, 1}));
  check(contiguous(DType::fp32, {129, 127}), contiguous(DType::fp32, {127, 1000}),
        contiguous(DType::bf16, {129, 1000}));
}

TEST(MatmulViews, TransposedOperands) {
  // x @ w.t() (linear): w [N, K] contiguous, seen as [K, N] with strides [1, K].
  check(contiguous(DType::bf16, {129, 256}), swapped(contiguous(DType::bf16, {300, 256}), 0, 1),
        contiguous(DType::fp32, {129, 300}));
  // a.t() @ b, and both transposed, with remainders along M, K and N.
  check(swapped(contiguous(DType::bf16, {300, 200}), 0, 1), contiguous(DType::bf16, {300, 513}),
        contiguous(DType::fp32, {200, 513}));
  check(swapped(contiguous(DType::fp16, {127, 129}), 0, 1),
        swapped(contiguous(DType::fp16, {100, 127}), 0, 1), contiguous(DType::fp32, {129, 100}));
}

TEST(MatmulViews, SlicedOperandsAndOutput) {
  // a = x[:, 10:266] of [150, 400]; b = y[::2] of [600, 64]; out = z[:, :64] of [150, 100].
  check(View{DType::bf16, {150, 256}, {400, 1}}, View{DType::bf16, {256, 64}, {128, 1}},
        View{DType::fp32, {150, 64}, {100, 1}});
}

TEST(MatmulViews, Batched) {
  check(contiguous(DType::bf16, {3, 129, 200}), contiguous(DType::bf16, {3, 200, 70}),
        contiguous(DType::fp32, {3, 129, 70}));
  // q @ k.transpose(-1, -2): b is [B, K, N] with strides [N*K, 1, K].
  check(contiguous(DType::bf16, {2, 64, 96}), swapped(contiguous(DType::bf16, {2, 130, 96}), 1, 2),
        contiguous(DType::bf16, {2, 64, 130}));
  // A weight shared by every batch (stride 0), and a shared a (size-1 batch).
  check(contiguous(DType::fp32, {4, 50, 60}), View{DType::fp32, {4, 60, 30}, {0, 30, 1}},
        contiguous(DType::fp32, {4, 50, 30}));
  check(contiguous(DType::fp32, {1, 50, 60}), contiguous(DType::fp32, {2, 60, 30}),
        contiguous(DType::fp32, {2, 50, 30}));
  // A batched output written into a transposed layout.
  check(contiguous(DType::bf16, {2, 40, 33}), contiguous(DType::bf16, {2, 33, 20}),
        View{DType::fp32, {2, 40, 20}, {800, 1, 40}});
}

// linear's x @ w.t(): W's rows load contiguously (pieces of up to 1024 bf16 or 512 FP32
// k's) and the PE transposes them, W is read once for all M tiles, and the values hold
// across pieces, partial K chunks (1100 = 8 x 128 + 76) and a partial last 128-row block of W.
TEST(MatmulViews, TransposedWeightLoadsRowsAndTransposesOnThePe) {
  const View x = contiguous(DType::bf16, {300, 1100});
  const View w_t = swapped(contiguous(DType::bf16, {600, 1100}), 0, 1);
  const View out = contiguous(DType::fp32, {300, 600});
  const isa::Program p = matmul("trn2", x, w_t, out);
  const test::HbmReads w = test::hbm_reads(p, "b");
  EXPECT_EQ(w.elems, 600u * 1100u);  // once, though 3 M tiles use it
  EXPECT_GE(w.shortest_run, 76u);    // no DMA of one element per descriptor
  check(x, w_t, out);
  // FP32: one K chunk per PSUM bank; N = 700 makes a second panel of 188 columns.
  check(contiguous(DType::fp32, {130, 300}), swapped(contiguous(DType::fp32, {700, 300}), 0, 1),
        contiguous(DType::bf16, {130, 700}));
  // Attention's q @ k.transpose(-2, -1) per head, M over several tiles.
  check(contiguous(DType::bf16, {2, 260, 64}), swapped(contiguous(DType::bf16, {2, 200, 64}), 1, 2),
        contiguous(DType::fp32, {2, 260, 200}));
}

// A weight shared by the batches stays resident: loaded once, not once per batch; a
// weight of its own per batch streams.
TEST(MatmulViews, SharedWeightStaysResidentAcrossBatches) {
  const View shared{DType::bf16, {3, 256, 300}, {0, 300, 1}};
  const isa::Program p = matmul("trn2", contiguous(DType::bf16, {3, 100, 256}), shared,
                                contiguous(DType::fp32, {3, 100, 300}));
  EXPECT_EQ(test::hbm_reads(p, "b").elems, 256u * 300u);
  const isa::Program q =
      matmul("trn2", contiguous(DType::bf16, {3, 100, 256}), contiguous(DType::bf16, {3, 256, 300}),
             contiguous(DType::fp32, {3, 100, 300}));
  EXPECT_EQ(test::hbm_reads(q, "b").elems, 3u * 256u * 300u);
}

// Views are declared flat and tiled 128 rows at a time: M is not bound by one access
// pattern's row count. Rows too wide for SBUF are stored in column blocks, so N
// (an LM head's vocabulary) is not bound either; K is, by A^T's rows in one partition.
TEST(MatmulViews, TakesMoreThan65535RowsOrColumnsAndNamesTheSbufLimit) {
  EXPECT_NO_THROW(matmul("trn2", contiguous(DType::fp32, {70000, 8}),
                         contiguous(DType::fp32, {8, 16}), contiguous(DType::fp32, {70000, 16})));
  EXPECT_NO_THROW(matmul("trn2", contiguous(DType::bf16, {4, 256}),
                         View{DType::bf16, {256, 151936}, {1, 256}},
                         contiguous(DType::bf16, {4, 151936})));
  test::expect_invalid(
      [&] {
        matmul("trn2", contiguous(DType::fp32, {2, 70000}), contiguous(DType::fp32, {70000, 3}),
               contiguous(DType::fp32, {2, 3}));
      },
      {"matmul", "K=70000", "bytes per SBUF partition"});
  // Values across the column blocks (an FP32 row of 30,000 and a bf16 one of 60,000 take
  // two blocks each on trn2), with nothing written outside the output.
  check(contiguous(DType::fp32, {3, 8}), contiguous(DType::fp32, {8, 30000}),
        contiguous(DType::fp32, {3, 30000}));
  check(contiguous(DType::bf16, {4, 64}), View{DType::bf16, {64, 60000}, {1, 64}},
        contiguous(DType::bf16, {4, 60000}));
}

TEST(MatmulViews, RefusesBadShapes) {
  const View a = contiguous(DType::bf16, {4, 5}), b = contiguous(DType::bf16, {5, 6});
  const View out = contiguous(DType::fp32, {4, 6});
  using test::expect_invalid;
  expect_invalid(
      [&] {
        matmul("trn2", a, contiguous(DType::bf16, {4, 6}), out);
      },
      {"matmul", "is not out"});
  expect_invalid(
      [&] {
        matmul("trn2", a, b, contiguous(DType::fp32, {1, 4, 6}));
      },
      {"matmul", "all be 2-D or all 3-D"});
  expect_invalid(
      [&] {
        matmul("trn2", a, contiguous(DType::fp32, {5, 6}), out);
      },
      {"matmul", "a is bfloat16 but b is float32"});
  expect_invalid(
      [&] {
        matmul("trn2", a, b, contiguous(DType::int32, {4, 6}));
      },
      {"matmul", "out must be a float dtype"});
  expect_invalid(
      [&] {
        matmul("trn2", a, b, View{DType::fp32, {4, 6}, {0, 1}});
      },
      {"matmul", "overlaps itself"});
  expect_invalid(
      [&] {
        matmul("trn2", contiguous(DType::bf16, {2, 4, 5}), contiguous(DType::bf16, {3, 5, 6}),
               contiguous(DType::fp32, {2, 4, 6}));
      },
      {"matmul", "batch 3"});
  expect_invalid(
      [&] {
        matmul("trn2", View{DType::bf16, {4, 0}, {1, 1}}, b, out);
      },
      {"matmul", "a is empty"});
}

}  // namespace
}  // namespace neuronsim::kernels
