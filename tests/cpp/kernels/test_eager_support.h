// Helpers of the eager kernel tests: strided views over host storages (the
// bytes the backend would bind, from the view's first element to its last) and
// the walk of their indices for host references.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "neuronsim/kernels/eager.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels::test {

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = step;
    step *= sizes[d];
  }
  return strides;
}

inline View contiguous(DType dtype, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides = contiguous_strides(sizes);
  return {dtype, std::move(sizes), std::move(strides)};
}

// The view with dims a and b swapped (x.transpose(a, b)).
inline View swapped(View v, size_t a, size_t b) {
  std::swap(v.sizes[a], v.sizes[b]);
  std::swap(v.strides[a], v.strides[b]);
  return v;
}

// Calls f(index) for every index of `sizes`, the last dim fastest.
template <class F>
void for_each_index(const std::vector<int64_t>& sizes, F&& f) {
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t s : sizes)
    if (s == 0) return;
  for (;;) {
    f(idx);
    size_t d = sizes.size();
    while (d > 0 && ++idx[d - 1] == sizes[d - 1]) idx[--d] = 0;
    if (d == 0) return;
  }
}

// Element offset of `idx` (of the output's rank) in v, broadcast numpy-style:
// dims aligned on the right, size-1 dims repeated.
inline int64_t offset_of(const View& v, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t skip = idx.size() - v.sizes.size();
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] != 1) off += idx[skip + d] * v.strides[d];
  return off;
}

// Values for a view's storage, uniform in [lo, hi) and rounded to its dtype.
inline std::vector<float> storage(const View& v, uint32_t seed, float lo, float hi) {
  return random_values(static_cast<size_t>(v.extent_elems()), seed, lo, hi, v.dtype);
}

// Expects `fn()` to throw std::invalid_argument whose message contains each of `parts`.
template <class Fn>
void expect_invalid(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one mentioning " << parts.front();
  } catch (const std::invalid_argument& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace neuronsim::kernels::test
