#include <gtest/gtest.h>

#include "neuronsim/traces/profile_summary.h"
#include "sample_run.h"

namespace neuronsim::traces {
namespace {

// Values worked out by hand from sample_run.h's core 2 (no launch; ends at 6.416 us).
TEST(ProfileSummary, CoreTwoOfTheSampleRunByHand) {
  auto sample = make_sample_run();
  sample->result.hbm_stacks = 4;  // trn2: 2,900 GB/s over four stacks
  const json all = profile_summary_json(sample->result, {"sample"});
  ASSERT_EQ(all.size(), 2u);
  const json& s = all.at("sample_nc2");
  const double total = 6.416e-6;
  EXPECT_DOUBLE_EQ(s.at("total_time").get<double>(), total);
  EXPECT_EQ(s.at("nc_idx"), 2);
  EXPECT_EQ(s.at("instance_type"), "trn2.3xlarge");
  EXPECT_DOUBLE_EQ(s.at("tensor_engine_active_time").get<double>(), 0.5e-6);
  EXPECT_DOUBLE_EQ(s.at("tensor_engine_active_time_percent").get<double>(), 0.5e-6 / total);
  EXPECT_DOUBLE_EQ(s.at("vector_engine_instruction_time").get<double>(), 0.8e-6);
  EXPECT_EQ(s.at("sync_engine_instruction_count"), 3);
  EXPECT_DOUBLE_EQ(s.at("dma_packet_time").get<double>(), 7.08e-6);
  // Unions of the records: [0, 3.016] [3.1, 3.916] [4.0, 4.6] [5.0, 6.416] us, and of the
  // transfers [1.0, 3.016] [5.0, 6.416] us.
  EXPECT_NEAR(s.at("total_active_time").get<double>(), 5.848e-6, 1e-15);
  EXPECT_NEAR(s.at("total_active_time_percent").get<double>(), 5.848 / 6.416, 1e-12);
  EXPECT_NEAR(s.at("dma_active_time").get<double>(), 3.432e-6, 1e-15);
  EXPECT_EQ(s.at("matmul_instruction_count"), 1);
  EXPECT_EQ(s.at("activate_instruction_count"), 1);
  EXPECT_NEAR(s.at("activate_instruction_time").get<double>(), 0.216e-6, 1e-15);
  // Bytes and FLOPs against a stack's 725 GB/s and the core's 100 TFLOPS.
  EXPECT_EQ(s.at("hbm_read_bytes"), 65'536);
  EXPECT_NEAR(s.at("mbu_estimated_percent").get<double>(), 98'304 / total / 725e9, 1e-12);
  EXPECT_NEAR(s.at("peak_flops_bandwidth_ratio").get<double>(), 1e14 / 725e9, 1e-9);
  EXPECT_NEAR(s.at("mfu_estimated_percent").get<double>(), 16'777'216 / (1e14 * total), 1e-12);
  EXPECT_NEAR(s.at("mm_arithmetic_intensity").get<double>(), 16'777'216.0 / 98'304, 1e-9);
  // Core 5's time starts after its launch: 3 us - 1 us.
  EXPECT_DOUBLE_EQ(all.at("sample_nc5").at("total_time").get<double>(), 2e-6);
}

TEST(ProfileSummary, WithoutRecordsOrStacksTheFiguresThatNeedThemAreAbsent) {
  auto sample = make_sample_run();
  sample->result.instructions.clear();
  sample->result.dmas.clear();
  const json s = profile_summary_json(sample->result).at("neuronsim_nc2");
  for (const char* absent : {"total_active_time", "dma_active_time", "matmul_instruction_count",
                             "mbu_estimated_percent", "peak_flops_bandwidth_ratio"})
    EXPECT_FALSE(s.contains(absent)) << absent;
  EXPECT_TRUE(s.contains("total_time"));
}

// The host's dispatch (every core's host) and each core's wait for it.
TEST(ProfileSummary, TheHostsDispatchAndTheCoresWaitForIt) {
  auto sample = make_sample_run();
  sample->result.host = {{"aten::mul", 0, 2'000'000}, {"aten::add", 2'000'000, 2'500'000}};
  sample->result.executions.push_back({5, 1, "aten::mul", nullptr, 2'000'000, 3'000'000});
  sample->result.executions.back().host_bound_ps = 1'500'000;
  const json all = profile_summary_json(sample->result, {"s"});
  EXPECT_DOUBLE_EQ(all.at("s_nc5").at("host_dispatch_time").get<double>(), 2.5e-6);
  EXPECT_DOUBLE_EQ(all.at("s_nc5").at("host_bound_time").get<double>(), 1.5e-6);
  EXPECT_DOUBLE_EQ(all.at("s_nc2").at("host_dispatch_time").get<double>(), 2.5e-6);
  EXPECT_DOUBLE_EQ(all.at("s_nc2").at("host_bound_time").get<double>(), 0.0);
}

// A collective (a hold: an execution without a program) is exposed where no kernel of its core
// runs beside it: here [2, 3) of [1, 4) us beside a kernel over [0, 2) and [3, 5) us.
TEST(ProfileSummary, CollectivesExposedWhereNoKernelRunsBesideThem) {
  auto sample = make_sample_run();
  sample->result.executions = {{5, 1, "aten::mm", nullptr, 0, 2'000'000},
                               {5, 2, "all_gather", nullptr, 1'000'000, 4'000'000},
                               {5, 3, "aten::mm", nullptr, 3'000'000, 5'000'000}};
  static const isa::Program program;
  sample->result.executions[0].program = &program;
  sample->result.executions[2].program = &program;
  const json s = profile_summary_json(sample->result, {"s"}).at("s_nc5");
  EXPECT_DOUBLE_EQ(s.at("collective_time").get<double>(), 3e-6);
  EXPECT_DOUBLE_EQ(s.at("collective_exposed_time").get<double>(), 1e-6);
  EXPECT_FALSE(profile_summary_json(make_sample_run()->result, {"s"})
                   .at("s_nc5")
                   .contains("collective_time"));  // no collectives, no figure
}

}  // namespace
}  // namespace neuronsim::traces
