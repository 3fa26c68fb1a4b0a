// What a DMA costs besides its bytes at one engine's rate: the hardware DGE's time to make each
// instruction's descriptors (dma_copy hwdge=true, one instruction after another per triggering
// engine), and the rate a core's DMA engines reach together (dma_core_bytes_per_ns).
#include <gtest/gtest.h>

#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/sim/device.h"

namespace neuronsim::sim {
namespace {

// `count` loads of [128, 64] fp32 tiles (256 B per partition), all from the Sync engine.
isa::Program loads(const char* target, int count, bool hwdge) {
  isa::KernelBuilder kb(target);
  const auto x = kb.input("x", isa::DType::fp32, {128, 64 * count});
  const auto y = kb.output("y", isa::DType::fp32, {128, 64});
  auto tile = kb.sbuf_tile(isa::DType::fp32, 128, 64);
  for (int i = 0; i < count; ++i) {
    isa::AccessPattern part = x;
    part.offset += static_cast<uint64_t>(i) * 64 * 4;
    part.dims[part.num_dims - 1].size = 64;
    kb.dma_copy(tile, part);
  }
  kb.dma_copy(y, tile);
  isa::Program p = kb.finish();
  for (auto& stream : p.streams)
    for (isa::Instruction& in : stream)
      if (hwdge && in.opcode == isa::Opcode::dma_copy) in.flags |= isa::kHwDge;
  return p;
}

// The program's time on the device, launch aside.
uint64_t body_ps(const char* instance, const isa::Program& program) {
  auto dev = Device::open(instance, {.mode = Mode::timing_only});
  const ProgramRef p = dev->load(0, program, "loads");
  const Completion c = dev->run({p, dev->allocate_io(*p), "loads"});
  return c.end_ps - c.start_ps - c.launch_ps;
}

TEST(DmaIssue, TheHardwareDgeMakesOneInstructionsDescriptorsAtATime) {
  constexpr int kLoads = 16;
  const double dge_ps = Device::open("trn2.3xlarge")->generation().dma_hwdge_ns * 1000;
  ASSERT_GT(dge_ps, 0);
  const uint64_t plain = body_ps("trn2.3xlarge", loads("trn2", kLoads, false));
  const uint64_t dge = body_ps("trn2.3xlarge", loads("trn2", kLoads, true));
  // Every instruction (the loads and the store) waits for the DGE in turn; the small
  // transfers themselves overlap that time.
  EXPECT_GE(static_cast<double>(dge), (kLoads + 1) * dge_ps);
  EXPECT_LT(static_cast<double>(dge), (kLoads + 1) * dge_ps + static_cast<double>(plain));
  EXPECT_GT(dge - plain, (kLoads - 1) * dge_ps * 0.75);
}

TEST(DmaIssue, PreBuiltDescriptorsCostNoDgeTime) {
  // trn1 has no hardware DGE: its figure is 0 and the ISA refuses the flag there.
  EXPECT_EQ(Device::open("trn1.2xlarge")->generation().dma_hwdge_ns, 0);
}

// One [128, cols] fp32 load on trn1: 16 engines, each at its own rate, and the core's
// engines together no faster than dma_core_bytes_per_ns.
TEST(DmaIssue, ACoresDmaEnginesShareOneRate) {
  auto dev = Device::open("trn1.2xlarge");
  const spec::GenerationConfig& g = dev->generation();
  ASSERT_LT(g.dma_core_bytes_per_ns, g.dma_engines * g.dma_engine_bytes_per_ns);
  isa::KernelBuilder kb("trn1");
  constexpr int64_t kCols = 16384;
  const auto x = kb.input("x", isa::DType::fp32, {128, kCols});
  const auto y = kb.output("y", isa::DType::fp32, {128, 1});
  const auto tile = kb.sbuf_tile(isa::DType::fp32, 128, kCols);
  kb.dma_copy(tile, x);
  auto column = tile;
  column.dims[column.num_dims - 1].size = 1;
  kb.dma_copy(y, column);
  const double bytes = 128.0 * kCols * 4;
  const double ps = static_cast<double>(body_ps("trn1.2xlarge", kb.finish()));
  const double at_core_rate = bytes / g.dma_core_bytes_per_ns * 1000;
  const double at_engines_rate = bytes / (g.dma_engines * g.dma_engine_bytes_per_ns) * 1000;
  EXPECT_GT(ps, at_core_rate);
  EXPECT_GT(at_core_rate, at_engines_rate * 1.5);  // the core's rate, not the engines', decides
  EXPECT_LT(ps, at_core_rate + 2 * (g.dma_issue_ns * 1000) + 1e6);
}

}  // namespace
}  // namespace neuronsim::sim
