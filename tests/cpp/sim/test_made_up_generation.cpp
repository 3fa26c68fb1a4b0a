// A new generation and instance from JSON alone: a made-up generation "trnz" and two instances
// of it, written into a directory of their own, load through spec (which adds trnz's ISA
// target), run a kernel through the simulator and collectives across their fabric, and every
// time comes from their figures.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "neuronsim/cc/communicator.h"
#include "neuronsim/cc/fabric.h"
#include "neuronsim/cc/runner.h"
#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/sim/cost_model.h"
#include "neuronsim/sim/simulator.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

constexpr uint64_t kFastLink = 100'000'000'000;  // bytes per second, one direction of one link
constexpr uint64_t kSlowLink = 50'000'000'000;
constexpr double kHopNs = 700, kIntraChipNs = 300, kHbmBytesPerNs = 1000;

// {"value": v, "source": ...}
ordered_json figure(const ordered_json& value) {
  return {{"value", value}, {"source", "made up for a test"}};
}

// trnz: trn2's file with another name, its own ISA limits (128 KiB of SBUF per partition, a
// moving free size of 1024), clocks, DMA, HBM, link latencies and algorithm thresholds.
ordered_json trnz_generation() {
  ordered_json g = ordered_json::parse(spec::builtin_configs().at("trn2.json"));
  g["description"] = "a generation that does not exist";
  g["name"] = "trnz";
  g["core_version"] = figure(9);
  g["clocks"]["act"] = figure(2.4);  // twice trn2's
  g["clocks"]["dve"] = figure(1.92);
  g["sbuf_partition_bytes"] = figure(131072);
  g["isa"]["neff_target"] = figure("trnz");
  g["isa"]["pe_moving_fmax"] = figure(1024);
  g["cores_per_chip"] = figure(4);
  g["dma_engine_bytes_per_ns"] = figure(46);
  g["hbm_bytes_per_ns"] = figure(kHbmBytesPerNs);
  g["neuronlink_latency_ns"] = figure(kHopNs);
  g["intra_chip_latency_ns"] = figure(kIntraChipNs);
  g["cc_mesh_below_bytes"] = figure(1000);
  g["cc_rdh_below_bytes"] = figure(2000);
  return g;
}

ordered_json trnz_instance(uint64_t link_bytes_per_s) {
  return {{"generation", "trnz"},
          {"chips", 4},
          {"cores_per_chip", 4},
          {"topology", "ring"},
          {"family", "trnz"},
          {"size", "4xlarge"},
          {"source", "made up for a test"},
          {"neuronlink_bytes_per_s", figure(link_bytes_per_s)}};
}

class MadeUpGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / fmt::format("neuronsim-made-up-{}", ::getpid()));
    fs::create_directories(*dir_);
    std::ofstream(*dir_ / "trnz.json") << trnz_generation().dump(2);
    ordered_json instances = {{"description", "instances of a generation that does not exist"}};
    instances["instances"]["trnz.4xlarge"] = trnz_instance(kFastLink);
    instances["instances"]["trnz.4xlarge-slow"] = trnz_instance(kSlowLink);
    std::ofstream(*dir_ / "instances.json") << instances.dump(2);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static spec::InstanceConfig instance(const std::string& name = "trnz.4xlarge") {
    return spec::load_instance(name, *dir_);
  }

  static fs::path* dir_;
};

fs::path* MadeUpGeneration::dir_ = nullptr;

TEST_F(MadeUpGeneration, LoadsAndAddsItsIsaTarget) {
  const spec::InstanceConfig inst = instance();
  EXPECT_EQ(inst.total_cores(), 16u);
  EXPECT_EQ(inst.family, "trnz");
  const spec::GenerationConfig& gen = inst.generation_config;
  EXPECT_EQ(gen.name, "trnz");
  EXPECT_DOUBLE_EQ(gen.act_ghz, 2.4);
  ASSERT_NE(gen.target, nullptr);
  EXPECT_EQ(gen.target, &isa::target_by_name("trnz"));
  EXPECT_EQ(gen.target->sbuf_partition_bytes, 131072u);
  EXPECT_EQ(gen.target->pe_moving_fmax, 1024u);
  EXPECT_EQ(gen.target->core_version, 9);
  EXPECT_EQ(spec::generation_names(*dir_), std::vector<std::string>{"trnz"});
  // The same through NEURONSIM_CONFIG_DIR.
  const char* old = std::getenv("NEURONSIM_CONFIG_DIR");
  const std::string saved = old ? old : "";
  ::setenv("NEURONSIM_CONFIG_DIR", dir_->c_str(), 1);
  EXPECT_EQ(spec::load_instance("trnz.4xlarge-slow").neuronlink_bytes_per_s, kSlowLink);
  EXPECT_THROW(spec::load_instance("trn2.3xlarge"), spec::ConfigError);  // not in that directory
  if (old)
    ::setenv("NEURONSIM_CONFIG_DIR", saved.c_str(), 1);
  else
    ::unsetenv("NEURONSIM_CONFIG_DIR");
}

TEST_F(MadeUpGeneration, ProgramsFollowItsIsaLimits) {
  instance();  // adds the target
  const std::string beyond_128k = "dve memset dst=sbuf.fp32[0:1]+131072[[1,1]]\n";
  EXPECT_NO_THROW(isa::assemble(".target trn2\n" + beyond_128k));
  EXPECT_THROW(isa::assemble(".target trnz\n" + beyond_128k), isa::AsmError);
  // A moving free size of 1024 (trn2: 512); core version 9 may write across PSUM banks, as v4 does.
  const std::string moving_1024 =
      "pe matmul dst=psum.fp32[0:128]+0[[1,1024]] stationary=sbuf.bf16[0:128]+0[[1,128]] "
      "moving=sbuf.bf16[0:128]+256[[1,1024]]\n";
  EXPECT_NO_THROW(isa::assemble(".target trnz\n" + moving_1024));
  try {
    isa::assemble(".target trn2\n" + moving_1024);
    FAIL() << "trn2 accepted a moving free size of 1024";
  } catch (const isa::AsmError& e) {
    EXPECT_THAT(e.what(), HasSubstr("free size 1024 exceeds 512"));
  }
}

// x -> SBUF -> square on ACT -> +1 on DVE -> y.
isa::Program square_plus_one(const std::string& target) {
  isa::KernelBuilder kb(target);
  const auto x = kb.input("x", isa::DType::fp32, {128, 512});
  const auto y = kb.output("y", isa::DType::fp32, {128, 512});
  const auto t0 = kb.sbuf_tile(isa::DType::fp32, 128, 512);
  const auto t1 = kb.sbuf_tile(isa::DType::fp32, 128, 512);
  kb.dma_copy(t0, x);
  kb.activation(t1, t0, isa::ActFunc::square);
  kb.tensor_scalar(isa::Engine::DVE, t1, t1, isa::AluOp::add, 1.0f);
  kb.dma_copy(y, t1);
  return kb.finish();
}

float x_value(size_t i) {
  return static_cast<float>(i % 97) * 0.25f - 3.0f;
}

struct KernelRun {
  RunResult result;
  std::vector<float> y;
};

// Runs `p` on `core` of the instance, x filled with x_value. The records point into `p`.
KernelRun run_kernel(const spec::InstanceConfig& inst, const isa::Program& p, uint32_t core) {
  Simulator sim(inst, inst.generation_config);
  CoreState& st = sim.core(core);
  bind_tensors(p, st, 0);
  const isa::TensorDecl* x = p.find_tensor("x");
  std::vector<float> xs(x->num_elems());
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = x_value(i);
  st.hbm.write(st.tensors.at(x->var_id).address, xs.data(), xs.size() * sizeof(float));
  sim.load(core, p);
  RunOptions o;
  o.record = true;
  KernelRun run{sim.run(o), {}};
  const isa::TensorDecl* y = p.find_tensor("y");
  run.y.resize(y->num_elems());
  st.hbm.read(st.tensors.at(y->var_id).address, run.y.data(), run.y.size() * sizeof(float));
  return run;
}

const InstructionRecord& record(const RunResult& r, isa::Opcode op) {
  for (const InstructionRecord& rec : r.instructions)
    if (rec.inst->opcode == op) return rec;
  throw std::out_of_range("no such instruction");
}

TEST_F(MadeUpGeneration, RunsAKernelThroughTheSimulatorWithItsFigures) {
  const spec::InstanceConfig trnz = instance();
  const isa::Program pz = square_plus_one("trnz");
  const KernelRun z = run_kernel(trnz, pz, 13);  // core 1 of chip 3
  for (size_t i = 0; i < z.y.size(); i += 37)
    EXPECT_FLOAT_EQ(z.y[i], x_value(i) * x_value(i) + 1.0f) << i;
  EXPECT_EQ(z.result.generation, "trnz");
  // The same kernel on trn2, whose ACT and DVE clocks are half of trnz's and whose DMA engines
  // move half the bytes per ns: the engines' busy times halve, the transfers go twice as fast.
  const spec::InstanceConfig trn2 = spec::load_instance("trn2.3xlarge", fs::path());
  const isa::Program p2 = square_plus_one("trn2");
  const KernelRun two = run_kernel(trn2, p2, 0);
  EXPECT_EQ(two.y, z.y);
  for (isa::Opcode op : {isa::Opcode::activation, isa::Opcode::tensor_scalar}) {
    const InstructionRecord& a = record(z.result, op);
    const InstructionRecord& b = record(two.result, op);
    EXPECT_NEAR(2.0 * static_cast<double>(a.end_ps - a.start_ps),
                static_cast<double>(b.end_ps - b.start_ps), 2.0)
        << isa::opcode_info(op).name;
  }
  ASSERT_FALSE(z.result.dmas.empty());
  const DmaRecord& d = z.result.dmas.front();
  EXPECT_EQ(d.end_ps - d.start_ps, dma_transfer_ps(d.bytes, d.descriptors, trnz.generation_config));
  EXPECT_NE(dma_transfer_ps(d.bytes, d.descriptors, trnz.generation_config),
            dma_transfer_ps(d.bytes, d.descriptors, trn2.generation_config));
}

TEST_F(MadeUpGeneration, FabricUsesItsLinkFigures) {
  const spec::InstanceConfig fast = instance(), slow = instance("trnz.4xlarge-slow");
  const uint64_t bytes = 1 << 20;
  auto one_message = [&](const spec::InstanceConfig& inst, cc::Placement placement) {
    cc::Fabric f = cc::Fabric::make(inst, 2, placement);
    cc::Picos at = 0;
    f.recv(1, 0, nullptr, bytes, 7, nullptr);
    f.send(0, 1, nullptr, bytes, 7, [&] { at = f.now(); });
    f.run();
    return at;
  };
  // Chip to chip: one hop of the generation's latency at the instance's link bandwidth.
  const cc::Picos hop = static_cast<cc::Picos>(kHopNs) * cc::kPicosPerNs;
  EXPECT_EQ(one_message(fast, cc::Placement::one_per_chip),
            hop + cc::Fabric::serialize_ps(bytes, kFastLink));
  EXPECT_EQ(one_message(slow, cc::Placement::one_per_chip),
            hop + cc::Fabric::serialize_ps(bytes, kSlowLink));
  // Core to core inside a chip: the generation's intra-chip latency, and the slower of its HBM
  // (1,000 B/ns) and the sending core's DMA engines (16 x 46 B/ns = 736 B/ns, at most what they
  // move together, dma_core_bytes_per_ns: trn2's 368 B/ns in this file, which the fabric
  // follows since 2026-12).
  const double engines = std::min(16.0 * 46, fast.generation_config.dma_core_bytes_per_ns);
  EXPECT_EQ(one_message(fast, cc::Placement::packed),
            static_cast<cc::Picos>(kIntraChipNs) * cc::kPicosPerNs +
                cc::Fabric::serialize_ps(bytes, static_cast<uint64_t>(engines * 1e9 + 0.5)));
  EXPECT_EQ(one_message(slow, cc::Placement::packed), one_message(fast, cc::Placement::packed));
}

TEST_F(MadeUpGeneration, CollectiveOnItsFabric) {
  const spec::InstanceConfig fast = instance(), slow = instance("trnz.4xlarge-slow");
  // The generation's thresholds: ring from 2,000 bytes (trn2 would take RDH at 1 MiB).
  const cc::Thresholds t = cc::thresholds_for(fast);
  EXPECT_EQ(t.mesh_below_bytes, 1000u);
  EXPECT_EQ(t.rdh_below_bytes, 2000u);
  const int R = 4;
  const uint64_t count = 1 << 18;  // 1 MiB of fp32 per rank
  cc::CollectiveSpec all_reduce{
      cc::Op::all_reduce, cc::ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < R; ++r) {
    std::vector<float> v(count);
    for (uint64_t i = 0; i < count; ++i)
      v[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7));
    inputs.emplace_back(reinterpret_cast<const uint8_t*>(v.data()),
                        reinterpret_cast<const uint8_t*>(v.data()) + v.size() * sizeof(float));
  }
  cc::RunOptions one_per_chip;
  one_per_chip.placement = cc::Placement::one_per_chip;
  one_per_chip.runtime = cc::RuntimeCosts::none();  // the fabric alone, no runtime release's cost
  const cc::CollectiveResult f = cc::run_collective(fast, R, all_reduce, inputs, one_per_chip);
  EXPECT_EQ(f.algorithm, cc::Algorithm::ring);
  ASSERT_EQ(f.outputs.size(), static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    const auto* out = reinterpret_cast<const float*>(f.outputs[static_cast<size_t>(r)].data());
    for (uint64_t i = 0; i < count; i += 1001)
      EXPECT_EQ(out[i], static_cast<float>(10 * (i % 7))) << r << " " << i;
  }
  // A ring all-reduce on 4 ranks is 2 x 3 steps, each one hop of a quarter of the data, and the
  // last reduction of the reduce-scatter at the DMA engines' reduction rate (the others travel
  // with the next step's sends, faster than the link; since 2026-12); halving the link bandwidth
  // doubles the serialization and leaves the hops and the reduction.
  const cc::CollectiveResult s = cc::run_collective(slow, R, all_reduce, inputs, one_per_chip);
  EXPECT_EQ(s.outputs, f.outputs);
  const cc::Picos hops = 6 * static_cast<cc::Picos>(kHopNs) * cc::kPicosPerNs;
  const cc::Picos reduce = cc::Fabric::serialize_ps(
      count * 4 / R, cc::FabricParams::for_instance(fast).reduce_bytes_per_s);
  EXPECT_EQ(f.duration_ps, hops + 6 * cc::Fabric::serialize_ps(count * 4 / R, kFastLink) + reduce);
  EXPECT_EQ(s.duration_ps, hops + 6 * cc::Fabric::serialize_ps(count * 4 / R, kSlowLink) + reduce);
}

// The same all-reduce as an instruction of a program, on core 0 of each of the 4 chips, through
// the simulator and a FabricCommunicator of the made-up instance.
TEST_F(MadeUpGeneration, CollectiveInstructionThroughTheSimulator) {
  const int R = 4;
  const int64_t n = 4096;
  auto run = [&](const spec::InstanceConfig& inst) {
    Simulator sim(inst, inst.generation_config);
    cc::RunOptions placement;
    std::vector<isa::Program> programs;
    for (int r = 0; r < R; ++r) {
      isa::KernelBuilder kb("trnz");
      const auto x = kb.input("x", isa::DType::fp32, {1, n});
      const auto y = kb.output("y", isa::DType::fp32, {1, n});
      isa::Instruction in;
      in.opcode = isa::Opcode::all_reduce;
      in.engine = isa::Engine::SP;
      in.operands = {{isa::Role::dst, y}, {isa::Role::src, x}};
      in.alu0 = isa::AluOp::add;
      kb.emit(in);
      programs.push_back(kb.finish());
      placement.cores.push_back({static_cast<uint32_t>(r), 0});
    }
    cc::FabricCommunicator comm(inst, R, placement);
    RunOptions o;
    o.record = true;
    o.collectives.communicator = &comm;
    for (int r = 0; r < R; ++r) {
      const uint32_t core = static_cast<uint32_t>(r) * inst.cores_per_chip;
      CoreState& st = sim.core(core);
      bind_tensors(programs[static_cast<size_t>(r)], st, 0);
      std::vector<float> v(n, static_cast<float>(r + 1));
      st.hbm.write(st.tensors.at(programs[static_cast<size_t>(r)].find_tensor("x")->var_id).address,
                   v.data(), v.size() * sizeof(float));
      sim.load(core, programs[static_cast<size_t>(r)]);
      o.collectives.ranks[core] = r;
    }
    const RunResult result = sim.run(o);
    for (int r = 0; r < R; ++r) {
      CoreState& st = sim.core(static_cast<uint32_t>(r) * inst.cores_per_chip);
      std::vector<float> y(n);
      st.hbm.read(st.tensors.at(programs[static_cast<size_t>(r)].find_tensor("y")->var_id).address,
                  y.data(), y.size() * sizeof(float));
      EXPECT_EQ(y, std::vector<float>(n, 10.0f)) << inst.name << " rank " << r;
    }
    const InstructionRecord& rec = record(result, isa::Opcode::all_reduce);
    return rec.end_ps - rec.start_ps;
  };
  const uint64_t fast = run(instance()), slow = run(instance("trnz.4xlarge-slow"));
  // 16 KiB per rank: a ring (from 2,000 bytes on trnz) of 6 steps of 4 KiB each.
  const uint64_t chunk = n * 4 / R;
  EXPECT_EQ(slow - fast, 6 * (cc::Fabric::serialize_ps(chunk, kSlowLink) -
                              cc::Fabric::serialize_ps(chunk, kFastLink)));
}

}  // namespace
}  // namespace neuronsim::sim
