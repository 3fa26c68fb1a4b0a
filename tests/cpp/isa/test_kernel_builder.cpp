// KernelBuilder's synchronisation: exact semaphores on a small multi-engine
// kernel, and a race check that runs the built streams under many random
// interleavings (engines, and DMA queues completing asynchronously) and
// verifies that every pair of conflicting accesses happens in program order.
#include <map>
#include <optional>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuronsim/isa/error.h"
#include "neuronsim/isa/kernel_builder.h"

namespace neuronsim::isa {
namespace {

std::vector<const Instruction*> without_waits(const std::vector<Instruction>& stream) {
  std::vector<const Instruction*> out;
  for (const Instruction& in : stream)
    if (in.opcode != Opcode::sem_wait) out.push_back(&in);
  return out;
}

TEST(KernelBuilder, LoadComputeStoreGetsExactlyTheNeededSemaphores) {
  KernelBuilder kb("trn2");
  const auto x = kb.input("x", DType::fp32, {128, 512});
  const auto out = kb.output("out", DType::fp32, {128, 512});
  const auto t0 = kb.sbuf_tile(DType::fp32, 128, 512);
  const auto t1 = kb.sbuf_tile(DType::fp32, 128, 512);
  kb.dma_copy(t0, x);                                  // SP queue 0 writes t0
  kb.activation(t1, t0, ActFunc::exp);                 // ACT: RAW on t0 -> waits for the queue
  kb.tensor_scalar(Engine::DVE, t1, t1, AluOp::multiply, 2.0f);  // DVE: RAW/WAW on t1 -> waits for ACT
  kb.dma_copy(out, t1);                                // SP queue 1: RAW on t1 -> waits for DVE
  const Program p = kb.finish();

  const auto& sp = p.stream(Engine::SP);
  const auto& act = p.stream(Engine::ACT);
  const auto& dve = p.stream(Engine::DVE);
  ASSERT_EQ(sp.size(), 2u);
  ASSERT_EQ(act.size(), 1u);
  ASSERT_EQ(dve.size(), 1u);
  // The load signals its queue's semaphore; ACT waits for it.
  EXPECT_EQ(sp[0].signal.op, SemOp::add);
  EXPECT_EQ(sp[0].wait.cond, WaitCond::none);
  EXPECT_EQ(act[0].wait, (SemWait{WaitCond::ge, sp[0].signal.sem, 1}));
  // ACT signals, DVE waits for it; DVE signals, the store waits for it.
  EXPECT_EQ(act[0].signal.op, SemOp::add);
  EXPECT_EQ(dve[0].wait, (SemWait{WaitCond::ge, act[0].signal.sem, 1}));
  EXPECT_EQ(dve[0].signal.op, SemOp::add);
  EXPECT_EQ(sp[1].wait, (SemWait{WaitCond::ge, dve[0].signal.sem, 1}));
  // Nobody consumes the store: it signals nothing.
  EXPECT_EQ(sp[1].signal.op, SemOp::none);
  // Three different agents, three different semaphores.
  std::set<uint16_t> sems = {sp[0].signal.sem, act[0].signal.sem, dve[0].signal.sem};
  EXPECT_EQ(sems.size(), 3u);
}

TEST(KernelBuilder, IndependentWorkIsNotSynchronised) {
  KernelBuilder kb;
  const auto a = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto b = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::DVE, a, 1.0f);
  kb.memset(Engine::POOL, b, 2.0f);
  kb.activation(kb.sbuf_tile(DType::fp32, 128, 64), kb.sbuf_tile(DType::fp32, 128, 64), ActFunc::relu);
  const Program p = kb.finish();
  for (const auto& stream : p.streams)
    for (const Instruction& in : stream) {
      EXPECT_EQ(in.wait.cond, WaitCond::none);
      EXPECT_EQ(in.signal.op, SemOp::none);
    }
}

TEST(KernelBuilder, WriteAfterReadWaitsForTheReader) {
  KernelBuilder kb;
  const auto x = kb.input("x", DType::fp32, {128, 64});
  const auto t = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto u = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::DVE, t, 0.0f);
  kb.activation(u, t, ActFunc::identity);  // ACT reads t (after DVE wrote it)
  kb.dma_copy(t, x);                       // overwrites t: must wait for ACT's read
  const Program p = kb.finish();
  const auto& act = p.stream(Engine::ACT);
  const auto& sp = p.stream(Engine::SP);
  ASSERT_EQ(sp.size(), 1u);
  EXPECT_EQ(sp[0].wait, (SemWait{WaitCond::ge, act[0].signal.sem, 1}));
}

TEST(KernelBuilder, DisjointPartitionsAndBytesDoNotConflict) {
  KernelBuilder kb;
  const auto t = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::DVE, rows(t, 0, 64), 0.0f);
  kb.memset(Engine::POOL, rows(t, 64, 64), 1.0f);  // other partitions
  kb.memset(Engine::ACT, cols(rows(t, 0, 64), 0, 32), 2.0f);  // overlaps DVE's write
  const Program p = kb.finish();
  EXPECT_EQ(p.stream(Engine::POOL)[0].wait.cond, WaitCond::none);
  EXPECT_EQ(p.stream(Engine::ACT)[0].wait.cond, WaitCond::ge);
  EXPECT_EQ(p.stream(Engine::ACT)[0].wait.sem, p.stream(Engine::DVE)[0].signal.sem);
}

TEST(KernelBuilder, SecondDependencyBecomesASemWait) {
  KernelBuilder kb;
  const auto a = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto b = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto c = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::ACT, a, 1.0f);
  kb.memset(Engine::POOL, b, 2.0f);
  kb.tensor_tensor(Engine::DVE, c, a, b, AluOp::add);  // needs ACT and POOL
  const Program p = kb.finish();
  const auto& dve = p.stream(Engine::DVE);
  ASSERT_EQ(dve.size(), 2u);
  EXPECT_EQ(dve[0].opcode, Opcode::sem_wait);
  std::set<uint16_t> waited = {dve[0].wait.sem, dve[1].wait.sem};
  std::set<uint16_t> signalled = {p.stream(Engine::ACT)[0].signal.sem, p.stream(Engine::POOL)[0].signal.sem};
  EXPECT_EQ(waited, signalled);
}

TEST(KernelBuilder, AWaitAlreadyMadeByTheStreamIsNotRepeated) {
  KernelBuilder kb;
  const auto a = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto b = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto c = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::ACT, a, 1.0f);
  kb.memset(Engine::ACT, b, 1.0f);
  kb.tensor_copy(Engine::DVE, c, b);  // waits for ACT's 2nd instruction, which implies the 1st
  kb.tensor_copy(Engine::DVE, c, a);  // no new wait needed
  const Program p = kb.finish();
  const auto& dve = p.stream(Engine::DVE);
  ASSERT_EQ(dve.size(), 2u);
  EXPECT_EQ(dve[0].wait.value, 2u);
  EXPECT_EQ(dve[1].wait.cond, WaitCond::none);
}

TEST(KernelBuilder, RejectsCallerSemaphoresAndExhaustedMemory) {
  KernelBuilder kb;
  Instruction in;
  in.opcode = Opcode::memset;
  in.engine = Engine::DVE;
  in.operands = {{Role::dst, kb.sbuf_tile(DType::fp32, 1, 1)}};
  in.signal = {SemOp::add, 0, 1};
  EXPECT_THROW(kb.emit(in), IsaError);
  EXPECT_THROW(kb.sbuf_tile(DType::fp32, 128, 1 << 20), IsaError);
  EXPECT_THROW(kb.psum_tile(DType::fp32, 128, 8192), IsaError);
  EXPECT_THROW(kb.input("x", DType::fp32, {1}); kb.input("x", DType::fp32, {1}), IsaError);
}

// ---- Race check by random interleaving -------------------------------------------------------

struct Region {
  MemSpace space;
  uint16_t tensor;
  uint32_t p0, p1;
  int64_t b0, b1;
};

Region region_of(const AccessPattern& ap) {
  int64_t lo = 0, hi = 0;
  for (const Dim& d : ap.free_dims()) (d.stride >= 0 ? hi : lo) += int64_t{d.stride} * (d.size - 1);
  const auto size = static_cast<int64_t>(dtype_size(ap.dtype));
  const auto base = static_cast<int64_t>(ap.offset);
  if (ap.space == MemSpace::HBM) {
    const int64_t r = ap.partition_stride * (ap.num_partitions - 1);
    return {ap.space, ap.tensor, 0, 1, base + (std::min<int64_t>(0, r) + lo) * size,
            base + (std::max<int64_t>(0, r) + hi + 1) * size};
  }
  return {ap.space, 0, ap.start_partition, uint32_t{ap.start_partition} + ap.num_partitions, base + lo * size,
          base + (hi + 1) * size};
}

bool overlap(const Region& a, const Region& b) {
  return a.space == b.space && a.tensor == b.tensor && a.p0 < b.p1 && b.p0 < a.p1 && a.b0 < b.b1 && b.b0 < a.b1;
}

bool conflict(const Instruction& a, const Instruction& b) {
  for (const Operand& x : a.operands)
    for (const Operand& y : b.operands) {
      if (x.ap.space == MemSpace::Pattern || y.ap.space == MemSpace::Pattern) continue;
      const bool xw = x.role == Role::dst || x.role == Role::reduce_dst;
      const bool yw = y.role == Role::dst || y.role == Role::reduce_dst;
      if ((xw || yw) && overlap(region_of(x.ap), region_of(y.ap))) return true;
    }
  return false;
}

// Runs the program's streams under a random schedule: engines issue in order when
// their wait holds; a dma_copy is queued on its (engine, queue) and completes later,
// in queue order. Returns the completion step of every non-wait instruction.
std::map<const Instruction*, int> random_schedule(const Program& p, std::mt19937& rng) {
  std::array<size_t, kNumEngines> pc{};
  std::map<std::pair<int, int>, std::vector<const Instruction*>> queues;
  std::array<uint32_t, kNumSemaphores> sem{};
  std::map<const Instruction*, int> done;
  int step = 0;
  auto complete = [&](const Instruction* in) {
    done[in] = step++;
    if (in->signal.op == SemOp::add) sem[in->signal.sem] += in->signal.value;
    if (in->signal.op == SemOp::set) sem[in->signal.sem] = in->signal.value;
  };
  for (;;) {
    std::vector<std::function<void()>> actions;
    for (int e = 0; e < kNumEngines; ++e) {
      const auto& s = p.streams[e];
      if (pc[e] >= s.size()) continue;
      const Instruction* in = &s[pc[e]];
      const bool ready = in->wait.cond == WaitCond::none ||
                         (in->wait.cond == WaitCond::ge ? sem[in->wait.sem] >= in->wait.value
                                                        : sem[in->wait.sem] == in->wait.value);
      if (!ready) continue;
      actions.push_back([&, e, in] {
        ++pc[e];
        if (in->opcode == Opcode::dma_copy) queues[{e, in->ints[0]}].push_back(in);
        else if (in->opcode != Opcode::sem_wait) complete(in);
      });
    }
    for (auto& [key, q] : queues)
      if (!q.empty())
        actions.push_back([&complete, &q] {
          complete(q.front());
          q.erase(q.begin());
        });
    if (actions.empty()) break;
    actions[std::uniform_int_distribution<size_t>(0, actions.size() - 1)(rng)]();
  }
  return done;
}

TEST(KernelBuilder, RandomInterleavingsNeverReorderConflictingAccesses) {
  // A tiled kernel with loads, matmuls, activations, vector ops and stores over
  // shared, reused tiles: many RAW, WAR and WAW hazards across all engines.
  KernelBuilder kb("trn2");
  const auto x = kb.input("x", DType::bf16, {128, 1024});
  const auto w = kb.input("w", DType::bf16, {128, 128});
  const auto y = kb.output("y", DType::fp32, {128, 1024});
  const auto wt = kb.sbuf_tile(DType::bf16, 128, 128);
  const auto xt = kb.sbuf_tile(DType::bf16, 128, 512);
  const auto h = kb.sbuf_tile(DType::fp32, 128, 512);
  const auto s = kb.sbuf_tile(DType::fp32, 128, 1);
  const auto acc = kb.psum_tile(DType::fp32, 128, 512);
  std::vector<std::pair<Engine, int>> emitted;  // (engine, index among its non-wait instructions)
  std::array<int, kNumEngines> count{};
  auto note = [&](Engine e) { emitted.emplace_back(e, count[static_cast<size_t>(e)]++); };
  kb.dma_copy(wt, w); note(Engine::SP);
  for (uint32_t j = 0; j < 2; ++j) {
    kb.dma_copy(xt, cols(x, j * 512, 512), j % 2 ? Engine::ACT : Engine::SP); note(j % 2 ? Engine::ACT : Engine::SP);
    kb.matmul(acc, wt, xt); note(Engine::PE);
    kb.activation(h, acc, ActFunc::gelu, 1.0f, nullptr, &s); note(Engine::ACT);
    kb.tensor_scalar(Engine::DVE, h, h, AluOp::multiply, 0.5f, AluOp::bypass, 0.0f, &s); note(Engine::DVE);
    kb.tensor_tensor(Engine::POOL, h, h, h, AluOp::add); note(Engine::POOL);
    kb.dma_copy(cols(y, j * 512, 512), h); note(Engine::SP);
    kb.memset(Engine::DVE, s, 0.0f); note(Engine::DVE);
  }
  const Program p = kb.finish();
  std::array<std::vector<const Instruction*>, kNumEngines> by_engine;
  for (int e = 0; e < kNumEngines; ++e) by_engine[e] = without_waits(p.streams[e]);
  std::vector<const Instruction*> order;
  for (auto [e, i] : emitted) order.push_back(by_engine[static_cast<size_t>(e)].at(i));

  std::mt19937 rng(1234);
  int conflicts = 0;
  for (int run = 0; run < 300; ++run) {
    const auto done = random_schedule(p, rng);
    ASSERT_EQ(done.size(), order.size()) << "deadlock in run " << run;
    for (size_t a = 0; a < order.size(); ++a)
      for (size_t b = a + 1; b < order.size(); ++b)
        if (conflict(*order[a], *order[b])) {
          ++conflicts;
          ASSERT_LT(done.at(order[a]), done.at(order[b])) << "instructions " << a << " and " << b << ", run " << run;
        }
  }
  EXPECT_GT(conflicts, 0);
}

}  // namespace
}  // namespace neuronsim::isa
