// cumsum and cumprod against a host running sum (product) in FP32 (the kernel's order, so
// exact): along the last dim and an outer one, transposed and broadcast inputs, strided
// outputs, a scanned dim of several chunks (the carry between chunks), low-precision outputs.
#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;
using test::contiguous;
using test::swapped;

void check(const View& in, int64_t dim, const View& out, bool product = false) {
  const isa::Program p = product ? cumprod("trn2", in, dim, out) : cumsum("trn2", in, dim, out);
  // Factors near 1 keep long products finite.
  const std::vector<float> x =
      product ? test::storage(in, 5, 0.9f, 1.1f) : test::storage(in, 5, -3.0f, 3.0f);
  const float sentinel = test::round_to(out.dtype, 77.0f);
  std::vector<float> init(static_cast<size_t>(out.extent_elems()), sentinel);
  std::vector<double> want(init.begin(), init.end());
  const auto d = static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(in.sizes.size()) : dim);
  test::for_each_index(in.sizes, [&](const std::vector<int64_t>& idx) {
    if (idx[d] != 0) return;
    std::vector<int64_t> at = idx;
    float s = product ? 1.0f : 0.0f;
    for (int64_t j = 0; j < in.sizes[d]; ++j) {
      at[d] = j;
      const float v = x[static_cast<size_t>(test::offset_of(in, at))];
      s = product ? s * v : s + v;
      want[static_cast<size_t>(test::offset_of(out, at))] = test::round_to(out.dtype, s);
    }
  });
  const std::vector<float> got = test::run(p, {{"in", x}, {"out", init}}).at("out");
  test::expect_close(got, want, want.size(), [](size_t) { return 0.0; });
}

TEST(Cumsum, LastAndOuterDims) {
  check(contiguous(DType::fp32, {5, 37}), 1, contiguous(DType::fp32, {5, 37}));
  check(contiguous(DType::fp32, {5, 37}), -2, contiguous(DType::fp32, {5, 37}));
  check(contiguous(DType::fp32, {300, 3, 4}), 1, contiguous(DType::fp32, {300, 3, 4}));
}

TEST(Cumsum, StridedBroadcastAndCast) {
  check(swapped(contiguous(DType::bf16, {40, 9}), 0, 1), 1, contiguous(DType::fp32, {9, 40}));
  check(View{DType::fp32, {6, 50}, {0, 1}}, 1, View{DType::bf16, {6, 50}, {1, 6}});
}

TEST(Cumsum, ManyChunksCarryTheirSums) {
  check(contiguous(DType::fp32, {3, 10000}), 1, contiguous(DType::fp32, {3, 10000}));
  check(contiguous(DType::fp32, {9000}), 0, contiguous(DType::fp32, {9000}));
}

TEST(Cumsum, IntegersAreExactBelow2To24) {
  check(contiguous(DType::int32, {4, 1000}), 1, contiguous(DType::int32, {4, 1000}));
}

TEST(Cumprod, StartsFromOneAndCarriesItsProductsAcrossChunks) {
  check(contiguous(DType::fp32, {5, 37}), 1, contiguous(DType::fp32, {5, 37}), true);
  check(swapped(contiguous(DType::bf16, {40, 9}), 0, 1), 1, contiguous(DType::fp32, {9, 40}), true);
  check(contiguous(DType::fp32, {3, 9000}), 1, contiguous(DType::bf16, {3, 9000}), true);
}

TEST(Cumsum, RefusesBadViews) {
  const View f = contiguous(DType::fp32, {4, 5});
  test::expect_invalid([&] { cumsum("trn2", f, 2, f); }, {"cumsum", "dim 2 is out of range"});
  test::expect_invalid(
      [&] {
        cumsum("trn2", f, 0, contiguous(DType::fp32, {5, 4}));
      },
      {"cumsum", "out has sizes [5, 4]"});
  test::expect_invalid([&] { cumprod("trn2", f, -3, f); }, {"cumprod", "dim -3 is out of range"});
}

}  // namespace
}  // namespace neuronsim::kernels
