// The fabric across instances: the Trn2 UltraServer's Z ring and EFA between instances.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fabric_util.h"
#include "neuronsim/cc/fabric.h"
#include "neuronsim/cc/runner.h"
#include "neuronsim/spec/config.h"

using namespace neuronsim;
using namespace neuronsim::cc;
using namespace neuronsim::cc::testing;

namespace {

constexpr Picos kHop = 1500 * kPicosPerNs;  // NeuronLink hop, also a Z hop [R3, I]
constexpr Picos kEfa = 15 * kPicosPerUs;    // EFA instance to instance [R3, R4]
constexpr Picos kMs = 1'000'000'000;        // one millisecond in ps

TEST(FabricMultiInstance, UltraServerConfig) {
  const auto& us = inst("trn2u-ultraserver");
  EXPECT_EQ(us.chips, 64u);
  EXPECT_EQ(us.total_cores(), 512u);
  EXPECT_EQ(us.instances, 4u);
  EXPECT_EQ(us.instance_link, "ring");
  EXPECT_EQ(us.chips_per_instance(), 16u);
  EXPECT_EQ(us.cores_per_instance(), 128u);
  EXPECT_EQ(inst("trn2u.48xlarge").instances, 1u);  // the single instance stays one
  EXPECT_EQ(inst("trn2u.48xlarge").instance_link, "none");
}

TEST(FabricMultiInstance, FiguresFromTheNotes) {
  auto trn2 = spec::load_generation("trn2"), trn1 = spec::load_generation("trn1");
  auto us = FabricParams::for_instance(inst("trn2u-ultraserver"), trn2);
  EXPECT_EQ(us.link_bytes_per_s, 256'000'000'000u);    // 1,024 GB/s per chip / 4 torus links
  EXPECT_EQ(us.z_link_bytes_per_s, 128'000'000'000u);  // 256 GB/s per chip / 2 Z links
  EXPECT_EQ(us.z_link_latency_ps, kHop);
  EXPECT_EQ(us.efa_bytes_per_s,
            25'000'000'000u);  // 3,200 Gbps per trn2u instance / 16 chips = 200 Gbps
  EXPECT_EQ(FabricParams::for_instance(inst("trn2.48xlarge"), trn2).efa_bytes_per_s,
            25'000'000'000u);
  EXPECT_EQ(FabricParams::for_instance(inst("trn2.48xlarge"), trn2).z_link_bytes_per_s, 0u);
  auto t1 = FabricParams::for_instance(inst("trn1.32xlarge"), trn1);
  EXPECT_EQ(t1.efa_bytes_per_s, 6'250'000'000u);  // 800 Gbps / 16 chips = 50 Gbps
  EXPECT_EQ(t1.efa_latency_ps, kEfa);
  EXPECT_EQ(FabricParams::for_instance(inst("trn1n.32xlarge"), trn1).efa_bytes_per_s,
            12'500'000'000u);
  EXPECT_EQ(FabricParams::for_instance(inst("inf2.48xlarge"), trn1).efa_bytes_per_s, 0u);
  EXPECT_EQ(FabricParams::for_instance(inst("trn1.2xlarge"), trn1).efa_bytes_per_s, 0u);
}

TEST(FabricMultiInstance, InstancesFollowFromRanksAndPlacement) {
  const auto& t1 = inst("trn1.32xlarge");
  EXPECT_EQ(Fabric::make(t1, 32, Placement::packed).instances(), 1u);
  EXPECT_EQ(Fabric::make(t1, 33, Placement::packed).instances(), 2u);  // ceil(33 / 32)
  EXPECT_EQ(Fabric::make(t1, 16, Placement::one_per_chip).instances(), 1u);
  EXPECT_EQ(Fabric::make(t1, 17, Placement::one_per_chip).instances(), 2u);  // ceil(17 / 16)
  EXPECT_EQ(Fabric::make(t1, 80, Placement::packed).instances(), 3u);
  auto cores = Fabric::place(t1, 64, Placement::packed);
  EXPECT_EQ(cores[31].instance, 0u);
  EXPECT_EQ(cores[32].instance, 1u);
  EXPECT_EQ(cores[32].chip, 0u);
  EXPECT_EQ(cores[63].chip, 15u);
  EXPECT_EQ(cores[63].core, 1u);
  // An UltraServer is always whole: 4 instances, 8 once the ranks need a second one.
  const auto& us = inst("trn2u-ultraserver");
  EXPECT_EQ(Fabric::make(us, 1).instances(), 4u);
  EXPECT_EQ(Fabric::make(us, 512).instances(), 4u);
  EXPECT_EQ(Fabric::make(us, 513).instances(), 8u);
  EXPECT_EQ(Fabric::make(us, 64, Placement::one_per_chip).instances(), 4u);
  // One instance keeps the plain names; several prefix the instance.
  EXPECT_EQ(Fabric::make(t1, 32).links().front().name, "chip0+x");
  EXPECT_EQ(Fabric::make(t1, 33).links().front().name, "inst0.chip0+x");
}

TEST(FabricMultiInstance, ZRingRoutes) {
  Fabric f = Fabric::make(inst("trn2u-ultraserver"), 64,
                          Placement::one_per_chip);  // rank r: inst r/16, chip r%16
  EXPECT_EQ(link_names(f, 0, 16), (std::vector<std::string>{"inst0.chip0+z"}));
  EXPECT_EQ(link_names(f, 0, 48), (std::vector<std::string>{"inst0.chip0-z"}));  // wrap-around
  EXPECT_EQ(link_names(f, 0, 32),
            (std::vector<std::string>{"inst0.chip0+z", "inst1.chip0+z"}));  // tie: positive
  EXPECT_EQ(link_names(f, 32, 0), (std::vector<std::string>{"inst2.chip0+z", "inst3.chip0+z"}));
  EXPECT_EQ(link_names(f, 0, 1), (std::vector<std::string>{"inst0.chip0+x"}));
  // X, then Y, then Z.
  EXPECT_EQ(link_names(f, 0, 21),
            (std::vector<std::string>{"inst0.chip0+x", "inst0.chip1+y", "inst0.chip5+z"}));
  EXPECT_EQ(link_names(f, 63, 0),
            (std::vector<std::string>{"inst3.chip15+x", "inst3.chip12+y", "inst3.chip0+z"}));
  EXPECT_EQ(link_names(f, 37, 10),  // instance 2 chip 5 to instance 0 chip 10: Z 2 -> 0 is a tie
            (std::vector<std::string>{"inst2.chip5+x", "inst2.chip6+y", "inst2.chip10+z",
                                      "inst3.chip10+z"}));
  // Packed: core to core in a chip through HBM; rank 128 is chip 0 of the next instance.
  Fabric p = Fabric::make(inst("trn2u-ultraserver"), 512);
  EXPECT_EQ(link_names(p, 0, 1), (std::vector<std::string>{"inst0.chip0.hbm"}));
  EXPECT_EQ(link_names(p, 0, 128), (std::vector<std::string>{"inst0.chip0+z"}));
  // Past 512 ranks a second UltraServer, reached over EFA only.
  Fabric two = Fabric::make(inst("trn2u-ultraserver"), 513);
  EXPECT_EQ(link_names(two, 0, 512),
            (std::vector<std::string>{"inst0.chip0.efa.out", "inst4.chip0.efa.in"}));
  EXPECT_EQ(link_names(two, 511, 0),
            (std::vector<std::string>{"inst3.chip15+x", "inst3.chip12+y", "inst3.chip0+z"}));
  EXPECT_EQ(two.links()[two.links().size() - 514].name, "inst7.chip15.efa.in");
  EXPECT_EQ(two.links().back().name, "rank512.dma");  // then each rank's DMA engines
}

TEST(FabricMultiInstance, OneMessageOverZ) {
  const uint64_t bytes = 128'000'000;  // 1 ms at 128 GB/s
  const auto& us = inst("trn2u-ultraserver");
  Fabric a = Fabric::make(us, 64, Placement::one_per_chip);
  EXPECT_EQ(deliver(a, {{0, 16}}, bytes)[0], kMs + kHop);
  Fabric b = Fabric::make(us, 64, Placement::one_per_chip);
  EXPECT_EQ(deliver(b, {{0, 32}}, bytes)[0], kMs + 2 * kHop);  // two Z hops, cut-through
  // X and Y at 256 GB/s (0.5 ms) hide under the slower Z link: its serialization, three latencies.
  Fabric c = Fabric::make(us, 64, Placement::one_per_chip);
  EXPECT_EQ(deliver(c, {{0, 21}}, bytes)[0], kMs + 3 * kHop);
  // 0->16 and 0->32 share inst0.chip0+z: their chunks take turns, both take about twice as long.
  Fabric d = Fabric::make(us, 64, Placement::one_per_chip);
  auto both = deliver(d, {{0, 16}, {0, 32}}, bytes);
  EXPECT_GT(both[0], 2 * kMs - 2 * Fabric::serialize_ps(64 * 1024, 128'000'000'000));
  EXPECT_EQ(both[1], 2 * kMs + 2 * kHop);
}

TEST(FabricMultiInstance, OneMessageOverEfa) {
  const uint64_t bytes = 6'250'000;  // 1 ms at a trn1 chip's 50 Gbps share of EFA
  const auto& t1 = inst("trn1.32xlarge");
  Fabric f = Fabric::make(t1, 32, Placement::one_per_chip);  // ranks 16..31 on the second instance
  EXPECT_EQ(link_names(f, 0, 16),
            (std::vector<std::string>{"inst0.chip0.efa.out", "inst1.chip0.efa.in"}));
  EXPECT_EQ(link_names(f, 21, 5),
            (std::vector<std::string>{"inst1.chip5.efa.out", "inst0.chip5.efa.in"}));
  EXPECT_EQ(link_names(f, 0, 1), (std::vector<std::string>{"inst0.chip0+x"}));
  EXPECT_EQ(deliver(f, {{0, 16}}, bytes)[0], kMs + kEfa);
  Fabric z = Fabric::make(t1, 32, Placement::one_per_chip);
  EXPECT_EQ(deliver(z, {{3, 30}}, 0)[0], kEfa);  // a zero-byte message still pays the latency
  // trn2.48xlarge: 200 Gbps per chip = 25 GB/s.
  Fabric t2 = Fabric::make(inst("trn2.48xlarge"), 32, Placement::one_per_chip);
  EXPECT_EQ(deliver(t2, {{0, 16}}, 25'000'000)[0], kMs + kEfa);
}

TEST(FabricMultiInstance, ContentionOnAnEfaNic) {
  const uint64_t bytes = 6'250'000;  // 1 ms at 50 Gbps
  const auto& t1 = inst("trn1.32xlarge");
  // Two messages of chip 0 to instance 1: both leave through its EFA share, chunks in turn.
  const Picos chunk = Fabric::serialize_ps(64 * 1024, bytes * 1000);  // at 50 Gbps
  Fabric f = Fabric::make(t1, 32, Placement::one_per_chip);
  auto out = deliver(f, {{0, 16}, {0, 17}}, bytes);
  EXPECT_GT(out[0], 2 * kMs - 2 * chunk + kEfa);
  EXPECT_EQ(out[1], 2 * kMs + kEfa);
  EXPECT_EQ(link(f, "inst0.chip0.efa.out").messages, 2u);
  EXPECT_EQ(link(f, "inst0.chip0.efa.out").bytes_carried, 2 * bytes);
  EXPECT_EQ(link(f, "inst1.chip0.efa.out").messages, 0u);
  // Two chips of one instance have a share each: no waiting.
  Fabric e = Fabric::make(t1, 32, Placement::one_per_chip);
  auto apart = deliver(e, {{0, 16}, {1, 17}}, bytes);
  EXPECT_EQ(apart[0], kMs + kEfa);
  EXPECT_EQ(apart[1], kMs + kEfa);
  // Chip 0 of instances 0 and 1 to chip 0 of instance 2: separate egresses, one ingress.
  Fabric g = Fabric::make(t1, 48, Placement::one_per_chip);
  auto in = deliver(g, {{0, 32}, {16, 32}}, bytes);
  EXPECT_GT(in[0], 2 * kMs - 2 * chunk + kEfa);
  EXPECT_EQ(in[1], 2 * kMs + kEfa);
  // Opposite directions use different NICs: no waiting.
  Fabric h = Fabric::make(t1, 32, Placement::one_per_chip);
  auto both = deliver(h, {{0, 16}, {16, 0}}, bytes);
  EXPECT_EQ(both[0], kMs + kEfa);
  EXPECT_EQ(both[1], kMs + kEfa);
}

// Rank r's input: element i is r + i (every sum exact in FP32).
std::vector<std::vector<uint8_t>> inputs(int ranks, uint64_t count) {
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(ranks), std::vector<uint8_t>(count * 4));
  for (int r = 0; r < ranks; ++r)
    for (uint64_t i = 0; i < count; ++i) {
      float v = static_cast<float>(r) + static_cast<float>(i);
      std::memcpy(in[static_cast<size_t>(r)].data() + i * 4, &v, 4);
    }
  return in;
}

void expect_sums(const CollectiveResult& res, int ranks, uint64_t count) {
  ASSERT_EQ(res.outputs.size(), static_cast<size_t>(ranks));
  const float base = static_cast<float>(ranks * (ranks - 1) / 2);
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(res.outputs[static_cast<size_t>(r)].size(), count * 4) << r;
    for (uint64_t i = 0; i < count; ++i) {
      float v = 0;
      std::memcpy(&v, res.outputs[static_cast<size_t>(r)].data() + i * 4, 4);
      ASSERT_EQ(v, base + static_cast<float>(ranks) * static_cast<float>(i))
          << "rank " << r << " element " << i;
    }
  }
}

TEST(FabricMultiInstance, AllReduceOnTheUltraServer) {
  const uint64_t count = 100;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
  for (Algorithm a : {Algorithm::ring, Algorithm::rdh}) {
    SCOPED_TRACE(algorithm_name(a));
    RunOptions opt;
    opt.algorithm = a;
    opt.placement = Placement::one_per_chip;
    Fabric f = Fabric::make(inst("trn2u-ultraserver"), 64, opt.placement);
    auto in = inputs(64, count);
    auto res = run_collective(f, spec, &in, opt);
    expect_sums(res, 64, count);
    EXPECT_GT(link(f, "inst0.chip0+z").bytes_carried, 0u);  // the ring crosses instances on Z
    for (const auto& l : f.links()) EXPECT_EQ(l.name.find("efa"), std::string::npos) << l.name;
  }
}

TEST(FabricMultiInstance, AllReduceOverEfa) {
  // 64 ranks packed on two trn1.32xlarge: ranks 31 -> 32 and 63 -> 0 of the ring cross EFA.
  const uint64_t count = 100;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 64);
  auto in = inputs(64, count);
  auto res = run_collective(f, spec, &in, opt);
  expect_sums(res, 64, count);
  EXPECT_GT(link(f, "inst0.chip15.efa.out").bytes_carried, 0u);  // rank 31 -> 32
  EXPECT_GT(link(f, "inst1.chip15.efa.out").bytes_carried, 0u);  // rank 63 -> 0
  // The same through the convenience runner, and equal to a timing-only run.
  auto again = run_collective(inst("trn1.32xlarge"), 64, spec, in, opt);
  EXPECT_EQ(again.outputs, res.outputs);
  EXPECT_EQ(again.duration_ps, res.duration_ps);
  EXPECT_EQ(time_collective(inst("trn1.32xlarge"), 64, spec, opt).duration_ps, res.duration_ps);
}

double bus_bw(const CollectiveResult& r, int ranks, uint64_t bytes) {
  return static_cast<double>(bytes) / r.seconds() * bus_bandwidth_factor(Op::all_reduce, ranks);
}

TEST(FabricMultiInstance, EfaLowersBusBandwidth) {
  const uint64_t bytes = uint64_t{1} << 30;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  const auto& t1 = inst("trn1.32xlarge");
  double one = bus_bw(time_collective(t1, 32, spec, opt), 32, bytes);
  double two = bus_bw(time_collective(t1, 64, spec, opt), 64, bytes);
  EXPECT_LT(two, one);
  EXPECT_LE(two, 6.25e9 * 1.0000001);  // every ring step crosses a chip's EFA share at 6.25 GB/s
  EXPECT_GT(two, 0.9 * 6.25e9);
  // On the UltraServer, one rank per chip: every ring step crosses a Z link at 128 GB/s.
  opt.placement = Placement::one_per_chip;
  double us = bus_bw(time_collective(inst("trn2u-ultraserver"), 64, spec, opt), 64, bytes);
  EXPECT_LE(us, 128e9 * 1.0000001);
  EXPECT_GT(us, 0.9 * 128e9);
}

TEST(FabricMultiInstance, NoEfaFigureMeansOneInstance) {
  const auto& inf2 = inst("inf2.48xlarge");
  EXPECT_NO_THROW(Fabric::make(inf2, 24));
  try {
    Fabric::make(inf2, 48);
    ADD_FAILURE() << "48 ranks on inf2.48xlarge (24 cores) did not throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("inf2.48xlarge"), std::string::npos) << what;
    EXPECT_NE(what.find("EFA"), std::string::npos) << what;
    EXPECT_NE(what.find("48 ranks need 2 instances"), std::string::npos) << what;
  }
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, 4, 0, {}, {}};
  EXPECT_THROW(time_collective(inf2, 48, spec), std::invalid_argument);
  EXPECT_THROW(Fabric::make(inst("trn1.2xlarge"), 3), std::invalid_argument);
  EXPECT_THROW(Fabric::make(inst("trn2.3xlarge"), 9), std::invalid_argument);
  // Explicit placements: an instance far past the ranks, and two ranks on one core.
  const auto& t1 = inst("trn1.32xlarge");
  auto params = FabricParams::for_instance(t1, spec::load_generation("trn1"));
  EXPECT_THROW(Fabric(t1, params, {{0, 0, 0}, {0, 0, 5}}), std::invalid_argument);
  EXPECT_THROW(Fabric(t1, params, {{3, 1, 1}, {3, 1, 1}}), std::invalid_argument);
  EXPECT_EQ(Fabric(t1, params, {{0, 0, 0}, {0, 0, 1}}).instances(), 2u);
}

}  // namespace

namespace {

// Hosts of a job: equal runs of consecutive ranks on hosts joined only by EFA.
TEST(FabricMultiInstance, RanksPerEntry) {
  EXPECT_EQ(Fabric::make(inst("trn1.32xlarge"), 64).ranks_per_entry(), 32);
  EXPECT_EQ(Fabric::make(inst("trn1.32xlarge"), 96).ranks_per_entry(), 32);
  EXPECT_EQ(Fabric::make(inst("trn1.32xlarge"), 32).ranks_per_entry(), 0);  // one host
  EXPECT_EQ(Fabric::make(inst("trn1.32xlarge"), 40).ranks_per_entry(), 0);  // 32 + 8: uneven
  EXPECT_EQ(Fabric::make(inst("trn2.48xlarge"), 32, Placement::one_per_chip).ranks_per_entry(), 16);
  // The UltraServer's four instances are one entry (joined by NeuronLink, not EFA).
  EXPECT_EQ(Fabric::make(inst("trn2u-ultraserver"), 64, Placement::one_per_chip).ranks_per_entry(),
            0);
}

// The hierarchical all-reduce (reduce-scatter in each host, the shards across hosts by every
// rank at once, all-gather in each host) gives the sums, crosses EFA on every chip, beats the
// flat ring at large sizes, and is the automatic choice across hosts from the mesh threshold.
TEST(FabricMultiInstance, HierarchicalAllReduceAcrossHosts) {
  const uint64_t count = 256;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
  RunOptions opt;
  opt.algorithm = Algorithm::hierarchical;
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 64);
  auto in = inputs(64, count);
  auto res = run_collective(f, spec, &in, opt);
  EXPECT_EQ(res.algorithm, Algorithm::hierarchical);
  expect_sums(res, 64, count);
  for (uint32_t chip = 0; chip < 16; ++chip)  // every chip's share, not one chip's
    EXPECT_GT(link(f, fmt::format("inst0.chip{}.efa.out", chip)).bytes_carried, 0u) << chip;

  const uint64_t big = uint64_t{256} << 20;
  CollectiveSpec large{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, big / 4, 0, {}, {}};
  const Picos hier = time_collective(inst("trn1.32xlarge"), 64, large, opt).duration_ps;
  opt.algorithm = Algorithm::ring;
  const Picos flat = time_collective(inst("trn1.32xlarge"), 64, large, opt).duration_ps;
  EXPECT_LT(hier * 4, flat);  // 16 chips' EFA shares against one
  opt.algorithm = Algorithm::auto_select;
  EXPECT_EQ(time_collective(inst("trn1.32xlarge"), 64, large, opt).algorithm,
            Algorithm::hierarchical);
  EXPECT_EQ(time_collective(inst("trn1.32xlarge"), 32, large, opt).algorithm, Algorithm::ring);
  CollectiveSpec small{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, 256, 0, {}, {}};
  EXPECT_EQ(time_collective(inst("trn1.32xlarge"), 64, small, opt).algorithm, Algorithm::mesh);
  // All-reduce, all-gather and reduce-scatter, and only across hosts.
  EXPECT_FALSE(algorithm_supported(Op::all_reduce, Algorithm::hierarchical, 64, 0));
  EXPECT_TRUE(algorithm_supported(Op::all_gather, Algorithm::hierarchical, 64, 32));
  EXPECT_FALSE(algorithm_supported(Op::all_to_all, Algorithm::hierarchical, 64, 32));
  EXPECT_FALSE(algorithm_supported(Op::all_reduce, Algorithm::hierarchical, 32, 32));
  EXPECT_THROW(make_plan(spec, 64, 0, Algorithm::hierarchical, 0), std::invalid_argument);
}

// The hierarchical all-gather (each block across hosts by its column, then every column's blocks
// inside each host) and reduce-scatter (the same backwards) give the flat ring's results, cross
// EFA on every chip, beat the flat ring at large sizes and are the automatic choice there.
TEST(FabricMultiInstance, HierarchicalAllGatherAndReduceScatterAcrossHosts) {
  const spec::InstanceConfig& t1 = inst("trn1.32xlarge");
  for (Op op : {Op::all_gather, Op::reduce_scatter}) {
    SCOPED_TRACE(op_name(op));
    const uint64_t count = 24;  // per rank: all-gather's input, reduce-scatter's output
    CollectiveSpec spec{op, ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
    const auto in = inputs(64, op == Op::all_gather ? count : count * 64);
    RunOptions opt;
    opt.algorithm = Algorithm::hierarchical;
    Fabric f = Fabric::make(t1, 64);
    const auto hier = run_collective(f, spec, &in, opt);
    EXPECT_EQ(hier.algorithm, Algorithm::hierarchical);
    opt.algorithm = Algorithm::ring;
    const auto flat = run_collective(t1, 64, spec, in, opt);
    ASSERT_EQ(hier.outputs.size(), 64u);
    EXPECT_EQ(hier.outputs, flat.outputs);
    for (uint32_t chip = 0; chip < 16; ++chip)
      EXPECT_GT(link(f, fmt::format("inst0.chip{}.efa.out", chip)).bytes_carried, 0u) << chip;

    const uint64_t big = uint64_t{1} << 19;  // elements per rank: 2 MiB of fp32
    CollectiveSpec large{op, ReduceOp::sum, isa::DType::fp32, big, 0, {}, {}};
    opt.algorithm = Algorithm::hierarchical;
    const Picos h = time_collective(t1, 64, large, opt).duration_ps;
    opt.algorithm = Algorithm::ring;
    const Picos r = time_collective(t1, 64, large, opt).duration_ps;
    EXPECT_LT(h * 4, r);
    opt.algorithm = Algorithm::auto_select;
    EXPECT_EQ(time_collective(t1, 64, large, opt).algorithm, Algorithm::hierarchical);
  }
}

}  // namespace

namespace {

// Collectives issued at once share the fabric: each is slower than alone, the results are the
// same as alone, and one that shares nothing with the other is not slowed.
TEST(FabricTogether, OverlappingCollectivesContendForTheLinks) {
  const uint64_t bytes = uint64_t{64} << 20;
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  opt.placement = Placement::one_per_chip;
  const CollectiveSpec ar{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
  const Picos alone = time_collective(inst("trn2.48xlarge"), 16, ar, opt).duration_ps;
  Fabric f = Fabric::make(inst("trn2.48xlarge"), 16, opt.placement);
  const auto both = run_together(f, {ar, ar}, nullptr, opt);
  ASSERT_EQ(both.size(), 2u);
  for (const CollectiveResult& r : both) {
    EXPECT_GT(r.duration_ps, alone * 3 / 2);  // the ring's links carry both: about twice as long
    EXPECT_LE(r.duration_ps, alone * 2 + alone / 10);
  }
  // With data: each collective's sums, as alone.
  const uint64_t count = 300;
  const CollectiveSpec small{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
  const CollectiveSpec gather{Op::all_gather, ReduceOp::sum, isa::DType::fp32, count, 0, {}, {}};
  const std::vector<std::vector<std::vector<uint8_t>>> in{inputs(16, count), inputs(16, count)};
  Fabric g = Fabric::make(inst("trn2.48xlarge"), 16, opt.placement);
  const auto data = run_together(g, {small, gather}, &in, opt);
  expect_sums(data[0], 16, count);
  const auto gathered = run_collective(inst("trn2.48xlarge"), 16, gather, in[1], opt);
  EXPECT_EQ(data[1].outputs, gathered.outputs);
  // A zero-byte barrier next to the large all-reduce hardly moves it.
  const CollectiveSpec barrier{Op::barrier, ReduceOp::sum, isa::DType::fp32, 0, 0, {}, {}};
  Fabric h = Fabric::make(inst("trn2.48xlarge"), 16, opt.placement);
  RunOptions any = opt;
  any.algorithm = Algorithm::auto_select;
  const auto with_barrier = run_together(h, {ar, barrier}, nullptr, any);
  EXPECT_LT(with_barrier[0].duration_ps,
            time_collective(inst("trn2.48xlarge"), 16, ar, any).duration_ps * 101 / 100);
}

}  // namespace

namespace {

// Logical NeuronCores (Trn2's LNC=2): two physical cores make one rank, so a trn2.48xlarge holds
// 64 ranks, four per chip, each driving both cores' DMA engines.
TEST(FabricLnc, TwoPhysicalCoresPerRank) {
  const auto& t2 = inst("trn2.48xlarge");
  Fabric f = Fabric::make(t2, 64, Placement::packed, 2);
  EXPECT_EQ(f.instances(), 1u);
  EXPECT_EQ(f.cores()[1].chip, 0u);
  EXPECT_EQ(f.cores()[1].core, 2u);
  EXPECT_EQ(f.cores()[4].chip, 1u);
  EXPECT_EQ(f.cores()[4].core, 0u);
  EXPECT_EQ(link(f, "rank0.dma").bytes_per_s, 2 * 16 * 23'000'000'000ull);
  Fabric two = Fabric::make(t2, 128, Placement::packed, 2);
  EXPECT_EQ(two.instances(), 2u);
  EXPECT_EQ(two.ranks_per_entry(), 64);
  EXPECT_EQ(Fabric::make(t2, 128).instances(), 1u);  // LNC=1: 128 ranks fit one instance
  EXPECT_THROW(Fabric::make(t2, 4, Placement::packed, 3), std::invalid_argument);
  // Inside a chip a rank now moves data at twice the rate: a 2-rank all-reduce is faster.
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  const CollectiveSpec big{
      Op::all_reduce, ReduceOp::sum, isa::DType::fp32, uint64_t{16} << 20, 0, {}, {}};
  const Picos one = time_collective(t2, 2, big, opt).duration_ps;
  opt.lnc = 2;
  EXPECT_LT(time_collective(t2, 2, big, opt).duration_ps * 3, one * 2);
}

}  // namespace

namespace {

// Across hosts the automatic all-reduce is the faster of the hierarchy and the one-host choice,
// so no size is slower than a larger one at the switch (on 256 ranks of trn2 the hierarchy's
// 2 x 127 ring steps inside a host cost more than RDH up to a few MB).
TEST(FabricMultiInstance, AutomaticAllReduceAcrossHostsIsMonotoneInSize) {
  for (const auto& [name, ranks] : {std::pair{"trn2.48xlarge", 256}, {"trn1.32xlarge", 64}}) {
    Picos previous = 0;
    for (uint64_t bytes = 8; bytes <= (uint64_t{16} << 20); bytes *= 4) {
      CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
      if (spec.count == 0) continue;
      const auto r = time_collective(inst(name), ranks, spec, RunOptions{});
      EXPECT_GE(r.duration_ps, previous)
          << name << " " << bytes << " B, " << algorithm_name(r.algorithm);
      previous = r.duration_ps;
    }
  }
  // Blocks that come back to a host are not a host per block.
  std::vector<CoreId> cores;
  for (uint32_t block = 0; block < 4; ++block)
    for (uint32_t i = 0; i < 16; ++i) cores.push_back({i, 0, block % 2});
  EXPECT_EQ(Fabric::ranks_per_entry(inst("trn2.48xlarge"), cores), 0);
}

}  // namespace
