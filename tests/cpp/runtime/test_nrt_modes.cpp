// libnrt.so.1: simulator modes, NEURONSIM_TRACE, programmatic inspect, and faults of NEFFs
// assembled at test time (with $NEURON_SIM asm).
#include <chrono>
#include <fstream>
#include <thread>

#include "nrt_test_util.h"

using namespace nrt_test;

namespace {

constexpr size_t kN = 128 * 512;

class NrtModes : public ::testing::Test {
 protected:
  void SetUp() override { setenv("NEURON_RT_LOG_LEVEL", "QUIET", 0); }
  void TearDown() override { nrt_close(); }
};

TEST_F(NrtModes, FunctionalOnlyComputesValues) {
  ScopedEnv env({{"NEURONSIM_MODE", "functional-only"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  m.write("a", std::vector<float>(kN, 1.5f));
  m.write("b", std::vector<float>(kN, 2.0f));
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  EXPECT_EQ(m.read<float>("out"), std::vector<float>(kN, 3.5f));
}

TEST_F(NrtModes, TimingOnlyLeavesMemoryAlone) {
  ScopedEnv env({{"NEURONSIM_MODE", "timing-only"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  m.write("a", std::vector<float>(kN, 1.5f));
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  EXPECT_EQ(m.read<float>("out"), std::vector<float>(kN, 0.0f));
}

TEST_F(NrtModes, NeuronsimTraceWritesOneFileForTheSession) {
  const auto path =
      std::filesystem::temp_directory_path() / ("nrt_trace_" + std::to_string(getpid()) + ".json");
  std::filesystem::remove(path);
  ScopedEnv env({{"NEURONSIM_TRACE", path.c_str()}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    Loaded m;
    ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
    ASSERT_EQ(m.execute(), NRT_SUCCESS);
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "written at nrt_close";
  nrt_close();
  const auto bytes = read_file(path);
  EXPECT_NE(std::string(bytes.begin(), bytes.end()).find("traceEvents"), std::string::npos);
  std::filesystem::remove(path);
}

TEST_F(NrtModes, NeuronsimTraceNamesEachRanksFile) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem = "nrt_trace_rank_" + std::to_string(getpid());
  const auto want = dir / (stem + "_3.json");
  std::filesystem::remove(want);
  ScopedEnv env({{"NEURONSIM_TRACE", (dir / (stem + "_{rank}.json")).c_str()}, {"RANK", "3"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    Loaded m;
    ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
    ASSERT_EQ(m.execute(), NRT_SUCCESS);
  }
  nrt_close();
  EXPECT_TRUE(std::filesystem::exists(want)) << want;
  std::filesystem::remove(want);
}

TEST_F(NrtModes, AHundredExecutionsMakeOneTraceWithAHundredKernelsOnOneTimeAxis) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("nrt_trace100_" + std::to_string(getpid()) + ".json");
  std::filesystem::remove(path);
  ScopedEnv env({{"NEURONSIM_TRACE", path.c_str()}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    Loaded m;
    ASSERT_EQ(m.load("add.neff", 2), NRT_SUCCESS);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(m.execute(), NRT_SUCCESS);
  }
  nrt_close();
  const TraceFile trace = read_trace(path);
  ASSERT_TRUE(trace.valid) << path;
  ASSERT_EQ(trace.kernels.size(), 100u);
  for (size_t i = 0; i < trace.kernels.size(); ++i) {
    const KernelSlice& k = trace.kernels[i];
    EXPECT_EQ(k.name, "add.neff");
    EXPECT_EQ(k.core, 2u);
    EXPECT_GT(k.end_ps, k.start_ps);
    if (i > 0) {
      EXPECT_GE(k.start_ps, trace.kernels[i - 1].end_ps) << "kernel " << i << " goes back in time";
    }
  }
  EXPECT_EQ(trace.instructions % 100, 0u);
  EXPECT_GT(trace.instructions, 0u);
  std::filesystem::remove(path);
}

TEST_F(NrtModes, InspectWithOptions) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const auto dir =
      std::filesystem::temp_directory_path() / ("nrt_inspect_opts_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  nrt_inspect_config_t* cfg = nullptr;
  ASSERT_EQ(nrt_inspect_config_allocate(&cfg), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_config_set_defaults(cfg), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_config_set_output_dir(cfg, dir.c_str()), NRT_SUCCESS);
  EXPECT_EQ(nrt_inspect_config_set_output_dir(cfg, nullptr), NRT_INVALID);
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  // The defaults have enable_inspect off: nothing is traced.
  ASSERT_EQ(nrt_inspect_begin_with_options(cfg), NRT_SUCCESS);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_stop(), NRT_SUCCESS);
  EXPECT_FALSE(std::filesystem::exists(dir));
  ASSERT_EQ(nrt_inspect_config_set_enable_inspect(cfg, true), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_config_set_sys_trace_max_events_per_nc(cfg, 1000), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_begin_with_options(cfg), NRT_SUCCESS);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_stop(), NRT_SUCCESS);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);  // not traced any more
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
  EXPECT_EQ(read_trace(dir / "neuronsim_session.trace.json").kernels.size(), 1u);
  EXPECT_EQ(nrt_inspect_config_free(cfg), NRT_SUCCESS);
  std::filesystem::remove_all(dir);
}

TEST_F(NrtModes, InspectSettingsThatDoNotMapAreRefused) {
  setenv("NEURON_RT_LOG_LEVEL", "ERROR", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  setenv("NEURON_RT_LOG_LEVEL", "QUIET", 1);
  nrt_inspect_config_t* cfg = nullptr;
  ASSERT_EQ(nrt_inspect_config_allocate(&cfg), NRT_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nrt_inspect_config_set_session_id(cfg, 7), NRT_FAILURE);
  EXPECT_EQ(nrt_inspect_config_set_enable_inspect_on_fail(cfg, true), NRT_FAILURE);
  EXPECT_EQ(nrt_inspect_config_set_capture_enabled_for_nc(cfg, 0, false), NRT_FAILURE);
  EXPECT_EQ(nrt_inspect_config_set_activity(cfg, "all", false), NRT_FAILURE);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("session ids are not supported by neuronsim"), std::string::npos) << err;
  EXPECT_NE(err.find("profiles of failed executions are not supported by neuronsim"),
            std::string::npos)
      << err;
  EXPECT_EQ(nrt_inspect_config_set_enable_inspect_on_fail(cfg, false),
            NRT_SUCCESS);  // what neuronsim does
  EXPECT_EQ(nrt_inspect_config_set_sys_trace_max_events_per_nc(cfg, 0), NRT_INVALID);
  EXPECT_EQ(nrt_inspect_config_set_session_id(nullptr, 1), NRT_INVALID);
  EXPECT_EQ(nrt_inspect_config_free(cfg), NRT_SUCCESS);
}

// add.s with DVE waiting on a semaphore nobody signals.
constexpr const char* kDeadlock = R"(.target trn2
.tensor a float32 [128,512] input
.tensor out float32 [128,512] output
sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=hbm.fp32(a)+0[[512,128],[1,512]] queue=0 signal=S[0]+=1
dve tensor_tensor dst=sbuf.fp32[0:128]+4096[[1,512]] in0=sbuf.fp32[0:128]+0[[1,512]] in1=sbuf.fp32[0:128]+0[[1,512]] op=add wait=S[5]>=1 signal=S[2]+=1
sp dma_copy dst=hbm.fp32(out)+0[[512,128],[1,512]] src=sbuf.fp32[0:128]+4096[[1,512]] queue=2 wait=S[2]>=1
)";

// An execution that deadlocks throws from inside a SystemC coroutine; AddressSanitizer cannot
// follow that stack switch and reports a false stack-use-after-scope (google/sanitizers#189;
// the simulator's own Simulator.DeadlockIsReportedWithTheWaitingInstruction hits it too).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

TEST_F(NrtModes, DeadlockedExecutionTimesOut) {
  if (kAsan) GTEST_SKIP() << "deadlocks cannot run under AddressSanitizer (SystemC coroutines)";
  const auto neff = assemble("deadlock", kDeadlock);
  if (neff.empty())
    GTEST_SKIP() << "neuron-sim (NEURON_SIM) not available to assemble the test NEFF";
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* model = nullptr;
  ASSERT_EQ(nrt_load(neff.data(), neff.size(), 2, 1, &model), NRT_SUCCESS);
  nrt_tensor_t *a = nullptr, *out = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, kN * 4, "a", &a), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, kN * 4, "out", &out), NRT_SUCCESS);
  nrt_tensor_set_t *in_set = nullptr, *out_set = nullptr;
  nrt_allocate_tensor_set(&in_set);
  nrt_allocate_tensor_set(&out_set);
  nrt_add_tensor_to_tensor_set(in_set, "a", a);
  nrt_add_tensor_to_tensor_set(out_set, "out", out);
  EXPECT_EQ(nrt_execute(model, in_set, out_set), NRT_TIMEOUT);
  // The runtime keeps working: a good model on another core runs.
  Loaded good;
  ASSERT_EQ(good.load("add.neff", 0), NRT_SUCCESS);
  good.write("a", std::vector<float>(kN, 1.0f));
  ASSERT_EQ(good.execute(), NRT_SUCCESS);
  EXPECT_EQ(good.read<float>("out"), std::vector<float>(kN, 1.0f));
  nrt_unload(model);
  nrt_tensor_free(&a);
  nrt_tensor_free(&out);
  nrt_destroy_tensor_set(&in_set);
  nrt_destroy_tensor_set(&out_set);
}

TEST_F(NrtModes, AFaultInABatchIsAttributedToItsExecution) {
  if (kAsan) GTEST_SKIP() << "deadlocks cannot run under AddressSanitizer (SystemC coroutines)";
  const auto neff = assemble("deadlock", kDeadlock);
  if (neff.empty())
    GTEST_SKIP() << "neuron-sim (NEURON_SIM) not available to assemble the test NEFF";
  ScopedEnv env({{"NEURON_RT_LOG_LEVEL", "WARN"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* bad = nullptr;
  ASSERT_EQ(nrt_load(neff.data(), neff.size(), 2, 1, &bad), NRT_SUCCESS);
  nrt_tensor_t *a = nullptr, *out = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, kN * 4, "a", &a), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, kN * 4, "out", &out), NRT_SUCCESS);
  nrt_tensor_set_t *in_set = nullptr, *out_set = nullptr;
  nrt_allocate_tensor_set(&in_set);
  nrt_allocate_tensor_set(&out_set);
  nrt_add_tensor_to_tensor_set(in_set, "a", a);
  nrt_add_tensor_to_tensor_set(out_set, "out", out);
  Loaded good;
  ASSERT_EQ(good.load("add.neff", 0), NRT_SUCCESS);
  good.write("a", std::vector<float>(kN, 2.0f));
  good.write("b", std::vector<float>(kN, 3.0f));
  // The device takes work as soon as it comes, so the two executions share a window when
  // they come while it is busy: a slow one on core 1 keeps it busy (milliseconds).
  std::string slow_source = ".target trn2\n";
  for (int i = 0; i < 64; ++i)
    slow_source +=
        "pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
        "moving=sbuf.bf16[0:128]+1024[[1,512]]\n";
  const auto slow_neff = assemble("slow", slow_source);
  ASSERT_FALSE(slow_neff.empty());
  nrt_model_t* slow = nullptr;
  ASSERT_EQ(nrt_load(slow_neff.data(), slow_neff.size(), 1, 1, &slow), NRT_SUCCESS);
  nrt_tensor_set_t* no_tensors = nullptr;
  nrt_allocate_tensor_set(&no_tensors);
  bool batched = false;
  for (int attempt = 0; attempt < 20 && !batched; ++attempt) {
    ::testing::internal::CaptureStderr();
    NRT_STATUS sb = NRT_SUCCESS, sg = NRT_FAILURE, ss = NRT_FAILURE;
    std::thread ts([&] { ss = nrt_execute(slow, no_tensors, no_tensors); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread tb([&] { sb = nrt_execute(bad, in_set, out_set); });
    std::thread tg([&] { sg = good.execute(); });
    ts.join();
    tb.join();
    tg.join();
    EXPECT_EQ(ss, NRT_SUCCESS);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(sb, NRT_TIMEOUT);
    EXPECT_EQ(sg, NRT_SUCCESS);
    batched = err.find("running each alone") != std::string::npos;
  }
  EXPECT_TRUE(batched);
  EXPECT_EQ(good.read<float>("out"), std::vector<float>(kN, 5.0f));
  nrt_unload(slow);
  nrt_destroy_tensor_set(&no_tensors);
  nrt_unload(bad);
  nrt_tensor_free(&a);
  nrt_tensor_free(&out);
  nrt_destroy_tensor_set(&in_set);
  nrt_destroy_tensor_set(&out_set);
}

TEST_F(NrtModes, WrongGenerationIsRefused) {
  ScopedEnv env({{"NEURONSIM_INSTANCE", "trn1.2xlarge"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const auto bytes = read_file(example("add.neff"));  // built for trn2
  nrt_model_t* model = nullptr;
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &model), NRT_INVALID);
}

}  // namespace
