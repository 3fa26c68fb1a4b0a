// A hand-built RunResult for the traces tests: two cores (ids 2 and 5), all five
// engines on core 2, DMA transfers on three queues and four DMA engines, and
// semaphore flows from DMA completions and from instructions. Every figure is
// chosen so that the tests can state expected values by hand.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces {

using isa::Engine;
using nlohmann::json;

struct SampleRun {
  isa::Program core2, core5;
  sim::RunResult result;

  SampleRun() = default;
  SampleRun(const SampleRun&) = delete;  // records point into the programs
  SampleRun& operator=(const SampleRun&) = delete;

  const isa::Instruction* inst(const isa::Program& p, Engine e, size_t i) const {
    return &p.stream(e).at(i);
  }
};

inline constexpr const char* kCore2Asm = R"(.target trn2
.tensor a float32 [128,512] input
.tensor out float32 [128,512] output
sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=hbm.fp32(a)+0[[512,128],[1,512]] queue=0 signal=S[0]+=1
sp dma_copy dst=sbuf.fp32[0:128]+2048[[1,512]] src=hbm.fp32(a)+0[[512,128],[1,512]] queue=1 signal=S[1]+=1
sp dma_copy dst=hbm.fp32(out)+0[[512,128],[1,512]] src=sbuf.fp32[0:128]+4096[[1,512]] queue=2 wait=S[3]>=1
pool iota dst=sbuf.i32[0:128]+0[[1,64]] pattern=pattern[[8,8],[1,8]] offset=-3 channel_multiplier=64
pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] moving=sbuf.bf16[0:128]+256[[1,512]] wait=S[0]>=1 signal=S[2]+=1
dve tensor_tensor dst=sbuf.fp32[0:128]+4096[[1,512]] in0=sbuf.fp32[0:128]+0[[1,512]] in1=sbuf.fp32[0:128]+2048[[1,512]] op=add wait=S[1]>=1
dve tensor_tensor dst=sbuf.fp32[0:128]+4096[[1,512]] in0=sbuf.fp32[0:128]+4096[[1,512]] in1=sbuf.fp32[0:128]+2048[[1,512]] op=multiply
act activation dst=sbuf.fp32[0:128]+4096[[1,512]] src=psum.fp32[0:128]+0[[1,512]] func=exp wait=S[2]>=1 signal=S[3]+=1
)";

inline constexpr const char* kCore5Asm = R"(.target trn2
.tensor x float32 [16,128] input
sp dma_copy dst=sbuf.fp32[0:16]+0[[1,128]] src=hbm.fp32(x)+0[[128,16],[1,128]] queue=0 signal=S[0]+=1
dve tensor_tensor dst=sbuf.fp32[0:16]+512[[1,128]] in0=sbuf.fp32[0:16]+1024[[1,128]] in1=sbuf.fp32[0:16]+1024[[1,128]] op=add
dve tensor_tensor dst=sbuf.fp32[0:16]+512[[1,128]] in0=sbuf.fp32[0:16]+0[[1,128]] in1=sbuf.fp32[0:16]+512[[1,128]] op=add wait=S[0]>=1
)";

inline std::unique_ptr<SampleRun> make_sample_run() {
  auto s = std::make_unique<SampleRun>();
  s->core2 = isa::assemble(kCore2Asm, "core2.s");
  s->core5 = isa::assemble(kCore5Asm, "core5.s");
  sim::RunResult& r = s->result;
  r.instance = "trn2.3xlarge";
  r.generation = "trn2";
  r.peak_flops_per_core = 1e14;
  r.hbm_bytes_per_ns = 2900;
  r.total_ps = 10'000'000;
  r.core_ids = {2, 5};
  r.cores.resize(2);

  auto add_inst = [&](uint32_t core, const isa::Program& p, Engine e, uint32_t index,
                      uint64_t start, uint64_t end, uint64_t wait) {
    r.instructions.push_back({core, e, index, s->inst(p, e, index), start, end, wait});
  };
  auto add_dma = [&](uint32_t core, Engine trigger, uint32_t index, uint32_t queue,
                     uint32_t dma_engine, uint64_t bytes, uint64_t start, uint64_t end) {
    r.dmas.push_back({core, trigger, index, queue, dma_engine, bytes, bytes, start, end});
  };

  // Core 2.
  add_inst(2, s->core2, Engine::SP, 0, 0, 600'000, 0);
  add_inst(2, s->core2, Engine::SP, 1, 600'000, 1'200'000, 0);
  add_inst(2, s->core2, Engine::SP, 2, 4'000'000, 4'600'000, 84'000);
  add_inst(2, s->core2, Engine::POOL, 0, 0, 150'000, 0);
  add_inst(2, s->core2, Engine::PE, 0, 3'100'000, 3'600'000, 84'000);
  add_inst(2, s->core2, Engine::DVE, 0, 3'100'000, 3'500'000, 84'000);
  add_inst(2, s->core2, Engine::DVE, 1, 3'500'000, 3'900'000, 0);
  add_inst(2, s->core2, Engine::ACT, 0, 3'700'000, 3'916'000, 100'000);
  add_dma(2, Engine::SP, 0, 0, 0, 16384, 1'000'000, 2'416'000);
  add_dma(2, Engine::SP, 0, 0, 1, 16384, 1'000'000, 2'416'000);
  add_dma(2, Engine::SP, 1, 1, 2, 16384, 1'600'000, 3'016'000);
  add_dma(2, Engine::SP, 1, 1, 3, 16384, 1'600'000, 3'016'000);
  add_dma(2, Engine::SP, 2, 2, 0, 32768, 5'000'000, 6'416'000);
  r.flows.push_back({2, 0, Engine::SP, 0, true, 2'416'000, Engine::PE, 0, 3'100'000});
  r.flows.push_back({2, 1, Engine::SP, 1, true, 3'016'000, Engine::DVE, 0, 3'100'000});
  r.flows.push_back({2, 2, Engine::PE, 0, false, 3'600'000, Engine::ACT, 0, 3'700'000});
  r.flows.push_back({2, 3, Engine::ACT, 0, false, 3'916'000, Engine::SP, 2, 4'000'000});

  // Core 5.
  add_inst(5, s->core5, Engine::SP, 0, 0, 600'000, 0);
  add_inst(5, s->core5, Engine::DVE, 0, 0, 1'000'000, 0);
  add_inst(5, s->core5, Engine::DVE, 1, 2'100'000, 3'000'000, 100'000);
  add_dma(5, Engine::SP, 0, 0, 3, 8192, 1'000'000, 2'000'000);
  r.flows.push_back({5, 0, Engine::SP, 0, true, 2'000'000, Engine::DVE, 1, 2'100'000});

  // Stats consistent with the records.
  sim::CoreStats& c2 = r.cores[0];
  auto set_engine = [](sim::CoreStats& c, Engine e, uint64_t busy, uint64_t n) {
    c.engines[static_cast<size_t>(e)] = {busy, n};
  };
  set_engine(c2, Engine::PE, 500'000, 1);
  set_engine(c2, Engine::ACT, 216'000, 1);
  set_engine(c2, Engine::DVE, 800'000, 2);
  set_engine(c2, Engine::POOL, 150'000, 1);
  set_engine(c2, Engine::SP, 1'800'000, 3);
  c2.end_ps = 6'416'000;
  c2.launch_ps = 0;  // a window with no launch on core 2 (the runtime's launch is core 5's)
  c2.dma_bytes = 98'304;
  c2.dma_busy_ps = 7'080'000;
  c2.dma_transfers = 5;
  c2.hbm_read_bytes = 65'536;
  c2.hbm_write_bytes = 32'768;
  c2.flops = 16'908'288;
  c2.matmul_flops = 16'777'216;

  sim::CoreStats& c5 = r.cores[1];
  set_engine(c5, Engine::DVE, 1'900'000, 2);
  set_engine(c5, Engine::SP, 600'000, 1);
  c5.end_ps = 3'000'000;
  c5.launch_ps = 1'000'000;  // what sim::Device adds before the first instruction
  c5.dma_bytes = 8'192;
  c5.dma_busy_ps = 1'000'000;
  c5.dma_transfers = 1;
  c5.hbm_read_bytes = 8'192;
  c5.flops = 131'072;
  return s;
}

// ---- helpers to read a trace back ----

inline uint64_t us_to_ps(double us) {
  return static_cast<uint64_t>(std::llround(us * 1e6));
}

inline const json& events_of(const json& trace) {
  return trace.at("traceEvents");
}

// Events of one phase.
inline std::vector<json> with_phase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : events_of(trace))
    if (e.at("ph") == ph) out.push_back(e);
  return out;
}

using ThreadKey = std::pair<int, int>;  // pid, tid

// Metadata value by (pid, tid) for one metadata name (thread_name, thread_sort_index, ...).
inline std::map<ThreadKey, json> metadata_by_thread(const json& trace, const std::string& name) {
  std::map<ThreadKey, json> out;
  for (const json& e : events_of(trace))
    if (e.at("ph") == "M" && e.at("name") == name)
      out[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args");
  return out;
}

inline std::string thread_name(const json& trace, int pid, int tid) {
  const auto names = metadata_by_thread(trace, "thread_name");
  const auto it = names.find({pid, tid});
  return it == names.end() ? std::string() : it->second.at("name").get<std::string>();
}

// The X event whose args match (engine, index) on a given pid.
inline json find_instruction_slice(const json& trace, int pid, const std::string& engine,
                                   uint32_t index) {
  for (const json& e : events_of(trace))
    if (e.at("ph") == "X" && e.at("cat") == "Instruction" && e.at("pid") == pid &&
        e.at("args").at("engine") == engine && e.at("args").at("index") == index)
      return e;
  return json();
}

}  // namespace neuronsim::traces
