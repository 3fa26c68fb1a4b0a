// libnrt.so.1: loading NEFFs, model metadata, execution, faults and profiling.
#include <atomic>
#include <latch>
#include <limits>
#include <thread>

#include "nrt/nrt_sys_trace.h"

#include "nrt_test_util.h"

using namespace nrt_test;

namespace {

using NrtModel = NrtTest;
using NrtExecute = NrtTest;

constexpr size_t kAddElems = 128 * 512;

std::vector<float> expected_sum(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

TEST_F(NrtModel, LoadAddAndTensorInfo) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  ASSERT_EQ(m.info->tensor_count, 3u);
  const nrt_tensor_info_t* e = m.info->tensor_array;
  EXPECT_STREQ(e[0].name, "a");
  EXPECT_STREQ(e[1].name, "b");
  EXPECT_STREQ(e[2].name, "out");
  EXPECT_EQ(e[0].usage, NRT_TENSOR_USAGE_INPUT);
  EXPECT_EQ(e[2].usage, NRT_TENSOR_USAGE_OUTPUT);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(e[i].size, kAddElems * 4);
    EXPECT_EQ(e[i].dtype, NRT_DTYPE_FLOAT32);
    ASSERT_EQ(e[i].ndim, 2u);
    EXPECT_EQ(e[i].shape[0], 128u);
    EXPECT_EQ(e[i].shape[1], 512u);
  }
  uint32_t n = 0;
  EXPECT_EQ(nrt_get_model_vnc_count(m.model, &n), NRT_SUCCESS);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(nrt_get_model_instance_count(m.model, &n), NRT_SUCCESS);
  EXPECT_GE(n, 1u);
  nrt_model_info_t info{};
  size_t out = 0;
  EXPECT_EQ(nrt_get_model_info(m.model, &info, sizeof info, &out), NRT_SUCCESS);
  EXPECT_EQ(out, sizeof info);
  EXPECT_EQ(info.vnc, 0u);
}

TEST_F(NrtModel, MatmulBf16Info) {
  Loaded m;
  ASSERT_EQ(m.load("matmul_bf16.neff", 3), NRT_SUCCESS);
  ASSERT_EQ(m.info->tensor_count, 3u);
  EXPECT_EQ(m.info->tensor_array[0].dtype, NRT_DTYPE_BFLOAT16);
  EXPECT_EQ(m.info->tensor_array[2].dtype, NRT_DTYPE_FLOAT32);
  nrt_model_info_t info{};
  EXPECT_EQ(nrt_get_model_info(m.model, &info, sizeof info, nullptr), NRT_SUCCESS);
  EXPECT_EQ(info.vnc, 3u);
}

TEST_F(NrtModel, AnyCoreMeansTheFirstFreeCore) {
  const auto bytes = read_file(example("add.neff"));
  std::vector<nrt_model_t*> models(10, nullptr);
  std::vector<uint32_t> cores;
  for (auto& m : models) {
    ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &m), NRT_SUCCESS);
    nrt_model_info_t info{};
    ASSERT_EQ(nrt_get_model_info(m, &info, sizeof info, nullptr), NRT_SUCCESS);
    cores.push_back(info.vnc);
  }
  // Eight visible cores: one model each, then the least-used cores again.
  EXPECT_EQ(cores, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 0, 1}));
  ASSERT_EQ(nrt_unload(models[3]), NRT_SUCCESS);
  nrt_model_t* again = nullptr;
  ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &again), NRT_SUCCESS);
  nrt_model_info_t info{};
  ASSERT_EQ(nrt_get_model_info(again, &info, sizeof info, nullptr), NRT_SUCCESS);
  EXPECT_EQ(info.vnc, 3u);
  models[3] = again;
  for (auto* m : models) EXPECT_EQ(nrt_unload(m), NRT_SUCCESS);
}

TEST_F(NrtModel, BadLoads) {
  nrt_model_t* model = nullptr;
  const auto bytes = read_file(example("add.neff"));
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(nrt_load(nullptr, 10, -1, -1, &model), NRT_INVALID);
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, nullptr), NRT_INVALID);
  EXPECT_EQ(nrt_load(bytes.data(), 100, -1, -1, &model), NRT_INVALID);  // truncated
  std::vector<uint8_t> junk(4096, 0x42);
  EXPECT_EQ(nrt_load(junk.data(), junk.size(), -1, -1, &model), NRT_INVALID);
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), 8, -1, &model), NRT_LOAD_NOT_ENOUGH_NC);
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), 7, 2, &model), NRT_LOAD_NOT_ENOUGH_NC);
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), -2, -1, &model), NRT_INVALID);
  EXPECT_EQ(model, nullptr);
  EXPECT_EQ(nrt_unload(nullptr), NRT_INVALID_HANDLE);
  ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), 0, 1, &model), NRT_SUCCESS);
  nrt_model_t* stale = model;
  EXPECT_EQ(nrt_unload(model), NRT_SUCCESS);
  EXPECT_EQ(nrt_unload(stale), NRT_INVALID_HANDLE);
  nrt_tensor_info_array_t* info = nullptr;
  EXPECT_EQ(nrt_get_model_tensor_info(stale, &info), NRT_INVALID_HANDLE);
  EXPECT_EQ(nrt_free_model_tensor_info(nullptr), NRT_SUCCESS);
}

TEST_F(NrtModel, RealNeuronxccNeffIsRefused) {
  const auto path = fixtures() / "neff" / "matmul_small.neff";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture not found: " << path;
  const auto bytes = read_file(path);
  nrt_model_t* model = nullptr;
  setenv("NEURON_RT_LOG_LEVEL", "ERROR", 1);
  nrt_close();
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &model), NRT_UNSUPPORTED_NEFF_VERSION);
  const std::string err = ::testing::internal::GetCapturedStderr();
  setenv("NEURON_RT_LOG_LEVEL", "QUIET", 1);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(err.find("cannot execute"), std::string::npos) << err;
}

TEST_F(NrtExecute, AddValues) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  const auto a = iota(kAddElems, 0.5f), b = iota(kAddElems, -0.25f, 3.0f);
  m.write("a", a);
  m.write("b", b);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  EXPECT_EQ(m.read<float>("out"), expected_sum(a, b));
  EXPECT_EQ(nrt_tensor_check_output_completion(m.tensors["out"], 0, 1), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_reset_output_completion(m.tensors["out"]), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_check_output_completion(m.tensors["out"], 0, 1), NRT_TIMEOUT);
  // Again with new inputs (the model can run many times).
  const auto c = iota(kAddElems, 2.0f);
  m.write("a", c);
  ASSERT_EQ(nrt_execute_repeat(m.model, m.in, m.out, 2), NRT_SUCCESS);
  EXPECT_EQ(m.read<float>("out"), expected_sum(c, b));
  EXPECT_EQ(nrt_execute_repeat(m.model, m.in, m.out, 0), NRT_INVALID);
}

TEST_F(NrtExecute, VaCoherence) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  auto* a = static_cast<float*>(nrt_tensor_get_va(m.tensors["a"]));
  auto* b = static_cast<float*>(nrt_tensor_get_va(m.tensors["b"]));
  auto* out = static_cast<float*>(nrt_tensor_get_va(m.tensors["out"]));
  ASSERT_TRUE(a && b && out);
  for (size_t i = 0; i < kAddElems; ++i) {
    a[i] = static_cast<float>(i % 97);
    b[i] = 1.0f;
  }
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  const auto r = m.read<float>("out");
  for (size_t i = 0; i < kAddElems; i += 1111) EXPECT_EQ(r[i], static_cast<float>(i % 97) + 1.0f);
  EXPECT_EQ(out[5], 6.0f);  // the output is visible through its VA too
}

TEST_F(NrtExecute, HostAndAttachedTensors) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff", -1, NRT_TENSOR_PLACEMENT_HOST), NRT_SUCCESS);
  const auto a = iota(kAddElems, 1.0f), b = iota(kAddElems, 1.0f, 1.0f);
  m.write("a", a);
  m.write("b", b);
  // Replace the output with a caller-owned buffer.
  std::vector<float> mine(kAddElems, -1.0f);
  nrt_tensor_t* attached = nullptr;
  ASSERT_EQ(nrt_tensor_allocate_empty("out", &attached), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_attach_buffer(attached, mine.data(), mine.size() * 4), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(m.out, "out", attached), NRT_SUCCESS);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  EXPECT_EQ(mine, expected_sum(a, b));
  nrt_tensor_free(&attached);
}

TEST_F(NrtExecute, SlicesAsInputs) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  nrt_tensor_t* big = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 2 * kAddElems * 4, "big", &big),
            NRT_SUCCESS);
  nrt_tensor_t *lo = nullptr, *hi = nullptr;
  ASSERT_EQ(nrt_tensor_allocate_slice(big, 0, kAddElems * 4, "lo", &lo), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate_slice(big, kAddElems * 4, kAddElems * 4, "hi", &hi), NRT_SUCCESS);
  const auto a = iota(kAddElems, 3.0f), b = iota(kAddElems, 0.125f);
  ASSERT_EQ(nrt_tensor_write(big, a.data(), 0, a.size() * 4), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_write(big, b.data(), a.size() * 4, b.size() * 4), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(m.in, "a", lo), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(m.in, "b", hi), NRT_SUCCESS);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  EXPECT_EQ(m.read<float>("out"), expected_sum(a, b));
  nrt_tensor_free(&lo);
  nrt_tensor_free(&hi);
  nrt_tensor_free(&big);
}

TEST_F(NrtExecute, MatmulBf16Values) {
  Loaded m;
  ASSERT_EQ(m.load("matmul_bf16.neff"), NRT_SUCCESS);
  // c[256,512] = a[256,256] @ b[256,512]; a = 2 I (bf16 0x4000), b small integers (exact in bf16).
  std::vector<uint16_t> a(256 * 256, 0), b(256 * 512);
  for (int i = 0; i < 256; ++i) a[i * 256 + i] = 0x4000;
  std::vector<float> expect(256 * 512);
  for (int k = 0; k < 256; ++k)
    for (int n = 0; n < 512; ++n) {
      const float v = static_cast<float>((k + n) % 7) - 3.0f;
      uint32_t bits = 0;
      std::memcpy(&bits, &v, 4);
      b[k * 512 + n] = static_cast<uint16_t>(bits >> 16);
      expect[k * 512 + n] = 2 * v;
    }
  m.write("a", a);
  m.write("b", b);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);
  EXPECT_EQ(m.read<float>("c"), expect);
}

TEST_F(NrtExecute, MissingOrWrongSizeTensors) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  nrt_tensor_set_t* partial = nullptr;
  ASSERT_EQ(nrt_allocate_tensor_set(&partial), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(partial, "a", m.tensors["a"]), NRT_SUCCESS);
  setenv("NEURON_RT_LOG_LEVEL", "ERROR", 1);
  nrt_close();
  // (re-init keeps tensors; reload the model for the new session)
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  setenv("NEURON_RT_LOG_LEVEL", "QUIET", 1);
  const auto bytes = read_file(example("add.neff"));
  ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &m.model), NRT_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nrt_execute(m.model, partial, m.out), NRT_INVALID);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("'b'"), std::string::npos) << err;
  nrt_tensor_t* small = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "b", &small), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(partial, "b", small), NRT_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nrt_execute(m.model, partial, m.out), NRT_INVALID);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("'b' has 16 bytes"), std::string::npos) << err;
  EXPECT_EQ(nrt_execute(m.model, nullptr, m.out), NRT_INVALID);
  EXPECT_EQ(nrt_execute(nullptr, m.in, m.out), NRT_INVALID_HANDLE);
  nrt_tensor_free(&small);
  nrt_destroy_tensor_set(&partial);
}

TEST_F(NrtExecute, ConcurrentExecutesFromManyThreads) {
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<Loaded>> models;
  for (int i = 0; i < kThreads; ++i) {
    models.push_back(std::make_unique<Loaded>());
    ASSERT_EQ(models.back()->load("add.neff", i % 4), NRT_SUCCESS);
  }
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Loaded& m = *models[i];
      for (int iter = 0; iter < 3; ++iter) {
        const auto a = iota(kAddElems, static_cast<float>(i + 1)),
                   b = iota(kAddElems, 1.0f, static_cast<float>(iter));
        if (nrt_tensor_write(m.tensors["a"], a.data(), 0, a.size() * 4) != NRT_SUCCESS ||
            nrt_tensor_write(m.tensors["b"], b.data(), 0, b.size() * 4) != NRT_SUCCESS ||
            m.execute() != NRT_SUCCESS) {
          failures[i]++;
          continue;
        }
        std::vector<float> out(kAddElems);
        nrt_tensor_read(m.tensors["out"], out.data(), 0, out.size() * 4);
        if (out != expected_sum(a, b)) failures[i]++;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(failures[i], 0) << "thread " << i;
}

TEST_F(NrtExecute, TwoModelsOnDifferentCoresRunTogether) {
  // Both executions are submitted at once from two threads; the device runs executions
  // queued together on different cores in one simulated window.
  Loaded m0, m1;
  ASSERT_EQ(m0.load("add.neff", 0), NRT_SUCCESS);
  ASSERT_EQ(m1.load("matmul_bf16.neff", 1), NRT_SUCCESS);
  const auto a = iota(kAddElems, 1.0f), b = iota(kAddElems, 2.0f);
  m0.write("a", a);
  m0.write("b", b);
  NRT_STATUS s0 = NRT_FAILURE, s1 = NRT_FAILURE;
  std::thread t0([&] { s0 = m0.execute(); });
  std::thread t1([&] { s1 = m1.execute(); });
  t0.join();
  t1.join();
  EXPECT_EQ(s0, NRT_SUCCESS);
  EXPECT_EQ(s1, NRT_SUCCESS);
  EXPECT_EQ(m0.read<float>("out"), expected_sum(a, b));
  EXPECT_EQ(m1.read<float>("c"), std::vector<float>(256 * 512, 0.0f));  // zero inputs
}

TEST_F(NrtExecute, PendingExecutionsOnDifferentCoresShareOneRun) {
  Loaded m0, m1;
  ASSERT_EQ(m0.load("add.neff", 0), NRT_SUCCESS);
  ASSERT_EQ(m1.load("add.neff", 1), NRT_SUCCESS);
  nrt_close();  // re-init with DEBUG logging, keeping the tensors and sets
  ScopedEnv env({{"NEURON_RT_LOG_LEVEL", "DEBUG"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const auto bytes = read_file(example("add.neff"));
  ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), 0, 1, &m0.model), NRT_SUCCESS);
  ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), 1, 1, &m1.model), NRT_SUCCESS);
  // Two threads released together, so that both executions are pending in one window;
  // thread start-up skew can still miss it, hence the attempts.
  bool batched = false;
  for (int attempt = 0; attempt < 100 && !batched; ++attempt) {
    ::testing::internal::CaptureStderr();
    NRT_STATUS s0 = NRT_FAILURE, s1 = NRT_FAILURE;
    std::latch start(2);
    std::thread t0([&] {
      start.arrive_and_wait();
      s0 = m0.execute();
    });
    std::thread t1([&] {
      start.arrive_and_wait();
      s1 = m1.execute();
    });
    t0.join();
    t1.join();
    const std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_EQ(s0, NRT_SUCCESS);
    ASSERT_EQ(s1, NRT_SUCCESS);
    batched = err.find("batch of 2 executions") != std::string::npos;
  }
  EXPECT_TRUE(batched);
  setenv("NEURON_RT_LOG_LEVEL", "QUIET", 1);
}

TEST_F(NrtExecute, NanFaultWhenFailOnNan) {
  nrt_close();
  ScopedEnv env({{"NEURON_FAIL_ON_NAN", "1"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  std::vector<float> a(kAddElems, 1.0f);
  a[77] = std::numeric_limits<float>::quiet_NaN();
  m.write("a", a);
  EXPECT_EQ(m.execute(), NRT_EXEC_COMPLETED_WITH_NUM_ERR);
  a[77] = 0;
  m.write("a", a);
  EXPECT_EQ(m.execute(), NRT_SUCCESS);  // the core is usable after a fault
}

TEST_F(NrtExecute, TimeoutOnSimulatedTime) {
  nrt_close();
  ScopedEnv env({{"NEURON_RT_EXEC_TIMEOUT", "0.000000001"}});  // 1 ns of simulated time
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  Loaded m;
  ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
  EXPECT_EQ(m.execute(), NRT_TIMEOUT);
}

TEST_F(NrtExecute, ProfileWritesChromeTrace) {
  Loaded m, other;
  ASSERT_EQ(m.load("add.neff", 0), NRT_SUCCESS);
  ASSERT_EQ(other.load("add.neff", 1), NRT_SUCCESS);
  const auto dir =
      std::filesystem::temp_directory_path() / ("nrt_profile_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "add.ntff").string();
  EXPECT_EQ(nrt_profile_start(m.model, nullptr), NRT_INVALID);
  ASSERT_EQ(nrt_profile_start(m.model, path.c_str()), NRT_SUCCESS);
  EXPECT_EQ(nrt_profile_start(m.model, path.c_str()), NRT_INVALID);  // already running
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(m.execute(), NRT_SUCCESS);
    ASSERT_EQ(other.execute(), NRT_SUCCESS);  // not this profile's model
  }
  ASSERT_EQ(nrt_profile_stop(path.c_str()), NRT_SUCCESS);
  ASSERT_EQ(m.execute(), NRT_SUCCESS);                     // after the profile
  EXPECT_EQ(nrt_profile_stop(path.c_str()), NRT_INVALID);  // already stopped
  const TraceFile trace = read_trace(path);
  ASSERT_TRUE(trace.valid) << path;
  EXPECT_EQ(trace.kernels.size(), 3u) << "the model's three executions between start and stop";
  for (const KernelSlice& k : trace.kernels) EXPECT_EQ(k.core, 0u);
  EXPECT_TRUE(std::filesystem::exists(path + ".metrics.json"));
  std::filesystem::remove_all(dir);
}

// Every execution starts with the runtime's launch: its own slice at the start of the
// execution's, as long as the profile's metrics say
// (Device.EveryExecutionPaysTheRuntimesLaunchFirst pins the figure); NEURONSIM_LAUNCH=0 leaves it
// out and the execution is shorter by it.
TEST_F(NrtExecute, EachExecutionStartsWithTheRuntimesLaunch) {
  struct Profile {
    TraceFile trace;
    double launch_ns = -1;
  };
  auto profile = [](const std::string& name) {
    Loaded m;
    EXPECT_EQ(m.load("add.neff", 0), NRT_SUCCESS);
    const auto path =
        std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".ntff");
    EXPECT_EQ(nrt_profile_start(m.model, path.c_str()), NRT_SUCCESS);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(m.execute(), NRT_SUCCESS);
    EXPECT_EQ(nrt_profile_stop(path.c_str()), NRT_SUCCESS);
    Profile p{read_trace(path)};
    std::ifstream metrics(path.string() + ".metrics.json");
    const nlohmann::json j = nlohmann::json::parse(metrics, nullptr, false);
    if (!j.is_discarded())
      for (const auto& m : j.at("metrics"))
        if (m.at("name") == "launch_time_ns") p.launch_ns = m.at("value").get<double>();
    std::filesystem::remove(path);
    std::filesystem::remove(path.string() + ".metrics.json");
    return p;
  };
  const Profile with = profile("nrt_launch");
  ASSERT_EQ(with.trace.kernels.size(), 2u);
  ASSERT_EQ(with.trace.launches.size(), 2u);
  // The session's metrics add up the core's two launches.
  const auto launch_ps = static_cast<uint64_t>(std::llround(with.launch_ns * 1000 / 2));
  ASSERT_GT(launch_ps, 0u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(with.trace.launches[i].name, "launch");
    EXPECT_EQ(with.trace.launches[i].start_ps, with.trace.kernels[i].start_ps);
    EXPECT_EQ(with.trace.launches[i].end_ps - with.trace.launches[i].start_ps, launch_ps);
    EXPECT_GT(with.trace.kernels[i].end_ps, with.trace.launches[i].end_ps);  // the body follows
  }
  nrt_close();
  ScopedEnv env({{"NEURONSIM_LAUNCH", "0"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const Profile without = profile("nrt_no_launch");
  ASSERT_EQ(without.trace.kernels.size(), 2u);
  EXPECT_TRUE(without.trace.launches.empty());
  EXPECT_EQ(without.launch_ns, 0.0);
  const auto length = [](const KernelSlice& k) { return k.end_ps - k.start_ps; };
  EXPECT_EQ(length(with.trace.kernels[0]), length(without.trace.kernels[0]) + launch_ps);
}

TEST_F(NrtExecute, InspectEnvWritesOneTraceForTheSession) {
  nrt_close();
  const auto dir =
      std::filesystem::temp_directory_path() / ("nrt_inspect_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  ScopedEnv env({{"NEURON_RT_INSPECT_ENABLE", "1"}, {"NEURON_RT_INSPECT_OUTPUT_DIR", dir.c_str()}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    Loaded m;
    ASSERT_EQ(m.load("add.neff"), NRT_SUCCESS);
    ASSERT_EQ(m.execute(), NRT_SUCCESS);
    ASSERT_EQ(m.execute(), NRT_SUCCESS);
  }
  EXPECT_FALSE(std::filesystem::exists(dir)) << "written when the session ends";
  EXPECT_EQ(nrt_inspect_stop(), NRT_SUCCESS);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);  // trace and metrics
  EXPECT_TRUE(std::filesystem::exists(dir / "neuronsim_session.metrics.json"));
  const TraceFile trace = read_trace(dir / "neuronsim_session.trace.json");
  EXPECT_EQ(trace.kernels.size(), 2u);
  std::filesystem::remove_all(dir);
}

TEST_F(NrtExecute, InspectEnvTraceIsWrittenAtClose) {
  nrt_close();
  const auto dir =
      std::filesystem::temp_directory_path() / ("nrt_inspect_close_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  ScopedEnv env({{"NEURON_RT_INSPECT_ENABLE", "1"},
                 {"NEURON_RT_INSPECT_OUTPUT_DIR", dir.c_str()},
                 {"NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC", "4"}});
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    Loaded m0, m1;
    ASSERT_EQ(m0.load("add.neff", 0), NRT_SUCCESS);
    ASSERT_EQ(m1.load("add.neff", 1), NRT_SUCCESS);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(m0.execute(), NRT_SUCCESS);
      ASSERT_EQ(m1.execute(), NRT_SUCCESS);
    }
  }
  nrt_close();
  const TraceFile trace = read_trace(dir / "neuronsim_session.trace.json");
  ASSERT_TRUE(trace.valid);
  EXPECT_EQ(trace.kernels.size(), 6u) << "executions are kept past the event limit";
  EXPECT_EQ(trace.instructions, 8u)
      << "NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC caps the records of each core";
  std::filesystem::remove_all(dir);
}

TEST_F(NrtExecute, UnsupportedCallsFailHonestly) {
  EXPECT_EQ(nrt_barrier(0, 0, 1), NRT_FAILURE);
  EXPECT_EQ(nrt_profile_session_start(0), NRT_FAILURE);
  EXPECT_EQ(nrt_sys_trace_start(nullptr), NRT_FAILURE);
  int fd = 0;
  EXPECT_EQ(nrt_get_dmabuf_fd(0, 0, &fd), NRT_INVALID);
  EXPECT_EQ(nrt_register_async_exec_callback(nullptr, nullptr), NRT_FAILURE);
  EXPECT_EQ(nrt_async_drain_queued_execs(0), NRT_SUCCESS);
}

TEST_F(NrtExecute, TensorTrafficDuringExecutions) {
  // Executions on two cores while other threads allocate, write, slice and free tensors.
  Loaded m0, m1;
  ASSERT_EQ(m0.load("add.neff", 0), NRT_SUCCESS);
  ASSERT_EQ(m1.load("add.neff", 5), NRT_SUCCESS);
  const auto a = iota(kAddElems, 1.0f), b = iota(kAddElems, 0.5f);
  for (Loaded* m : {&m0, &m1}) {
    m->write("a", a);
    m->write("b", b);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> churn;
  for (int i = 0; i < 3; ++i)
    churn.emplace_back([&, i] {
      while (!stop) {
        nrt_tensor_t *t = nullptr, *s = nullptr;
        if (nrt_tensor_allocate(i == 2 ? NRT_TENSOR_PLACEMENT_HOST : NRT_TENSOR_PLACEMENT_DEVICE, i,
                                4096, "churn", &t) != NRT_SUCCESS ||
            nrt_tensor_memset(t, 0, i, 4096) != NRT_SUCCESS ||
            nrt_tensor_allocate_slice(t, 1024, 1024, "s", &s) != NRT_SUCCESS)
          errors++;
        nrt_tensor_free(&t);
        nrt_tensor_free(&s);
      }
    });
  std::vector<std::thread> runners;
  for (Loaded* m : {&m0, &m1})
    runners.emplace_back([&, m] {
      for (int k = 0; k < 4; ++k)
        if (m->execute() != NRT_SUCCESS) errors++;
    });
  for (auto& t : runners) t.join();
  stop = true;
  for (auto& t : churn) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(m0.read<float>("out"), expected_sum(a, b));
  EXPECT_EQ(m1.read<float>("out"), expected_sum(a, b));
}

TEST_F(NrtExecute, AnOutOfBoundsAccessIsExecOob) {
  const auto neff = assemble("gather", kGather);
  if (neff.empty())
    GTEST_SKIP() << "neuron-sim (NEURON_SIM) not available to assemble the test NEFF";
  nrt_model_t* model = nullptr;
  std::map<std::string, nrt_tensor_t*> t;
  nrt_tensor_set_t *in = nullptr, *out = nullptr;
  ASSERT_NO_FATAL_FAILURE(load_gather(neff, &model, t, &in, &out));
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  ASSERT_EQ(nrt_tensor_write(t["x"], x.data(), 0, x.size() * 4), NRT_SUCCESS);
  const std::vector<int32_t> good = {7, 0, 3, 3}, bad = {1, 9, 0, 0};
  ASSERT_EQ(nrt_tensor_write(t["idx"], good.data(), 0, 16), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(model, in, out), NRT_SUCCESS);
  std::vector<float> y(16);
  ASSERT_EQ(nrt_tensor_read(t["y"], y.data(), 0, 64), NRT_SUCCESS);
  EXPECT_EQ(y[0], 28.0f);  // row 7
  EXPECT_EQ(y[8], 12.0f);  // row 3
  ASSERT_EQ(nrt_tensor_write(t["idx"], bad.data(), 0, 16), NRT_SUCCESS);
  setenv("NEURON_RT_LOG_LEVEL", "ERROR", 1);
  nrt_close();
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  setenv("NEURON_RT_LOG_LEVEL", "QUIET", 1);
  ASSERT_EQ(nrt_load(neff.data(), neff.size(), 0, 1, &model), NRT_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nrt_execute(model, in, out), NRT_EXEC_OOB);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("execution failed (status 1006)"), std::string::npos) << err;
  EXPECT_NE(err.find("index 1 = 9"), std::string::npos) << err;
  ASSERT_EQ(nrt_tensor_write(t["idx"], good.data(), 0, 16), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(model, in, out), NRT_SUCCESS);  // the core is usable after the fault
  nrt_unload(model);
  for (auto& [name, tensor] : t) nrt_tensor_free(&tensor);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtExecute, UnloadBeforeFreeingTensors) {
  auto m = std::make_unique<Loaded>();
  ASSERT_EQ(m->load("add.neff"), NRT_SUCCESS);
  ASSERT_EQ(m->execute(), NRT_SUCCESS);
  ASSERT_EQ(nrt_unload(m->model), NRT_SUCCESS);
  m->model = nullptr;
  m.reset();  // frees the tensors after the model is gone
}

}  // namespace
