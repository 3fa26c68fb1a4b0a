// Every operation x dtype x algorithm x rank count against a reference computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "neuronsim/cc/runner.h"
#include "neuronsim/sim/config.h"

using namespace neuronsim;
using namespace neuronsim::cc;
using isa::DType;

namespace {

const DType kDTypes[] = {DType::fp32, DType::bf16, DType::fp16, DType::fp8_e4m3, DType::fp8_e5m2,
                         DType::int32, DType::int16, DType::int8, DType::uint8};
const ReduceOp kReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg};

uint32_t mix(uint32_t x) {
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
float contribution(ReduceOp op, DType t, int R, int r, uint64_t e) {
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

std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * isa::dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) isa::store_from_float(t, v[i], out.data() + i * isa::dtype_size(t));
  return out;
}

std::vector<uint8_t> noise(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(mix(static_cast<uint32_t>(i) * 2654435761U + seed));
  return v;
}

// Reduction over all ranks of element e, rounded to the dtype once.
float reference_reduce(ReduceOp op, DType t, int R, uint64_t e) {
  double acc = contribution(op, t, R, 0, e);
  for (int r = 1; r < R; ++r) {
    double v = contribution(op, t, R, r, e);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::min: acc = std::min(acc, v); break;
    }
  }
  if (op == ReduceOp::avg) return static_cast<float>(acc) / static_cast<float>(R);
  return static_cast<float>(acc);
}

const sim::InstanceConfig& trn1() {
  static const sim::InstanceConfig inst = sim::load_instance("trn1.32xlarge");
  return inst;
}

using Param = std::tuple<Op, Algorithm, int>;

}  // namespace
namespace neuronsim::cc {
void PrintTo(Op op, std::ostream* os) { *os << op_name(op); }
void PrintTo(Algorithm a, std::ostream* os) { *os << algorithm_name(a); }
}  // namespace neuronsim::cc
namespace {

class CollectiveTest : public ::testing::TestWithParam<Param> {};

std::string describe(DType t, ReduceOp o, uint64_t count, int root) {
  return std::string(isa::dtype_name(t)) + " " + std::string(reduce_op_name(o)) + " count " + std::to_string(count) +
         " root " + std::to_string(root);
}

TEST_P(CollectiveTest, MatchesReference) {
  const auto [op, alg, R] = GetParam();
  const bool reducing = op == Op::all_reduce || op == Op::reduce_scatter || op == Op::reduce;
  int checked = 0;
  for (DType t : kDTypes) {
    const size_t es = isa::dtype_size(t);
    for (uint64_t count : {uint64_t{37}, uint64_t{3}}) {  // uneven chunks; fewer elements than ranks
      for (int root : {0, R - 1}) {
        if (root != 0 && op != Op::broadcast && op != Op::reduce) continue;
        for (ReduceOp ro : kReduceOps) {
          if (!reducing && ro != ReduceOp::sum) continue;
          SCOPED_TRACE(describe(t, ro, count, root));
          CollectiveSpec spec{op, ro, t, count, root, {}, {}};
          if (op == Op::permute) {  // a shift by 1, except the last rank sends nowhere
            spec.peers.resize(static_cast<size_t>(R));
            for (int r = 0; r < R; ++r) spec.peers[static_cast<size_t>(r)] = r + 1 < R ? r + 1 : -1;
          }
          if (op == Op::all_to_all_v) {  // uneven, some empty, depending on count
            for (int s = 0; s < R; ++s)
              for (int d = 0; d < R; ++d)
                spec.counts.push_back((static_cast<uint64_t>(s * 3 + d * 5) + count) % 5);
          }
          std::vector<std::vector<uint8_t>> in(static_cast<size_t>(R));
          for (int r = 0; r < R; ++r) {
            if (reducing) {
              uint64_t n = op == Op::reduce_scatter ? count * static_cast<uint64_t>(R) : count;
              std::vector<float> v(n);
              for (uint64_t e = 0; e < n; ++e) v[e] = contribution(ro, t, R, r, e);
              in[static_cast<size_t>(r)] = encode(t, v);
            } else {
              in[static_cast<size_t>(r)] = noise(spec.input_bytes(R, r), static_cast<uint32_t>(r * 977 + 5));
            }
          }
          RunOptions opt;
          opt.algorithm = alg;
          auto res = run_collective(trn1(), R, spec, in, opt);
          ASSERT_EQ(res.outputs.size(), static_cast<size_t>(R));
          ASSERT_EQ(res.rank_done_ps.size(), static_cast<size_t>(R));
          EXPECT_GT(res.duration_ps, 0u);
          const uint64_t B = count * es;
          for (int r = 0; r < R; ++r) {
            std::vector<uint8_t> want;
            const auto& mine = in[static_cast<size_t>(r)];
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
                  want.insert(want.end(), in[static_cast<size_t>(j)].begin(), in[static_cast<size_t>(j)].end());
                break;
              case Op::all_to_all:
                for (int j = 0; j < R; ++j) {
                  auto first = in[static_cast<size_t>(j)].begin() + static_cast<std::ptrdiff_t>(B * static_cast<uint64_t>(r));
                  want.insert(want.end(), first, first + static_cast<std::ptrdiff_t>(B));
                }
                break;
              case Op::all_to_all_v:
                for (int s = 0; s < R; ++s) {
                  uint64_t off = 0;
                  for (int d = 0; d < r; ++d) off += spec.counts[static_cast<size_t>(s * R + d)];
                  auto first = in[static_cast<size_t>(s)].begin() + static_cast<std::ptrdiff_t>(off * es);
                  want.insert(want.end(), first, first + static_cast<std::ptrdiff_t>(spec.counts[static_cast<size_t>(s * R + r)] * es));
                }
                break;
              case Op::broadcast: want = in[static_cast<size_t>(root)]; break;
              case Op::permute:
                if (r > 0) want = in[static_cast<size_t>(r - 1)];
                break;
              case Op::barrier: break;
            }
            (void)mine;
            ASSERT_EQ(res.outputs[static_cast<size_t>(r)], want) << "rank " << r;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (Op op : {Op::all_reduce, Op::all_gather, Op::reduce_scatter, Op::all_to_all, Op::broadcast, Op::reduce,
                Op::permute, Op::barrier, Op::all_to_all_v})
    for (Algorithm a : {Algorithm::ring, Algorithm::mesh, Algorithm::rdh, Algorithm::hier2d})
      for (int R : {2, 3, 4, 5, 8, 12, 16})
        if (algorithm_supported(op, a, R)) out.emplace_back(op, a, R);
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [op, a, R] = info.param;
  return std::string(op_name(op)) + "_" + std::string(algorithm_name(a)) + "_" + std::to_string(R);
}

INSTANTIATE_TEST_SUITE_P(All, CollectiveTest, ::testing::ValuesIn(all_params()), param_name);

TEST(Collectives, RdhNeedsPowerOfTwo) {
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, DType::fp32, 16, 0, {}, {}};
  std::vector<std::vector<uint8_t>> in(6, std::vector<uint8_t>(64));
  RunOptions opt;
  opt.algorithm = Algorithm::rdh;
  EXPECT_THROW(run_collective(trn1(), 6, spec, in, opt), std::invalid_argument);
  EXPECT_FALSE(algorithm_supported(Op::all_reduce, Algorithm::rdh, 6));
  EXPECT_TRUE(algorithm_supported(Op::all_reduce, Algorithm::rdh, 8));
  EXPECT_TRUE(algorithm_supported(Op::broadcast, Algorithm::rdh, 6));  // binomial tree: any count
  // Auto never picks rdh where it cannot run: medium size on 6 ranks falls back to ring.
  CollectiveSpec medium{Op::all_reduce, ReduceOp::sum, DType::fp32, 10'000'000 / 4, 0, {}, {}};
  EXPECT_EQ(choose_algorithm(medium, 6), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(medium, 8), Algorithm::rdh);
}

TEST(Collectives, WrongInputSizeThrows) {
  CollectiveSpec spec{Op::all_gather, ReduceOp::sum, DType::bf16, 8, 0, {}, {}};
  std::vector<std::vector<uint8_t>> in(4, std::vector<uint8_t>(16));
  in[2].resize(15);
  EXPECT_THROW(run_collective(trn1(), 4, spec, in), std::invalid_argument);
}

TEST(Collectives, AllReduceGivesEveryRankTheSameBits) {
  // Random FP32 data: rounding depends on the reduction order, yet every rank must end with
  // the same bits (each element is reduced once, then copied) for every algorithm.
  const int R = 8;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, DType::fp32, 1000, 0, {}, {}};
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < R; ++r) {
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(mix(static_cast<uint32_t>(i * 31 + static_cast<size_t>(r))) % 100000) / 997.0f - 50.0f;
    in.push_back(encode(DType::fp32, v));
  }
  for (Algorithm a : {Algorithm::ring, Algorithm::mesh, Algorithm::rdh, Algorithm::hier2d}) {
    RunOptions opt;
    opt.algorithm = a;
    auto res = run_collective(trn1(), R, spec, in, opt);
    for (int r = 1; r < R; ++r) EXPECT_EQ(res.outputs[static_cast<size_t>(r)], res.outputs[0]) << algorithm_name(a);
    // And the values are the sum up to FP32 rounding.
    std::vector<float> got(1000);
    std::memcpy(got.data(), res.outputs[0].data(), 4000);
    for (size_t i = 0; i < got.size(); ++i) {
      double want = 0;
      for (int r = 0; r < R; ++r) {
        float x;
        std::memcpy(&x, in[static_cast<size_t>(r)].data() + i * 4, 4);
        want += x;
      }
      EXPECT_NEAR(got[i], want, 1e-3) << algorithm_name(a) << " element " << i;
    }
  }
}

TEST(Collectives, DeterministicBitsAndTimes) {
  const int R = 16;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, DType::bf16, 4099, 0, {}, {}};
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < R; ++r) in.push_back(encode(DType::bf16, std::vector<float>(4099, 0.1f * static_cast<float>(r + 1))));
  for (Algorithm a : {Algorithm::ring, Algorithm::mesh, Algorithm::rdh, Algorithm::hier2d}) {
    RunOptions opt;
    opt.algorithm = a;
    auto x = run_collective(trn1(), R, spec, in, opt);
    auto y = run_collective(trn1(), R, spec, in, opt);
    EXPECT_EQ(x.outputs, y.outputs) << algorithm_name(a);
    EXPECT_EQ(x.duration_ps, y.duration_ps) << algorithm_name(a);
    EXPECT_EQ(x.messages, y.messages) << algorithm_name(a);
    // Timing-only runs send the same messages at the same times.
    auto t = time_collective(trn1(), R, spec, opt);
    EXPECT_EQ(t.duration_ps, x.duration_ps) << algorithm_name(a);
    EXPECT_TRUE(t.outputs.empty());
  }
}

TEST(Collectives, SendRecvIsAPermuteOfOnePair) {
  const int R = 4;
  CollectiveSpec spec = send_recv_spec(R, 3, 1, DType::int8, 5);
  EXPECT_EQ(spec.peers, (std::vector<int>{-1, -1, -1, 1}));
  EXPECT_THROW(send_recv_spec(R, 2, 2, DType::int8, 5), std::invalid_argument);
  std::vector<std::vector<uint8_t>> in(R, std::vector<uint8_t>(5));
  for (int r = 0; r < R; ++r) in[static_cast<size_t>(r)].assign(5, static_cast<uint8_t>(10 + r));
  auto res = run_collective(trn1(), R, spec, in);
  EXPECT_EQ(res.outputs[1], std::vector<uint8_t>(5, 13));
  EXPECT_TRUE(res.outputs[0].empty());
  EXPECT_TRUE(res.outputs[3].empty());
  spec.peers = {1, 1, -1, -1};  // two senders to one rank
  EXPECT_THROW(run_collective(trn1(), R, spec, in), std::invalid_argument);
}

}  // namespace
