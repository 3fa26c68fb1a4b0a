// grouped_matmul: each group's rows times its own B, with the groups' ends read on the
// device, against a double-precision reference of the same bf16/fp32 inputs: groups of
// every size (empty, partial blocks, several blocks), ends short of the rows (zero rows),
// no rows at all, B as a plain [G, K, N] and as the transpose of [G, N, K] (experts'
// weights as linear layers hold them), and the refusals.
#include <cmath>

#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;
using test::contiguous;
using test::swapped;

struct Case {
  int64_t S, K, N;
  std::vector<int32_t> ends;  // the groups' cumulative row ends (offs)
  bool transposed_b = false;  // b = W^T of a contiguous [G, N, K]
  DType dtype = DType::bf16;
};

void check(const Case& c) {
  const int64_t G = static_cast<int64_t>(c.ends.size());
  const View a = contiguous(c.dtype, {c.S, c.K});
  const View b = c.transposed_b ? swapped(contiguous(c.dtype, {G, c.N, c.K}), 1, 2)
                                : contiguous(c.dtype, {G, c.K, c.N});
  const View offs = contiguous(DType::int32, {G});
  const View out = contiguous(DType::fp32, {c.S, c.N});
  const isa::Program p = grouped_matmul("trn2", a, b, offs, out);
  const std::vector<float> x = test::storage(a, 3, -1.0f, 1.0f);
  const std::vector<float> w = test::storage(b, 5, -1.0f, 1.0f);
  const std::vector<float> ends(c.ends.begin(), c.ends.end());
  const std::vector<float> poison(static_cast<size_t>(c.S * c.N), 123.0f);
  const auto got = test::run(p, {{"a", x}, {"b", w}, {"offs", ends}, {"out", poison}});
  std::vector<double> want(static_cast<size_t>(c.S * c.N), 0.0);
  int64_t start = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t end = c.ends[static_cast<size_t>(g)];
    for (int64_t r = start; r < end; ++r)
      for (int64_t n = 0; n < c.N; ++n) {
        double sum = 0.0;
        for (int64_t k = 0; k < c.K; ++k)
          sum += double{x[static_cast<size_t>(r * c.K + k)]} *
                 w[static_cast<size_t>(test::offset_of(b, {g, k, n}))];
        want[static_cast<size_t>(r * c.N + n)] = sum;
      }
    start = std::max(start, end);
  }
  const double tol = 2e-3 * std::sqrt(static_cast<double>(c.K));
  test::expect_close(got.at("out"), want, static_cast<size_t>(c.N), [&](size_t) { return tol; });
}

TEST(GroupedMatmul, GroupsOfEverySizeIncludingEmpty) {
  // 5 groups: 0, 3, 130 (two blocks), 0 and 127 rows.
  check({260, 96, 80, {0, 3, 133, 133, 260}});
}

TEST(GroupedMatmul, ExpertsHeldAsLinearLayers) {
  check({200, 160, 144, {40, 40, 190, 200}, /*transposed_b=*/true});
}

TEST(GroupedMatmul, RowsPastTheLastEndAreZero) {
  check({150, 64, 48, {20, 100}, true});
}

TEST(GroupedMatmul, NoRowsAtAllGivesZeros) {
  check({40, 32, 16, {0, 0, 0}});
}

TEST(GroupedMatmul, OneGroupOfManyBlocksInFp32) {
  check({300, 130, 520, {300}, false, DType::fp32});
}

TEST(GroupedMatmul, ManyGroupsFewRows) {
  // More groups than rows: at most S groups have rows (the block bound's m = min(G, S)).
  std::vector<int32_t> ends(64);
  for (size_t g = 0; g < ends.size(); ++g) ends[g] = static_cast<int32_t>(std::min<size_t>(g, 9));
  check({9, 64, 64, ends, true});
}

TEST(GroupedMatmul, RefusesWhatItCannotIndex) {
  const View a = contiguous(DType::bf16, {8, 16});
  const View out = contiguous(DType::bf16, {8, 32});
  const View offs = contiguous(DType::int32, {2});
  // Groups that do not follow one another at the row stride.
  const View b{DType::bf16, {2, 16, 32}, {600, 32, 1}};
  test::expect_invalid([&] { grouped_matmul("trn2", a, b, offs, out); },
                       {"grouped_matmul", "one after another"});
  test::expect_invalid(
      [&] {
        grouped_matmul("trn2", a, contiguous(DType::bf16, {2, 16, 32}),
                       contiguous(DType::fp32, {2}), out);
      },
      {"grouped_matmul", "offs must be int32"});
}

}  // namespace
}  // namespace neuronsim::kernels
