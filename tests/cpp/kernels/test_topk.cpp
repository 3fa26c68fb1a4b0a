// topk over one dim of strided views, against a stable sort of the dtype-rounded inputs
// on the host: values are the inputs themselves and positions are exact, so both must
// match exactly, ties in position order (what makes k = n a stable sort).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;
using test::contiguous;
using test::swapped;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The kernel's order: torch's (NaN above every number: first when largest, last when
// smallest), except that its FP32 keys stay above -inf, so -inf ties with -FLT_MAX when
// largest, and +inf, FLT_MAX and NaN tie when smallest; ties keep their positions' order.
float key(float x, bool largest) {
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  if (std::isnan(x)) return largest ? kNan : kLowest;
  return std::max(largest ? x : -x, kLowest);
}
bool before(float a, float b, bool largest) {
  const float ka = key(a, largest), kb = key(b, largest);
  if (std::isnan(ka) || std::isnan(kb)) return !std::isnan(kb);
  return ka > kb;
}

// The top k of `x` (in's storage) along `dim`, checked against a stable sort. `edit` may
// change the inputs before the run (ties, NaN, infinities).
void check(const View& in, int64_t dim, int64_t k, bool largest, const View& values,
           const View& indices, const std::function<void(std::vector<float>&)>& edit = {}) {
  const isa::Program p = topk("trn2", in, dim, k, largest, values, indices);
  std::vector<float> x = test::storage(in, 7, -4.0f, 4.0f);
  if (edit) edit(x);
  for (float& v : x) v = test::round_to(in.dtype, v);
  const size_t d = static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(in.sizes.size()) : dim);
  const float sentinel = 77.0f;
  std::vector<float> vinit(static_cast<size_t>(values.extent_elems()), sentinel);
  std::vector<float> iinit(static_cast<size_t>(indices.extent_elems()), sentinel);
  std::vector<double> want_v(vinit.begin(), vinit.end()), want_i(iinit.begin(), iinit.end());
  std::vector<int64_t> kept = in.sizes;
  kept[d] = 1;
  test::for_each_index(kept, [&](std::vector<int64_t> idx) {
    std::vector<float> row;
    for (int64_t j = 0; j < in.sizes[d]; ++j) {
      idx[d] = j;
      row.push_back(x[static_cast<size_t>(test::offset_of(in, idx))]);
    }
    std::vector<int64_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return before(row[a], row[b], largest); });
    for (int64_t j = 0; j < k; ++j) {
      idx[d] = j;
      want_v[static_cast<size_t>(test::offset_of(values, idx))] = row[order[j]];
      want_i[static_cast<size_t>(test::offset_of(indices, idx))] = static_cast<double>(order[j]);
    }
  });
  const auto got = test::run(p, {{"in", x}, {"values", vinit}, {"indices", iinit}});
  const std::vector<float>& gv = got.at("values");
  const std::vector<float>& gi = got.at("indices");
  for (size_t i = 0; i < want_v.size(); ++i) {
    if (std::isnan(want_v[i]))
      EXPECT_TRUE(std::isnan(gv[i])) << "values[" << i << "]";
    else
      EXPECT_EQ(gv[i], want_v[i]) << "values[" << i << "]";
    EXPECT_EQ(gi[i], want_i[i]) << "indices[" << i << "]";
  }
}

View int32(std::vector<int64_t> sizes) {
  return contiguous(DType::int32, std::move(sizes));
}

// Small integers: many ties, which must come out in position order.
void to_integers(std::vector<float>& x) {
  for (float& v : x) v = std::floor(v);
}

TEST(Topk, LastDimLargestAndSmallest) {
  const View x = contiguous(DType::fp32, {300, 128});  // a router's probabilities: top 8 of 128
  for (bool largest : {true, false}) {
    check(x, 1, 8, largest, contiguous(DType::fp32, {300, 8}), int32({300, 8}));
    check(x, -1, 5, largest, contiguous(DType::fp32, {300, 5}), int32({300, 5}), to_integers);
  }
}

TEST(Topk, StableSortOfWholeRowsWithTies) {
  const View x = contiguous(DType::bf16, {3, 1000});
  for (bool largest : {true, false})
    check(x, 1, 1000, largest, contiguous(DType::bf16, {3, 1000}), int32({3, 1000}), to_integers);
  // Fewer than 8 elements, a 1-D tensor.
  check(contiguous(DType::fp32, {5}), 0, 5, false, contiguous(DType::fp32, {5}), int32({5}),
        to_integers);
}

TEST(Topk, OuterDimsAndStridedViews) {
  const View t = swapped(contiguous(DType::fp32, {40, 129}), 0, 1);  // [129, 40], rows strided
  check(t, 1, 12, true, contiguous(DType::fp32, {129, 12}), int32({129, 12}));
  check(contiguous(DType::fp16, {6, 50, 7}), 1, 3, false, contiguous(DType::fp16, {6, 3, 7}),
        int32({6, 3, 7}), to_integers);
}

TEST(Topk, NanFirstWhenLargestLastWhenSmallest) {
  const auto specials = [](std::vector<float>& x) {
    for (size_t i = 0; i < x.size(); i += 7) x[i] = kNan;
    for (size_t i = 3; i < x.size(); i += 11) x[i] = -kInf;
    for (size_t i = 5; i < x.size(); i += 13) x[i] = kInf;
  };
  const View x = contiguous(DType::fp32, {4, 100});
  EXPECT_TRUE(before(kNan, kInf, true) && before(kInf, 3.0f, true) && before(3.0f, -kInf, true));
  EXPECT_TRUE(before(-kInf, 3.0f, false) && before(3.0f, kNan, false));
  for (bool largest : {true, false})
    check(x, 1, 100, largest, contiguous(DType::fp32, {4, 100}), int32({4, 100}), specials);
}

// A vocabulary longer than the 16,384 elements one round reads: chunks and candidates.
TEST(Topk, RowsLongerThanAChunk) {
  const View x = contiguous(DType::bf16, {2, 40000});  // 16384 + 16384 + 7232
  check(x, 1, 50, true, contiguous(DType::bf16, {2, 50}), int32({2, 50}));
  check(x, 1, 20, false, contiguous(DType::bf16, {2, 20}), int32({2, 20}), to_integers);
}

TEST(Topk, RefusesWhatItCannotDo) {
  test::expect_invalid(
      [] {
        (void)topk("trn2", contiguous(DType::fp32, {4, 10}), 1, 11, true,
                   contiguous(DType::fp32, {4, 11}), int32({4, 11}));
      },
      {"topk", "k = 11 is not in 1..10"});
  test::expect_invalid(
      [] {
        (void)topk("trn2", contiguous(DType::int32, {4, 10}), 1, 2, true,
                   contiguous(DType::int32, {4, 2}), int32({4, 2}));
      },
      {"topk", "32-bit integers"});
  test::expect_invalid(
      [] {
        (void)topk("trn2", contiguous(DType::fp32, {1, 100000}), 1, 4000, true,
                   contiguous(DType::fp32, {1, 4000}), int32({1, 4000}));
      },
      {"topk", "7 chunks of 4000 candidates"});
}

}  // namespace
}  // namespace neuronsim::kernels
