// spec/configs and their loader: every generation and instance loads, every
// figure carries a source, and every broken config is refused with a message
// that names the file and the field.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "neuronsim/isa/target.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::spec {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

const char* const kGenerations[] = {"trn1", "trn2", "trn3"};

fs::path source_configs() {
  return fs::path(NEURONSIM_SOURCE_DIR) / "spec/configs";
}

ordered_json read_json(const fs::path& p) {
  std::ifstream in(p);
  return ordered_json::parse(in);
}

void write_json(const fs::path& p, const ordered_json& j) {
  std::ofstream out(p, std::ios::trunc);
  out << j.dump(2);
}

// What a call throws as ConfigError ("<none>" when it does not throw).
std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<none>";
}

TEST(Config, LoadsEveryGeneration) {
  for (const char* name : kGenerations) {
    SCOPED_TRACE(name);
    const GenerationConfig g = load_generation(name, source_configs());
    EXPECT_EQ(g.name, name);
    ASSERT_NE(g.target, nullptr);
    EXPECT_EQ(g.target->name, name);
    EXPECT_EQ(g.core_version, g.target->core_version);
    EXPECT_EQ(g.partitions, g.target->num_partitions);
    EXPECT_EQ(g.sbuf_partition_bytes, g.target->sbuf_partition_bytes);
    EXPECT_EQ(g.psum_partition_bytes, g.target->psum_partition_bytes);
    EXPECT_EQ(g.psum_partition_bytes / g.psum_banks, g.target->psum_bank_bytes);
    EXPECT_GT(g.pe_ghz, 0);
    EXPECT_GT(g.act_ghz, 0);
    EXPECT_GT(g.dve_ghz, 0);
    EXPECT_GT(g.pool_ghz, 0);
    EXPECT_GT(g.sp_ghz, 0);
    EXPECT_EQ(g.dma_engines, 16u);
    EXPECT_EQ(g.dma_queues_per_engine, 16u);
  }
}

TEST(Config, GenerationFiguresMatchTheResearchNotes) {
  const GenerationConfig t1 = load_generation("trn1", source_configs());
  const GenerationConfig t2 = load_generation("trn2", source_configs());
  const GenerationConfig t3 = load_generation("trn3", source_configs());
  // §2.1 clocks.
  EXPECT_DOUBLE_EQ(t1.pe_ghz, 2.8);
  EXPECT_DOUBLE_EQ(t1.dve_ghz, 1.12);
  EXPECT_DOUBLE_EQ(t1.act_ghz, 1.4);
  EXPECT_DOUBLE_EQ(t2.pe_ghz, 2.4);
  EXPECT_DOUBLE_EQ(t2.dve_ghz, 0.96);
  EXPECT_DOUBLE_EQ(t3.dve_ghz, 1.2);
  // §3 sustained DMA bandwidth per engine.
  EXPECT_DOUBLE_EQ(t1.dma_engine_bytes_per_ns, 17);
  EXPECT_DOUBLE_EQ(t2.dma_engine_bytes_per_ns, 23);
  EXPECT_DOUBLE_EQ(t3.dma_engine_bytes_per_ns, 33);
  // §1 chip figures.
  EXPECT_EQ(t1.cores_per_chip, 2u);
  EXPECT_EQ(t2.cores_per_chip, 8u);
  EXPECT_EQ(t3.cores_per_chip, 8u);
  EXPECT_EQ(t1.hbm_bytes, 32ull << 30);
  EXPECT_EQ(t2.hbm_bytes, 96ull << 30);
  EXPECT_EQ(t3.hbm_bytes, 144ull << 30);
  EXPECT_EQ(t2.hbm_stacks, 4u);
  // §4.1: DVE 2x/4x modes only from NC-v3 on; FP8 at double rate only on NC-v3.
  EXPECT_EQ(t1.dve_elems_per_cycle_16bit, 1u);
  EXPECT_EQ(t2.dve_elems_per_cycle_16bit, 4u);
}

TEST(Config, EachEngineRunsAtItsOwnClock) {
  const GenerationConfig g = load_generation("trn2");
  EXPECT_DOUBLE_EQ(g.ghz(isa::Engine::PE), g.pe_ghz);
  EXPECT_DOUBLE_EQ(g.ghz(isa::Engine::ACT), g.act_ghz);
  EXPECT_DOUBLE_EQ(g.ghz(isa::Engine::DVE), g.dve_ghz);
  EXPECT_DOUBLE_EQ(g.ghz(isa::Engine::POOL), g.pool_ghz);
  EXPECT_DOUBLE_EQ(g.ghz(isa::Engine::SP), g.sp_ghz);
  EXPECT_NE(g.ghz(isa::Engine::PE), g.ghz(isa::Engine::DVE));  // trn2: 2.4 vs 0.96 GHz
}

TEST(Config, PeakBf16Flops) {
  // 2 * 128 * 128 * 2.8 GHz = 91.75 TFLOPS ("92" in §2.1); 2.4 GHz gives 78.6 ("79").
  EXPECT_DOUBLE_EQ(load_generation("trn1", source_configs()).peak_bf16_flops(),
                   2.0 * 128 * 128 * 2.8e9);
  EXPECT_NEAR(load_generation("trn2", source_configs()).peak_bf16_flops(), 78.64e12, 0.01e12);
}

TEST(Config, LoadsEveryInstance) {
  const std::vector<std::string> names = instance_names(source_configs());
  for (const char* required :
       {"inf2.xlarge", "trn1.2xlarge", "trn1.32xlarge", "trn2.3xlarge", "trn2.48xlarge"})
    EXPECT_THAT(names, ::testing::Contains(std::string(required)));
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const InstanceConfig inst = load_instance(name, source_configs());
    EXPECT_EQ(inst.name, name);
    EXPECT_EQ(inst.cores_per_chip,
              load_generation(inst.generation, source_configs()).cores_per_chip);
  }
  const InstanceConfig big = load_instance("trn2.48xlarge", source_configs());
  EXPECT_EQ(big.generation, "trn2");
  EXPECT_EQ(big.chips, 16u);
  EXPECT_EQ(big.total_cores(), 128u);
  EXPECT_EQ(big.topology, "torus-4x4");
  EXPECT_EQ(load_instance("trn1.32xlarge", source_configs()).total_cores(), 32u);
  EXPECT_EQ(load_instance("inf2.xlarge", source_configs()).generation, "trn1");
  EXPECT_EQ(load_instance("inf2.xlarge", source_configs()).topology, "none");
  EXPECT_EQ(load_instance("trn2.3xlarge", source_configs()).total_cores(), 8u);
}

TEST(Config, InstanceFamilySizeAndLinks) {
  const InstanceConfig t1 = load_instance("trn1.32xlarge", source_configs());
  EXPECT_EQ(t1.family, "trn1");
  EXPECT_EQ(t1.size, "32xlarge");
  EXPECT_EQ(t1.neuronlink_bytes_per_s, 96ull << 30);  // 384 GiB/s per chip over 4 links
  EXPECT_EQ(t1.efa_gbps, 800u);
  EXPECT_DOUBLE_EQ(t1.efa_latency_ns, 15000);
  EXPECT_EQ(t1.instance_link_bytes_per_s, 0u);
  EXPECT_EQ(load_instance("trn1n.32xlarge", source_configs()).family, "trn1n");
  const InstanceConfig us = load_instance("trn2u-ultraserver", source_configs());
  EXPECT_EQ(us.family, "trn2u");
  EXPECT_EQ(us.size, "48xlarge");
  EXPECT_EQ(us.instance_link_bytes_per_s, 128'000'000'000u);  // 256 GB/s per chip over 2 Z links
  EXPECT_DOUBLE_EQ(us.instance_link_latency_ns, 1500);
  const InstanceConfig small = load_instance("inf2.xlarge", source_configs());
  EXPECT_EQ(small.family, "inf2");
  EXPECT_EQ(small.size, "xlarge");
  EXPECT_EQ(small.neuronlink_bytes_per_s, 0u);
  EXPECT_EQ(small.efa_gbps, 0u);
  for (const char* name : kGenerations) {
    const GenerationConfig g = load_generation(name, source_configs());
    EXPECT_DOUBLE_EQ(g.neuronlink_latency_ns, 1500) << name;
    EXPECT_DOUBLE_EQ(g.intra_chip_latency_ns, 1500) << name;
  }
}

// Every number in a generation file sits in a {"value", "source"} object whose
// source is a non-empty string.
void expect_sourced(const ordered_json& node, const std::string& where) {
  if (node.is_object()) {
    if (node.contains("value")) {
      EXPECT_TRUE(node["value"].is_number() || where.ends_with(".isa.neff_target")) << where;
      ASSERT_TRUE(node.contains("source")) << where << " has no source";
      ASSERT_TRUE(node["source"].is_string()) << where;
      EXPECT_FALSE(node["source"].get<std::string>().empty()) << where << " has an empty source";
      return;
    }
    for (const auto& [key, child] : node.items()) expect_sourced(child, where + "." + key);
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i)
      expect_sourced(node[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_FALSE(node.is_number()) << where << " is a number without a source";
  }
}

TEST(Config, EveryFigureHasASource) {
  int figures = 0;
  for (const char* name : kGenerations) {
    const ordered_json j = read_json(source_configs() / (std::string(name) + ".json"));
    expect_sourced(j, name);
    for (const auto& [key, value] : j.items())
      figures += !value.is_object()        ? 0
                 : value.contains("value") ? 1
                                           : static_cast<int>(value.size());
  }
  EXPECT_EQ(
      figures,
      3 * 48);  // the 42 figures of GenerationConfig and 6 more of its ISA target, in each file
  const ordered_json inst = read_json(source_configs() / "instances.json");
  ASSERT_TRUE(inst.contains("instances"));
  for (const auto& [name, entry] : inst["instances"].items()) {
    ASSERT_TRUE(entry.contains("source")) << name;
    EXPECT_FALSE(entry["source"].get<std::string>().empty()) << name;
    for (const auto& [key, value] : entry.items())  // the link figures
      if (value.is_object()) expect_sourced(value, name + "." + key);
  }
}

// spec/configs/runtime-releases.json: the runtime releases whose collective costs the model knows,
// oldest first, the newest by default, every figure sourced, and the algorithms of each.
TEST(Config, RuntimeReleasesLoadTheNewestByDefault) {
  const std::vector<std::string> names = runtime_release_names(source_configs());
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.front(), "2.10");
  EXPECT_EQ(runtime_release_names(fs::path()), names);  // the built-in file is the source file
  EXPECT_EQ(load_runtime_release("", source_configs()).name, names.back());
  EXPECT_EQ(load_runtime_release().name, names.back());
  const RuntimeRelease old = load_runtime_release("2.10", source_configs());
  EXPECT_EQ(old.algorithms, (std::vector<std::string>{"ring", "hierarchical"}));
  EXPECT_FALSE(old.has_algorithm("mesh"));
  EXPECT_GT(old.collective_fixed_ns, 0);
  EXPECT_GT(old.across_hosts_fixed_ns, old.collective_fixed_ns);
  const RuntimeRelease newer = load_runtime_release("2.24", source_configs());
  EXPECT_TRUE(newer.has_algorithm("mesh") && newer.has_algorithm("rdh"));
  EXPECT_LT(newer.collective_fixed_ns, old.collective_fixed_ns);
  const ordered_json j = read_json(source_configs() / "runtime-releases.json");
  for (const auto& [name, release] : j["releases"].items()) {
    EXPECT_FALSE(release["source"].get<std::string>().empty()) << name;
    for (const auto& [key, value] : release.items())
      if (value.is_object() && key != "algorithms") expect_sourced(value, name + "." + key);
    EXPECT_FALSE(release["algorithms"]["source"].get<std::string>().empty()) << name;
    // Fitted figures say on which points.
    for (const char* key : {"collective_fixed_ns", "across_hosts_fixed_ns"}) {
      const std::string source = release[key]["source"];
      if (source.find("fitted") != std::string::npos)
        EXPECT_THAT(source, HasSubstr("fitted on spec/calibration/nccom-fit.csv (")) << name;
    }
  }
}

TEST(Config, ConfigDirFollowsTheEnvironment) {
  const char* old = std::getenv("NEURONSIM_CONFIG_DIR");
  const std::string saved = old ? old : "";
  ::unsetenv("NEURONSIM_CONFIG_DIR");
  EXPECT_EQ(config_dir(), fs::path());  // the built-in configs
  ::setenv("NEURONSIM_CONFIG_DIR", "/somewhere/else", 1);
  EXPECT_EQ(config_dir(), fs::path("/somewhere/else"));
  if (old)
    ::setenv("NEURONSIM_CONFIG_DIR", saved.c_str(), 1);
  else
    ::unsetenv("NEURONSIM_CONFIG_DIR");
}

// The library carries the configs of the source tree, byte for byte, and reads them without it.
TEST(Config, BuiltInConfigsAreTheSourceFiles) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(source_configs()))
    if (entry.path().extension() == ".json") files.insert(entry.path().filename().string());
  std::set<std::string> builtin;
  for (const auto& [name, text] : builtin_configs()) {
    builtin.insert(name);
    std::ifstream in(source_configs() / name, std::ios::binary);
    const std::string on_disk((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    EXPECT_EQ(text, on_disk) << name;
  }
  EXPECT_EQ(builtin, files);
  EXPECT_EQ(generation_names(fs::path()), (std::vector<std::string>{"trn1", "trn2", "trn3"}));
  EXPECT_EQ(generation_names(source_configs()), generation_names(fs::path()));
  EXPECT_EQ(instance_names(fs::path()), instance_names(source_configs()));
  for (const std::string& name : instance_names(fs::path())) {
    const InstanceConfig inst = load_instance(name, fs::path());
    EXPECT_EQ(inst.total_cores(), load_instance(name, source_configs()).total_cores()) << name;
    EXPECT_EQ(inst.generation_config.name, inst.generation) << name;
  }
  EXPECT_DOUBLE_EQ(load_generation("trn2", fs::path()).hbm_bytes_per_ns, 2900);
  const std::string e = config_error([] { load_generation("trn9", fs::path()); });
  EXPECT_THAT(e, HasSubstr("spec/configs/trn9.json (built in)"));
  EXPECT_THAT(e, HasSubstr("known: trn1, trn2, trn3"));
  EXPECT_THAT(config_error([] { load_instance("trn9.xlarge", fs::path()); }),
              HasSubstr("spec/configs/instances.json (built in): unknown instance 'trn9.xlarge'"));
}

// A private copy of the configs to break.
class ConfigErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() / ("neuronsim-config-test-" + std::to_string(::getpid()) +
                                        "-" + std::to_string(counter++));
    fs::create_directories(dir_);
    for (const auto& entry : fs::directory_iterator(source_configs()))
      if (entry.path().extension() == ".json")
        fs::copy_file(entry.path(), dir_ / entry.path().filename());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes <dir>/<file>.json as the pristine config with `edit` applied; returns the
  // ConfigError that loading it gives.
  std::string break_generation(const std::string& file,
                               const std::function<void(ordered_json&)>& edit) {
    ordered_json j = read_json(source_configs() / (file + ".json"));
    edit(j);
    write_json(dir_ / (file + ".json"), j);
    return config_error([&] { load_generation(file, dir_); });
  }
  std::string break_instance(const std::string& name,
                             const std::function<void(ordered_json&)>& edit) {
    ordered_json j = read_json(source_configs() / "instances.json");
    edit(j["instances"][name]);
    write_json(dir_ / "instances.json", j);
    return config_error([&] { load_instance(name, dir_); });
  }

  fs::path dir_;
};

TEST_F(ConfigErrors, CopyLoads) {
  for (const char* name : kGenerations) EXPECT_NO_THROW(load_generation(name, dir_));
  EXPECT_NO_THROW(load_instance("trn2.48xlarge", dir_));
}

TEST_F(ConfigErrors, MissingField) {
  const std::string e = break_generation("trn2", [](ordered_json& j) { j.erase("dma_issue_ns"); });
  EXPECT_THAT(e, HasSubstr("trn2.json"));
  EXPECT_THAT(e, HasSubstr("'dma_issue_ns'"));
  EXPECT_THAT(e, HasSubstr("missing"));
}

TEST_F(ConfigErrors, ACoresDmaRateIsAtMostItsEnginesAndTheDgeTimeNotNegative) {
  // trn1: 16 engines at 17 B/ns move 272 B/ns together at most.
  std::string e =
      break_generation("trn1", [](ordered_json& j) { j["dma_core_bytes_per_ns"]["value"] = 300; });
  EXPECT_THAT(e, HasSubstr("'dma_core_bytes_per_ns'"));
  EXPECT_THAT(e, HasSubstr("more than the core's 16 engines move at 17 B/ns each"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_core_bytes_per_ns"]["value"] = 0; });
  EXPECT_THAT(e, HasSubstr("'dma_core_bytes_per_ns'"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_hwdge_ns"]["value"] = -1; });
  EXPECT_THAT(e, HasSubstr("'dma_hwdge_ns'"));
  e = break_generation("trn3", [](ordered_json& j) { j.erase("dma_hwdge_ns"); });
  EXPECT_THAT(e, HasSubstr("'dma_hwdge_ns'"));
  EXPECT_THAT(e, HasSubstr("missing"));
}

TEST_F(ConfigErrors, MissingClock) {
  const std::string e = break_generation("trn1", [](ordered_json& j) { j["clocks"].erase("act"); });
  EXPECT_THAT(e, HasSubstr("trn1.json"));
  EXPECT_THAT(e, HasSubstr("'clocks.act'"));
  EXPECT_THAT(e, HasSubstr("missing"));
}

TEST_F(ConfigErrors, NonNumber) {
  const std::string e =
      break_generation("trn3", [](ordered_json& j) { j["min_interval"]["value"] = "sixty-four"; });
  EXPECT_THAT(e, HasSubstr("trn3.json"));
  EXPECT_THAT(e, HasSubstr("'min_interval'"));
  EXPECT_THAT(e, HasSubstr("not a number"));
}

TEST_F(ConfigErrors, ValueWithoutSource) {
  std::string e = break_generation("trn2", [](ordered_json& j) { j["pool_startup"] = 150; });
  EXPECT_THAT(e, HasSubstr("trn2.json"));
  EXPECT_THAT(e, HasSubstr("'pool_startup'"));
  EXPECT_THAT(e, HasSubstr("no source"));
  e = break_generation("trn2", [](ordered_json& j) { j["pool_startup"] = {{"value", 150}}; });
  EXPECT_THAT(e, HasSubstr("'pool_startup'"));
  EXPECT_THAT(e, HasSubstr("no source"));
  e = break_generation("trn2", [](ordered_json& j) { j["clocks"]["sp"]["source"] = " "; });
  EXPECT_THAT(e, HasSubstr("'clocks.sp'"));
  EXPECT_THAT(e, HasSubstr("no source"));
}

TEST_F(ConfigErrors, NonPositiveClocksAndBandwidths) {
  std::string e = break_generation("trn2", [](ordered_json& j) { j["clocks"]["pe"]["value"] = 0; });
  EXPECT_THAT(e, HasSubstr("trn2.json"));
  EXPECT_THAT(e, HasSubstr("'clocks.pe'"));
  EXPECT_THAT(e, HasSubstr("positive"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_engine_bytes_per_ns"]["value"] = 0; });
  EXPECT_THAT(e, HasSubstr("'dma_engine_bytes_per_ns'"));
  EXPECT_THAT(e, HasSubstr("positive"));
  e = break_generation("trn2", [](ordered_json& j) { j["hbm_bytes_per_ns"]["value"] = -2900; });
  EXPECT_THAT(e, HasSubstr("'hbm_bytes_per_ns'"));
  EXPECT_THAT(e, HasSubstr("positive"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_fixed_ns"]["value"] = -1; });
  EXPECT_THAT(e, HasSubstr("'dma_fixed_ns'"));
  EXPECT_THAT(e, HasSubstr("negative"));
}

TEST_F(ConfigErrors, PartitionsDisagreeWithTheIsaTarget) {
  const std::string e =
      break_generation("trn1", [](ordered_json& j) { j["partitions"]["value"] = 64; });
  EXPECT_THAT(e, HasSubstr("trn1.json"));
  EXPECT_THAT(e, HasSubstr("'partitions'"));
  EXPECT_THAT(e, HasSubstr("ISA target"));
}

TEST_F(ConfigErrors, MemorySizesDisagreeWithTheIsaTarget) {
  std::string e = break_generation(
      "trn2", [](ordered_json& j) { j["sbuf_partition_bytes"]["value"] = 196608; });
  EXPECT_THAT(e, HasSubstr("trn2.json"));
  EXPECT_THAT(e, HasSubstr("'sbuf_partition_bytes'"));
  EXPECT_THAT(e, HasSubstr("ISA target"));
  e = break_generation("trn2", [](ordered_json& j) { j["psum_partition_bytes"]["value"] = 32768; });
  EXPECT_THAT(e, HasSubstr("'psum_partition_bytes'"));
  EXPECT_THAT(e, HasSubstr("ISA target"));
}

TEST_F(ConfigErrors, IsaLimitsDisagreeWithTheIsaTarget) {
  std::string e =
      break_generation("trn3", [](ordered_json& j) { j["isa"]["pe_moving_fmax"]["value"] = 512; });
  EXPECT_THAT(e, HasSubstr("trn3.json"));
  EXPECT_THAT(e, HasSubstr("'isa.pe_moving_fmax'"));
  EXPECT_THAT(e, HasSubstr("disagrees with the ISA target trn3 (4096)"));
  e = break_generation("trn2", [](ordered_json& j) { j["isa"]["neff_target"]["value"] = "trn2"; });
  EXPECT_THAT(e, HasSubstr("'isa.neff_target'"));
  EXPECT_THAT(e, HasSubstr("cayman"));
  e = break_generation("trn2", [](ordered_json& j) { j["isa"]["neff_target"]["value"] = 2; });
  EXPECT_THAT(e, HasSubstr("'isa.neff_target'"));
  EXPECT_THAT(e, HasSubstr("not a non-empty string"));
  e = break_generation("trn1", [](ordered_json& j) { j.erase("isa"); });
  EXPECT_THAT(e, HasSubstr("'isa'"));
  EXPECT_THAT(e, HasSubstr("missing"));
  e = break_generation(
      "trn1", [](ordered_json& j) { j["isa"]["psum_fre_max"] = j["isa"]["psum_free_max"]; });
  EXPECT_THAT(e, HasSubstr("'isa.psum_fre_max'"));
  EXPECT_THAT(e, HasSubstr("unknown field"));
  e = break_generation("trn1", [](ordered_json& j) { j["isa"]["bn_stats_fmax"] = 512; });
  EXPECT_THAT(e, HasSubstr("'isa.bn_stats_fmax'"));
  EXPECT_THAT(e, HasSubstr("no source"));
}

// A generation the ISA does not know brings its own target limits, which it adds.
TEST_F(ConfigErrors, NewGenerationAddsItsIsaTarget) {
  auto made_up = [&](const std::string& name, const std::function<void(ordered_json&)>& edit) {
    ordered_json j = read_json(source_configs() / "trn2.json");
    j["name"] = name;
    j["isa"]["neff_target"]["value"] = name + "-kelf";
    edit(j);
    write_json(dir_ / (name + ".json"), j);
    return config_error([&] { load_generation(name, dir_); });
  };
  ASSERT_FALSE(isa::find_target_name("trnq"));
  EXPECT_EQ(made_up("trnq", [](ordered_json& j) { j["sbuf_partition_bytes"]["value"] = 131072; }),
            "<none>");
  const isa::Target& t = isa::target_by_name("trnq");
  EXPECT_EQ(t.sbuf_partition_bytes, 131072u);
  EXPECT_EQ(t.neff_target, "trnq-kelf");
  EXPECT_EQ(t.core_version, 3);
  EXPECT_EQ(t.psum_bank_bytes, 2048u);
  EXPECT_EQ(load_generation("trnq", dir_).target, &t);  // loading again finds the same target
  // Once added, a target is checked like a built-in one.
  std::string e = made_up("trnq", [](ordered_json& j) {
    j["sbuf_partition_bytes"]["value"] = 131072;
    j["isa"]["pe_moving_fmax"]["value"] = 256;
  });
  EXPECT_THAT(e, HasSubstr("trnq.json"));
  EXPECT_THAT(e, HasSubstr("'isa.pe_moving_fmax'"));
  EXPECT_THAT(e, HasSubstr("disagrees with the ISA target trnq (512)"));
  // A NEFF target that names another target, a name that is another name of a target.
  e = made_up("trnr", [](ordered_json& j) { j["isa"]["neff_target"]["value"] = "cayman"; });
  EXPECT_THAT(e, HasSubstr("'isa.neff_target'"));
  EXPECT_THAT(e, HasSubstr("already names the ISA target trn2"));
  e = made_up("inf2", [](ordered_json&) {});
  EXPECT_THAT(e, HasSubstr("'name'"));
  EXPECT_THAT(e, HasSubstr("another name of the ISA target trn1"));
  e = made_up("trnr", [](ordered_json& j) { j["isa"]["pe_stationary_fmax"]["value"] = 256; });
  EXPECT_THAT(e, HasSubstr("'isa.pe_stationary_fmax'"));
  // A file that fails adds nothing.
  e = made_up("trnr", [](ordered_json& j) { j["dma_engines"]["value"] = 12; });
  EXPECT_THAT(e, HasSubstr("'dma_engines'"));
  EXPECT_FALSE(isa::find_target_name("trnr"));
}

TEST_F(ConfigErrors, PsumNotDivisibleByBanks) {
  std::string e = break_generation("trn3", [](ordered_json& j) { j["psum_banks"]["value"] = 7; });
  EXPECT_THAT(e, HasSubstr("trn3.json"));
  EXPECT_THAT(e, HasSubstr("'psum_banks'"));
  EXPECT_THAT(e, HasSubstr("not divisible"));
  e = break_generation("trn3",
                       [](ordered_json& j) { j["psum_banks"]["value"] = 4; });  // 4 KiB banks
  EXPECT_THAT(e, HasSubstr("'psum_banks'"));
  EXPECT_THAT(e, HasSubstr("2048-byte banks"));
}

TEST_F(ConfigErrors, DmaEnginesAndQueues) {
  std::string e = break_generation("trn2", [](ordered_json& j) { j["dma_engines"]["value"] = 12; });
  EXPECT_THAT(e, HasSubstr("trn2.json"));
  EXPECT_THAT(e, HasSubstr("'dma_engines'"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_engines"]["value"] = 256; });
  EXPECT_THAT(e, HasSubstr("'dma_engines'"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_engines"]["value"] = 0; });
  EXPECT_THAT(e, HasSubstr("'dma_engines'"));
  e = break_generation("trn2", [](ordered_json& j) { j["dma_queues_per_engine"]["value"] = 4; });
  EXPECT_THAT(e, HasSubstr("'dma_queues_per_engine'"));
  e = break_generation("trn2",
                       [](ordered_json& j) { j["dma_queues_per_engine"]["value"] = 100000; });
  EXPECT_THAT(e, HasSubstr("'dma_queues_per_engine'"));
}

TEST_F(ConfigErrors, IntegerFieldsAndIdentity) {
  std::string e =
      break_generation("trn1", [](ordered_json& j) { j["pe_min_interval"]["value"] = 64.5; });
  EXPECT_THAT(e, HasSubstr("'pe_min_interval'"));
  EXPECT_THAT(e, HasSubstr("integer"));
  e = break_generation("trn1", [](ordered_json& j) { j["core_version"]["value"] = 3; });
  EXPECT_THAT(e, HasSubstr("'core_version'"));
  e = break_generation("trn1", [](ordered_json& j) { j["name"] = "trn2"; });
  EXPECT_THAT(e, HasSubstr("trn1.json"));
  EXPECT_THAT(e, HasSubstr("'name'"));
  e = break_generation("trn1", [](ordered_json& j) {
    j["dma_engine_bytes_per_nss"] = j["dma_engine_bytes_per_ns"];
  });
  EXPECT_THAT(e, HasSubstr("'dma_engine_bytes_per_nss'"));
  EXPECT_THAT(e, HasSubstr("unknown field"));
}

TEST_F(ConfigErrors, InvalidJsonAndUnknownGeneration) {
  {
    std::ofstream out(dir_ / "trn2.json", std::ios::trunc);
    out << "{ \"name\": \"trn2\", ";
  }
  std::string e = config_error([&] { load_generation("trn2", dir_); });
  EXPECT_THAT(e, HasSubstr("trn2.json"));
  EXPECT_THAT(e, HasSubstr("invalid JSON"));
  e = config_error([&] { load_generation("trn9", dir_); });
  EXPECT_THAT(e, HasSubstr("trn9"));
  EXPECT_THAT(e, HasSubstr("known: trn1, trn2, trn3"));
}

TEST_F(ConfigErrors, InstanceWithUnknownGeneration) {
  const std::string e =
      break_instance("trn2.3xlarge", [](ordered_json& i) { i["generation"] = "trn7"; });
  EXPECT_THAT(e, HasSubstr("instances.json"));
  EXPECT_THAT(e, HasSubstr("'trn2.3xlarge.generation'"));
  EXPECT_THAT(e, HasSubstr("unknown generation 'trn7'"));
}

TEST_F(ConfigErrors, InstanceCoresDisagreeWithGeneration) {
  const std::string e =
      break_instance("trn1.32xlarge", [](ordered_json& i) { i["cores_per_chip"] = 8; });
  EXPECT_THAT(e, HasSubstr("instances.json"));
  EXPECT_THAT(e, HasSubstr("'trn1.32xlarge.cores_per_chip'"));
  EXPECT_THAT(e, HasSubstr("trn1"));
}

TEST_F(ConfigErrors, InstanceFields) {
  std::string e = break_instance("trn2.48xlarge", [](ordered_json& i) { i.erase("source"); });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.source'"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["topology"] = "mesh"; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.topology'"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["topology"] = "none"; });  // 16 chips
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.topology'"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["chips"] = "16"; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.chips'"));
  EXPECT_THAT(e, HasSubstr("not a number"));
}

TEST_F(ConfigErrors, InstanceFamilyAndSize) {
  std::string e = break_instance("trn2.48xlarge", [](ordered_json& i) { i.erase("family"); });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.family'"));
  EXPECT_THAT(e, HasSubstr("missing"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["family"] = "Trn2"; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.family'"));
  for (const char* bad : {"48xl", "large", "048xlarge", "x48xlarge", ""}) {
    e = break_instance("trn2.48xlarge", [&](ordered_json& i) { i["size"] = bad; });
    EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.size'")) << bad;
  }
  EXPECT_EQ(break_instance("trn2.48xlarge", [](ordered_json& i) { i["size"] = "xlarge"; }),
            "<none>");
}

TEST_F(ConfigErrors, InstanceLinkFigures) {
  // Required where the topology has the links, refused where it has none.
  std::string e =
      break_instance("inf2.24xlarge", [](ordered_json& i) { i.erase("neuronlink_bytes_per_s"); });
  EXPECT_THAT(e, HasSubstr("instances.json"));
  EXPECT_THAT(e, HasSubstr("'inf2.24xlarge.neuronlink_bytes_per_s'"));
  EXPECT_THAT(e, HasSubstr("missing field (topology 'ring')"));
  e = break_instance("trn1.2xlarge", [](ordered_json& i) {
    i["neuronlink_bytes_per_s"] = {{"value", 1000}, {"source", "x"}};
  });
  EXPECT_THAT(e, HasSubstr("'trn1.2xlarge.neuronlink_bytes_per_s'"));
  EXPECT_THAT(e, HasSubstr("not allowed (topology 'none')"));
  e = break_instance("trn2u-ultraserver",
                     [](ordered_json& i) { i.erase("instance_link_latency_ns"); });
  EXPECT_THAT(e, HasSubstr("'trn2u-ultraserver.instance_link_latency_ns'"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i.erase("efa_gbps"); });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.efa_latency_ns'"));
  EXPECT_THAT(e, HasSubstr("without efa_gbps"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i.erase("efa_latency_ns"); });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.efa_latency_ns'"));
  EXPECT_THAT(e, HasSubstr("with efa_gbps"));
  // Each figure is a sourced positive integer (latencies: non-negative numbers).
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["efa_gbps"] = 3200; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.efa_gbps'"));
  EXPECT_THAT(e, HasSubstr("no source"));
  e = break_instance("trn2.48xlarge",
                     [](ordered_json& i) { i["neuronlink_bytes_per_s"]["value"] = 0; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.neuronlink_bytes_per_s'"));
  EXPECT_THAT(e, HasSubstr("at least 1"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["efa_latency_ns"]["value"] = -1; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.efa_latency_ns'"));
  EXPECT_THAT(e, HasSubstr("negative"));
  e = break_instance("trn2.48xlarge", [](ordered_json& i) { i["efa_gbsp"] = i["efa_gbps"]; });
  EXPECT_THAT(e, HasSubstr("'trn2.48xlarge.efa_gbsp'"));
  EXPECT_THAT(e, HasSubstr("unknown field"));
  // The generation's link latencies.
  e = break_generation("trn2", [](ordered_json& j) { j.erase("neuronlink_latency_ns"); });
  EXPECT_THAT(e, HasSubstr("'neuronlink_latency_ns'"));
  e = break_generation("trn2", [](ordered_json& j) { j["intra_chip_latency_ns"]["value"] = -5; });
  EXPECT_THAT(e, HasSubstr("'intra_chip_latency_ns'"));
}

TEST_F(ConfigErrors, RuntimeReleases) {
  auto broken = [&](const std::function<void(ordered_json&)>& edit,
                    const std::string& name = "2.10") {
    ordered_json j = read_json(source_configs() / "runtime-releases.json");
    edit(j);
    write_json(dir_ / "runtime-releases.json", j);
    return config_error([&] { load_runtime_release(name, dir_); });
  };
  std::string e = config_error([&] { load_runtime_release("1.0", dir_); });
  EXPECT_THAT(e, HasSubstr("runtime-releases.json"));
  EXPECT_THAT(e, HasSubstr("unknown runtime release '1.0' (known: 2.10, 2.24"));
  e = broken([](ordered_json& j) { j["releases"]["2.10"].erase("source"); });
  EXPECT_THAT(e, HasSubstr("'releases.2.10.source'"));
  e = broken([](ordered_json& j) { j["releases"]["2.10"]["collective_fixed_ns"]["value"] = -1; });
  EXPECT_THAT(e, HasSubstr("'releases.2.10.collective_fixed_ns'"));
  EXPECT_THAT(e, HasSubstr("negative"));
  e = broken([](ordered_json& j) { j["releases"]["2.10"]["across_hosts_fixed_ns"] = 5; });
  EXPECT_THAT(e, HasSubstr("has no source"));
  e = broken([](ordered_json& j) { j["releases"]["2.10"]["algorithms"]["value"] = "ring kanga"; });
  EXPECT_THAT(e, HasSubstr("unknown algorithm 'kanga'"));
  e = broken([](ordered_json& j) { j["releases"]["2.10"]["algorithms"]["value"] = "mesh rdh"; });
  EXPECT_THAT(e, HasSubstr("must list ring"));
  e = broken([](ordered_json& j) { j["releases"]["2.10"]["algorithms"]["value"] = "ring, ring"; });
  EXPECT_THAT(e, HasSubstr("'ring' is listed twice"));
  e = broken([](ordered_json& j) {
    j["releases"]["2.10"]["fixed_ns"] = j["releases"]["2.10"]["collective_fixed_ns"];
  });
  EXPECT_THAT(e, HasSubstr("'releases.2.10.fixed_ns'"));
  EXPECT_THAT(e, HasSubstr("unknown field"));
  e = broken([](ordered_json& j) { j["releases"]["latest"] = j["releases"]["2.10"]; });
  EXPECT_THAT(e, HasSubstr("named by its version"));
  e = broken([](ordered_json& j) { j.erase("releases"); });
  EXPECT_THAT(e, HasSubstr("'releases'"));
  // Versions order by number, not text: 2.9 is older than 2.10.
  broken([](ordered_json& j) {
    j["releases"]["2.9"] = j["releases"]["2.10"];
    j["releases"].erase("2.24");
  });
  EXPECT_EQ(runtime_release_names(dir_), (std::vector<std::string>{"2.9", "2.10"}));
  EXPECT_EQ(load_runtime_release("", dir_).name, "2.10");
  // A directory without the file (a made-up generation's) uses the built-in releases.
  fs::remove(dir_ / "runtime-releases.json");
  EXPECT_EQ(runtime_release_names(dir_), runtime_release_names(fs::path()));
}

TEST_F(ConfigErrors, UnknownInstanceListsKnownOnes) {
  const std::string e = config_error([&] { load_instance("trn2.96xlarge", dir_); });
  EXPECT_THAT(e, HasSubstr("instances.json"));
  EXPECT_THAT(e, HasSubstr("unknown instance 'trn2.96xlarge'"));
  EXPECT_THAT(e, HasSubstr("trn2.48xlarge"));
  EXPECT_THAT(e, HasSubstr("inf2.xlarge"));
}

}  // namespace
}  // namespace neuronsim::spec
