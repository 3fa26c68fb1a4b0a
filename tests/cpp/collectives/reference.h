// Inputs and reference outputs for every operation, dtype, reduction, count and root: shared by
// the in-process tests and the tests across threads and processes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/cc/algorithms.h"

namespace neuronsim::cc::testing {

using isa::DType;

inline const DType kDTypes[] = {DType::fp32,     DType::bf16,     DType::fp16,
                                DType::fp8_e4m3, DType::fp8_e5m2, DType::int32,
                                DType::int16,    DType::int8,     DType::uint8};
inline const ReduceOp kReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min,
                                      ReduceOp::avg};

inline uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// The value rank r contributes to element e. Every partial result of any reduction order is
// exactly representable in every dtype tested (at most two ranks hold a value other than the
// identity, from a set of small powers of two and integers), so the reference does not depend
// on the order the algorithm reduces in.
inline float contribution(ReduceOp op, DType t, int R, int r, uint64_t e) {
  const bool uns = t == DType::uint8;
  const bool integer = !isa::is_float(t);
  const float fset[] = {1, 2, 0.5f, -1, -2, -0.5f};
  const float iset[] = {1, 2, 3, -1, -2, -3};
  const float* set = integer ? iset : fset;
  const uint32_t h = mix(static_cast<uint32_t>(e * 131 + static_cast<uint64_t>(r) * 7 + 1));
  float v = set[h % (uns ? 3 : 6)];
  if (op == ReduceOp::max || op == ReduceOp::min) return v;  // order-free: any values
  const int a1 = static_cast<int>(e % static_cast<uint64_t>(R));
  const int a2 = static_cast<int>((e * 7 + 3) % static_cast<uint64_t>(R));
  const bool active = r == a1 || r == a2;
  if (op == ReduceOp::prod) {
    if (!active) return 1;
    return integer ? v : (v == 0.5f || v == -0.5f ? v * 4 : v);  // powers of two only
  }
  return active ? v : 0;
}

inline std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * isa::dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i)
    isa::store_from_float(t, v[i], out.data() + i * isa::dtype_size(t));
  return out;
}

inline std::vector<uint8_t> noise(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(mix(static_cast<uint32_t>(i) * 2654435761U + seed));
  return v;
}

// Reduction over all ranks of element e, rounded to the dtype once.
inline float reference_reduce(ReduceOp op, DType t, int R, uint64_t e) {
  double acc = contribution(op, t, R, 0, e);
  for (int r = 1; r < R; ++r) {
    double v = contribution(op, t, R, r, e);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
    }
  }
  if (op == ReduceOp::avg) return static_cast<float>(acc) / static_cast<float>(R);
  return static_cast<float>(acc);
}

// One collective with each rank's input and the output each rank must end with.
struct ReferenceCase {
  CollectiveSpec spec;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<std::vector<uint8_t>> expected;
  std::string name;
};

inline bool is_reducing(Op op) {
  return op == Op::all_reduce || op == Op::reduce_scatter || op == Op::reduce;
}

inline std::vector<uint8_t> reference_output(const CollectiveSpec& spec, int R, int r,
                                             const std::vector<std::vector<uint8_t>>& in) {
  const auto op = spec.op;
  const auto t = spec.dtype;
  const auto ro = spec.reduce;
  const auto count = spec.count;
  const auto root = spec.root;
  const size_t es = isa::dtype_size(t);
  const uint64_t B = count * es;
  std::vector<uint8_t> want;
  switch (op) {
    case Op::all_reduce:
    case Op::reduce: {
      if (op == Op::reduce && r != root) break;
      std::vector<float> v(count);
      for (uint64_t e = 0; e < count; ++e) v[e] = reference_reduce(ro, t, R, e);
      want = encode(t, v);
      break;
    }
    case Op::reduce_scatter: {
      std::vector<float> v(count);
      for (uint64_t e = 0; e < count; ++e)
        v[e] = reference_reduce(ro, t, R, static_cast<uint64_t>(r) * count + e);
      want = encode(t, v);
      break;
    }
    case Op::all_gather:
      for (int j = 0; j < R; ++j)
        want.insert(want.end(), in[static_cast<size_t>(j)].begin(),
                    in[static_cast<size_t>(j)].end());
      break;
    case Op::all_to_all:
      for (int j = 0; j < R; ++j) {
        auto first = in[static_cast<size_t>(j)].begin() +
                     static_cast<std::ptrdiff_t>(B * static_cast<uint64_t>(r));
        want.insert(want.end(), first, first + static_cast<std::ptrdiff_t>(B));
      }
      break;
    case Op::all_to_all_v:
      for (int s = 0; s < R; ++s) {
        uint64_t off = 0;
        for (int d = 0; d < r; ++d) off += spec.counts[static_cast<size_t>(s * R + d)];
        auto first = in[static_cast<size_t>(s)].begin() + static_cast<std::ptrdiff_t>(off * es);
        want.insert(
            want.end(), first,
            first + static_cast<std::ptrdiff_t>(spec.counts[static_cast<size_t>(s * R + r)] * es));
      }
      break;
    case Op::broadcast:
      want = in[static_cast<size_t>(root)];
      break;
    case Op::permute:
      if (r > 0) want = in[static_cast<size_t>(r - 1)];
      break;
    case Op::barrier:
      break;
  }
  return want;
}

// Every dtype x count (uneven chunks; fewer elements than ranks) x root x reduction of `op`.
inline std::vector<ReferenceCase> reference_cases(Op op, int R) {
  std::vector<ReferenceCase> cases;
  for (DType t : kDTypes)
    for (uint64_t count : {uint64_t{37}, uint64_t{3}})
      for (int root : {0, R - 1}) {
        if (root != 0 && op != Op::broadcast && op != Op::reduce) continue;
        for (ReduceOp ro : kReduceOps) {
          if (!is_reducing(op) && ro != ReduceOp::sum) continue;
          ReferenceCase c;
          c.spec = CollectiveSpec{op, ro, t, count, root, {}, {}};
          CollectiveSpec& spec = c.spec;
          if (op == Op::permute) {  // a shift by 1, except the last rank sends nowhere
            spec.peers.resize(static_cast<size_t>(R));
            for (int r = 0; r < R; ++r) spec.peers[static_cast<size_t>(r)] = r + 1 < R ? r + 1 : -1;
          }
          if (op == Op::all_to_all_v)  // uneven, some empty, depending on count
            for (int s = 0; s < R; ++s)
              for (int d = 0; d < R; ++d)
                spec.counts.push_back((static_cast<uint64_t>(s * 3 + d * 5) + count) % 5);
          for (int r = 0; r < R; ++r) {
            if (is_reducing(op)) {
              uint64_t n = op == Op::reduce_scatter ? count * static_cast<uint64_t>(R) : count;
              std::vector<float> v(n);
              for (uint64_t e = 0; e < n; ++e) v[e] = contribution(ro, t, R, r, e);
              c.inputs.push_back(encode(t, v));
            } else {
              c.inputs.push_back(noise(spec.input_bytes(R, r), static_cast<uint32_t>(r * 977 + 5)));
            }
          }
          for (int r = 0; r < R; ++r) c.expected.push_back(reference_output(spec, R, r, c.inputs));
          c.name = std::string(isa::dtype_name(t)) + " " + std::string(reduce_op_name(ro)) +
                   " count " + std::to_string(count) + " root " + std::to_string(root);
          cases.push_back(std::move(c));
        }
      }
  return cases;
}

}  // namespace neuronsim::cc::testing
