#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "neuronsim/traces/metrics.h"
#include "sample_run.h"

namespace neuronsim::traces {
namespace {

// name -> {unit, value}
std::map<std::string, std::pair<std::string, json>> by_name(const json& m) {
  std::map<std::string, std::pair<std::string, json>> out;
  for (const json& e : m.at("metrics")) {
    EXPECT_EQ(e.size(), 3u) << e;
    EXPECT_TRUE(out.emplace(e.at("name").get<std::string>(),
                            std::pair{e.at("unit").get<std::string>(), e.at("value")})
                    .second)
        << "duplicate " << e;
  }
  return out;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { sample = make_sample_run(); }
  std::unique_ptr<SampleRun> sample;
};

// Values worked out by hand from sample_run.h (two cores, 10 us).
TEST_F(MetricsTest, ListHoldsEveryMetricWithItsUnitAndHandComputedValue) {
  const auto m = by_name(metrics_json(sample->result));
  struct Expected {
    const char* name;
    const char* unit;
    double value;
  };
  const std::vector<Expected> expected = {
      {"total_time_ns", "ns", 10'000},
      {"launch_time_ns", "ns", 1'000},  // the longest core's
      {"tensor_engine_active_time_ns", "ns", 500},
      {"tensor_engine_active_time_percent", "%", 2.5},  // 500 ns / (2 cores * 10 us)
      {"tensor_engine_instructions", "count", 1},
      {"vector_engine_active_time_ns", "ns", 2'700},
      {"vector_engine_active_time_percent", "%", 13.5},
      {"vector_engine_instructions", "count", 4},
      {"scalar_engine_active_time_ns", "ns", 216},
      {"scalar_engine_active_time_percent", "%", 1.08},
      {"scalar_engine_instructions", "count", 1},
      {"gpsimd_engine_active_time_ns", "ns", 150},
      {"gpsimd_engine_active_time_percent", "%", 0.75},
      {"gpsimd_engine_instructions", "count", 1},
      {"sync_engine_active_time_ns", "ns", 2'400},
      {"sync_engine_active_time_percent", "%", 12},
      {"sync_engine_instructions", "count", 4},
      {"instructions", "count", 11},
      {"dma_bytes", "bytes", 106'496},
      {"dma_transfers", "count", 6},
      {"dma_transfer_average_bytes", "bytes", 106'496.0 / 6},
      {"dma_busy_time_ns", "ns", 8'080},
      {"hbm_read_bytes", "bytes", 73'728},
      {"hbm_write_bytes", "bytes", 32'768},
      {"hbm_bandwidth_GBps", "GB/s", 10.6496},  // 106496 B / 10000 ns
      {"hbm_bandwidth_percent", "%", 10.6496 / 2900 * 100},
      {"flops", "FLOP", 17'039'360},
      {"matmul_flops", "FLOP", 16'777'216},
      {"mfu_estimated_percent", "%", 0.8388608},  // 16777216 / (10 us * 1e14 FLOP/s * 2 cores)
  };
  EXPECT_EQ(m.size(), expected.size());
  for (const Expected& e : expected) {
    ASSERT_TRUE(m.count(e.name)) << e.name;
    EXPECT_EQ(m.at(e.name).first, e.unit) << e.name;
    EXPECT_NEAR(m.at(e.name).second.get<double>(), e.value, 1e-9 * std::max(1.0, e.value))
        << e.name;
  }
  // Counts stay integers (exact beyond 2^53).
  EXPECT_TRUE(m.at("dma_bytes").second.is_number_unsigned());
  EXPECT_TRUE(m.at("flops").second.is_number_unsigned());
}

TEST_F(MetricsTest, UtilisationIsBusyOverTotalTime) {
  sample->result.total_ps = 20'000'000;
  const auto m = by_name(metrics_json(sample->result));
  EXPECT_DOUBLE_EQ(m.at("tensor_engine_active_time_percent").second.get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(m.at("mfu_estimated_percent").second.get<double>(), 0.4194304);
  EXPECT_DOUBLE_EQ(m.at("hbm_bandwidth_GBps").second.get<double>(), 5.3248);
}

TEST_F(MetricsTest, PrefixIsPrependedToEveryName) {
  const json m = metrics_json(sample->result, {"matmul_512"});
  for (const json& e : m.at("metrics"))
    EXPECT_EQ(e.at("name").get<std::string>().rfind("matmul_512/", 0), 0u) << e;
  EXPECT_EQ(by_name(m).count("matmul_512/total_time_ns"), 1u);
}

TEST_F(MetricsTest, DetailsBreakDownPerCoreWithNeuronExplorerNames) {
  const json d = metrics_json(sample->result).at("details");
  EXPECT_EQ(d.at("instance"), "trn2.3xlarge");
  EXPECT_EQ(d.at("total_ps"), 10'000'000);
  ASSERT_EQ(d.at("cores").size(), 2u);
  const json& c2 = d.at("cores")[0];
  EXPECT_EQ(c2.at("core"), 2);
  EXPECT_DOUBLE_EQ(c2.at("tensor_engine_active_time_percent").get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(c2.at("sync_engine_active_time_ns").get<double>(), 1'800.0);
  EXPECT_EQ(c2.at("vector_engine_instructions"), 2);
  EXPECT_EQ(c2.at("instructions"), 8);
  EXPECT_EQ(c2.at("hbm_read_bytes"), 65'536);
  EXPECT_DOUBLE_EQ(c2.at("mfu_estimated_percent").get<double>(), 1.6777216);
  EXPECT_DOUBLE_EQ(c2.at("end_time_ns").get<double>(), 6'416.0);
  const json& c5 = d.at("cores")[1];
  EXPECT_EQ(c5.at("core"), 5);
  EXPECT_DOUBLE_EQ(c5.at("vector_engine_active_time_percent").get<double>(), 19.0);
  EXPECT_DOUBLE_EQ(c5.at("mfu_estimated_percent").get<double>(), 0.0);

  // OpcodeSummary from the records: DVE tensor_tensor on core 2 twice, 800 ns.
  bool found = false;
  for (const json& row : d.at("opcode_summary"))
    if (row.at("core") == 2 && row.at("engine") == "vector" &&
        row.at("opcode") == "tensor_tensor") {
      found = true;
      EXPECT_EQ(row.at("instructions"), 2);
      EXPECT_DOUBLE_EQ(row.at("time_ns").get<double>(), 800.0);
    }
  EXPECT_TRUE(found);
  // Per DMA queue.
  std::map<std::string, uint64_t> queue_bytes;
  for (const json& row : d.at("dma_queue_summary"))
    queue_bytes[std::to_string(row.at("core").get<int>()) + ":" +
                row.at("queue").get<std::string>()] += row.at("bytes").get<uint64_t>();
  EXPECT_EQ(queue_bytes, (std::map<std::string, uint64_t>{{"2:qSyncIO0", 32768},
                                                          {"2:qSyncIO1", 32768},
                                                          {"2:qSyncIO2", 32768},
                                                          {"5:qSyncIO0", 8192}}));
}

TEST_F(MetricsTest, WithoutRecordsOrTimeThereAreNoNaNs) {
  sim::RunResult r;
  r.cores.resize(1);
  const json m = metrics_json(r);
  for (const json& e : m.at("metrics")) {
    ASSERT_TRUE(e.at("value").is_number()) << e;
    EXPECT_EQ(e.at("value").get<double>(), 0.0) << e;
  }
  EXPECT_FALSE(m.at("details").contains("opcode_summary"));
  EXPECT_NE(m.dump().find("\"mfu_estimated_percent\""), std::string::npos);
}

TEST_F(MetricsTest, WritesTheMetricsFile) {
  const auto path = std::filesystem::temp_directory_path() / "neuronsim_test_metrics.json";
  write_metrics_json(sample->result, {"b"}, path);
  std::ifstream in(path);
  EXPECT_EQ(json::parse(in), metrics_json(sample->result, {"b"}));
  std::filesystem::remove(path);
  EXPECT_THROW(write_metrics_json(sample->result, {}, "/nonexistent-dir/x/m.json"),
               std::runtime_error);
}

}  // namespace
}  // namespace neuronsim::traces
