// reduce over one dim of strided views, against a double-precision reference on
// the dtype-rounded inputs. max/min/argmax/argmin pick an input value or index,
// so they are exact; sum and mean get the bound of an FP32 sum of D terms in any
// order, (D + 2) u32 sum |x| + 2 u_out |ref| (the chunked sums add in another
// order than the host).
#include <cmath>

#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;
using test::contiguous;
using test::swapped;

struct Range {
  float lo = -4.0f, hi = 4.0f;
  bool integers = false;  // rounded down to whole numbers: many ties
};

void check(ReduceOp op, const View& in, int64_t dim, const View& out, Range range = {}) {
  const isa::Program p = reduce("trn2", op, in, dim, out);
  std::vector<float> x = test::storage(in, 5, range.lo, range.hi);
  if (range.integers)
    for (float& v : x) v = std::floor(v);
  const size_t d = static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(in.sizes.size()) : dim);
  const float sentinel = test::round_to(out.dtype, 77.0f);
  std::vector<float> init(static_cast<size_t>(out.extent_elems()), sentinel);
  std::vector<double> want(init.begin(), init.end()), bound(init.size(), 0.0);
  std::vector<int64_t> kept = in.sizes;
  kept[d] = 1;
  test::for_each_index(kept, [&](std::vector<int64_t> idx) {
    double sum = 0, abs_sum = 0, best = 0;
    int64_t at = 0;
    for (int64_t j = 0; j < in.sizes[d]; ++j) {
      idx[d] = j;
      const double v = x[static_cast<size_t>(test::offset_of(in, idx))];
      sum += v;
      abs_sum += std::fabs(v);
      const bool better = op == ReduceOp::max || op == ReduceOp::argmax ? v > best : v < best;
      if (j == 0 || better) best = v, at = j;
    }
    idx[d] = 0;
    if (out.sizes.size() < in.sizes.size()) idx.erase(idx.begin() + static_cast<std::ptrdiff_t>(d));
    const auto o = static_cast<size_t>(test::offset_of(out, idx));
    const auto D = static_cast<double>(in.sizes[d]);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean: {
        const double scale = op == ReduceOp::mean ? 1.0 / D : 1.0;
        want[o] = sum * scale;
        bound[o] = ((D + 2) * test::kU32 * abs_sum * scale) +
                   2 * test::rounding(out.dtype) * std::fabs(want[o]);
        break;
      }
      case ReduceOp::max:
      case ReduceOp::min:
        want[o] = test::round_to(out.dtype, static_cast<float>(best));
        break;
      case ReduceOp::argmax:
      case ReduceOp::argmin:
        want[o] = static_cast<double>(at);
        break;
    }
  });
  const std::vector<float> got = test::run(p, {{"in", x}, {"out", init}}).at("out");
  test::expect_close(got, want, want.size(), [&](size_t i) { return bound[i]; });
}

// Small integers: many ties, so argmax/argmin must return the first one.
constexpr Range kTies{0.0f, 5.0f, true};

TEST(Reduce, LastDimContiguous) {
  const View x = contiguous(DType::fp32, {127, 129});
  check(ReduceOp::sum, x, 1, contiguous(DType::fp32, {127}));
  check(ReduceOp::mean, x, -1, contiguous(DType::fp32, {127, 1}));  // keepdim
  check(ReduceOp::max, x, 1, contiguous(DType::fp32, {127}));
  check(ReduceOp::min, x, 1, contiguous(DType::fp32, {127}));
  check(ReduceOp::sum, contiguous(DType::fp32, {1000}), 0, View{DType::fp32, {}, {}});
  check(ReduceOp::sum, contiguous(DType::fp32, {1}), 0, View{DType::fp32, {}, {}});
}

TEST(Reduce, OuterAndMiddleDims) {
  const View x = contiguous(DType::fp32, {129, 1000});
  check(ReduceOp::sum, x, 0, contiguous(DType::fp32, {1000}));  // the reduced dim strided by 1000
  check(ReduceOp::max, x, 0, contiguous(DType::fp32, {1, 1000}));
  const View x3 = contiguous(DType::fp32, {8, 129, 33});
  check(ReduceOp::mean, x3, 1, contiguous(DType::fp32, {8, 33}));
  check(ReduceOp::min, x3, 1, contiguous(DType::fp32, {8, 1, 33}));
  check(ReduceOp::sum, x3, 0, contiguous(DType::fp32, {129, 33}));
}

TEST(Reduce, TransposedAndSlicedViews) {
  const View t = swapped(contiguous(DType::fp32, {129, 127}), 0, 1);  // [127, 129]
  check(ReduceOp::sum, t, 1, contiguous(DType::fp32, {127}));
  check(ReduceOp::max, t, 0, contiguous(DType::fp32, {129}));
  const View slice{DType::fp32, {200, 149}, {300, 2}};            // x[:, 3::2] of [200, 300]
  check(ReduceOp::sum, slice, 1, View{DType::fp32, {200}, {3}});  // a strided out too
  check(ReduceOp::min, slice, 0, contiguous(DType::fp32, {149}));
}

TEST(Reduce, LongDimInChunks) {
  const View x = contiguous(DType::fp32, {3, 20000});  // 8192 + 8192 + 3616
  check(ReduceOp::sum, x, 1, contiguous(DType::fp32, {3}));
  check(ReduceOp::mean, x, 1, contiguous(DType::fp32, {3}));
  check(ReduceOp::max, x, 1, contiguous(DType::fp32, {3}));
  check(ReduceOp::sum, swapped(contiguous(DType::fp32, {20000, 3}), 0, 1), 1,
        contiguous(DType::bf16, {3}));
}

TEST(Reduce, Dtypes) {
  const View b = contiguous(DType::bf16, {300, 777});
  check(ReduceOp::sum, b, 1, contiguous(DType::bf16, {300}));
  check(ReduceOp::sum, b, 1, contiguous(DType::fp32, {300}));
  check(ReduceOp::min, contiguous(DType::fp16, {129, 65}), 0, contiguous(DType::fp16, {65}));
  check(ReduceOp::max, contiguous(DType::int32, {129, 1000}), 1, contiguous(DType::int32, {129}),
        {-1e6f, 1e6f});
  check(ReduceOp::sum, contiguous(DType::int32, {129, 1000}), 1, contiguous(DType::int32, {129}),
        {-1000.0f, 1000.0f});
}

TEST(Reduce, ArgmaxArgminFirstOccurrence) {
  const View x = contiguous(DType::fp32, {300, 129});
  for (ReduceOp op : {ReduceOp::argmax, ReduceOp::argmin}) {
    check(op, x, 1, contiguous(DType::int32, {300}), kTies);
    check(op, x, 0, contiguous(DType::int32, {1, 129}), kTies);
    check(op, contiguous(DType::bf16, {4, 8000}), -1, contiguous(DType::int32, {4}));
    check(op, swapped(contiguous(DType::fp32, {33, 129, 8}), 0, 2), 1,
          contiguous(DType::int32, {8, 33}), kTies);
  }
}

// Rows longer than a tile (greedy decoding's argmax over a 151,936-token vocabulary):
// each chunk's best and first index, then the first index of the row's best. Ties across
// chunks (small integers) must give the first chunk's index.
TEST(Reduce, ArgmaxArgminOverRowsLongerThanATile) {
  for (ReduceOp op : {ReduceOp::argmax, ReduceOp::argmin}) {
    check(op, contiguous(DType::fp32, {3, 20000}), 1, contiguous(DType::int32, {3}));
    check(op, contiguous(DType::fp32, {130, 17000}), 1, contiguous(DType::int32, {130}), kTies);
    check(op, contiguous(DType::bf16, {2, 151936}), 1, contiguous(DType::int32, {2}));
  }
}

TEST(Reduce, RefusesBadArguments) {
  const View x = contiguous(DType::fp32, {4, 5});
  using test::expect_invalid;
  expect_invalid([&] { reduce("trn2", ReduceOp::sum, x, 2, contiguous(DType::fp32, {4})); },
                 {"reduce", "dim 2 is out of range"});
  expect_invalid([&] { reduce("trn2", ReduceOp::sum, x, 1, contiguous(DType::fp32, {5})); },
                 {"reduce", "out has sizes [5]"});
  expect_invalid([&] { reduce("trn2", ReduceOp::argmax, x, 1, contiguous(DType::fp32, {4})); },
                 {"reduce", "int32 indices"});
  expect_invalid(
      [&] {
        reduce("trn2", ReduceOp::mean, contiguous(DType::int32, {4, 5}), 1,
               contiguous(DType::int32, {4}));
      },
      {"reduce", "out of mean must be a float dtype"});
  expect_invalid(
      [&] {
        reduce("trn2", ReduceOp::max, x, 0, View{DType::fp32, {5}, {0}});
      },
      {"reduce", "overlaps itself"});
}

}  // namespace
}  // namespace neuronsim::kernels
