// The runtime release in the time of a collective (spec/configs/runtime-releases.json): a fixed
// cost per collective, more across hosts, and the algorithms of its automatic choice; the newest
// release unless told.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fabric_util.h"
#include "neuronsim/cc/communicator.h"
#include "neuronsim/cc/fabric.h"
#include "neuronsim/cc/runner.h"
#include "neuronsim/spec/config.h"

using namespace neuronsim;
using namespace neuronsim::cc;
using namespace neuronsim::cc::testing;

namespace {

CollectiveSpec all_reduce(uint64_t bytes) {
  return {Op::all_reduce, ReduceOp::sum, isa::DType::fp32, bytes / 4, 0, {}, {}};
}
CollectiveSpec all_gather(int ranks, uint64_t bytes) {
  return {Op::all_gather,
          ReduceOp::sum,
          isa::DType::fp32,
          bytes / 4 / static_cast<uint64_t>(ranks),
          0,
          {},
          {}};
}

RunOptions with(const RuntimeCosts& runtime, Algorithm algorithm = Algorithm::auto_select) {
  RunOptions o;
  o.runtime = runtime;
  o.algorithm = algorithm;
  return o;
}

Picos duration(const std::string& instance, int ranks, const CollectiveSpec& spec,
               const RunOptions& o) {
  return time_collective(inst(instance), ranks, spec, o).duration_ps;
}

TEST(RuntimeRelease, CostsAndAlgorithmsComeFromTheConfigs) {
  const spec::RuntimeRelease r = spec::load_runtime_release("2.10");
  const RuntimeCosts c = RuntimeCosts::load("2.10");
  EXPECT_EQ(c.release, "2.10");
  EXPECT_EQ(c.fixed_ps, static_cast<Picos>(r.collective_fixed_ns * 1000 + 0.5));
  EXPECT_EQ(c.across_hosts_ps, static_cast<Picos>(r.across_hosts_fixed_ns * 1000 + 0.5));
  EXPECT_FALSE(c.mesh);
  EXPECT_FALSE(c.rdh);
  EXPECT_TRUE(c.hierarchical);
  const RuntimeCosts none = RuntimeCosts::none();
  EXPECT_EQ(none.release, "none");
  EXPECT_EQ(none.fixed_ps, 0u);
  EXPECT_TRUE(none.mesh && none.rdh && none.hierarchical);
  EXPECT_EQ(RuntimeCosts::load().release, spec::runtime_release_names().back());
  EXPECT_THROW(RuntimeCosts::load("1.0"), spec::ConfigError);
}

// The floor: at small sizes a collective takes its release's fixed cost more than the fabric
// alone, whatever its size, and the cost is the release's, not the hardware's (the same 32-rank
// all-gather on trn1 took ~150 us in release 2.10's example and 6.16 us in 2.24's).
TEST(RuntimeRelease, FixedCostIsTheFloorOfSmallCollectivesAndIsPerRelease) {
  for (const std::string release : {"2.10", "2.24"}) {
    SCOPED_TRACE(release);
    const RuntimeCosts rt = RuntimeCosts::load(release);
    RuntimeCosts bare = rt;  // the same algorithms, no cost
    bare.fixed_ps = 0;
    for (uint64_t bytes : {uint64_t{1024}, uint64_t{64} << 10}) {
      const Picos with_cost = duration("trn1.32xlarge", 32, all_gather(32, bytes), with(rt));
      EXPECT_EQ(with_cost,
                duration("trn1.32xlarge", 32, all_gather(32, bytes), with(bare)) + rt.fixed_ps);
    }
  }
  const RuntimeCosts old = RuntimeCosts::load("2.10"), newer = RuntimeCosts::load("2.24");
  EXPECT_GT(old.fixed_ps, 100 * newer.fixed_ps);
  // A 1 KiB all-reduce of two ranks: the fabric's two hops (3 us) and, with release 2.10, the
  // floor of its nccom-test example (58 us, spec/calibration/nccom-fit.csv) within a few percent.
  const Picos bare = duration("trn1.32xlarge", 2, all_reduce(1024), with(RuntimeCosts::none()));
  EXPECT_LT(bare, 4 * kPicosPerUs);
  const Picos floor = duration("trn1.32xlarge", 2, all_reduce(1024), with(old));
  EXPECT_NEAR(static_cast<double>(floor), 58e6, 58e6 * 0.05);
  // Flat up to 256 KiB, as the example (58, 58, 58, 58, 60 us): the floor dominates.
  EXPECT_LT(duration("trn1.32xlarge", 2, all_reduce(256 << 10), with(old)), floor * 11 / 10);
  // At 1 GiB the floor is a small part: the DMA engines' time is most of it.
  const Picos large = duration("trn1.32xlarge", 2, all_reduce(uint64_t{1} << 30), with(old));
  EXPECT_LT(old.fixed_ps * 100, large);
}

// Without options the newest release: what the communicators and cc-bench use by default.
TEST(RuntimeRelease, TheNewestReleaseByDefault) {
  const RuntimeCosts newest = RuntimeCosts::load();
  const CollectiveSpec spec = all_gather(32, 8192);
  EXPECT_EQ(duration("trn1.32xlarge", 32, spec, RunOptions{}),
            duration("trn1.32xlarge", 32, spec, with(newest)));
  FabricCommunicator comm(inst("trn1.32xlarge"), 32);
  std::vector<RankCall> calls;
  for (int r = 0; r < 32; ++r) calls.push_back({r, 0, {}});
  EXPECT_EQ(comm.run(spec, calls, false).duration_ps(),
            duration("trn1.32xlarge", 32, spec, with(newest)));
}

// Release 2.10's library had ring inside a host (mesh All-Reduce came with runtime 2.14.8, later)
// and the hierarchy across hosts; newer ones choose mesh for small sizes.
TEST(RuntimeRelease, ItsAlgorithmsAreTheChoice) {
  const auto& trn1 = inst("trn1.32xlarge");
  const CollectiveSpec small = all_reduce(4096), mid = all_reduce(uint64_t{4} << 20);
  EXPECT_EQ(resolve_algorithm(small, 16, trn1, with(RuntimeCosts::load("2.10"))), Algorithm::ring);
  EXPECT_EQ(resolve_algorithm(mid, 16, trn1, with(RuntimeCosts::load("2.10"))), Algorithm::ring);
  EXPECT_EQ(resolve_algorithm(small, 16, trn1, with(RuntimeCosts::load("2.24"))), Algorithm::mesh);
  EXPECT_EQ(resolve_algorithm(mid, 16, trn1, with(RuntimeCosts::load("2.24"))), Algorithm::rdh);
  // The thresholds left to a release: without mesh its band goes to RDH, without either to ring.
  const Thresholds t{1000, 5000};
  RuntimeCosts no_mesh = RuntimeCosts::none();
  no_mesh.mesh = false;
  EXPECT_EQ(thresholds_for(t, no_mesh).mesh_below_bytes, 0u);
  EXPECT_EQ(thresholds_for(t, no_mesh).rdh_below_bytes, 5000u);
  RuntimeCosts no_rdh = RuntimeCosts::none();
  no_rdh.rdh = false;
  EXPECT_EQ(thresholds_for(t, no_rdh).rdh_below_bytes, 1000u);
  const Thresholds ring_only = thresholds_for(t, RuntimeCosts::load("2.10"));
  EXPECT_EQ(ring_only.mesh_below_bytes, 0u);
  EXPECT_EQ(ring_only.rdh_below_bytes, 0u);
  // An explicit algorithm is run whatever the release has.
  EXPECT_EQ(resolve_algorithm(small, 16, trn1, with(RuntimeCosts::load("2.10"), Algorithm::mesh)),
            Algorithm::mesh);
  // Across two hosts 2.10 runs the hierarchy, and without it the flat ring.
  Fabric f = Fabric::make(trn1, 64);
  EXPECT_EQ(choose_on_fabric(f, all_reduce(8), with(RuntimeCosts::load("2.10")), 32),
            Algorithm::hierarchical);
  RuntimeCosts flat = RuntimeCosts::load("2.10");
  flat.hierarchical = false;
  EXPECT_EQ(choose_on_fabric(f, all_reduce(8), with(flat), 32), Algorithm::ring);
}

// A collective whose ranks span hosts joined by EFA pays the release's cost across hosts too; one
// inside a host does not.
TEST(RuntimeRelease, AcrossHostsCostsMore) {
  const RuntimeCosts rt = RuntimeCosts::load("2.10");
  ASSERT_GT(rt.across_hosts_ps, 0u);
  RuntimeCosts inside = rt;
  inside.across_hosts_ps = 0;
  const CollectiveSpec tiny = all_reduce(8);
  EXPECT_EQ(duration("trn1.32xlarge", 64, tiny, with(rt)),
            duration("trn1.32xlarge", 64, tiny, with(inside)) + rt.across_hosts_ps);
  EXPECT_EQ(duration("trn1.32xlarge", 32, tiny, with(rt)),
            duration("trn1.32xlarge", 32, tiny, with(inside)));
  // The 8 B point of release 2.10's two-host example: 520 us (nccom-fit.csv).
  EXPECT_NEAR(static_cast<double>(duration("trn1.32xlarge", 64, tiny, with(rt))), 520e6,
              520e6 * 0.05);
}

// Collectives issued together (nccom-test's streams) each pay the cost, each on its own CC core.
TEST(RuntimeRelease, CollectivesRunTogetherEachPayIt) {
  const RuntimeCosts rt = RuntimeCosts::load("2.10");
  const CollectiveSpec spec = all_reduce(1024);
  Fabric f = Fabric::make(inst("trn1.32xlarge"), 4);
  const auto both = run_together(f, {spec, spec}, nullptr, with(rt));
  Fabric g = Fabric::make(inst("trn1.32xlarge"), 4);
  const auto bare = run_together(g, {spec, spec}, nullptr, with(RuntimeCosts::none()));
  ASSERT_EQ(both.size(), 2u);
  for (const CollectiveResult& r : both) EXPECT_GE(r.duration_ps, rt.fixed_ps);
  EXPECT_GT(both[0].duration_ps, bare[0].duration_ps + rt.fixed_ps / 2);
}

}  // namespace
