// Chrome traces of runs with executions (sim::Device trace sessions): a "kernels" row per core
// with one named slice per execution, and records of several executions of one program on one
// core kept apart (instruction text, DMA names and flows each from their own execution).
#include <gtest/gtest.h>

#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/names.h"
#include "sample_run.h"

namespace neuronsim::traces {
namespace {

// kCore5Asm with its tensor named w instead of x.
constexpr const char* kOtherAsm = R"(.target trn2
.tensor w float32 [16,128] input
sp dma_copy dst=sbuf.fp32[0:16]+0[[1,128]] src=hbm.fp32(w)+0[[128,16],[1,128]] queue=0 signal=S[0]+=1
dve tensor_tensor dst=sbuf.fp32[0:16]+512[[1,128]] in0=sbuf.fp32[0:16]+1024[[1,128]] in1=sbuf.fp32[0:16]+1024[[1,128]] op=add
dve tensor_tensor dst=sbuf.fp32[0:16]+512[[1,128]] in0=sbuf.fp32[0:16]+0[[1,128]] in1=sbuf.fp32[0:16]+512[[1,128]] op=add wait=S[0]>=1
)";

constexpr uint64_t kLength = 3'000'000;  // ps per execution

// Three executions on core 0, back to back: `first` and `second` of one program, `third` of
// another; and `idle` on core 1, which recorded nothing.
struct Session {
  isa::Program a = isa::assemble(kCore5Asm, "a.s");
  isa::Program b = isa::assemble(kOtherAsm, "b.s");
  sim::RunResult result;

  Session() {
    result.instance = "trn2.3xlarge";
    result.generation = "trn2";
    const isa::Program* programs[] = {&a, &a, &b};
    const char* names[] = {"first", "second", "third"};
    for (uint32_t k = 0; k < 3; ++k) {
      const isa::Program& p = *programs[k];
      const uint64_t t = k * kLength;
      auto inst = [&](Engine e, uint32_t i, uint64_t start, uint64_t end) {
        result.instructions.push_back({0, e, i, &p.stream(e).at(i), t + start, t + end, 0});
      };
      inst(Engine::SP, 0, 0, 600'000);
      inst(Engine::DVE, 0, 0, 1'000'000);
      inst(Engine::DVE, 1, 2'100'000, kLength);
      result.dmas.push_back({0, Engine::SP, 0, 0, 3, 8192, 8192, t + 1'000'000, t + 2'000'000});
      result.flows.push_back(
          {0, 0, Engine::SP, 0, true, t + 2'000'000, Engine::DVE, 1, t + 2'100'000});
      result.executions.push_back({0, k + 1, names[k], &p, t, t + kLength});
    }
    result.executions.push_back({1, 4, "idle", &a, 0, 1'000'000});
    result.core_ids = {0, 1};
    result.cores.resize(2);
    result.total_ps = 3 * kLength;
  }
};

int tid_named(const json& t, int pid, const std::string& name) {
  for (const auto& [key, args] : metadata_by_thread(t, "thread_name"))
    if (key.first == pid && args.at("name") == name) return key.second;
  return 0;
}

TEST(ChromeTraceExecutions, EachCoreHasAKernelsRowWithOneNamedSlicePerExecution) {
  const Session s;
  const json t = chrome_trace(s.result);
  const int pid = 1;  // core 0
  const int kernels = tid_named(t, pid, std::string(kernel_track_name()));
  ASSERT_NE(kernels, 0);
  std::vector<json> slices;
  for (const json& e : with_phase(t, "X"))
    if (e.at("pid") == pid && e.at("tid") == kernels) slices.push_back(e);
  ASSERT_EQ(slices.size(), 3u);
  const char* names[] = {"first", "second", "third"};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(slices[k].at("name"), names[k]);
    EXPECT_EQ(slices[k].at("cat"), "Execution");
    EXPECT_EQ(us_to_ps(slices[k].at("ts")), k * kLength);
    EXPECT_EQ(us_to_ps(slices[k].at("dur")), kLength);
    EXPECT_EQ(slices[k].at("args").at("seq"), k + 1);
    EXPECT_EQ(slices[k].at("args").at("instructions"), 3);
  }
  // The kernels row sorts above the engines.
  const auto sort = metadata_by_thread(t, "thread_sort_index");
  const int sync = tid_named(t, pid, std::string(engine_track_name(Engine::SP)));
  EXPECT_LT(sort.at({pid, kernels}).at("sort_index").get<int>(),
            sort.at({pid, sync}).at("sort_index").get<int>());
  // A core with an execution but no records still gets its process and kernels row.
  EXPECT_NE(tid_named(t, 2, std::string(kernel_track_name())), 0);
  EXPECT_EQ(t.at("otherData").at("executions"), 4);
}

TEST(ChromeTraceExecutions, RecordsAreReadWithTheProgramOfTheirExecution) {
  const Session s;
  const json t = chrome_trace(s.result);
  std::vector<std::string> texts;  // the SP dma_copy of each execution, in time order
  std::vector<std::string> copy_names;
  for (const json& e : with_phase(t, "X")) {
    if (e.at("cat") == "Instruction" && e.at("args").at("engine") == "sp")
      texts.push_back(e.at("args").at("instruction"));
    if (e.at("cat") == "DmaPacketAggregated") copy_names.push_back(e.at("name"));
  }
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_NE(texts[0].find("hbm.fp32(x)"), std::string::npos) << texts[0];
  EXPECT_NE(texts[1].find("hbm.fp32(x)"), std::string::npos) << texts[1];
  EXPECT_NE(texts[2].find("hbm.fp32(w)"), std::string::npos) << texts[2];
  // Each dma_copy is one slice named from its own execution's trigger.
  EXPECT_EQ(copy_names, std::vector<std::string>(3, "HBM\u2192SBUF"));
}

TEST(ChromeTraceExecutions, FlowsStayInsideTheirExecution) {
  const Session s;
  const json t = chrome_trace(s.result);
  EXPECT_EQ(t.at("otherData").at("flows"), 3);
  EXPECT_EQ(t.at("otherData").at("flows_skipped"), 0);
  std::map<uint64_t, uint64_t> start_ps;  // flow id -> where the arrow leaves
  for (const json& e : with_phase(t, "s")) start_ps[e.at("id")] = us_to_ps(e.at("ts"));
  ASSERT_EQ(start_ps.size(), 3u);
  for (const json& f : with_phase(t, "f")) {
    const uint64_t from = start_ps.at(f.at("id")), to = us_to_ps(f.at("ts"));
    EXPECT_EQ(from / kLength, to / kLength) << "a flow crosses executions: " << f;
    EXPECT_LT(from, to);
  }
}

// The host's dispatch is a row of its own, in a process above the cores; an execution the
// core was ready for before the host submitted it says how long it waited.
TEST(ChromeTraceExecutions, TheHostsDispatchIsARowOfItsOwn) {
  Session s;
  s.result.host.push_back({"aten::mul", 0, 400'000});
  s.result.host.push_back({"aten::add", 400'000, 3'400'000});
  s.result.executions[1].host_bound_ps = 400'000;
  const json t = chrome_trace(s.result);
  int host_pid = 0;
  for (const json& e : with_phase(t, "M"))
    if (e.at("name") == "process_name" && e.at("args").at("name") == "Host") host_pid = e.at("pid");
  ASSERT_NE(host_pid, 0);
  const int row = tid_named(t, host_pid, "Dispatch");
  ASSERT_NE(row, 0);
  std::vector<json> slices;
  for (const json& e : with_phase(t, "X"))
    if (e.at("pid") == host_pid) slices.push_back(e);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].at("name"), "aten::add");
  EXPECT_EQ(slices[1].at("tid"), row);
  EXPECT_EQ(us_to_ps(slices[1].at("ts")), 400'000u);
  EXPECT_EQ(us_to_ps(slices[1].at("dur")), 3'000'000u);
  for (const json& e : with_phase(t, "X")) {
    if (e.at("cat") == "Execution" && e.at("name") == "second")
      EXPECT_DOUBLE_EQ(e.at("args").at("waited_for_host_ns").get<double>(), 400.0);
  }
}

// Without host work, no host process.
TEST(ChromeTraceExecutions, NoHostRowWithoutHostWork) {
  const Session s;
  for (const json& e : with_phase(chrome_trace(s.result), "M")) {
    if (e.at("name") == "process_name") EXPECT_NE(e.at("args").at("name"), "Host");
  }
}

}  // namespace
}  // namespace neuronsim::traces
