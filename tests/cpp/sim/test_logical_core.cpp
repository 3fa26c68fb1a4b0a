// A program compiled for a logical core of two physical cores (isa::Program::lnc, Trn2's
// LNC=2): the same values, its engines' work shared by the pair, its DMAs spread over both
// cores' DMA engines, and clear refusals where it cannot run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "neuronsim/isa/error.h"
#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/sim/device.h"

namespace neuronsim::sim {
namespace {

using ::testing::HasSubstr;

constexpr int kTiles = 8;

// Rows [first, first + 128) of an fp32 HBM tensor of 2048 columns.
isa::AccessPattern rows(isa::AccessPattern ap, int64_t first) {
  ap.offset += static_cast<uint64_t>(first) * 2048 * 4;
  ap.num_partitions = 128;
  return ap;
}

// y = exp(x) + 1 over kTiles [128, 2048] fp32 tiles, each loaded, computed and stored on
// its own, so that the tiles' DMAs and compute can overlap.
isa::Program tiles(uint32_t lnc) {
  isa::KernelBuilder kb("trn2");
  const auto x = kb.input("x", isa::DType::fp32, {kTiles * 128, 2048});
  const auto y = kb.output("y", isa::DType::fp32, {kTiles * 128, 2048});
  for (int t = 0; t < kTiles; ++t) {
    const uint64_t mark = kb.sbuf_mark();
    const auto a = kb.sbuf_tile(isa::DType::fp32, 128, 2048);
    const auto b = kb.sbuf_tile(isa::DType::fp32, 128, 2048);
    kb.dma_copy(a, rows(x, t * 128));
    kb.activation(b, a, isa::ActFunc::exp);
    kb.tensor_scalar(isa::Engine::DVE, b, b, isa::AluOp::add, 1.0f);
    kb.dma_copy(rows(y, t * 128), b);
    kb.release_sbuf(mark);
  }
  isa::Program p = kb.finish();
  p.lnc = lnc;
  return p;
}

struct Ran {
  Completion done;
  std::vector<uint8_t> y;
  TraceSession trace;
};

Ran run(uint32_t lnc) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, tiles(lnc), "tiles");
  const Bindings io = dev->allocate_io(*p);
  std::vector<uint8_t> x(size_t{kTiles} * 128 * 2048 * 4);
  for (size_t i = 0; i < x.size() / 4; ++i) {
    const float v = static_cast<float>(i % 97) / 97.0f;
    std::memcpy(x.data() + i * 4, &v, 4);
  }
  dev->write_tensor(*p, io, "x", x);
  const uint64_t session = dev->start_trace();
  Ran r{dev->run({p, io, "tiles"}), {}, {}};
  r.trace = dev->stop_trace(session);
  r.y = dev->read_tensor(*p, io, "y");
  return r;
}

const CoreStats& stats(const Completion& c) {
  return c.run->cores.at(0);
}

TEST(LogicalCore, ThePairSharesEveryEnginesWorkAndComputesTheSameValues) {
  const Ran one = run(1), two = run(2);
  EXPECT_EQ(one.y, two.y);
  for (const isa::Engine e : {isa::Engine::ACT, isa::Engine::DVE}) {
    const EngineStats& a = stats(one.done).engines[static_cast<size_t>(e)];
    const EngineStats& b = stats(two.done).engines[static_cast<size_t>(e)];
    EXPECT_EQ(b.instructions, a.instructions);
    // Each instruction's time halved, rounded up to a picosecond.
    EXPECT_NEAR(static_cast<double>(b.busy_ps), a.busy_ps / 2.0, static_cast<double>(kTiles));
    EXPECT_GT(a.busy_ps, 0u);
  }
  EXPECT_EQ(stats(one.done).physical_cores, 1u);
  EXPECT_EQ(stats(two.done).physical_cores, 2u);
  EXPECT_EQ(stats(two.done).flops, stats(one.done).flops);  // the same work
  const uint64_t body_one = one.done.end_ps - one.done.start_ps - one.done.launch_ps;
  const uint64_t body_two = two.done.end_ps - two.done.start_ps - two.done.launch_ps;
  EXPECT_LT(body_two, body_one * 3 / 4);
  EXPECT_GT(body_two, body_one / 3);
}

TEST(LogicalCore, ItsDmasTakeBothCoresDmaEnginesInTurn) {
  const Ran one = run(1), two = run(2);
  const uint32_t per_core = Device::open("trn2.3xlarge")->generation().dma_engines;
  const auto engines = [](const Ran& r) {
    std::set<uint32_t> used;
    for (const DmaRecord& d : r.trace.result.dmas) used.insert(d.dma_engine);
    return used;
  };
  ASSERT_FALSE(engines(one).empty());
  ASSERT_FALSE(engines(two).empty());
  EXPECT_LT(*engines(one).rbegin(), per_core);
  EXPECT_GE(*engines(two).rbegin(), per_core);
  EXPECT_LT(*engines(two).rbegin(), 2 * per_core);
  EXPECT_EQ(stats(two.done).dma_bytes, stats(one.done).dma_bytes);
}

TEST(LogicalCore, ACopyOfALogicalCoreUsesBothCoresDmaEngines) {
  auto dev = Device::open("trn2.3xlarge");
  const uint64_t bytes = 64 << 20;
  const auto a = dev->allocate(0, bytes);
  const auto b = dev->allocate(0, bytes);
  ASSERT_TRUE(a && b);
  const Completion one = dev->wait(dev->enqueue(0, Copy{0, 0, *a, *b, bytes, "one", 1}));
  const Completion two = dev->wait(dev->enqueue(0, Copy{0, 0, *b, *a, bytes, "two", 2}));
  // DMA-bound on one core's 16 engines (368 GB/s), under the HBM's bound with two.
  EXPECT_LT(two.end_ps - two.start_ps, (one.end_ps - one.start_ps) * 6 / 10);
}

TEST(LogicalCore, AProgramMustBeginALogicalCoreAndHaveADegreeTheSdkSupports) {
  auto dev = Device::open("trn2.3xlarge");
  try {
    dev->load(1, tiles(2), "odd");
    FAIL() << "loaded onto core 1";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("logical core of 2 physical cores"));
    EXPECT_THAT(e.what(), HasSubstr("core 1"));
  }
  EXPECT_NO_THROW(dev->load(2, tiles(2), "even"));
  try {
    dev->load(0, tiles(3), "three");
    FAIL() << "loaded a degree of 3";
  } catch (const isa::IsaError& e) {
    EXPECT_THAT(e.what(), HasSubstr("3 physical cores (LNC)"));
  }
}

TEST(LogicalCore, TheDegreeTravelsInTheNeffHeader) {
  const isa::Program p = tiles(2);
  const isa::neff::Neff n = isa::to_neff(p);
  EXPECT_EQ(n.header.lnc_size, 2u);
  EXPECT_EQ(isa::from_neff(n, "tiles.neff"), p);
}

}  // namespace
}  // namespace neuronsim::sim
