#include "neuronsim/traces/chrome_trace.h"

#include "occupancy.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "derived.h"
#include "neuronsim/isa/assembler.h"
#include "neuronsim/traces/names.h"

namespace neuronsim::traces {
namespace {

using detail::ps_to_us;
using nlohmann::json;
using Sink = std::function<void(json&&)>;

// Process and thread ids. pid = core id + 1 (some viewers treat pid 0 as the
// idle process); process-wide events (metadata, counters) use tid = pid, the
// "main thread" convention; tracks use pid * 100000 + local, unique in the
// file: engines 1-5, the other tracks 100 up.
constexpr int kTidsPerCore = 100000;
constexpr int kFirstExtraLocalTid = 100;
// thread_sort_index bases: kernels, engines, then DMA queues, then DMA engines; + lane.
constexpr int kLaneStride = 100;
constexpr int kKernelSortBase = -kLaneStride, kEngineSortBase = 0, kQueueSortBase = 100000,
              kDmaEngineSortBase = 200000;
// Local tid of a core's kernels row (the engines have 1-5).
constexpr int kKernelLocalTid = 0;

int pid_of(uint32_t core) {
  return static_cast<int>(core) + 1;
}
// The host that drives the device: a process of its own above the cores, one row.
constexpr int kHostPid = 10000;
constexpr int kHostTid = kHostPid * kTidsPerCore;
int tid_of(uint32_t core, int local) {
  return pid_of(core) * kTidsPerCore + local;
}

uint64_t stream_key(uint32_t core, isa::Engine engine, uint32_t index) {
  return (static_cast<uint64_t>(core) << 40) | (static_cast<uint64_t>(engine) << 32) | index;
}
uint64_t engine_key(uint32_t core, isa::Engine engine) {
  return (static_cast<uint64_t>(core) << 8) | static_cast<uint64_t>(engine);
}

// A record of one execution: its stream key and the execution that covers it (kNoExecution
// for runs without executions). A trace session holds many executions of one program on one
// core, whose records share stream keys.
constexpr uint32_t kNoExecution = UINT32_MAX;
struct RecordKey {
  uint32_t execution;
  uint64_t stream;
  bool operator==(const RecordKey&) const = default;
};
struct RecordKeyHash {
  size_t operator()(const RecordKey& k) const {
    return std::hash<uint64_t>{}(k.stream ^ (uint64_t{k.execution} * 0x9e3779b97f4a7c15ull));
  }
};
template <class V>
using RecordMap = std::unordered_map<RecordKey, V, RecordKeyHash>;

// The executions of each core in time order (RunResult::executions), to find the one that
// covers a record: the latest that starts at or before it. The executions of one core follow
// each other on the device clock.
class ExecutionIndex {
 public:
  explicit ExecutionIndex(const std::vector<sim::ExecutionRecord>& executions)
      : executions_(executions) {
    for (size_t i = 0; i < executions.size(); ++i)
      by_core_[executions[i].core].push_back(static_cast<uint32_t>(i));
    for (auto& [core, list] : by_core_)
      std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
        return std::tie(executions[a].start_ps, executions[a].end_ps) <
               std::tie(executions[b].start_ps, executions[b].end_ps);
      });
  }
  uint32_t find(uint32_t core, uint64_t ps) const {
    const auto it = by_core_.find(core);
    if (it == by_core_.end()) return kNoExecution;
    const auto& list = it->second;
    auto pos = std::upper_bound(list.begin(), list.end(), ps, [&](uint64_t t, uint32_t e) {
      return t < executions_[e].start_ps;
    });
    return pos == list.begin() ? list.front() : *std::prev(pos);
  }
  const std::map<uint32_t, std::vector<uint32_t>>& by_core() const { return by_core_; }

 private:
  const std::vector<sim::ExecutionRecord>& executions_;
  std::map<uint32_t, std::vector<uint32_t>> by_core_;
};

// Splits intervals into lanes so that no two in one lane overlap ([start, end),
// touching is fine). `order` is the group's record indices; returns lane per
// entry of `order`. Serial streams stay in lane 0 at O(1) per record.
template <class Record>
std::vector<uint32_t> assign_lanes(const std::vector<Record>& records, std::vector<size_t>& order) {
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(records[a].start_ps, records[a].end_ps) <
           std::tie(records[b].start_ps, records[b].end_ps);
  });
  std::vector<uint64_t> lane_end;
  std::vector<uint32_t> lanes(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& r = records[order[k]];
    uint32_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > r.start_ps) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(0);
    lane_end[lane] = std::max(r.start_ps, r.end_ps);
    lanes[k] = lane;
  }
  return lanes;
}

// Framework op names by (core, engine), flattened into disjoint segments that
// each carry the innermost range covering them (latest begin, then earliest
// end, then latest listed): O(n log n) to build, O(log n) per lookup.
class OpNameIndex {
 public:
  explicit OpNameIndex(const std::vector<OpName>& names) {
    std::unordered_map<uint64_t, std::vector<const OpName*>> by_stream;
    for (const OpName& n : names)
      if (n.end > n.begin) by_stream[engine_key(n.core, n.engine)].push_back(&n);
    for (auto& [key, list] : by_stream) segments_[key] = flatten(list);
  }

  const OpName* find(uint32_t core, isa::Engine engine, uint32_t index) const {
    const auto it = segments_.find(engine_key(core, engine));
    if (it == segments_.end()) return nullptr;
    const auto& segs = it->second;
    auto pos = std::upper_bound(segs.begin(), segs.end(), index,
                                [](uint32_t i, const Segment& s) { return i < s.begin; });
    if (pos == segs.begin()) return nullptr;
    --pos;
    return index < pos->end ? pos->name : nullptr;
  }

 private:
  struct Segment {
    uint32_t begin, end;
    const OpName* name;
  };

  static std::vector<Segment> flatten(const std::vector<const OpName*>& list) {
    struct Edge {
      uint32_t at;
      bool open;
      size_t i;
    };
    std::vector<Edge> edges;
    for (size_t i = 0; i < list.size(); ++i) {
      edges.push_back({list[i]->begin, true, i});
      edges.push_back({list[i]->end, false, i});
    }
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
    auto inner_first = [&](size_t a, size_t b) {
      const OpName &x = *list[a], &y = *list[b];
      if (x.begin != y.begin) return x.begin > y.begin;
      if (x.end != y.end) return x.end < y.end;
      return a > b;
    };
    std::set<size_t, decltype(inner_first)> active(inner_first);
    std::vector<Segment> out;
    for (size_t k = 0; k < edges.size();) {
      const uint32_t at = edges[k].at;
      for (; k < edges.size() && edges[k].at == at; ++k) {
        if (edges[k].open)
          active.insert(edges[k].i);
        else
          active.erase(edges[k].i);
      }
      if (!out.empty() && out.back().end == UINT32_MAX)
        out.back().end = at;  // close the open segment
      if (!active.empty()) out.push_back({at, UINT32_MAX, list[*active.begin()]});
    }
    return out;
  }

  std::unordered_map<uint64_t, std::vector<Segment>> segments_;
};

std::string_view space_label(isa::MemSpace s) {
  switch (s) {
    case isa::MemSpace::SBUF:
      return "SBUF";
    case isa::MemSpace::PSUM:
      return "PSUM";
    case isa::MemSpace::HBM:
      return "HBM";
    default:
      return "";
  }
}

// "HBM→SBUF" from the dma_copy's operands; "DmaPacket" when unknown.
std::string dma_slice_name(const isa::Instruction* inst) {
  if (inst != nullptr) {
    const isa::AccessPattern* src = inst->operand(isa::Role::src);
    const isa::AccessPattern* dst = inst->operand(isa::Role::dst);
    if (src != nullptr && dst != nullptr && !space_label(src->space).empty() &&
        !space_label(dst->space).empty())
      return fmt::format("{}\u2192{}", space_label(src->space), space_label(dst->space));
  }
  return "DmaPacket";
}

// Builds a JSON object by moving members in: nlohmann's initializer lists build
// a two-element array per member and copy it, which dominates on big traces.
class Obj {
 public:
  Obj() : json_(json::value_t::object), object_(json_.get_ptr<json::object_t*>()) {}
  template <class V>
  Obj& add(std::string_view key, V&& value) {
    object_->emplace(std::string(key), json(std::forward<V>(value)));
    return *this;
  }
  json take() { return std::move(json_); }

 private:
  json json_;
  json::object_t* object_;
};

json metadata(std::string_view name, int pid, int tid, std::string_view key, json value) {
  return Obj()
      .add("name", name)
      .add("ph", "M")
      .add("ts", 0)
      .add("pid", pid)
      .add("tid", tid)
      .add("args", Obj().add(key, std::move(value)).take())
      .take();
}

struct Track {
  uint32_t core = 0;
  int tid = 0;
  std::string name;
  int sort_index = 0;
};

// The threads of the trace: places each group's intervals into lanes (a group
// is one engine, DMA queue or DMA engine of a core) and names a thread per lane.
class Tracks {
 public:
  // Sets tid_of_record[i] for every i in `members` (indices into `records`).
  // Lane 0 gets `lane0_tid` when non-zero; extra lanes are named "<name> #<n>".
  template <class Record>
  void place(const std::vector<Record>& records, std::vector<size_t> members, uint32_t core,
             const std::string& name, int sort_index, int lane0_tid,
             std::vector<int>& tid_of_record) {
    const std::vector<uint32_t> lanes = assign_lanes(records, members);
    std::vector<int> lane_tid;
    for (size_t k = 0; k < members.size(); ++k) {
      const uint32_t lane = lanes[k];
      while (lane_tid.size() <= lane) {
        const auto n = static_cast<uint32_t>(lane_tid.size());
        Track t{core, n == 0 && lane0_tid != 0 ? lane0_tid : new_tid(core),
                n == 0 ? name : fmt::format("{} #{}", name, n + 1),
                sort_index + static_cast<int>(n)};
        if (n > 0) ++extra_lanes_;
        lane_tid.push_back(t.tid);
        tracks_.push_back(std::move(t));
      }
      tid_of_record[members[k]] = lane_tid[lane];
    }
  }
  const std::vector<Track>& all() const { return tracks_; }
  size_t extra_lanes() const { return extra_lanes_; }

 private:
  int new_tid(uint32_t core) {
    const int local = kFirstExtraLocalTid + next_local_[core]++;
    if (local >= kTidsPerCore)
      throw std::runtime_error(fmt::format("trace: more than {} rows for NeuronCore {}",
                                           kTidsPerCore - kFirstExtraLocalTid, core));
    return tid_of(core, local);
  }

  std::vector<Track> tracks_;
  std::map<uint32_t, int> next_local_;
  size_t extra_lanes_ = 0;
};

// One dma_copy as its queue sees it: from its first transfer's start to its last one's end.
struct DmaCopy {
  uint32_t core = 0;
  uint32_t execution = kNoExecution;
  isa::Engine trigger = isa::Engine::SP;
  uint32_t index = 0, queue = 0;
  uint64_t start_ps = UINT64_MAX, end_ps = 0;
  uint64_t bytes = 0, hbm_bytes = 0, transfers = 0;
  std::vector<uint32_t> dma_engines;  // sorted, unique
};

// "0-3,7" from sorted unique engine numbers.
std::string engine_ranges(const std::vector<uint32_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j > i ? fmt::format("{}-{}", v[i], v[j]) : fmt::format("{}", v[i]);
    i = j + 1;
  }
  return out;
}

// SBUF and PSUM live bytes of one core (see occupancy.h), one point per change.
void add_occupancy_counters(const sim::RunResult& r, uint32_t core, const Sink& emit) {
  const int pid = pid_of(core);
  for (const detail::OccupancyStep& step : detail::live_occupancy(r, core))
    for (auto [name, bytes] : {std::pair{"SBUF occupancy", step.sbuf_bytes},
                               std::pair{"PSUM occupancy", step.psum_bytes}})
      emit(Obj()
               .add("name", name)
               .add("ph", "C")
               .add("ts", ps_to_us(step.ps))
               .add("pid", pid)
               .add("tid", pid)
               .add("args", Obj().add("live bytes", bytes).take())
               .take());
}

// Counter tracks of one core, from its DMA records.
void add_counters(const sim::RunResult& r, const std::vector<size_t>& dmas, uint32_t core,
                  uint64_t bucket_ps, const Sink& emit) {
  const int pid = pid_of(core);
  auto counter = [&](std::string_view name, uint64_t ps, std::string_view key, json value) {
    emit(Obj()
             .add("name", name)
             .add("ph", "C")
             .add("ts", ps_to_us(ps))
             .add("pid", pid)
             .add("tid", pid)
             .add("args", Obj().add(key, std::move(value)).take())
             .take());
  };

  // Step functions over the transfer starts and ends.
  struct Edge {
    uint64_t ps;
    int delta;  // +1 start, -1 end
    size_t record;
  };
  std::vector<Edge> edges;
  edges.reserve(dmas.size() * 2);
  for (size_t i : dmas) {
    edges.push_back({r.dmas[i].start_ps, +1, i});
    edges.push_back({std::max(r.dmas[i].start_ps, r.dmas[i].end_ps), -1, i});
  }
  std::stable_sort(edges.begin(), edges.end(),
                   [](const Edge& a, const Edge& b) { return a.ps < b.ps; });

  const bool exact_bw = bucket_ps == 0;
  std::map<uint32_t, int> engine_active;  // DMA engine -> transfers running on it
  long double rate = 0;                   // bytes per ns of the running transfers that touch HBM
  int in_flight = 0, hbm_in_flight = 0;
  // A point only where a value changes; all three start at 0 at time 0.
  double last_rate = 0;
  int last_in_flight = 0;
  size_t last_engines = 0;
  if (exact_bw) counter("HBM bandwidth", 0, "GB/s", 0.0);
  counter("DMA transfers", 0, "in flight", 0);
  counter("DMA engines", 0, "busy", 0);
  for (size_t k = 0; k < edges.size();) {
    const uint64_t t = edges[k].ps;
    for (; k < edges.size() && edges[k].ps == t; ++k) {
      const sim::DmaRecord& d = r.dmas[edges[k].record];
      in_flight += edges[k].delta;
      int& on_engine = engine_active[d.dma_engine];
      on_engine += edges[k].delta;
      if (on_engine == 0) engine_active.erase(d.dma_engine);
      if (d.end_ps > d.start_ps && d.hbm_bytes > 0) {
        hbm_in_flight += edges[k].delta;
        rate += edges[k].delta * static_cast<long double>(d.hbm_bytes) * 1000.0L /
                static_cast<long double>(d.end_ps - d.start_ps);
      }
    }
    if (hbm_in_flight == 0 || rate < 0) rate = 0;  // no rounding residue when nothing runs
    if (exact_bw && static_cast<double>(rate) != last_rate) {
      last_rate = static_cast<double>(rate);
      counter("HBM bandwidth", t, "GB/s", last_rate);
    }
    if (in_flight != last_in_flight)
      counter("DMA transfers", t, "in flight", last_in_flight = in_flight);
    if (engine_active.size() != last_engines)
      counter("DMA engines", t, "busy", last_engines = engine_active.size());
  }

  if (exact_bw) return;
  // Bucketed bandwidth: each transfer's HBM bytes spread evenly over its duration.
  std::map<uint64_t, long double> buckets;  // bucket index -> bytes
  for (size_t i : dmas) {
    const sim::DmaRecord& d = r.dmas[i];
    if (d.hbm_bytes == 0) continue;
    if (d.end_ps <= d.start_ps) {
      buckets[d.start_ps / bucket_ps] += static_cast<long double>(d.hbm_bytes);
      continue;
    }
    const long double per_ps =
        static_cast<long double>(d.hbm_bytes) / static_cast<long double>(d.end_ps - d.start_ps);
    for (uint64_t b = d.start_ps / bucket_ps; b * bucket_ps < d.end_ps; ++b) {
      const uint64_t lo = std::max(d.start_ps, b * bucket_ps),
                     hi = std::min(d.end_ps, (b + 1) * bucket_ps);
      buckets[b] += per_ps * static_cast<long double>(hi - lo);
    }
  }
  if (buckets.empty() || buckets.begin()->first > 0) counter("HBM bandwidth", 0, "GB/s", 0.0);
  for (auto it = buckets.begin(); it != buckets.end(); ++it) {
    const uint64_t b = it->first;
    counter("HBM bandwidth", b * bucket_ps, "GB/s",
            static_cast<double>(it->second * 1000.0L / static_cast<long double>(bucket_ps)));
    const auto next = std::next(it);
    if (next == buckets.end() || next->first != b + 1)
      counter("HBM bandwidth", (b + 1) * bucket_ps, "GB/s", 0.0);
  }
}

// Hands every event of the trace to `emit` (metadata first); returns otherData.
json emit_trace(const sim::RunResult& r, const TraceOptions& options, const Sink& emit) {
  const auto& insts = r.instructions;
  const auto& dmas = r.dmas;

  // Cores: those with stats and any that appear in records.
  std::map<uint32_t, size_t> cores;  // core id -> index in r.cores (or SIZE_MAX)
  for (size_t i = 0; i < r.cores.size(); ++i) cores.emplace(detail::core_id(r, i), i);
  for (const auto& rec : insts) cores.emplace(rec.core, SIZE_MAX);
  for (const auto& rec : dmas) cores.emplace(rec.core, SIZE_MAX);

  // The execution that covers each record (sim::Device trace sessions).
  const ExecutionIndex executions(r.executions);
  auto execution_at = [&](uint32_t core, uint64_t ps) {
    return r.executions.empty() ? kNoExecution : executions.find(core, ps);
  };
  std::vector<uint32_t> inst_exec(insts.size()), dma_exec(dmas.size());
  for (size_t i = 0; i < insts.size(); ++i)
    inst_exec[i] = execution_at(insts[i].core, insts[i].start_ps);
  for (size_t i = 0; i < dmas.size(); ++i)
    dma_exec[i] = execution_at(dmas[i].core, dmas[i].start_ps);

  // Instruction records by (execution, core, engine, index).
  RecordMap<size_t> inst_at;
  inst_at.reserve(insts.size());
  for (size_t i = 0; i < insts.size(); ++i)
    inst_at.emplace(
        RecordKey{inst_exec[i], stream_key(insts[i].core, insts[i].engine, insts[i].index)}, i);
  auto find_inst = [&](uint32_t execution, uint32_t core, isa::Engine e,
                       uint32_t index) -> const sim::InstructionRecord* {
    const auto it = inst_at.find(RecordKey{execution, stream_key(core, e, index)});
    return it == inst_at.end() ? nullptr : &insts[it->second];
  };

  // DMA transfers grouped by their dma_copy, in order of first appearance.
  std::vector<DmaCopy> copies;
  RecordMap<size_t> copy_at;
  auto copy_key = [&](size_t i) {
    return RecordKey{dma_exec[i], stream_key(dmas[i].core, dmas[i].trigger, dmas[i].index)};
  };
  for (size_t i = 0; i < dmas.size(); ++i) {
    const sim::DmaRecord& d = dmas[i];
    const auto [it, inserted] = copy_at.emplace(copy_key(i), copies.size());
    if (inserted) {
      DmaCopy c;
      c.core = d.core;
      c.execution = dma_exec[i];
      c.trigger = d.trigger;
      c.index = d.index;
      c.queue = d.queue;
      copies.push_back(std::move(c));
    }
    DmaCopy& c = copies[it->second];
    c.start_ps = std::min(c.start_ps, d.start_ps);
    c.end_ps = std::max({c.end_ps, d.start_ps, d.end_ps});
    c.bytes += d.bytes;
    c.hbm_bytes += d.hbm_bytes;
    ++c.transfers;
    c.dma_engines.push_back(d.dma_engine);
  }
  for (DmaCopy& c : copies) {
    std::sort(c.dma_engines.begin(), c.dma_engines.end());
    c.dma_engines.erase(std::unique(c.dma_engines.begin(), c.dma_engines.end()),
                        c.dma_engines.end());
  }

  // Threads: one per engine, per DMA queue and per DMA engine of each core (plus
  // a lane for any interval that overlaps another of its group, which a correct
  // run never produces for engines and DMA engines).
  Tracks tracks;
  std::vector<int> exec_tid(r.executions.size()), inst_tid(insts.size()), copy_tid(copies.size()),
      dma_tid(dmas.size());
  for (const auto& [core, members] : executions.by_core()) {
    cores.emplace(core, SIZE_MAX);
    tracks.place(r.executions, std::vector<size_t>(members.begin(), members.end()), core,
                 std::string(kernel_track_name()), kKernelSortBase, tid_of(core, kKernelLocalTid),
                 exec_tid);
  }
  // (core, row order) -> records
  std::map<std::pair<uint32_t, int>, std::vector<size_t>> by_engine;
  for (size_t i = 0; i < insts.size(); ++i)
    by_engine[{insts[i].core, engine_track_order(insts[i].engine)}].push_back(i);
  for (auto& [key, members] : by_engine) {
    const auto [core, order] = key;
    tracks.place(insts, std::move(members), core,
                 std::string(engine_track_name(detail::kEngineOrder[order])),
                 kEngineSortBase + order * kLaneStride, tid_of(core, 1 + order), inst_tid);
  }
  // (core, trigger row order, queue) -> dma_copies
  std::map<std::tuple<uint32_t, int, uint32_t>, std::vector<size_t>> by_queue;
  for (size_t i = 0; i < copies.size(); ++i)
    by_queue[{copies[i].core, engine_track_order(copies[i].trigger), copies[i].queue}].push_back(i);
  std::map<uint32_t, int> queue_rank;
  for (auto& [key, members] : by_queue) {
    const auto [core, order, queue] = key;
    tracks.place(copies, std::move(members), core,
                 dma_queue_name(detail::kEngineOrder[order], queue),
                 kQueueSortBase + queue_rank[core]++ * kLaneStride, 0, copy_tid);
  }
  // (core, DMA engine) -> transfers
  std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> by_dma_engine;
  for (size_t i = 0; i < dmas.size(); ++i)
    by_dma_engine[{dmas[i].core, dmas[i].dma_engine}].push_back(i);
  std::map<uint32_t, int> dma_engine_rank;
  for (auto& [key, members] : by_dma_engine) {
    const auto [core, dma_engine] = key;
    tracks.place(dmas, std::move(members), core, fmt::format("DMA engine {}", dma_engine),
                 kDmaEngineSortBase + dma_engine_rank[core]++ * kLaneStride, 0, dma_tid);
  }

  // Metadata: processes, then threads.
  for (const auto& [core, index] : cores) {
    const int pid = pid_of(core);
    std::string name = fmt::format("NeuronCore {}", core);
    if (!r.instance.empty()) name += fmt::format(" ({})", r.instance);
    emit(metadata("process_name", pid, pid, "name", name));
    emit(metadata("process_sort_index", pid, pid, "sort_index", core));
    std::string labels = r.instance;
    if (!r.generation.empty()) labels += (labels.empty() ? "" : ", ") + r.generation;
    if (!labels.empty()) emit(metadata("process_labels", pid, pid, "labels", labels));
  }
  for (const Track& t : tracks.all()) {
    emit(metadata("thread_name", pid_of(t.core), t.tid, "name", t.name));
    emit(metadata("thread_sort_index", pid_of(t.core), t.tid, "sort_index", t.sort_index));
  }
  if (!r.host.empty()) {
    emit(metadata("process_name", kHostPid, kHostPid, "name", "Host"));
    emit(metadata("process_sort_index", kHostPid, kHostPid, "sort_index", -1));
    emit(metadata("thread_name", kHostPid, kHostTid, "name", "Dispatch"));
  }

  const OpNameIndex op_names(options.op_names);
  // The program of the execution that covers a record, else TraceOptions::programs.
  auto program_of = [&](uint32_t execution, uint32_t core) -> const isa::Program* {
    if (execution != kNoExecution && r.executions[execution].program != nullptr)
      return r.executions[execution].program;
    const auto it = options.programs.find(core);
    return it == options.programs.end() ? nullptr : it->second;
  };
  auto slice = [&](std::string_view name, std::string_view cat, uint64_t start, uint64_t end,
                   uint32_t core, int tid, Obj& args) {
    emit(Obj()
             .add("name", name)
             .add("cat", cat)
             .add("ph", "X")
             .add("ts", ps_to_us(start))
             .add("dur", ps_to_us(end > start ? end - start : 0))
             .add("pid", pid_of(core))
             .add("tid", tid)
             .add("args", args.take())
             .take());
  };

  // Host slices: the dispatch of each op, on the host's row.
  for (const sim::HostRecord& h : r.host)
    emit(Obj()
             .add("name", h.name)
             .add("cat", "Host")
             .add("ph", "X")
             .add("ts", ps_to_us(h.start_ps))
             .add("dur", ps_to_us(h.end_ps - h.start_ps))
             .add("pid", kHostPid)
             .add("tid", kHostTid)
             .take());

  // Kernel slices: one per execution.
  for (size_t i = 0; i < r.executions.size(); ++i) {
    const sim::ExecutionRecord& e = r.executions[i];
    Obj args;
    args.add("seq", e.seq)
        .add("instructions", e.program != nullptr ? e.program->num_instructions() : 0);
    if (e.host_bound_ps > 0) args.add("waited_for_host_ns", detail::ps_to_ns(e.host_bound_ps));
    slice(e.name, "Execution", e.start_ps, e.end_ps, e.core, exec_tid[i], args);
    // The runtime's launch, inside the execution's slice before its first instruction.
    if (e.launch_ps > 0) {
      Obj launch;
      launch.add("seq", e.seq).add("execution", e.name);
      slice("launch", "Launch", e.start_ps, e.start_ps + e.launch_ps, e.core, exec_tid[i], launch);
    }
  }

  // Instruction slices.
  for (size_t i = 0; i < insts.size(); ++i) {
    const sim::InstructionRecord& rec = insts[i];
    Obj args;
    args.add("index", rec.index)
        .add("engine", isa::engine_name(rec.engine))
        .add("semaphore_wait_ns", detail::ps_to_ns(rec.wait_ps));
    std::string_view name = "INSTRUCTION";
    if (rec.inst != nullptr) {
      name = opcode_slice_name(rec.inst->opcode);
      args.add("opcode", isa::opcode_info(rec.inst->opcode).name)
          .add("instruction",
               isa::format_instruction(*rec.inst, program_of(inst_exec[i], rec.core)));
    }
    if (const OpName* op = op_names.find(rec.core, rec.engine, rec.index)) args.add("op", op->name);
    slice(name, "Instruction", rec.start_ps, rec.end_ps, rec.core, inst_tid[i], args);
  }

  // DMA: one slice per dma_copy on its queue's thread, one per transfer on its DMA engine's.
  std::vector<std::string> copy_name(copies.size());
  for (size_t i = 0; i < copies.size(); ++i) {
    const DmaCopy& c = copies[i];
    const sim::InstructionRecord* trigger = find_inst(c.execution, c.core, c.trigger, c.index);
    copy_name[i] = dma_slice_name(trigger != nullptr ? trigger->inst : nullptr);
    Obj args;
    args.add("bytes", c.bytes)
        .add("hbm_bytes", c.hbm_bytes)
        .add("transfers", c.transfers)
        .add("dma_engines", engine_ranges(c.dma_engines))
        .add("queue", dma_queue_name(c.trigger, c.queue))
        .add("queue_id", c.queue)
        .add("trigger_engine", isa::engine_name(c.trigger))
        .add("trigger_index", c.index)
        .add("throughput_GBps", detail::gb_per_s(c.bytes, c.end_ps - c.start_ps));
    if (const OpName* op = op_names.find(c.core, c.trigger, c.index)) args.add("op", op->name);
    slice(copy_name[i], "DmaPacketAggregated", c.start_ps, c.end_ps, c.core, copy_tid[i], args);
  }
  for (size_t i = 0; i < dmas.size(); ++i) {
    const sim::DmaRecord& d = dmas[i];
    Obj args;
    args.add("bytes", d.bytes)
        .add("hbm_bytes", d.hbm_bytes)
        .add("descriptors", d.descriptors)
        .add("dma_engine", d.dma_engine)
        .add("queue", dma_queue_name(d.trigger, d.queue))
        .add("queue_id", d.queue)
        .add("trigger_engine", isa::engine_name(d.trigger))
        .add("trigger_index", d.index)
        .add("throughput_GBps",
             detail::gb_per_s(d.bytes, d.end_ps > d.start_ps ? d.end_ps - d.start_ps : 0));
    if (const OpName* op = op_names.find(d.core, d.trigger, d.index)) args.add("op", op->name);
    slice(copy_name[copy_at.at(copy_key(i))], "DmaPacket", d.start_ps, d.end_ps, d.core, dma_tid[i],
          args);
  }

  // Flows: semaphore signal -> released wait, bound at the middle of each slice
  // (a DMA signal leaves from its dma_copy's slice on the queue thread).
  size_t flows = 0, flows_skipped = 0;
  if (options.flows) {
    auto mid = [](uint64_t start, uint64_t end) {
      return start + (end > start ? (end - start) / 2 : 0);
    };
    auto flow_event = [&](std::string_view ph, const std::string& name, uint64_t id, uint64_t ps,
                          int pid, int tid, std::string_view time_key, uint64_t time_ps,
                          uint16_t sem) {
      emit(Obj()
               .add("name", name)
               .add("cat", "SemaphoreUpdate")
               .add("ph", ph)
               .add("id", id)
               .add("ts", ps_to_us(ps))
               .add("pid", pid)
               .add("tid", tid)
               .add("bp", "e")
               .add("args",
                    Obj().add("semaphore", sem).add(time_key, detail::ps_to_ns(time_ps)).take())
               .take());
    };
    for (const sim::FlowRecord& f : r.flows) {
      // A semaphore hand-off stays inside one execution: the one of the released wait.
      const uint32_t execution = execution_at(f.core, f.to_ps);
      const sim::InstructionRecord* to = find_inst(execution, f.core, f.to_engine, f.to_index);
      int from_tid = 0;
      uint64_t from_mid = 0;
      if (f.from_dma) {
        const auto it =
            copy_at.find(RecordKey{execution, stream_key(f.core, f.from_engine, f.from_index)});
        if (it != copy_at.end()) {
          from_tid = copy_tid[it->second];
          from_mid = mid(copies[it->second].start_ps, copies[it->second].end_ps);
        }
      } else if (const sim::InstructionRecord* from =
                     find_inst(execution, f.core, f.from_engine, f.from_index)) {
        from_tid = inst_tid[static_cast<size_t>(from - insts.data())];
        from_mid = mid(from->start_ps, from->end_ps);
      }
      if (to == nullptr || from_tid == 0) {
        ++flows_skipped;
        continue;
      }
      const int pid = pid_of(f.core);
      const uint64_t id = ++flows;
      const std::string name = fmt::format("S[{}]", f.semaphore);
      flow_event("s", name, id, from_mid, pid, from_tid, "signal_ns", f.from_ps, f.semaphore);
      flow_event("f", name, id, mid(to->start_ps, to->end_ps), pid,
                 inst_tid[static_cast<size_t>(to - insts.data())], "released_ns", f.to_ps,
                 f.semaphore);
    }
  }

  // Counters per core.
  if (options.counters) {
    std::map<uint32_t, std::vector<size_t>> dmas_by_core;
    for (size_t i = 0; i < dmas.size(); ++i) dmas_by_core[dmas[i].core].push_back(i);
    for (const auto& [core, list] : dmas_by_core)
      add_counters(r, list, core, options.bandwidth_bucket_ps, emit);
    for (uint32_t core : r.core_ids) add_occupancy_counters(r, core, emit);
  }

  json other = {{"generator", "neuronsim"},
                {"instance", r.instance},
                {"generation", r.generation},
                {"total_ps", r.total_ps},
                {"total_time_ns", detail::ps_to_ns(r.total_ps)},
                {"cores", cores.size()},
                {"executions", r.executions.size()},
                {"instructions", insts.size()},
                {"dma_transfers", dmas.size()},
                {"flows", flows},
                {"flows_skipped", flows_skipped},
                {"overlap_lanes", tracks.extra_lanes()}};
  return other;
}

}  // namespace

json chrome_trace(const sim::RunResult& result, const TraceOptions& options) {
  json events = json::array();
  auto& list = events.get_ref<json::array_t&>();
  list.reserve(result.instructions.size() + 6 * result.dmas.size() + 2 * result.flows.size() + 64);
  json other = emit_trace(result, options, [&](json&& e) { list.push_back(std::move(e)); });
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ns"},
              {"otherData", std::move(other)}};
}

void write_chrome_trace(const sim::RunResult& result, const TraceOptions& options,
                        const std::filesystem::path& path) {
  // Streams event by event: memory stays proportional to the records, not to the JSON.
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write trace {}", path.string()));
  auto text = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  out << "{\"traceEvents\":[";
  bool first = true;
  const json other = emit_trace(result, options, [&](json&& e) {
    if (!first) out << ",\n";
    first = false;
    out << text(e);
  });
  out << "\n],\"displayTimeUnit\":\"ns\",\"otherData\":" << text(other) << "}\n";
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write trace {}", path.string()));
}

}  // namespace neuronsim::traces
