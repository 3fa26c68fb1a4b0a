// The fabric model: routes, link timing, contention, bus bandwidth, and the size-based choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "fabric_util.h"
#include "neuronsim/cc/fabric.h"
#include "neuronsim/cc/runner.h"
#include "neuronsim/spec/config.h"

using namespace neuronsim;
using namespace neuronsim::cc;
using namespace neuronsim::cc::testing;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr Picos kSer = 976'562'500;  // 96 MiB at 96 GiB/s: 1e12 / 1024 ps

TEST(Fabric, FiguresFromTheNotes) {
  auto trn1 = FabricParams::for_instance(inst("trn1.32xlarge"), spec::load_generation("trn1"));
  EXPECT_EQ(trn1.link_bytes_per_s, 96 * kGiB);  // 384 GiB/s per chip over 4 links
  EXPECT_EQ(trn1.link_latency_ps, 1500 * kPicosPerNs);
  EXPECT_EQ(trn1.intra_chip_bytes_per_s, 820'000'000'000u);  // trn1 HBM, 820 GB/s
  auto trn1n = FabricParams::for_instance(inst("trn1n.32xlarge"), spec::load_generation("trn1"));
  EXPECT_EQ(trn1n.link_bytes_per_s, 192 * kGiB);
  auto trn2 = FabricParams::for_instance(inst("trn2.48xlarge"), spec::load_generation("trn2"));
  EXPECT_EQ(trn2.link_bytes_per_s, 256'000'000'000u);
  auto inf2 = FabricParams::for_instance(inst("inf2.48xlarge"), spec::load_generation("trn1"));
  EXPECT_EQ(inf2.link_bytes_per_s, 96 * kGiB);
}

TEST(Fabric, TorusDimensionOrderRoutes) {
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  EXPECT_EQ(link_names(f, 0, 1), (std::vector<std::string>{"chip0+x"}));
  EXPECT_EQ(link_names(f, 0, 3), (std::vector<std::string>{"chip0-x"}));  // wrap-around
  EXPECT_EQ(link_names(f, 0, 2),
            (std::vector<std::string>{"chip0+x", "chip1+x"}));  // tie: positive
  EXPECT_EQ(link_names(f, 0, 5),
            (std::vector<std::string>{"chip0+x", "chip1+y"}));  // X first, then Y
  EXPECT_EQ(link_names(f, 5, 0), (std::vector<std::string>{"chip5-x", "chip4-y"}));
  EXPECT_EQ(link_names(f, 0, 12), (std::vector<std::string>{"chip0-y"}));
  EXPECT_EQ(link_names(f, 15, 0), (std::vector<std::string>{"chip15+x", "chip12+y"}));
  EXPECT_TRUE(f.route(3, 3).empty());
  // Packed ranks share a chip: core to core through that chip's HBM.
  Fabric p = Fabric::make(inst("trn1.32xlarge"), 4, Placement::packed);
  EXPECT_EQ(link_names(p, 0, 1), (std::vector<std::string>{"chip0.hbm"}));
  EXPECT_EQ(link_names(p, 1, 2), (std::vector<std::string>{"chip0+x"}));
}

TEST(Fabric, RingRoutes) {
  Fabric f = Fabric::make(inst("inf2.48xlarge"), 12, Placement::one_per_chip);
  EXPECT_EQ(link_names(f, 0, 11), (std::vector<std::string>{"chip0-"}));
  EXPECT_EQ(link_names(f, 10, 1), (std::vector<std::string>{"chip10+", "chip11+", "chip0+"}));
  EXPECT_EQ(f.route(0, 6).size(), 6u);
  EXPECT_THROW(Fabric::make(inst("inf2.48xlarge"), 13, Placement::one_per_chip),
               std::invalid_argument);
}

TEST(Fabric, OneMessageTakesLatencyPlusSerialization) {
  const uint64_t bytes = 96 * kGiB / 1024;  // 1/1024 s at 96 GiB/s
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  auto one = deliver(f, {{0, 1}}, bytes);
  EXPECT_EQ(one[0], kSer + 1500 * kPicosPerNs);
  // Two hops, cut-through: the serialization once, the latency twice.
  Fabric g = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  auto two = deliver(g, {{0, 5}}, bytes);
  EXPECT_EQ(two[0], kSer + 2 * 1500 * kPicosPerNs);
  // A zero-byte message still pays the latency.
  Fabric h = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  EXPECT_EQ(deliver(h, {{0, 1}}, 0)[0], 1500 * kPicosPerNs);
}

TEST(Fabric, ContentionOnASharedLink) {
  const uint64_t bytes = 96 * kGiB / 1024;
  // 0->1 and 0->2 both leave chip 0 on +x: their chunks take turns on it, so the link is busy
  // for both lengths and each message takes nearly twice as long as alone.
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  auto shared = deliver(f, {{0, 1}, {0, 2}}, bytes);
  EXPECT_EQ(shared[1], 2 * kSer + 2 * 1500 * kPicosPerNs);
  EXPECT_GT(shared[0], 2 * kSer - 2 * Fabric::serialize_ps(64 * 1024, 96 * kGiB));
  EXPECT_LT(shared[0], shared[1]);
  // 0->1 (+x) and 5->4 (-x of chip 5) use different links and DMA engines: no waiting.
  Fabric g = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  auto apart = deliver(g, {{0, 1}, {5, 4}}, bytes);
  EXPECT_EQ(apart[0], apart[1]);
  EXPECT_GT(shared[1], apart[1]);
  // 0->1 (+x) and 0->4 (+y): different links, but one rank's DMA engines feed both, a chunk of
  // each in turn. The links (96 GiB/s each) could take 206 GB/s together; the second message
  // finishes by whichever is slower, the two links or the engines carrying both (trn1: what the
  // core's engines move together, dma_core_bytes_per_ns, below 16 x 17 B/ns), a chunk later at
  // most. (Until 2026-12 the engines were 16 x 17 B/ns, faster than both links, and the first
  // message finished exactly by its link.)
  Fabric d = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  auto fed = deliver(d, {{0, 1}, {0, 4}}, bytes);
  const uint64_t engines = d.params().rank_dma_bytes_per_s;
  const Picos last = std::max(kSer, Fabric::serialize_ps(2 * bytes, engines)) + 1500 * kPicosPerNs;
  EXPECT_GE(fed[0], kSer + 1500 * kPicosPerNs);
  EXPECT_GT(fed[1], fed[0]);
  EXPECT_GE(fed[1] + Fabric::serialize_ps(64 * 1024, engines), last);
  EXPECT_LE(fed[1], last + Fabric::serialize_ps(64 * 1024, 96 * kGiB));
  // Opposite directions of one chip pair are separate links.
  Fabric h = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  auto both = deliver(h, {{0, 1}, {1, 0}}, bytes);
  EXPECT_EQ(both[0], both[1]);
}

TEST(Fabric, DataArrivesAndEarlyMessagesWait) {
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 2, Placement::one_per_chip);
  std::vector<uint8_t> src{1, 2, 3, 4}, dst(4, 0);
  bool got = false;
  f.send(0, 1, src.data(), 4, 7, nullptr);
  src.assign(4, 9);  // captured at send(): changing it now does not change the message
  f.schedule(10 * kPicosPerUs, [&] { f.recv(1, 0, dst.data(), 4, 7, [&] { got = true; }); });
  f.run();
  EXPECT_TRUE(got);
  EXPECT_EQ(dst, (std::vector<uint8_t>{1, 2, 3, 4}));
  // A receive nobody sends to is an error when the fabric goes idle.
  Fabric g = Fabric::make(inst("trn1.32xlarge"), 2, Placement::one_per_chip);
  g.recv(1, 0, nullptr, 4, 1, nullptr);
  EXPECT_THROW(g.run(), std::runtime_error);
}

double bus_bw(const CollectiveResult& r, Op op, int ranks, uint64_t bytes) {
  return static_cast<double>(bytes) / r.seconds() * bus_bandwidth_factor(op, ranks);
}

// The ranks of `ranks` on trn1.32xlarge, one per chip, with reductions that take no time: the
// link model alone (the reductions' own time: Fabric.ReductionsTakeTheDmaEnginesTime).
CollectiveResult time_without_reductions(int ranks, const CollectiveSpec& spec,
                                         const RunOptions& opt) {
  const auto& trn1 = inst("trn1.32xlarge");
  FabricParams p = FabricParams::for_instance(trn1);
  p.reduce_bytes_per_s = 0;
  Fabric f(trn1, p, Fabric::place(trn1, ranks, Placement::one_per_chip));
  return run_collective(f, spec, nullptr, opt);
}

TEST(Fabric, RingAllReduceBusBandwidthApproachesTheLink) {
  // Two ranks on neighbouring chips of trn1.32xlarge: bus bandwidth -> 96 GiB/s as size grows,
  // the reductions free and no runtime cost (both apart: ReductionsTakeTheDmaEnginesTime,
  // RuntimeRelease.*).
  const double link = 96.0 * static_cast<double>(kGiB);
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  opt.runtime = RuntimeCosts::none();
  double prev = 0;
  for (uint64_t bytes :
       {uint64_t{1} << 10, uint64_t{1} << 20, uint64_t{1} << 26, uint64_t{1} << 32}) {
    CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
    auto r = time_without_reductions(2, spec, opt);
    double bw = bus_bw(r, Op::all_reduce, 2, bytes);
    EXPECT_GT(bw, prev) << bytes;
    EXPECT_LE(bw, link * 1.0000001) << bytes;
    prev = bw;
  }
  EXPECT_GT(prev, link * 0.999);  // 4 GiB
  // 1 KiB is latency-bound: two steps of one hop each, ~3 us, a tiny fraction of the link.
  CollectiveSpec small{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, 256, 0, {}, {}};
  auto r = time_without_reductions(2, small, opt);
  EXPECT_GE(r.duration_ps, 2 * 1500 * kPicosPerNs);
  EXPECT_LT(r.duration_ps, 2 * 1500 * kPicosPerNs + 100 * kPicosPerNs);
  EXPECT_LT(bus_bw(r, Op::all_reduce, 2, 1024), link * 0.01);
}

TEST(Fabric, IntraChipGoesAtTheRanksDmaRate) {
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  opt.runtime = RuntimeCosts::none();
  const uint64_t bytes = uint64_t{1} << 32;
  CollectiveSpec spec{Op::all_gather, ReduceOp::sum, isa::DType::fp32, bytes / 8, 0, {}, {}};
  auto r = time_collective(inst("trn1.32xlarge"), 2, spec, opt);  // packed: both cores of chip 0
  double bw = bus_bw(r, Op::all_gather, 2, bytes);
  // Each way is its rank's DMA engines: on trn1 what a core's engines move together
  // (dma_core_bytes_per_ns, at most 16 x 17 B/ns); the chip's HBM, 820 GB/s shared by both
  // ways, has room for 410 each: not HBM's rate. (An all-reduce until 2026-12, when its
  // reductions took no time.)
  const spec::GenerationConfig& g = spec::load_generation("trn1");
  const double engines =
      std::min(g.dma_engines * g.dma_engine_bytes_per_ns, g.dma_core_bytes_per_ns) * 1e9;
  EXPECT_LT(engines, 410e9);
  EXPECT_NEAR(bw, engines, engines * 0.002);
}

// A rank combines what it receives with its DMA engines (read, read, add, write) at
// dma_add_efficiency of their copy rate (trainium3_arch.rst: 50 % before NeuronCore-v4): a large
// all-reduce of two ranks in a chip sends half the buffer each way twice and reduces half, so its
// bus bandwidth is 2 / (2 + 1 / efficiency) of the engines' rate, a third below a copy's at 50 %.
TEST(Fabric, ReductionsTakeTheDmaEnginesTime) {
  RunOptions opt;
  opt.algorithm = Algorithm::ring;
  opt.runtime = RuntimeCosts::none();
  const uint64_t bytes = uint64_t{1} << 32;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
  const auto& trn1 = inst("trn1.32xlarge");
  const FabricParams p = FabricParams::for_instance(trn1);
  const spec::GenerationConfig& g = generation_of(trn1);
  EXPECT_EQ(p.reduce_bytes_per_s,
            static_cast<uint64_t>(
                static_cast<double>(p.rank_dma_bytes_per_s) * g.dma_add_efficiency + 0.5));
  const double engines = static_cast<double>(p.rank_dma_bytes_per_s);
  const double bw = bus_bw(time_collective(trn1, 2, spec, opt), Op::all_reduce, 2, bytes);
  EXPECT_NEAR(bw, engines * 2 / (2 + 1 / g.dma_add_efficiency), engines * 0.002);
  // Without the reductions' time the same all-reduce runs at the engines' rate.
  FabricParams free = p;
  free.reduce_bytes_per_s = 0;
  Fabric f(trn1, free, Fabric::place(trn1, 2, Placement::packed));
  EXPECT_NEAR(bus_bw(run_collective(f, spec, nullptr, opt), Op::all_reduce, 2, bytes), engines,
              engines * 0.002);
  // A message combined on its way out (a reduce-scatter step that feeds the next) crosses the
  // sender's engines at the reduction rate, then its link: on trn2 the engines' 184 GB/s
  // (16 x 23 x 50 %) are slower than a 256 GB/s link, so they set its time.
  const auto& trn2 = inst("trn2.48xlarge");
  const uint64_t msg = uint64_t{64} << 20;
  Fabric plain = Fabric::make(trn2, 2, Placement::one_per_chip);
  Fabric reduced = Fabric::make(trn2, 2, Placement::one_per_chip);
  Picos sent = 0, combined = 0;
  plain.recv(1, 0, nullptr, msg, 0, nullptr);
  plain.send(0, 1, nullptr, msg, 0, [&] { sent = plain.now(); });
  plain.run();
  reduced.recv(1, 0, nullptr, msg, 0, nullptr);
  reduced.send_reduced(0, 1, nullptr, msg, 0, [&] { combined = reduced.now(); });
  reduced.run();
  const Picos hop = static_cast<Picos>(trn2.generation_config.neuronlink_latency_ns) * kPicosPerNs;
  EXPECT_EQ(sent, Fabric::serialize_ps(msg, plain.params().link_bytes_per_s) + hop);
  EXPECT_LT(reduced.params().reduce_bytes_per_s, reduced.params().link_bytes_per_s);
  EXPECT_GE(combined, Fabric::serialize_ps(msg, reduced.params().reduce_bytes_per_s) + hop);
  EXPECT_LE(combined, Fabric::serialize_ps(msg, reduced.params().reduce_bytes_per_s) + hop +
                          Fabric::serialize_ps(64 * 1024, reduced.params().link_bytes_per_s));
}

TEST(Fabric, MeshBeatsRingForSmallMessages) {
  RunOptions opt;
  opt.placement = Placement::one_per_chip;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::bf16, 512, 0, {}, {}};
  opt.algorithm = Algorithm::mesh;
  auto mesh = time_collective(inst("trn1.32xlarge"), 16, spec, opt);
  opt.algorithm = Algorithm::ring;
  auto ring = time_collective(inst("trn1.32xlarge"), 16, spec, opt);
  opt.algorithm = Algorithm::rdh;
  auto rdh = time_collective(inst("trn1.32xlarge"), 16, spec, opt);
  EXPECT_LT(mesh.duration_ps, rdh.duration_ps);
  EXPECT_LT(rdh.duration_ps, ring.duration_ps);
}

TEST(Fabric, Hierarchical2DBeatsTheFlatRingOnTheTorus) {
  // 16 ranks, one per chip: rows of the grid are torus rows, so every ring step is one hop, and
  // there are 2*3 + 2*3 steps instead of 2*15.
  RunOptions opt;
  opt.placement = Placement::one_per_chip;
  CollectiveSpec spec{Op::all_reduce, ReduceOp::sum, isa::DType::bf16, 1 << 20, 0, {}, {}};
  opt.algorithm = Algorithm::hier2d;
  auto hier = time_collective(inst("trn1.32xlarge"), 16, spec, opt);
  opt.algorithm = Algorithm::ring;
  auto ring = time_collective(inst("trn1.32xlarge"), 16, spec, opt);
  EXPECT_LT(hier.duration_ps, ring.duration_ps);
  EXPECT_EQ(hier.messages, 16u * 12u);
  EXPECT_EQ(ring.messages, 16u * 30u);
  EXPECT_FALSE(algorithm_supported(Op::all_reduce, Algorithm::hier2d, 6));
  EXPECT_FALSE(algorithm_supported(Op::all_gather, Algorithm::hier2d, 16));
}

TEST(Fabric, AutomaticChoiceFollowsTheThresholds) {
  auto spec = [](uint64_t bytes) {
    return CollectiveSpec{Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
  };
  // The figures of §5 [R3], from the generation configs.
  const Thresholds cfg = thresholds_for(inst("trn1.32xlarge"));
  EXPECT_EQ(cfg.mesh_below_bytes, 1'000'000u);
  EXPECT_EQ(cfg.rdh_below_bytes, 56'000'000u);
  EXPECT_EQ(thresholds_for(inst("trn2.48xlarge")).rdh_below_bytes, 56'000'000u);
  EXPECT_EQ(choose_algorithm(spec(100'000), 16, cfg), Algorithm::mesh);
  EXPECT_EQ(choose_algorithm(spec(999'996), 16, cfg), Algorithm::mesh);
  EXPECT_EQ(choose_algorithm(spec(1'000'000), 16, cfg), Algorithm::rdh);
  EXPECT_EQ(choose_algorithm(spec(10'000'000), 16, cfg), Algorithm::rdh);
  EXPECT_EQ(choose_algorithm(spec(56'000'000), 16, cfg), Algorithm::ring);
  Thresholds t;
  t.mesh_below_bytes = 0;
  t.rdh_below_bytes = 0;
  EXPECT_EQ(choose_algorithm(spec(100'000), 16, t), Algorithm::ring);
  RunOptions opt;
  opt.thresholds = t;
  std::vector<std::vector<uint8_t>> in(4, std::vector<uint8_t>(400));
  EXPECT_EQ(run_collective(inst("trn1.32xlarge"), 4, spec(400), in, opt).algorithm,
            Algorithm::ring);
  EXPECT_EQ(run_collective(inst("trn1.32xlarge"), 4, spec(400), in).algorithm, Algorithm::mesh);
  CollectiveSpec a2a{Op::all_to_all, ReduceOp::sum, isa::DType::fp32, 100'000'000, 0, {}, {}};
  EXPECT_EQ(choose_algorithm(a2a, 16, cfg), Algorithm::mesh);
  EXPECT_THROW(make_plan(a2a, 16, 0, Algorithm::auto_select), std::invalid_argument);
}

// The fabric and the automatic choice take their figures from the instance's spec, which
// brings its generation along: a changed copy changes the result, and an instance without its
// generation's figures is refused.
TEST(Fabric, FiguresComeWithTheInstance) {
  spec::InstanceConfig t1 = inst("trn1.32xlarge");
  EXPECT_EQ(generation_of(t1).name, "trn1");
  EXPECT_EQ(FabricParams::for_instance(t1).link_bytes_per_s, 96 * kGiB);
  t1.neuronlink_bytes_per_s = 48 * kGiB;
  t1.generation_config.neuronlink_latency_ns = 500;
  t1.generation_config.cc_mesh_below_bytes = 10;
  const FabricParams p = FabricParams::for_instance(t1);
  EXPECT_EQ(p.link_bytes_per_s, 48 * kGiB);
  EXPECT_EQ(p.link_latency_ps, 500 * kPicosPerNs);
  EXPECT_EQ(thresholds_for(t1).mesh_below_bytes, 10u);
  Fabric f = Fabric::make(t1, 2, Placement::one_per_chip);
  EXPECT_EQ(deliver(f, {{0, 1}}, 48 * kGiB / 1024)[0],
            500 * kPicosPerNs + kSer);  // 1/1024 s + 500 ns
  spec::InstanceConfig bare = inst("trn1.32xlarge");
  bare.generation_config = {};
  EXPECT_THROW(Fabric::make(bare, 2), std::invalid_argument);
  EXPECT_THROW(thresholds_for(bare), std::invalid_argument);
}

TEST(Fabric, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Op::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Op::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Op::reduce_scatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Op::all_to_all, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Op::permute, 8), 1.0);
}

TEST(Fabric, Trn2And32RanksRun) {
  // Every core of trn1.32xlarge, every chip of trn2.48xlarge: the collectives complete.
  CollectiveSpec spec{Op::all_reduce, ReduceOp::max, isa::DType::bf16, 64, 0, {}, {}};
  std::vector<std::vector<uint8_t>> in(32, std::vector<uint8_t>(128, 0x3f));
  for (Algorithm a : {Algorithm::ring, Algorithm::mesh, Algorithm::rdh, Algorithm::hier2d}) {
    RunOptions opt;
    opt.algorithm = a;
    auto r = run_collective(inst("trn1.32xlarge"), 32, spec, in, opt);
    EXPECT_EQ(r.outputs[31], in[0]);
    opt.placement = Placement::one_per_chip;
    std::vector<std::vector<uint8_t>> in16(in.begin(), in.begin() + 16);
    EXPECT_GT(run_collective(inst("trn2.48xlarge"), 16, spec, in16, opt).duration_ps, 0u);
  }
  EXPECT_THROW(Fabric::make(inst("trn1.2xlarge"), 3), std::invalid_argument);  // 2 cores only
}

}  // namespace

namespace {

// A network that holds back every send of one rank for a while: a barrier must hold all ranks.
class LateRank final : public Network {
 public:
  LateRank(Fabric& f, int late, Picos delay) : f_(f), late_(late), delay_(delay) {}
  int num_ranks() const override { return f_.num_ranks(); }
  Picos now() const override { return f_.now(); }
  void send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
            Callback on_done) override {
    if (src != late_) return f_.send(src, dst, data, bytes, tag, std::move(on_done));
    f_.schedule(delay_, [this, src, dst, bytes, tag, cb = std::move(on_done)]() mutable {
      f_.send(src, dst, nullptr, bytes, tag, std::move(cb));
    });
  }
  void recv(int dst, int src, void* buffer, uint64_t bytes, uint64_t tag,
            Callback on_done) override {
    f_.recv(dst, src, buffer, bytes, tag, std::move(on_done));
  }
  void schedule(Picos delay, Callback fn) override { f_.schedule(delay, std::move(fn)); }
  Picos run() override { return f_.run(); }

 private:
  Fabric& f_;
  int late_;
  Picos delay_;
};

TEST(Fabric, BarrierHoldsEveryRankUntilTheLastArrives) {
  for (int R : {2, 5, 8, 16})
    for (Algorithm a : {Algorithm::mesh, Algorithm::rdh}) {
      Fabric f = Fabric::make(inst("trn1.32xlarge"), R, Placement::one_per_chip);
      const Picos delay = 100 * kPicosPerUs;
      LateRank net(f, R - 1, delay);
      CollectiveSpec spec{Op::barrier, ReduceOp::sum, isa::DType::fp32, 0, 0, {}, {}};
      std::vector<int> local;
      std::vector<RankPlan> plans;
      for (int r = 0; r < R; ++r) {
        local.push_back(r);
        plans.push_back(make_plan(spec, R, r, a));
      }
      auto done = execute(net, spec, local, plans, nullptr);
      ASSERT_EQ(done.size(), static_cast<size_t>(R));
      for (int r = 0; r < R; ++r)
        EXPECT_GT(done[static_cast<size_t>(r)], delay)
            << algorithm_name(a) << " R " << R << " rank " << r;
    }
  // Without the late rank, a dissemination barrier of 16 takes 4 rounds of at least one hop.
  CollectiveSpec spec{Op::barrier, ReduceOp::sum, isa::DType::fp32, 0, 0, {}, {}};
  RunOptions opt;
  opt.placement = Placement::one_per_chip;
  auto r = time_collective(inst("trn1.32xlarge"), 16, spec, opt);
  EXPECT_GE(r.duration_ps, 4 * 1500 * kPicosPerNs);
  EXPECT_EQ(r.messages, 16u * 4u);
}

}  // namespace

namespace {

// A link is taken when a message's head reaches it, not when the message is sent, and chunk by
// chunk: a message two hops away holds nothing yet, and a small message that reaches a link
// behind a large one waits for one of its chunks, not for its whole length.
TEST(Fabric, ALinkServesChunksInTheOrderTheyReachIt) {
  const uint64_t bytes = 96 * kGiB / 1024;
  // 0 -> 2 crosses chip0+x then chip1+x; 1 -> 2 crosses chip1+x only. Sent first, the 0 -> 2
  // message reaches chip1+x only after a hop's latency: 1 -> 2 finds the link free.
  Fabric alone = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
  const Picos solo = deliver(alone, {{1, 2}}, bytes)[0];
  for (const uint64_t first : {uint64_t{0}, uint64_t{64}}) {
    Fabric f = Fabric::make(inst("trn1.32xlarge"), 16, Placement::one_per_chip);
    std::vector<Picos> at(2);
    f.recv(2, 0, nullptr, first, 0, nullptr);
    f.send(0, 2, nullptr, first, 0, [&] { at[0] = f.now(); });
    f.recv(2, 1, nullptr, bytes, 1, nullptr);
    f.send(1, 2, nullptr, bytes, 1, [&] { at[1] = f.now(); });
    f.run();
    // The large message lost at most the small one's slot on the shared link
    EXPECT_GE(at[1], solo) << first;
    EXPECT_LE(at[1], solo + Fabric::serialize_ps(64, 96 * kGiB) + 1) << first;
    // and the small one waited for the chunks queued ahead of it, not for the whole message.
    EXPECT_LT(at[0] * 50, solo) << first;
  }
}

// Times grow with size: no size arrives before a smaller one (the reservation artefact made a
// 32 B all-reduce over 64 ranks of trn1n slower than a 64 B one).
TEST(Fabric, CollectiveTimesAreMonotoneInSize) {
  struct Case {
    const char* instance;
    int ranks;
    Op op;
  };
  for (const Case& c :
       {Case{"trn1n.32xlarge", 64, Op::all_reduce}, Case{"trn1.32xlarge", 32, Op::all_gather},
        Case{"trn2.48xlarge", 16, Op::all_reduce},
        Case{"trn2.48xlarge", 128, Op::reduce_scatter}}) {
    Picos previous = 0;
    for (uint64_t bytes = 8; bytes <= (1u << 20); bytes *= 2) {
      const uint64_t count = bytes / 4;
      CollectiveSpec spec{c.op,
                          ReduceOp::sum,
                          isa::DType::fp32,
                          c.op == Op::all_reduce ? count : count / static_cast<uint64_t>(c.ranks),
                          0,
                          {},
                          {}};
      if (spec.count == 0) continue;
      const Picos t = time_collective(inst(c.instance), c.ranks, spec, RunOptions{}).duration_ps;
      EXPECT_GE(t, previous) << c.instance << " " << c.ranks << " ranks, " << bytes << " B";
      previous = t;
    }
  }
}

}  // namespace
