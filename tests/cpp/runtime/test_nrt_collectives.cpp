// libnrt.so.1: nrt_load_collectives in one process. Four threads each load one rank of a NEFF
// with an all_reduce and execute it; the executions meet and run in one simulated run. Ranks
// that never execute make the others time out; bad loads are refused.
#include <atomic>
#include <chrono>
#include <thread>

#include "nrt_test_util.h"

using namespace nrt_test;

namespace {

constexpr int kRanks = 4;
constexpr size_t kRows = 128, kCols = 64, kElems = kRows * kCols;

// x -> SBUF, all_reduce (sum over the ranks) on POOL, SBUF -> y.
constexpr const char* kAllReduce = R"(.target trn2
.tensor x float32 [128,64] input
.tensor y float32 [128,64] output
sp dma_copy dst=sbuf.fp32[0:128]+0[[1,64]] src=hbm.fp32(x)+0[[64,128],[1,64]] queue=0 signal=S[0]+=1
pool all_reduce dst=sbuf.fp32[0:128]+256[[1,64]] src=sbuf.fp32[0:128]+0[[1,64]] op=add wait=S[0]>=1 signal=S[1]+=1
sp dma_copy dst=hbm.fp32(y)+0[[64,128],[1,64]] src=sbuf.fp32[0:128]+256[[1,64]] queue=1 wait=S[1]>=1
)";

class NrtCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NEURON_RT_LOG_LEVEL", "QUIET", 0);
    neff_ = assemble("all_reduce", kAllReduce);
    ASSERT_FALSE(neff_.empty()) << "neuron-sim ($NEURON_SIM) is needed to assemble the test NEFF";
  }
  void TearDown() override { nrt_close(); }

  // One rank: its model, on core `rank`, with device tensors x and y.
  struct Rank {
    nrt_model_t* model = nullptr;
    nrt_tensor_t *x = nullptr, *y = nullptr;
    nrt_tensor_set_t *in = nullptr, *out = nullptr;
    NRT_STATUS load(const std::vector<uint8_t>& neff, int rank, int world = kRanks, int vnc = -2) {
      NRT_STATUS s =
          nrt_load_collectives(neff.data(), neff.size(), vnc == -2 ? rank : vnc, 1,
                               static_cast<uint32_t>(rank), static_cast<uint32_t>(world), &model);
      if (s != NRT_SUCCESS) return s;
      const int core = vnc == -2 ? rank : vnc;
      if ((s = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, core, kElems * 4, "x", &x)) !=
          NRT_SUCCESS)
        return s;
      if ((s = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, core, kElems * 4, "y", &y)) !=
          NRT_SUCCESS)
        return s;
      nrt_allocate_tensor_set(&in);
      nrt_allocate_tensor_set(&out);
      nrt_add_tensor_to_tensor_set(in, "x", x);
      nrt_add_tensor_to_tensor_set(out, "y", y);
      return NRT_SUCCESS;
    }
    NRT_STATUS execute() { return nrt_execute(model, in, out); }
    std::vector<float> result() {
      std::vector<float> v(kElems);
      EXPECT_EQ(nrt_tensor_read(y, v.data(), 0, v.size() * 4), NRT_SUCCESS);
      return v;
    }
    ~Rank() {
      if (model != nullptr) nrt_unload(model);
      nrt_tensor_free(&x);
      nrt_tensor_free(&y);
      nrt_destroy_tensor_set(&in);
      nrt_destroy_tensor_set(&out);
    }
  };

  static std::vector<float> input_of(int rank) {
    std::vector<float> v(kElems);
    for (size_t i = 0; i < kElems; ++i)
      v[i] = static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3) % 13) - 6.0f;
    return v;
  }
  static std::vector<float> sum_over(int ranks) {
    std::vector<float> want(kElems, 0.0f);
    for (int r = 0; r < ranks; ++r) {
      const auto v = input_of(r);
      for (size_t i = 0; i < kElems; ++i) want[i] += v[i];
    }
    return want;
  }

  std::vector<uint8_t> neff_;
};

TEST_F(NrtCollectives, FourRanksInFourThreadsAllReduce) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  std::vector<Rank> ranks(kRanks);
  std::vector<NRT_STATUS> loaded(kRanks, NRT_FAILURE);
  std::vector<std::vector<NRT_STATUS>> executed(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      Rank& me = ranks[static_cast<size_t>(r)];
      loaded[static_cast<size_t>(r)] = me.load(neff_, r);
      if (loaded[static_cast<size_t>(r)] != NRT_SUCCESS) return;
      const auto x = input_of(r);
      nrt_tensor_write(me.x, x.data(), 0, x.size() * 4);
      for (int round = 0; round < 2; ++round)
        executed[static_cast<size_t>(r)].push_back(me.execute());
    });
  for (auto& t : threads) t.join();
  const auto want = sum_over(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(loaded[static_cast<size_t>(r)], NRT_SUCCESS) << "rank " << r;
    EXPECT_EQ(executed[static_cast<size_t>(r)], std::vector<NRT_STATUS>(2, NRT_SUCCESS))
        << "rank " << r;
    EXPECT_EQ(ranks[static_cast<size_t>(r)].result(), want) << "rank " << r;
  }
}

TEST_F(NrtCollectives, FunctionalOnlyModeRunsThemToo) {
  ScopedEnv env({{"NEURONSIM_MODE", "functional-only"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  std::vector<Rank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[static_cast<size_t>(r)].load(neff_, r, 2), NRT_SUCCESS);
    const auto x = input_of(r);
    ASSERT_EQ(nrt_tensor_write(ranks[static_cast<size_t>(r)].x, x.data(), 0, x.size() * 4),
              NRT_SUCCESS);
  }
  std::vector<NRT_STATUS> status(2, NRT_FAILURE);
  std::thread t1([&] { status[1] = ranks[1].execute(); });
  status[0] = ranks[0].execute();
  t1.join();
  EXPECT_EQ(status, std::vector<NRT_STATUS>(2, NRT_SUCCESS));
  EXPECT_EQ(ranks[0].result(), sum_over(2));
  EXPECT_EQ(ranks[1].result(), sum_over(2));
}

TEST_F(NrtCollectives, RanksThatNeverExecuteMakeTheOthersTimeOut) {
  ScopedEnv env({{"NEURON_RT_EXEC_TIMEOUT", "1"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  std::vector<Rank> ranks(kRanks);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ranks[static_cast<size_t>(r)].load(neff_, r), NRT_SUCCESS) << r;
  // Ranks 0..2 execute; rank 3 never does.
  std::vector<NRT_STATUS> status(kRanks - 1, NRT_SUCCESS);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks - 1; ++r)
    threads.emplace_back(
        [&, r] { status[static_cast<size_t>(r)] = ranks[static_cast<size_t>(r)].execute(); });
  for (auto& t : threads) t.join();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(status, std::vector<NRT_STATUS>(kRanks - 1, NRT_TIMEOUT));
  EXPECT_GE(waited, 0.99);
  EXPECT_LT(waited, 30.0);
  // Nothing ran: the outputs are untouched.
  EXPECT_EQ(ranks[0].result(), std::vector<float>(kElems, 0.0f));
  // The job is still usable once every rank executes.
  for (int r = 0; r < kRanks; ++r) {
    const auto x = input_of(r);
    nrt_tensor_write(ranks[static_cast<size_t>(r)].x, x.data(), 0, x.size() * 4);
  }
  std::vector<NRT_STATUS> again(kRanks, NRT_FAILURE);
  threads.clear();
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back(
        [&, r] { again[static_cast<size_t>(r)] = ranks[static_cast<size_t>(r)].execute(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(again, std::vector<NRT_STATUS>(kRanks, NRT_SUCCESS));
  EXPECT_EQ(ranks[3].result(), sum_over(kRanks));
}

TEST_F(NrtCollectives, BadLoadsAreRefused) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = nullptr;
  // Rank outside the job, empty job.
  EXPECT_EQ(nrt_load_collectives(neff_.data(), neff_.size(), 0, 1, 4, 4, &m), NRT_INVALID);
  EXPECT_EQ(nrt_load_collectives(neff_.data(), neff_.size(), 0, 1, 0, 0, &m), NRT_INVALID);
  Rank r0;
  ASSERT_EQ(r0.load(neff_, 0), NRT_SUCCESS);
  // Another world size while the job has models.
  EXPECT_EQ(nrt_load_collectives(neff_.data(), neff_.size(), 1, 1, 1, 2, &m), NRT_INVALID);
  // Rank 1 on rank 0's core.
  EXPECT_EQ(nrt_load_collectives(neff_.data(), neff_.size(), 0, 1, 1, kRanks, &m), NRT_INVALID);
  // The refused loads left nothing behind: rank 1 loads on its own core.
  Rank r1;
  ASSERT_EQ(r1.load(neff_, 1, kRanks, 1), NRT_SUCCESS);
}

TEST_F(NrtCollectives, ACollectiveNeffLoadedWithoutAJobFails) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* model = nullptr;
  ASSERT_EQ(nrt_load(neff_.data(), neff_.size(), 0, 1, &model), NRT_SUCCESS);
  nrt_tensor_t *x = nullptr, *y = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, kElems * 4, "x", &x), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, kElems * 4, "y", &y), NRT_SUCCESS);
  nrt_tensor_set_t *in = nullptr, *out = nullptr;
  nrt_allocate_tensor_set(&in);
  nrt_allocate_tensor_set(&out);
  nrt_add_tensor_to_tensor_set(in, "x", x);
  nrt_add_tensor_to_tensor_set(out, "y", y);
  EXPECT_EQ(nrt_execute(model, in, out), NRT_EXEC_COMPLETED_WITH_ERR);
  nrt_unload(model);
  nrt_tensor_free(&x);
  nrt_tensor_free(&y);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

}  // namespace
