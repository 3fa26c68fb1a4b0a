// libnrt.so.1: lifecycle state machine, version, topology and environment parsing.
#include <sys/wait.h>
#include <unistd.h>

#include "nrt_test_util.h"

using namespace nrt_test;

namespace {

class NrtLifecycle : public ::testing::Test {
 protected:
  void SetUp() override { setenv("NEURON_RT_LOG_LEVEL", "QUIET", 0); }
  void TearDown() override { nrt_close(); }
};

TEST_F(NrtLifecycle, CallsBeforeInitAreUninitialized) {
  nrt_model_t* model = nullptr;
  uint8_t byte = 0;
  EXPECT_EQ(nrt_load(&byte, 1, -1, -1, &model), NRT_UNINITIALIZED);
  nrt_tensor_t* t = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t), NRT_UNINITIALIZED);
  EXPECT_EQ(t, nullptr);
  nrt_tensor_set_t* set = nullptr;
  EXPECT_EQ(nrt_allocate_tensor_set(&set), NRT_UNINITIALIZED);
  EXPECT_EQ(nrt_execute(nullptr, nullptr, nullptr), NRT_UNINITIALIZED);
  EXPECT_EQ(nrt_tensor_get_va(nullptr), nullptr);
  nrt_close();  // closing an uninitialised runtime is harmless
}

TEST_F(NrtLifecycle, PreInitGettersWork) {
  uint32_t total = 0, visible = 0;
  EXPECT_EQ(nrt_get_total_nc_count(&total), NRT_SUCCESS);
  EXPECT_GT(total, 0u);
  EXPECT_EQ(nrt_get_total_vnc_count(&total), NRT_SUCCESS);
  EXPECT_EQ(nrt_get_visible_vnc_count(&visible), NRT_SUCCESS);
  EXPECT_EQ(visible, total);
  EXPECT_EQ(nrt_get_visible_nc_count(nullptr), NRT_INVALID);
  nrt_version_t v{};
  EXPECT_EQ(nrt_get_version(&v, sizeof v), NRT_SUCCESS);
  EXPECT_EQ(v.rt_major, 2u);
  EXPECT_NE(std::string(v.rt_detail).find("libnrt version"), std::string::npos);
  EXPECT_STREQ(v.git_hash, "neuronsim");
  EXPECT_EQ(nrt_get_version(&v, 100), NRT_FAILURE);
  EXPECT_EQ(nrt_get_version(nullptr, sizeof v), NRT_INVALID);
}

TEST_F(NrtLifecycle, InitIsIdempotentAndAcceptsNullStrings) {
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, nullptr, nullptr), NRT_SUCCESS);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_PYTORCH, "2.0", ""), NRT_SUCCESS);
  uint32_t n = 0;
  EXPECT_EQ(nrt_get_visible_vnc_count(&n), NRT_SUCCESS);
  EXPECT_EQ(n, 8u);  // trn2.3xlarge: one chip of 8 cores
  nrt_instance_info_t info{};
  EXPECT_EQ(nrt_get_instance_info(&info, sizeof info), NRT_SUCCESS);
  EXPECT_EQ(info.family, static_cast<uint32_t>(NRT_INSTANCE_TRN2));
  EXPECT_EQ(info.size, static_cast<uint32_t>(NRT_INSTANCE_SIZE_3XL));
  EXPECT_STREQ(info.arch_name, "trn2");
}

TEST_F(NrtLifecycle, ReinitAfterClose) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_tensor_t* t = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t), NRT_SUCCESS);
  nrt_close();
  EXPECT_EQ(nrt_tensor_write(t, "x", 0, 1), NRT_UNINITIALIZED);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  // A tensor from the earlier session is still host memory that can be used and freed.
  EXPECT_EQ(nrt_tensor_write(t, "x", 0, 1), NRT_SUCCESS);
  nrt_tensor_free(&t);
  EXPECT_EQ(t, nullptr);
}

TEST_F(NrtLifecycle, ForkedChildFails) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    nrt_tensor_t* t = nullptr;
    int code = 0;
    if (nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t) != NRT_FAILURE) code |= 1;
    if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_FAILURE) code |= 2;
    uint32_t n = 0;
    if (nrt_get_total_nc_count(&n) != NRT_FAILURE) code |= 4;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent is unaffected.
  nrt_tensor_t* t = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t), NRT_SUCCESS);
  nrt_tensor_free(&t);
}

TEST_F(NrtLifecycle, StatusStrings) {
  EXPECT_STREQ(nrt_get_status_as_str(NRT_SUCCESS), "NRT_SUCCESS");
  EXPECT_STREQ(nrt_get_status_as_str(NRT_EXEC_OOB), "NRT_EXEC_OOB");
  EXPECT_STREQ(nrt_get_status_as_str(static_cast<NRT_STATUS>(2000)), "NRT_UNKNOWN_STATUS");
}

struct EnvCase {
  const char* name;
  const char* value;
  NRT_STATUS expect;
  uint32_t visible;  // when it succeeds
};

class NrtEnv : public ::testing::TestWithParam<EnvCase> {
 protected:
  void TearDown() override { nrt_close(); }
};

TEST_P(NrtEnv, Parse) {
  const EnvCase& c = GetParam();
  ScopedEnv env({{"NEURON_RT_LOG_LEVEL", "QUIET"}, {c.name, c.value}});
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), c.expect) << c.name << "=" << c.value;
  if (c.expect == NRT_SUCCESS) {
    uint32_t n = 0;
    EXPECT_EQ(nrt_get_visible_vnc_count(&n), NRT_SUCCESS);
    EXPECT_EQ(n, c.visible);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NrtEnv,
    ::testing::Values(EnvCase{"NEURON_RT_VISIBLE_CORES", "0-3", NRT_SUCCESS, 4},
                      EnvCase{"NEURON_RT_VISIBLE_CORES", "1,2", NRT_SUCCESS, 2},
                      EnvCase{"NEURON_RT_VISIBLE_CORES", "7", NRT_SUCCESS, 1},
                      EnvCase{"NEURON_RT_VISIBLE_CORES", "abc", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_VISIBLE_CORES", "0,2", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_VISIBLE_CORES", "3-1", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_VISIBLE_CORES", "0-8", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_NUM_CORES", "2", NRT_SUCCESS, 2},
                      EnvCase{"NEURON_RT_NUM_CORES", "0", NRT_SUCCESS, 8},
                      EnvCase{"NEURON_RT_NUM_CORES", "9", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_NUM_CORES", "-1", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_VIRTUAL_CORE_SIZE", "2", NRT_SUCCESS, 4},
                      EnvCase{"NEURON_RT_VIRTUAL_CORE_SIZE", "3", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_VIRTUAL_CORE_SIZE", "0", NRT_INVALID, 0},
                      EnvCase{"NEURON_LOGICAL_NC_CONFIG", "2", NRT_SUCCESS, 4},
                      EnvCase{"NEURON_LOGICAL_NC_CONFIG", "1", NRT_SUCCESS, 8},
                      EnvCase{"NEURON_LOGICAL_NC_CONFIG", "4", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_EXEC_TIMEOUT", "soon", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_EXEC_TIMEOUT", "30", NRT_SUCCESS, 8},
                      EnvCase{"NEURON_FAIL_ON_NAN", "maybe", NRT_INVALID, 0},
                      EnvCase{"NEURONSIM_MODE", "timing-only", NRT_SUCCESS, 8},
                      EnvCase{"NEURONSIM_MODE", "fast", NRT_INVALID, 0},
                      EnvCase{"NEURONSIM_INSTANCE", "trn2.48xlarge", NRT_SUCCESS, 128},
                      EnvCase{"NEURONSIM_INSTANCE", "trn9.nano", NRT_INVALID, 0},
                      EnvCase{"NEURON_RT_INSPECT_ENABLE", "2", NRT_INVALID, 0}));

TEST(NrtEnvCombined, VisibleCoresWinOverNumCoresAndLncDividesTotal) {
  ScopedEnv env({{"NEURON_RT_LOG_LEVEL", "QUIET"},
                 {"NEURON_RT_VISIBLE_CORES", "2-3"},
                 {"NEURON_RT_NUM_CORES", "1"},
                 {"NEURON_RT_VIRTUAL_CORE_SIZE", "2"}});
  uint32_t total = 0, visible = 0;
  EXPECT_EQ(nrt_get_total_vnc_count(&total), NRT_SUCCESS);  // before init, from the environment
  EXPECT_EQ(total, 4u);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  EXPECT_EQ(nrt_get_visible_vnc_count(&visible), NRT_SUCCESS);
  EXPECT_EQ(visible, 2u);
  EXPECT_EQ(nrt_get_total_nc_count(&total), NRT_SUCCESS);
  EXPECT_EQ(total, 4u);
  nrt_close();
}

TEST(NrtEnvCombined, InvalidConfigLogsWhatWasWrong) {
  ScopedEnv env({{"NEURON_RT_LOG_LEVEL", "ERROR"}, {"NEURON_RT_VISIBLE_CORES", "abc"}});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_INVALID);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("NEURON_RT_VISIBLE_CORES='abc'"), std::string::npos) << err;
  EXPECT_NE(err.find("ERROR  NRT:nrt_init"), std::string::npos) << err;
}

}  // namespace
