// KernelBuilder's synchronisation: exact semaphores on a small multi-engine
// kernel, a race check that runs the built streams under many random
// interleavings (engines, and DMA queues completing asynchronously) and
// verifies that every pair of conflicting accesses happens in program order, and
// the builder's dependencies against a plain scan of the whole history, on
// pipelined kernels and on random tile operations with overlapping regions.
#include <algorithm>
#include <initializer_list>
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
  kb.dma_copy(t0, x);                   // SP queue 0 writes t0
  kb.activation(t1, t0, ActFunc::exp);  // ACT: RAW on t0 -> waits for the queue
  kb.tensor_scalar(Engine::DVE, t1, t1, AluOp::multiply,
                   2.0f);  // DVE: RAW/WAW on t1 -> waits for ACT
  kb.dma_copy(out, t1);    // SP queue 1: RAW on t1 -> waits for DVE
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
  kb.activation(kb.sbuf_tile(DType::fp32, 128, 64), kb.sbuf_tile(DType::fp32, 128, 64),
                ActFunc::relu);
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
  kb.memset(Engine::POOL, rows(t, 64, 64), 1.0f);             // other partitions
  kb.memset(Engine::ACT, cols(rows(t, 0, 64), 0, 32), 2.0f);  // overlaps DVE's write
  const Program p = kb.finish();
  EXPECT_EQ(p.stream(Engine::POOL)[0].wait.cond, WaitCond::none);
  EXPECT_EQ(p.stream(Engine::ACT)[0].wait.cond, WaitCond::ge);
  EXPECT_EQ(p.stream(Engine::ACT)[0].wait.sem, p.stream(Engine::DVE)[0].signal.sem);
}

// A partition broadcast reads only its start partition: a write to that partition before
// the DMA is a RAW dependency, and a later write to it a WAR one; writes to the other
// partitions its walk spans are neither.
TEST(KernelBuilder, PartitionBroadcastDependsOnItsOnePartitionOnly) {
  KernelBuilder kb;
  const auto t = kb.sbuf_tile(DType::fp32, 128, 16);
  const auto out = kb.sbuf_tile(DType::fp32, 128, 16);
  AccessPattern bcast = rows(t, 0, 1);
  bcast.num_partitions = 128;
  bcast.partition_broadcast = true;
  kb.memset(Engine::ACT, rows(t, 0, 1), 1.0f);    // the source partition
  kb.memset(Engine::POOL, rows(t, 64, 1), 2.0f);  // inside [0, 128), not read
  kb.dma_copy(out, bcast);
  kb.memset(Engine::DVE, rows(t, 96, 32), 3.0f);  // not read: need not wait for the DMA
  kb.memset(Engine::POOL, rows(t, 0, 32), 4.0f);  // overwrites the source: waits for it
  const Program p = kb.finish();
  const auto& sp = p.stream(Engine::SP);
  ASSERT_EQ(sp.size(), 1u);
  EXPECT_EQ(sp[0].wait, (SemWait{WaitCond::ge, p.stream(Engine::ACT)[0].signal.sem, 1}));
  EXPECT_TRUE(sp[0].operand(Role::src)->partition_broadcast);
  EXPECT_EQ(p.stream(Engine::POOL)[0].signal.op, SemOp::none);  // nobody waits for it
  EXPECT_EQ(p.stream(Engine::DVE)[0].wait.cond, WaitCond::none);
  const auto pool = without_waits(p.stream(Engine::POOL));
  ASSERT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool[1]->wait, (SemWait{WaitCond::ge, sp[0].signal.sem, 1}));
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
  std::set<uint16_t> signalled = {p.stream(Engine::ACT)[0].signal.sem,
                                  p.stream(Engine::POOL)[0].signal.sem};
  EXPECT_EQ(waited, signalled);
}

TEST(KernelBuilder, SemWaitsGoRightBeforeTheirInstructionsInTheMiddleOfAStream) {
  KernelBuilder kb;
  const auto a = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto b = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto c = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto d = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::DVE, d, 0.0f);  // DVE's instructions before and after the two waits
  kb.memset(Engine::ACT, a, 1.0f);
  kb.memset(Engine::POOL, b, 2.0f);
  kb.tensor_tensor(Engine::DVE, c, a, b, AluOp::add);  // needs ACT and POOL
  kb.tensor_copy(Engine::DVE, d, c);
  const Program p = kb.finish();
  const auto& dve = p.stream(Engine::DVE);
  ASSERT_EQ(dve.size(), 4u);
  EXPECT_EQ(dve[0].opcode, Opcode::memset);
  EXPECT_EQ(dve[1].opcode, Opcode::sem_wait);
  EXPECT_EQ(dve[2].opcode, Opcode::tensor_tensor);
  EXPECT_EQ(dve[2].wait.cond, WaitCond::ge);
  EXPECT_EQ(dve[3].opcode, Opcode::tensor_copy);
  EXPECT_EQ(dve[3].wait.cond, WaitCond::none);
}

TEST(KernelBuilder, ErrorsNameTheInstructionAmongThoseOfItsEngine) {
  KernelBuilder kb;
  const auto t = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.memset(Engine::DVE, t, 0.0f);
  kb.memset(Engine::ACT, t, 0.0f);
  kb.memset(Engine::DVE, t, 1.0f);
  try {
    kb.matmul(t, t, t);  // a matmul writes PSUM
    FAIL() << "no error";
  } catch (const IsaError& e) {
    EXPECT_THAT(e.what(), testing::StartsWith("kernel pe[0]: matmul:"));
  }
  try {
    kb.tensor_copy(Engine::DVE, t, cols(t, 0, 32));  // 64 elements per partition from 32
    FAIL() << "no error";
  } catch (const IsaError& e) {
    EXPECT_THAT(e.what(), testing::StartsWith("kernel dve[2]: tensor_copy:"));
  }
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
    return {ap.space,
            ap.tensor,
            0,
            1,
            base + (std::min<int64_t>(0, r) + lo) * size,
            base + (std::max<int64_t>(0, r) + hi + 1) * size};
  }
  const uint32_t parts = ap.partition_broadcast ? 1 : ap.num_partitions;
  return {ap.space,           0,
          ap.start_partition, uint32_t{ap.start_partition} + parts,
          base + lo * size,   base + (hi + 1) * size};
}

bool overlap(const Region& a, const Region& b) {
  return a.space == b.space && a.tensor == b.tensor && a.p0 < b.p1 && b.p0 < a.p1 && a.b0 < b.b1 &&
         b.b0 < a.b1;
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
        if (in->opcode == Opcode::dma_copy)
          queues[{e, in->ints[0]}].push_back(in);
        else if (in->opcode != Opcode::sem_wait)
          complete(in);
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
  kb.dma_copy(wt, w);
  note(Engine::SP);
  for (uint32_t j = 0; j < 2; ++j) {
    kb.dma_copy(xt, cols(x, j * 512, 512), j % 2 ? Engine::ACT : Engine::SP);
    note(j % 2 ? Engine::ACT : Engine::SP);
    kb.matmul(acc, wt, xt);
    note(Engine::PE);
    kb.activation(h, acc, ActFunc::gelu, 1.0f, nullptr, &s);
    note(Engine::ACT);
    kb.tensor_scalar(Engine::DVE, h, h, AluOp::multiply, 0.5f, AluOp::bypass, 0.0f, &s);
    note(Engine::DVE);
    kb.tensor_tensor(Engine::POOL, h, h, h, AluOp::add);
    note(Engine::POOL);
    kb.dma_copy(cols(y, j * 512, 512), h);
    note(Engine::SP);
    kb.memset(Engine::DVE, s, 0.0f);
    note(Engine::DVE);
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
          ASSERT_LT(done.at(order[a]), done.at(order[b]))
              << "instructions " << a << " and " << b << ", run " << run;
        }
  }
  EXPECT_GT(conflicts, 0);
}

// ---- The dependencies against a plain scan of the whole history ----------------------------

}  // namespace

// The rule the builder implements, as the scan it used to run: for each operand, every
// earlier access, newest first; an overlap with another agent's access that is not read
// after read makes that access's instruction the dependency on its agent, unless a newer
// one of the agent already is. Quadratic in the number of instructions, so only here.
struct KernelBuilderTestPeer {
  using Deps = std::vector<std::vector<size_t>>;

  static Deps deps(const KernelBuilder& kb) {
    Deps out;
    for (const auto& node : kb.nodes_) {
      const auto first = kb.deps_.begin() + node.first_dep;
      out.emplace_back(first, first + node.num_deps);
    }
    return out;
  }

  static void use_reference_rule(KernelBuilder& kb) {
    struct Access {
      Region region;
      size_t node;
      int agent;
      bool write;
    };
    std::vector<std::pair<Engine, int>> agents;  // numbered in order of first use
    std::vector<Access> history;
    kb.deps_.clear();
    for (size_t i = 0; i < kb.nodes_.size(); ++i) {
      const Instruction& in = kb.instruction(kb.nodes_[i]);
      const std::pair<Engine, int> key{in.engine, in.opcode == Opcode::dma_copy ? in.ints[0] : -1};
      const auto found = std::find(agents.begin(), agents.end(), key);
      const int agent = static_cast<int>(found - agents.begin());
      if (found == agents.end()) agents.push_back(key);
      std::vector<std::optional<size_t>> latest(agents.size());
      std::vector<Access> accesses;
      for (const Operand& op : in.operands) {
        if (op.ap.space == MemSpace::Pattern) continue;
        const Region r = region_of(op.ap);
        const bool w = op.role == Role::dst || op.role == Role::reduce_dst;
        for (auto h = history.rbegin(); h != history.rend(); ++h) {
          if (h->agent == agent || (latest[h->agent] && *latest[h->agent] >= h->node)) continue;
          if ((w || h->write) && overlap(r, h->region)) latest[h->agent] = h->node;
        }
        accesses.push_back({r, i, agent, w});
        // A dst whose old contents matter is also a read.
        if (op.role == Role::dst && (in.opcode == Opcode::copy_predicated ||
                                     (in.opcode == Opcode::matmul && in.has_flag(kAccumulate))))
          accesses.push_back({r, i, agent, false});
      }
      history.insert(history.end(), accesses.begin(), accesses.end());
      kb.nodes_[i].first_dep = static_cast<uint32_t>(kb.deps_.size());
      for (const auto& dep : latest)
        if (dep) kb.deps_.push_back(*dep);
      kb.nodes_[i].num_deps = static_cast<uint32_t>(kb.deps_.size()) - kb.nodes_[i].first_dep;
    }
  }
};

namespace {

using Peer = KernelBuilderTestPeer;

// The program `kb` builds must be the one built from the same instructions with the
// reference's dependencies, semaphore for semaphore. Returns the number of dependencies.
size_t expect_reference_program(KernelBuilder& kb) {
  KernelBuilder reference = kb;
  Peer::use_reference_rule(reference);
  const auto found = Peer::deps(kb), expected = Peer::deps(reference);
  EXPECT_EQ(found.size(), expected.size());
  size_t total = 0;
  for (size_t i = 0; i < std::min(found.size(), expected.size()); ++i) {
    total += expected[i].size();
    if (found[i] != expected[i]) {
      ADD_FAILURE() << "instruction " << i << ": dependencies " << testing::PrintToString(found[i])
                    << ", the reference has " << testing::PrintToString(expected[i]);
      break;
    }
  }
  const Program built = kb.finish(), wanted = reference.finish();
  EXPECT_TRUE(built == wanted);
  return total;
}

TEST(KernelBuilder, ANewerWriteOfAnotherAgentDoesNotHideAnOlderRead) {
  // ACT reads two halves of t; POOL's write covers both and waits for the second; DVE's
  // write overlaps only the first read. DVE's dependency on ACT is still that first read,
  // which therefore signals, although POOL's write implies it and DVE only waits for POOL.
  KernelBuilder kb;
  const auto t = kb.sbuf_tile(DType::fp32, 128, 64);
  const auto u = kb.sbuf_tile(DType::fp32, 128, 64);
  kb.activation(cols(u, 0, 16), cols(t, 0, 16), ActFunc::identity);
  kb.activation(cols(u, 16, 16), cols(t, 16, 16), ActFunc::identity);
  kb.memset(Engine::POOL, cols(t, 0, 32), 1.0f);
  kb.memset(Engine::DVE, cols(t, 0, 8), 2.0f);
  KernelBuilder copy = kb;
  EXPECT_EQ(Peer::deps(kb), (Peer::Deps{{}, {}, {1}, {0, 2}}));
  expect_reference_program(copy);
  const Program p = kb.finish();
  EXPECT_EQ(p.stream(Engine::ACT)[0].signal.op, SemOp::add);
  EXPECT_EQ(p.stream(Engine::ACT)[1].signal.op, SemOp::add);
  ASSERT_EQ(p.stream(Engine::DVE).size(), 1u);
  EXPECT_EQ(p.stream(Engine::DVE)[0].wait.sem, p.stream(Engine::POOL)[0].signal.sem);
}

TEST(KernelBuilder, PipelinedKernelsMatchTheReference) {
  {
    // Elementwise: three slots of x/y tiles, loads on SP and ACT queues, DVE/POOL compute,
    // stores from SP and POOL; the last tiles use fewer partitions and columns.
    KernelBuilder kb;
    const uint32_t n = 24, per = 256;
    const auto x = kb.input("x", DType::fp32, {128, n * per});
    const auto y = kb.input("y", DType::fp32, {128, n * per});
    const auto out = kb.output("out", DType::fp32, {128, n * per});
    std::vector<std::pair<AccessPattern, AccessPattern>> slots;
    for (int i = 0; i < 3; ++i)
      slots.emplace_back(kb.sbuf_tile(DType::fp32, 128, per), kb.sbuf_tile(DType::fp32, 128, per));
    auto view = [&](const AccessPattern& t, uint32_t i) {
      return i + 1 < n ? t : cols(rows(t, 0, 64), 0, per / 2);
    };
    auto hbm = [&](const AccessPattern& t, uint32_t i) {
      return i + 1 < n ? cols(t, i * per, per) : cols(rows(t, 0, 64), i * per, per / 2);
    };
    auto load = [&](uint32_t i) {
      kb.dma_copy(view(slots[i % 3].first, i), hbm(x, i), Engine::SP);
      kb.dma_copy(view(slots[i % 3].second, i), hbm(y, i), Engine::ACT);
    };
    load(0);
    load(1);
    for (uint32_t i = 0; i < n; ++i) {
      if (i + 2 < n) load(i + 2);
      const Engine e = i % 2 ? Engine::POOL : Engine::DVE;
      const auto a = view(slots[i % 3].first, i), b = view(slots[i % 3].second, i);
      kb.tensor_tensor(e, a, a, b, AluOp::add);
      kb.dma_copy(hbm(out, i), a, e == Engine::POOL ? Engine::POOL : Engine::SP);
    }
    EXPECT_GT(expect_reference_program(kb), 0u);
  }
  {
    // Matmul: C blocks accumulate over K chunks in two PSUM banks; A chunks rotate over
    // three SBUF tiles; B stays resident; ACT evacuates PSUM, SP stores. The C blocks'
    // HBM rows interleave, so their byte ranges overlap.
    KernelBuilder kb;
    const uint32_t mb = 3, nb = 2, kc = 3;
    const auto a = kb.input("a", DType::bf16, {128 * mb, 128 * kc});
    const auto b = kb.input("b", DType::bf16, {128 * kc, 256 * nb});
    const auto c = kb.output("c", DType::fp32, {128 * mb, 256 * nb});
    std::vector<AccessPattern> at, bt, ps, ot;
    for (int i = 0; i < 3; ++i) at.push_back(kb.sbuf_tile(DType::bf16, 128, 128));
    for (uint32_t k = 0; k < kc; ++k) bt.push_back(kb.sbuf_tile(DType::bf16, 128, 256 * nb));
    for (int i = 0; i < 2; ++i) ps.push_back(kb.psum_tile(DType::fp32, 128, 256));
    for (int i = 0; i < 2; ++i) ot.push_back(kb.sbuf_tile(DType::fp32, 128, 256));
    for (uint32_t k = 0; k < kc; ++k) kb.dma_copy(bt[k], rows(b, k * 128, 128), Engine::ACT);
    uint32_t step = 0, block = 0;
    for (uint32_t m = 0; m < mb; ++m)
      for (uint32_t j = 0; j < nb; ++j, ++block) {
        const auto& acc = ps[block % 2];
        for (uint32_t k = 0; k < kc; ++k, ++step) {
          const auto& s = at[step % 3];
          kb.dma_copy(s, cols(rows(a, m * 128, 128), k * 128, 128), Engine::SP);
          kb.matmul(acc, s, cols(bt[k], j * 256, 256), k > 0);
        }
        kb.activation(ot[block % 2], acc, ActFunc::identity);
        kb.dma_copy(cols(rows(c, m * 128, 128), j * 256, 256), ot[block % 2], Engine::SP);
      }
    EXPECT_GT(expect_reference_program(kb), 0u);
  }
}

// Random tile operations on one SBUF area, one PSUM area and three HBM tensors, at random
// partitions (aligned as engines need them; any for DMA) and columns on a coarse grid, some
// strided or reversed, so that regions often coincide, nest or partly overlap.
class RandomOps {
 public:
  RandomOps(KernelBuilder& kb, uint32_t seed) : kb_(kb), rng_(seed) {
    sbuf_ = kb.sbuf_tile(DType::fp32, 128, 1024);
    psum_ = kb.psum_tile(DType::fp32, 128, 2048);  // four banks
    x_ = kb.input("x", DType::fp32, {128, 512});
    y_ = kb.output("y", DType::fp32, {128, 512});
    s_ = kb.scratch("s", DType::fp32, {128, 512});
  }

  // One operation; its operands are drawn in the order written (never as arguments of one
  // call, whose evaluation order C++ leaves open).
  void emit_one() {
    const uint32_t np = pick({128u, 64u, 32u, 16u}), nc = pick({16u, 64u, 256u});
    const Engine any = pick({Engine::DVE, Engine::POOL, Engine::ACT});
    const Engine dve_pool = pick({Engine::DVE, Engine::POOL});
    switch (below(11)) {
      case 0: {
        const auto dst = chance(4) ? psum(np, nc) : sbuf(np, nc);
        kb_.memset(any, dst, 1.0f);
        break;
      }
      case 1: {
        const auto dst = sbuf(np, nc);
        const auto src = chance(3) ? psum(np, nc) : sbuf(np, nc);
        kb_.tensor_copy(any, dst, src);
        break;
      }
      case 2: {
        const auto dst = sbuf(np, nc);
        const auto in0 = chance(3) ? dst : sbuf(np, nc);
        const auto in1 = sbuf(np, nc);
        kb_.tensor_tensor(dve_pool, dst, in0, in1, AluOp::add);
        break;
      }
      case 3: {
        const auto dst = sbuf(np, nc);
        const auto src = chance(2) ? psum(np, nc) : sbuf(np, nc);
        const auto bias = sbuf(np, 1);
        const auto sum = sbuf(np, 1);
        const bool with_bias = chance(2), with_sum = chance(2);
        kb_.activation(dst, src, ActFunc::exp, 1.0f, with_bias ? &bias : nullptr,
                       with_sum ? &sum : nullptr);
        break;
      }
      case 4: {
        const auto dst = sbuf(np, nc);
        const auto src = sbuf(np, nc);
        const auto scalar = sbuf(np, 1);
        const bool with_scalar = chance(2);
        kb_.tensor_scalar(any, dst, src, AluOp::multiply, 2.0f, AluOp::bypass, 0.0f,
                          with_scalar ? &scalar : nullptr);
        break;
      }
      case 5: {
        const auto dst = sbuf(np, nc, true);
        const auto src = hbm(chance(2) ? x_ : s_, np, nc);
        kb_.dma_copy(dst, src, trigger());
        break;
      }
      case 6: {
        const auto dst = hbm(chance(2) ? y_ : s_, np, nc);
        const auto src = sbuf(np, nc, true);
        kb_.dma_copy(dst, src, trigger());
        break;
      }
      case 7: {
        const auto dst = sbuf(np, nc, true);
        const auto src = sbuf(np, nc, true);
        kb_.dma_copy(dst, src, trigger());
        break;
      }
      case 8:
      case 9: {
        const uint32_t k = pick({128u, 64u, 32u}), m = pick({128u, 64u, 32u});
        const uint32_t n = pick({64u, 256u, 512u});
        const auto dst = psum(m, n);
        const auto stationary = sbuf(k, m, false, true);
        const auto moving = sbuf(k, n, false, true);
        kb_.matmul(dst, stationary, moving, chance(2));
        break;
      }
      case 10: {
        Instruction in;
        in.opcode = Opcode::copy_predicated;
        in.engine = dve_pool;
        in.operands.push_back({Role::dst, sbuf(np, nc)});
        in.operands.push_back({Role::src, sbuf(np, nc)});
        in.operands.push_back({Role::predicate, sbuf(np, nc)});
        kb_.emit(in);
        break;
      }
    }
  }

 private:
  uint32_t below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  bool chance(uint32_t one_in) { return below(one_in) == 0; }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return values.begin()[below(static_cast<uint32_t>(values.size()))];
  }
  Engine trigger() { return pick({Engine::SP, Engine::ACT, Engine::POOL}); }

  // A start partition for `np` partitions: any for DMA, else aligned as engines need it.
  uint16_t start(uint32_t np, bool any) {
    if (any) return static_cast<uint16_t>(below(128 - np + 1));
    const uint32_t align = np > 64 ? 128 : np > 32 ? 64 : 32;
    return static_cast<uint16_t>(below((128 - np) / align + 1) * align);
  }

  // [np, nc] of the SBUF area at a random place: contiguous, every other element, or reversed.
  AccessPattern sbuf(uint32_t np, uint32_t nc, bool any_start = false, bool at_zero = false) {
    AccessPattern ap = rows(sbuf_, at_zero ? 0 : start(np, any_start), np);
    const uint32_t kind = nc > 1 ? below(4) : 0;
    const uint32_t span = kind == 1 ? 2 * nc - 1 : nc;
    const uint32_t c0 = 16 * below((1024 - span) / 16 + 1);
    ap = cols(ap, c0, nc);
    if (kind == 1) ap.dims[0].stride = 2;
    if (kind == 2) {
      ap.dims[0].stride = -1;
      ap.offset += uint64_t{nc - 1} * 4;
    }
    return ap;
  }

  // [np, nc] inside one PSUM bank (a matmul's output must not cross banks).
  AccessPattern psum(uint32_t np, uint32_t nc) {
    const uint32_t bank = below(4), c0 = 16 * below((512 - nc) / 16 + 1);
    return cols(rows(psum_, start(np, false), np), bank * 512 + c0, nc);
  }

  AccessPattern hbm(const AccessPattern& t, uint32_t np, uint32_t nc) {
    const uint32_t r0 = below(128 - np + 1), c0 = 16 * below((512 - nc) / 16 + 1);
    return cols(rows(t, r0, np), c0, nc);
  }

  KernelBuilder& kb_;
  std::mt19937 rng_;
  AccessPattern sbuf_, psum_, x_, y_, s_;
};

TEST(KernelBuilder, RandomTileOperationsMatchTheReference) {
  size_t deps = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    KernelBuilder kb;
    RandomOps ops(kb, seed);
    for (int i = 0; i < 300; ++i) ops.emit_one();
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    deps += expect_reference_program(kb);
    if (HasFailure()) break;
  }
  EXPECT_GT(deps, 40u * 100u);  // the sequences are full of hazards
}

}  // namespace
}  // namespace neuronsim::isa
