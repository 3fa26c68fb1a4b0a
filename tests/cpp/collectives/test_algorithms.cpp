// Every operation x dtype x algorithm x rank count against a reference computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "neuronsim/cc/runner.h"
#include "neuronsim/spec/config.h"
#include "reference.h"

using namespace neuronsim;
using namespace neuronsim::cc;
using isa::DType;
using namespace neuronsim::cc::testing;

namespace {

const spec::InstanceConfig& trn1() {
  static const spec::InstanceConfig inst = spec::load_instance("trn1.32xlarge");
  return inst;
}

using Param = std::tuple<Op, Algorithm, int>;

}  // namespace
namespace neuronsim::cc {
void PrintTo(Op op, std::ostream* os) {
  *os << op_name(op);
}
void PrintTo(Algorithm a, std::ostream* os) {
  *os << algorithm_name(a);
}
}  // namespace neuronsim::cc
namespace {

class CollectiveTest : public ::testing::TestWithParam<Param> {};

TEST_P(CollectiveTest, MatchesReference) {
  const auto [op, alg, R] = GetParam();
  int checked = 0;
  for (const auto& c : reference_cases(op, R)) {
    SCOPED_TRACE(c.name);
    RunOptions opt;
    opt.algorithm = alg;
    auto res = run_collective(trn1(), R, c.spec, c.inputs, opt);
    ASSERT_EQ(res.outputs.size(), static_cast<size_t>(R));
    ASSERT_EQ(res.rank_done_ps.size(), static_cast<size_t>(R));
    EXPECT_GT(res.duration_ps, 0u);
    for (int r = 0; r < R; ++r) {
      ASSERT_EQ(res.outputs[static_cast<size_t>(r)], c.expected[static_cast<size_t>(r)])
          << "rank " << r;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (Op op : {Op::all_reduce, Op::all_gather, Op::reduce_scatter, Op::all_to_all, Op::broadcast,
                Op::reduce, Op::permute, Op::barrier, Op::all_to_all_v})
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
  EXPECT_EQ(choose_algorithm(medium, 6, thresholds_for(trn1())), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(medium, 8, thresholds_for(trn1())), Algorithm::rdh);
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
      v[i] =
          static_cast<float>(mix(static_cast<uint32_t>(i * 31 + static_cast<size_t>(r))) % 100000) /
              997.0f -
          50.0f;
    in.push_back(encode(DType::fp32, v));
  }
  for (Algorithm a : {Algorithm::ring, Algorithm::mesh, Algorithm::rdh, Algorithm::hier2d}) {
    RunOptions opt;
    opt.algorithm = a;
    auto res = run_collective(trn1(), R, spec, in, opt);
    for (int r = 1; r < R; ++r)
      EXPECT_EQ(res.outputs[static_cast<size_t>(r)], res.outputs[0]) << algorithm_name(a);
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
  for (int r = 0; r < R; ++r)
    in.push_back(encode(DType::bf16, std::vector<float>(4099, 0.1f * static_cast<float>(r + 1))));
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
