#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/names.h"
#include "sample_run.h"

namespace neuronsim::traces {
namespace {

class ChromeTraceTest : public ::testing::Test {
 protected:
  void SetUp() override { sample = make_sample_run(); }
  json trace(const TraceOptions& options = {}) const {
    return chrome_trace(sample->result, options);
  }
  std::unique_ptr<SampleRun> sample;
};

// Slices ([start, end) in ps) per (pid, tid).
std::map<ThreadKey, std::vector<std::pair<uint64_t, uint64_t>>> slices_by_thread(const json& t) {
  std::map<ThreadKey, std::vector<std::pair<uint64_t, uint64_t>>> out;
  for (const json& e : with_phase(t, "X")) {
    const uint64_t start = us_to_ps(e.at("ts").get<double>());
    out[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(
        {start, start + us_to_ps(e.at("dur").get<double>())});
  }
  return out;
}

void expect_no_overlap(const json& t) {
  for (auto& [key, list] : slices_by_thread(t)) {
    std::sort(list.begin(), list.end());
    for (size_t i = 1; i < list.size(); ++i)
      EXPECT_LE(list[i - 1].second, list[i].first)
          << "overlapping slices on pid " << key.first << " tid " << key.second << " ("
          << thread_name(t, key.first, key.second) << ")";
  }
}

TEST_F(ChromeTraceTest, ParsesBackAsJsonWithTheContainerFields) {
  const json t = trace();
  const json back = json::parse(t.dump());
  EXPECT_EQ(back, t);
  ASSERT_TRUE(back.at("traceEvents").is_array());
  EXPECT_EQ(back.at("displayTimeUnit"), "ns");
  const json& other = back.at("otherData");
  EXPECT_EQ(other.at("instance"), "trn2.3xlarge");
  EXPECT_EQ(other.at("total_ps"), 10'000'000);
  EXPECT_EQ(other.at("instructions"), 11);
  EXPECT_EQ(other.at("dma_transfers"), 6);
  EXPECT_EQ(other.at("flows"), 5);
  EXPECT_EQ(other.at("flows_skipped"), 0);
  EXPECT_EQ(other.at("overlap_lanes"), 0);
  // 11 instruction slices, 4 dma_copy slices on queue threads, 6 transfers on DMA engine threads.
  EXPECT_EQ(with_phase(t, "X").size(), 21u);
}

TEST_F(ChromeTraceTest, EveryEventHasTheFieldsOfItsPhase) {
  const json t = trace();
  std::set<std::string> phases;
  for (const json& e : events_of(t)) {
    for (const char* key : {"name", "ph", "ts", "pid", "tid"})
      ASSERT_TRUE(e.contains(key)) << key << " missing in " << e;
    EXPECT_TRUE(e.at("name").is_string()) << e;
    EXPECT_TRUE(e.at("ts").is_number()) << e;
    EXPECT_TRUE(e.at("pid").is_number_integer()) << e;
    EXPECT_TRUE(e.at("tid").is_number_integer()) << e;
    const std::string ph = e.at("ph");
    phases.insert(ph);
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur")) << e;
      EXPECT_GE(e.at("dur").get<double>(), 0.0) << e;
      EXPECT_TRUE(e.contains("cat")) << e;
      EXPECT_TRUE(e.at("args").is_object()) << e;
    } else if (ph == "s" || ph == "f") {
      ASSERT_TRUE(e.contains("id")) << e;
      EXPECT_EQ(e.at("bp"), "e") << e;
      EXPECT_TRUE(e.contains("cat")) << e;
    } else if (ph == "C" || ph == "M") {
      ASSERT_TRUE(e.contains("args")) << e;
      EXPECT_TRUE(e.at("args").is_object() && !e.at("args").empty()) << e;
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_EQ(phases, (std::set<std::string>{"M", "X", "s", "f", "C"}));
}

TEST_F(ChromeTraceTest, OneProcessPerCoreNamedAfterTheCoreAndInstance) {
  const json t = trace();
  std::set<int> pids;
  for (const json& e : events_of(t)) pids.insert(e.at("pid").get<int>());
  EXPECT_EQ(pids.size(), 2u);
  std::map<int, std::string> names;
  for (const json& e : events_of(t))
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      names[e.at("pid")] = e.at("args").at("name");
  ASSERT_EQ(names.size(), 2u);
  std::set<std::string> got;
  for (const auto& [pid, name] : names) {
    EXPECT_TRUE(pids.count(pid));
    got.insert(name);
  }
  EXPECT_EQ(got,
            (std::set<std::string>{"NeuronCore 2 (trn2.3xlarge)", "NeuronCore 5 (trn2.3xlarge)"}));
  // Core 2 sorts before core 5.
  std::map<int, int> sort;
  for (const json& e : events_of(t))
    if (e.at("ph") == "M" && e.at("name") == "process_sort_index")
      sort[e.at("pid")] = e.at("args").at("sort_index");
  ASSERT_EQ(sort.size(), 2u);
  EXPECT_LT(sort.begin()->second, sort.rbegin()->second);
  EXPECT_EQ(sort.begin()->second, 2);
}

TEST_F(ChromeTraceTest, EveryThreadInUseIsNamedInNeuronExplorerSpelling) {
  const json t = trace();
  const auto names = metadata_by_thread(t, "thread_name");
  std::set<std::string> core2_names;
  for (const json& e : events_of(t)) {
    const std::string ph = e.at("ph");
    if (ph != "X" && ph != "s" && ph != "f") continue;
    const ThreadKey key{e.at("pid").get<int>(), e.at("tid").get<int>()};
    ASSERT_TRUE(names.count(key)) << "no thread_name for " << e;
  }
  const int pid2 = 3;  // pid = core id + 1
  ASSERT_FALSE(find_instruction_slice(t, pid2, "pe", 0).is_null());
  for (const auto& [key, args] : names)
    if (key.first == pid2) core2_names.insert(args.at("name"));
  EXPECT_EQ(core2_names,
            (std::set<std::string>{"Tensor (PE)", "Vector (DVE)", "Scalar (ACT)", "GpSimd (Pool)",
                                   "Sync (SP)", "qSyncIO0", "qSyncIO1", "qSyncIO2", "DMA engine 0",
                                   "DMA engine 1", "DMA engine 2", "DMA engine 3"}));
  // tids are unique across the file: no tid is used by two processes.
  std::map<int, std::set<int>> pids_of_tid;
  for (const auto& [key, args] : names) pids_of_tid[key.second].insert(key.first);
  for (const auto& [tid, pids] : pids_of_tid) EXPECT_EQ(pids.size(), 1u) << tid;
}

TEST_F(ChromeTraceTest, EnginesSortBeforeDmaQueuesInTensorVectorScalarGpSimdSyncOrder) {
  const json t = trace();
  const auto names = metadata_by_thread(t, "thread_name");
  const auto sort = metadata_by_thread(t, "thread_sort_index");
  std::vector<std::pair<int, std::string>> rows;
  for (const auto& [key, args] : names) {
    if (key.first != 3) continue;
    ASSERT_TRUE(sort.count(key)) << args;
    rows.push_back({sort.at(key).at("sort_index").get<int>(), args.at("name").get<std::string>()});
  }
  std::sort(rows.begin(), rows.end());
  const std::vector<std::string> expected = {"Tensor (PE)",   "Vector (DVE)", "Scalar (ACT)",
                                             "GpSimd (Pool)", "Sync (SP)",    "qSyncIO0",
                                             "qSyncIO1",      "qSyncIO2",     "DMA engine 0",
                                             "DMA engine 1",  "DMA engine 2", "DMA engine 3"};
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(rows[i].second, expected[i]);
}

TEST_F(ChromeTraceTest, NoSlicesOverlapOnAnyThread) {
  const json t = trace();
  expect_no_overlap(t);
  // The sample has transfers of queues 0 and 1 overlapping in time, and engine
  // slices touching end to start: all on their own threads, no extra lanes.
  const auto by_thread = slices_by_thread(t);
  size_t threads_of_core2 = 0;
  for (const auto& [key, list] : by_thread) threads_of_core2 += key.first == 3;
  EXPECT_EQ(threads_of_core2, 12u);
  EXPECT_EQ(t.at("otherData").at("overlap_lanes"), 0);
}

TEST_F(ChromeTraceTest, OverlappingIntervalsOnOneRowGoToExtraLanes) {
  sim::RunResult& r = sample->result;
  // Two more transfers of SP #0 on DMA engine 0 overlapping its first one (a DMA
  // engine serving queues round robin), a dma_copy on queue 0 overlapping SP #0's
  // (queues complete in order but their transfers may overlap), and an engine
  // record overlapping its predecessor (a simulator bug): the trace stays valid.
  r.dmas.push_back({2, Engine::SP, 0, 0, 0, 100, 100, 1'500'000, 1'700'000});
  r.dmas.push_back({2, Engine::SP, 0, 0, 0, 100, 100, 1'200'000, 2'000'000});
  r.dmas.push_back({2, Engine::SP, 5, 0, 4, 100, 100, 2'000'000, 2'500'000});
  r.instructions.push_back(
      {2, Engine::PE, 1, sample->inst(sample->core2, Engine::PE, 0), 3'500'000, 3'700'000, 0});
  const json t = trace();
  expect_no_overlap(t);
  EXPECT_EQ(t.at("otherData").at("overlap_lanes"), 4);
  std::set<std::string> names;
  for (const auto& [key, args] : metadata_by_thread(t, "thread_name"))
    names.insert(args.at("name"));
  EXPECT_TRUE(names.count("DMA engine 0 #2"));
  EXPECT_TRUE(names.count("DMA engine 0 #3"));
  EXPECT_TRUE(names.count("qSyncIO0 #2"));
  EXPECT_TRUE(names.count("Tensor (PE) #2"));
  // Extra lanes sort right after their first lane.
  const auto sort = metadata_by_thread(t, "thread_sort_index");
  std::map<std::string, int> index;
  for (const auto& [key, args] : metadata_by_thread(t, "thread_name"))
    if (key.first == 3) index[args.at("name")] = sort.at(key).at("sort_index");
  EXPECT_LT(index.at("Tensor (PE)"), index.at("Tensor (PE) #2"));
  EXPECT_LT(index.at("Tensor (PE) #2"), index.at("Vector (DVE)"));
  EXPECT_LT(index.at("qSyncIO0 #2"), index.at("qSyncIO1"));
}

TEST_F(ChromeTraceTest, InstructionSlicesAreNamedByOpcodeWithTextIndexEngineAndWait) {
  const json t = trace();
  const json mm = find_instruction_slice(t, 3, "pe", 0);
  ASSERT_FALSE(mm.is_null());
  EXPECT_EQ(mm.at("name"), "MATMUL");
  EXPECT_EQ(mm.at("cat"), "Instruction");
  EXPECT_EQ(mm.at("args").at("instruction"),
            isa::format_instruction(*sample->inst(sample->core2, Engine::PE, 0)));
  EXPECT_EQ(mm.at("args").at("opcode"), "matmul");
  EXPECT_DOUBLE_EQ(mm.at("args").at("semaphore_wait_ns").get<double>(), 84.0);
  EXPECT_EQ(thread_name(t, 3, mm.at("tid")), "Tensor (PE)");

  EXPECT_EQ(find_instruction_slice(t, 3, "act", 0).at("name"), "ACTIVATE");
  EXPECT_EQ(find_instruction_slice(t, 3, "dve", 1).at("name"), "TENSOR_TENSOR");
  EXPECT_EQ(find_instruction_slice(t, 3, "pool", 0).at("name"), "IOTA");
  EXPECT_EQ(find_instruction_slice(t, 3, "sp", 2).at("name"), "DMA_TRIGGER");
  EXPECT_EQ(find_instruction_slice(t, 6, "dve", 1).at("args").at("index"), 1);
  EXPECT_EQ(thread_name(t, 3, find_instruction_slice(t, 3, "pool", 0).at("tid")), "GpSimd (Pool)");
}

TEST(SliceNames, FollowTheProfilersUpperCaseOpcodes) {
  EXPECT_EQ(opcode_slice_name(isa::Opcode::matmul), "MATMUL");
  EXPECT_EQ(opcode_slice_name(isa::Opcode::tensor_tensor_scan), "TENSOR_TENSOR_SCAN");
  EXPECT_EQ(opcode_slice_name(isa::Opcode::activation), "ACTIVATE");
  EXPECT_EQ(opcode_slice_name(isa::Opcode::sem_wait), "EVENT_SEMAPHORE");
  EXPECT_EQ(opcode_slice_name(isa::Opcode::sem_set), "EVENT_SEMAPHORE");
  EXPECT_EQ(opcode_slice_name(isa::Opcode::dma_copy), "DMA_TRIGGER");
  EXPECT_EQ(opcode_slice_name(isa::Opcode::all_reduce), "ALL_REDUCE");
  EXPECT_EQ(dma_queue_name(Engine::SP, 0), "qSyncIO0");
  EXPECT_EQ(dma_queue_name(Engine::ACT, 15), "qScalarIO15");
  EXPECT_EQ(dma_queue_name(Engine::POOL, 3), "qGpSimdIO3");
  EXPECT_EQ(engine_metric_name(Engine::POOL), "gpsimd");
}

TEST_F(ChromeTraceTest, DmaSlicesAreNamedByDirectionWithBytesEngineAndQueue) {
  const json t = trace();
  std::map<std::string, int> by_name, copies_by_name;
  for (const json& e : with_phase(t, "X")) {
    const json& a = e.at("args");
    if (e.at("cat") == "DmaPacketAggregated") {
      // One slice per dma_copy on its queue's thread.
      ++copies_by_name[e.at("name")];
      EXPECT_EQ(thread_name(t, e.at("pid"), e.at("tid")), a.at("queue"));
      if (e.at("pid") == 3 && a.at("trigger_index") == 0) {
        EXPECT_EQ(a.at("bytes"), 32768);
        EXPECT_EQ(a.at("transfers"), 2);
        EXPECT_EQ(a.at("dma_engines"), "0-1");
        EXPECT_EQ(us_to_ps(e.at("ts")), 1'000'000u);
        EXPECT_EQ(us_to_ps(e.at("dur")), 1'416'000u);
      }
      if (e.at("pid") == 3 && a.at("trigger_index") == 1) {
        EXPECT_EQ(a.at("dma_engines"), "2-3");
      }
      continue;
    }
    if (e.at("cat") != "DmaPacket") continue;
    ++by_name[e.at("name")];
    EXPECT_EQ(thread_name(t, e.at("pid"), e.at("tid")),
              "DMA engine " + std::to_string(a.at("dma_engine").get<int>()));
    if (e.at("pid") == 3 && a.at("trigger_index") == 2) {
      EXPECT_EQ(e.at("name"), "SBUF\u2192HBM");
      EXPECT_EQ(a.at("bytes"), 32768);
      EXPECT_EQ(a.at("queue"), "qSyncIO2");
      EXPECT_EQ(a.at("queue_id"), 2);
      EXPECT_EQ(a.at("trigger_engine"), "sp");
      EXPECT_NEAR(a.at("throughput_GBps").get<double>(), 32768.0 / 1416.0, 1e-9);
    }
  }
  EXPECT_EQ(by_name["HBM\u2192SBUF"], 5);
  EXPECT_EQ(by_name["SBUF\u2192HBM"], 1);
  EXPECT_EQ(copies_by_name["HBM\u2192SBUF"], 3);
  EXPECT_EQ(copies_by_name["SBUF\u2192HBM"], 1);

  // Without the triggering instruction the transfer is a plain DmaPacket.
  sample->result.instructions.clear();
  sample->result.flows.clear();
  for (const json& e : with_phase(trace(), "X")) EXPECT_EQ(e.at("name"), "DmaPacket");
}

TEST_F(ChromeTraceTest, TimestampsAreExactPicosecondsOverAMillion) {
  sample->result.dmas.push_back({5, Engine::SP, 0, 1, 0, 64, 64, 1'416'000, 2'832'001});
  const json t = trace();
  bool found = false;
  for (const json& e : with_phase(t, "X")) {
    if (e.at("pid") == 6 && e.at("cat") == "DmaPacket" && e.at("args").at("queue_id") == 1) {
      found = true;
      EXPECT_EQ(e.at("ts").get<double>(), 1.416);
      EXPECT_EQ(e.at("dur").get<double>(), 1.416001);
    }
  }
  EXPECT_TRUE(found);
  const std::string text = t.dump();
  // The JSON text carries the decimal ps value itself (keys are sorted: "ts" ends its object).
  EXPECT_NE(text.find("\"ts\":1.416}"), std::string::npos);
  EXPECT_NE(text.find("\"dur\":1.416001,"), std::string::npos);
  // Every slice start is a whole number of ps as given.
  const json mm = find_instruction_slice(t, 3, "act", 0);
  EXPECT_EQ(us_to_ps(mm.at("ts")), 3'700'000u);
  EXPECT_EQ(mm.at("dur").get<double>(), 0.216);
}

TEST_F(ChromeTraceTest, FlowsPairUpAndBindInsideTheProducerAndConsumerSlices) {
  const json t = trace();
  std::map<uint64_t, json> starts, finishes;
  for (const json& e : with_phase(t, "s"))
    EXPECT_TRUE(starts.emplace(e.at("id").get<uint64_t>(), e).second);
  for (const json& e : with_phase(t, "f"))
    EXPECT_TRUE(finishes.emplace(e.at("id").get<uint64_t>(), e).second);
  ASSERT_EQ(starts.size(), 5u);
  ASSERT_EQ(finishes.size(), 5u);

  const auto by_thread = slices_by_thread(t);
  auto enclosing = [&](const json& e) -> std::pair<uint64_t, uint64_t> {
    const uint64_t ps = us_to_ps(e.at("ts"));
    const auto it = by_thread.find({e.at("pid").get<int>(), e.at("tid").get<int>()});
    if (it == by_thread.end()) return {0, 0};
    for (const auto& s : it->second)
      if (s.first < ps && ps < s.second) return s;  // strictly inside
    return {0, 0};
  };
  std::set<std::pair<std::string, std::string>> arrows;  // producer thread -> consumer thread
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id)) << id;
    const json& f = finishes.at(id);
    EXPECT_EQ(s.at("name"), f.at("name"));
    EXPECT_EQ(s.at("cat"), f.at("cat"));
    EXPECT_EQ(s.at("pid"), f.at("pid"));
    const auto from = enclosing(s), to = enclosing(f);
    EXPECT_NE(from.second, 0u) << "flow start not inside a slice: " << s;
    EXPECT_NE(to.second, 0u) << "flow finish not inside a slice: " << f;
    EXPECT_LE(from.first, to.first) << "flow goes back in time";
    arrows.insert(
        {thread_name(t, s.at("pid"), s.at("tid")), thread_name(t, f.at("pid"), f.at("tid"))});
  }
  // From the DMA completion to the matmul; the chosen transfer ends when the signal landed.
  EXPECT_TRUE(arrows.count({"qSyncIO0", "Tensor (PE)"}));
  EXPECT_TRUE(arrows.count({"qSyncIO1", "Vector (DVE)"}));
  EXPECT_TRUE(arrows.count({"Tensor (PE)", "Scalar (ACT)"}));
  EXPECT_TRUE(arrows.count({"Scalar (ACT)", "Sync (SP)"}));
  EXPECT_TRUE(arrows.count({"qSyncIO0", "Vector (DVE)"}));  // core 5
  EXPECT_EQ(arrows.size(), 5u);
  for (const auto& [id, s] : starts)
    EXPECT_EQ(s.at("name").get<std::string>().rfind("S[", 0), 0u) << s;
}

TEST_F(ChromeTraceTest, FlowsWithoutARecordedEndpointAreSkippedAndCounted) {
  sample->result.flows.push_back({2, 9, Engine::PE, 7, false, 0, Engine::ACT, 0, 1});  // no PE #7
  sample->result.flows.push_back(
      {2, 9, Engine::SP, 9, true, 0, Engine::ACT, 0, 1});  // no DMA of SP #9
  const json t = trace();
  EXPECT_EQ(with_phase(t, "s").size(), 5u);
  EXPECT_EQ(t.at("otherData").at("flows_skipped"), 2);
  TraceOptions no_flows;
  no_flows.flows = false;
  EXPECT_TRUE(with_phase(trace(no_flows), "s").empty());
}

// Integral of the "HBM bandwidth" counter of one pid, in bytes (GB/s * ns).
double integrate_bandwidth(const json& t, int pid) {
  std::vector<std::pair<double, double>> points;  // ts (us), GB/s
  for (const json& e : with_phase(t, "C"))
    if (e.at("pid") == pid && e.at("name") == "HBM bandwidth")
      points.push_back({e.at("ts"), e.at("args").at("GB/s")});
  std::stable_sort(points.begin(), points.end(),
                   [](auto& a, auto& b) { return a.first < b.first; });
  double bytes = 0;
  for (size_t i = 0; i + 1 < points.size(); ++i)
    bytes += points[i].second * (points[i + 1].first - points[i].first) * 1e3;
  if (!points.empty()) {
    EXPECT_EQ(points.back().second, 0.0) << "bandwidth must drop to 0 after the last transfer";
  }
  return bytes;
}

TEST(ChromeTraceOccupancy, CountsDataFromItsWriteToItsLastRead) {
  // DVE writes a [128, 64] fp32 tile (32 KiB) at 1 ns, ACT reads it until 3 ns, DVE
  // overwrites it at 5 ns and nobody reads the new data: live 32 KiB from 1 to 3 ns only.
  const isa::Program p = isa::assemble(R"(.target trn2
dve memset dst=sbuf.fp32[0:128]+0[[1,64]] value=1
act activation dst=psum.fp32[0:128]+0[[1,64]] src=sbuf.fp32[0:128]+0[[1,64]] func=exp
dve memset dst=sbuf.fp32[0:128]+0[[1,64]] value=2
)");
  sim::RunResult r;
  r.core_ids = {0};
  r.cores.resize(1);
  r.total_ps = 6000;
  r.instructions = {{0, Engine::DVE, 0, &p.stream(Engine::DVE)[0], 0, 1000, 0},
                    {0, Engine::ACT, 0, &p.stream(Engine::ACT)[0], 2000, 3000, 0},
                    {0, Engine::DVE, 1, &p.stream(Engine::DVE)[1], 4000, 5000, 0}};
  std::vector<std::pair<double, uint64_t>> sbuf;
  const json t = chrome_trace(r);
  for (const json& e : t.at("traceEvents"))
    if (e.at("ph") == "C" && e.at("name") == "SBUF occupancy")
      sbuf.emplace_back(e.at("ts").get<double>(), e.at("args").at("live bytes").get<uint64_t>());
  const std::vector<std::pair<double, uint64_t>> want = {{0.0, 0}, {0.001, 32768}, {0.003, 0}};
  EXPECT_EQ(sbuf, want) << t.dump();
}

TEST_F(ChromeTraceTest, CountersAreNonNegativeAndBandwidthIntegratesToTheBytesMoved) {
  for (uint64_t bucket : {uint64_t{0}, uint64_t{1'000'000}, uint64_t{333'333}}) {
    TraceOptions o;
    o.bandwidth_bucket_ps = bucket;
    const json t = trace(o);
    std::set<std::string> names;
    for (const json& e : with_phase(t, "C")) {
      names.insert(e.at("name"));
      for (const auto& [k, v] : e.at("args").items()) EXPECT_GE(v.get<double>(), 0.0) << e;
    }
    EXPECT_EQ(names, (std::set<std::string>{"HBM bandwidth", "DMA transfers", "DMA engines",
                                            "SBUF occupancy", "PSUM occupancy"}));
    EXPECT_NEAR(integrate_bandwidth(t, 3), 98'304.0, 1e-6) << "bucket " << bucket;
    EXPECT_NEAR(integrate_bandwidth(t, 6), 8'192.0, 1e-6) << "bucket " << bucket;
  }
  // Exact mode: while both queue-0 transfers run alone the rate is 2 * 16384 B / 1416 ns.
  const json t = trace();
  for (const json& e : with_phase(t, "C"))
    if (e.at("pid") == 3 && e.at("name") == "HBM bandwidth" && us_to_ps(e.at("ts")) == 1'000'000) {
      EXPECT_NEAR(e.at("args").at("GB/s").get<double>(), 2 * 16384.0 / 1416.0, 1e-9);
    }
  // 1 us buckets: bucket [2, 3) us holds 416 ns of queue 0 and 1000 ns of queue 1, each on two
  // engines.
  TraceOptions o;
  o.bandwidth_bucket_ps = 1'000'000;
  bool seen = false;
  for (const json& e : with_phase(trace(o), "C"))
    if (e.at("pid") == 3 && e.at("name") == "HBM bandwidth" && us_to_ps(e.at("ts")) == 2'000'000) {
      seen = true;
      EXPECT_NEAR(e.at("args").at("GB/s").get<double>(),
                  2 * 16384.0 * (416.0 + 1000.0) / 1416.0 / 1000.0, 1e-9);
    }
  EXPECT_TRUE(seen);
}

TEST_F(ChromeTraceTest, DmaInFlightCountersFollowTheTransfers) {
  const json t = trace();
  int max_transfers = 0, max_engines = 0;
  std::map<uint64_t, int> transfers_at;
  for (const json& e : with_phase(t, "C")) {
    if (e.at("pid") != 3) continue;
    if (e.at("name") == "DMA transfers") {
      const int v = e.at("args").at("in flight");
      max_transfers = std::max(max_transfers, v);
      transfers_at[us_to_ps(e.at("ts"))] = v;
    }
    if (e.at("name") == "DMA engines")
      max_engines = std::max(max_engines, e.at("args").at("busy").get<int>());
  }
  EXPECT_EQ(max_transfers, 4);  // queue 0 and queue 1, two engines each, between 1.6 and 2.416 us
  EXPECT_EQ(max_engines, 4);
  EXPECT_EQ(transfers_at.at(0), 0);
  EXPECT_EQ(transfers_at.at(1'000'000), 2);
  EXPECT_EQ(transfers_at.at(1'600'000), 4);
  EXPECT_EQ(transfers_at.at(2'416'000), 2);
  EXPECT_EQ(transfers_at.at(3'016'000), 0);
  EXPECT_EQ(transfers_at.at(6'416'000), 0);

  TraceOptions off;
  off.counters = false;
  EXPECT_TRUE(with_phase(trace(off), "C").empty());
}

TEST_F(ChromeTraceTest, OpNamesShowUpInTheArgsOfTheirInstructionsAndTransfers) {
  TraceOptions o;
  o.op_names = {{2, Engine::PE, 0, 1, "aten::mm"},
                {2, Engine::SP, 0, 3, "load_inputs"},
                {2, Engine::SP, 1, 2, "load_b"},  // nested: wins for SP #1
                {5, Engine::DVE, 1, 2, "aten::add"},
                {5, Engine::DVE, 0, 100, "layer0"},  // outer, listed after the inner one
                {5, Engine::PE, 5, 5, "empty"}};
  const json t = trace(o);
  EXPECT_EQ(find_instruction_slice(t, 3, "pe", 0).at("args").at("op"), "aten::mm");
  EXPECT_EQ(find_instruction_slice(t, 3, "sp", 0).at("args").at("op"), "load_inputs");
  EXPECT_EQ(find_instruction_slice(t, 3, "sp", 1).at("args").at("op"), "load_b");
  EXPECT_EQ(find_instruction_slice(t, 3, "sp", 2).at("args").at("op"), "load_inputs");
  EXPECT_EQ(find_instruction_slice(t, 6, "dve", 1).at("args").at("op"), "aten::add");
  EXPECT_EQ(find_instruction_slice(t, 6, "dve", 0).at("args").at("op"), "layer0");
  EXPECT_FALSE(find_instruction_slice(t, 3, "dve", 0).at("args").contains("op"));
  for (const json& e : with_phase(t, "X"))
    if (e.at("cat") != "Instruction" && e.at("pid") == 3) {
      EXPECT_EQ(e.at("args").at("op"),
                e.at("args").at("trigger_index") == 1 ? "load_b" : "load_inputs");
    }
}

TEST_F(ChromeTraceTest, ProgramsOptionNamesHbmTensorsInTheInstructionText) {
  TraceOptions o;
  o.programs = {{2, &sample->core2}};
  const std::string text =
      find_instruction_slice(trace(o), 3, "sp", 0).at("args").at("instruction");
  EXPECT_NE(text.find("hbm.fp32(a)"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("sp dma_copy", 0), 0u) << text;
}

TEST_F(ChromeTraceTest, WritesTheTraceToAFileAndReportsUnwritablePaths) {
  const auto path = std::filesystem::temp_directory_path() / "neuronsim_test_trace.json";
  write_chrome_trace(sample->result, {}, path);
  std::ifstream in(path);
  const json back = json::parse(in);
  EXPECT_EQ(back, trace());
  std::filesystem::remove(path);
  EXPECT_THROW(write_chrome_trace(sample->result, {}, "/nonexistent-dir/x/trace.json"),
               std::runtime_error);
}

TEST_F(ChromeTraceTest, EmptyRunGivesAValidTraceWithProcessesOnly) {
  sim::RunResult r;
  r.cores.resize(1);
  const json t = chrome_trace(r);
  EXPECT_TRUE(with_phase(t, "X").empty());
  EXPECT_EQ(with_phase(t, "M").size(), 2u);  // process_name, process_sort_index
  EXPECT_EQ(with_phase(t, "M")[0].at("args").at("name"), "NeuronCore 0");
}

// A big synthetic run: n instructions over two cores and five engines, n/5 DMA
// transfers and n/5 flows.
sim::RunResult big_run(size_t n, const isa::Program& program) {
  sim::RunResult r;
  r.total_ps = 0;
  r.core_ids = {0, 1};
  r.cores.resize(2);
  std::array<std::array<uint64_t, isa::kNumEngines>, 2> clock{};
  std::array<std::array<uint32_t, isa::kNumEngines>, 2> next{};
  for (size_t i = 0; i < n; ++i) {
    const uint32_t core = static_cast<uint32_t>(i % 2);
    const auto e = static_cast<Engine>((i / 2) % isa::kNumEngines);
    const auto k = static_cast<size_t>(e);
    const isa::Instruction* inst =
        program.stream(e).empty() ? &program.stream(Engine::DVE)[0] : &program.stream(e)[0];
    const uint64_t start = clock[core][k] + 1000 * (i % 7), end = start + 50'000 + 1000 * (i % 13);
    r.instructions.push_back({core, e, next[core][k]++, inst, start, end, i % 3 * 1000});
    clock[core][k] = end;
    if (e == Engine::SP) {
      for (uint32_t d = 0; d < 2; ++d)
        r.dmas.push_back({core, e, next[core][k] - 1, static_cast<uint32_t>(i % 16), d, 4096, 4096,
                          end + 1000, end + 180'000});
      r.flows.push_back({core, 0, e, next[core][k] - 1, true, end + 180'000, Engine::PE,
                         next[core][0] > 0 ? next[core][0] - 1 : 0, end});
    }
    r.total_ps = std::max(r.total_ps, end + 180'000);
  }
  return r;
}

TEST(ChromeTracePerformance, WritingScalesLinearlyWithTheNumberOfRecords) {
  const isa::Program program = isa::assemble(kCore2Asm, "core2.s");
  const auto path = std::filesystem::temp_directory_path() /
                    ("neuronsim_test_big_trace." + std::to_string(::getpid()) + ".json");
  // Op names as a framework would give them: a layer over each stream, an op
  // over every other instruction (the gaps make a naive innermost search quadratic).
  auto op_names_for = [](const sim::RunResult& r) {
    TraceOptions o;
    for (uint32_t core = 0; core < 2; ++core)
      for (int e = 0; e < isa::kNumEngines; ++e)
        o.op_names.push_back({core, static_cast<Engine>(e), 0, UINT32_MAX, "layer"});
    for (const sim::InstructionRecord& rec : r.instructions)
      if (rec.index % 2 == 0)
        o.op_names.push_back({rec.core, rec.engine, rec.index, rec.index + 1, "op"});
    return o;
  };
  auto time_it = [&](size_t n) {
    const sim::RunResult r = big_run(n, program);
    const TraceOptions o = op_names_for(r);
    const auto t0 = std::chrono::steady_clock::now();
    write_chrome_trace(r, o, path);
    const auto t1 = std::chrono::steady_clock::now();
    EXPECT_GT(std::filesystem::file_size(path), n * 100);
    return std::chrono::duration<double>(t1 - t0).count();
  };
  time_it(5'000);  // warm up
  const double small = time_it(25'000), large = time_it(100'000);
  std::printf("write_chrome_trace: 25k instructions %.3f s, 100k instructions %.3f s\n", small,
              large);
  // Linear work gives ~4x; quadratic would give ~16x.
  EXPECT_LT(large / small, 9.0);
  // The streamed file is the same trace as chrome_trace() builds.
  const sim::RunResult r = big_run(25'000, program);
  const TraceOptions o = op_names_for(r);
  write_chrome_trace(r, o, path);
  std::ifstream in(path);
  const json written = json::parse(in);
  const json t = chrome_trace(r, o);
  EXPECT_EQ(written, t);
  expect_no_overlap(t);
  EXPECT_EQ(t.at("otherData").at("flows_skipped"), 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace neuronsim::traces
