#include "neuronsim/sim/simulator.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <span>

#include <fmt/format.h>
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include "collective_hub.h"
#include "dma_lane.h"
#include "neuronsim/isa/assembler.h"
#include "neuronsim/sim/cost_model.h"
#include "schedule.h"

namespace neuronsim::sim {
namespace {

using isa::Engine;
using isa::Instruction;
using isa::Opcode;

// SystemC keeps one kernel per process: one run at a time.
std::mutex& kernel_mutex() {
  static std::mutex m;
  return m;
}

// SystemC's banner needs no setting (SC_COPYRIGHT_MESSAGE) to stay away: SystemC prints it
// only from sc_elab_and_sim, which its own main() calls before sc_main (sc_main_main.cpp calls
// pln(), from 2.3.0 to 3.0.x); creating the kernel, setting the time resolution and sc_start
// print nothing. Every program that uses the simulator has a main of its own (see
// support/sc_main.cpp), so the library leaves the process environment alone.
void init_kernel() {
  static const bool done = [] {
    sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
    return true;
  }();
  (void)done;
}

uint64_t now_ps() {
  return sc_core::sc_time_stamp().value();
}

void wait_ps(uint64_t ps) {
  if (ps > 0) sc_core::wait(sc_core::sc_time(static_cast<double>(ps), sc_core::SC_PS));
}

// The chip-wide HBM: transfers reserve its bandwidth in the order they are issued.
struct ChipRun {
  double ps_per_byte = 0;
  uint64_t free_ps = 0;
};

// Transfers of one DMA instruction, at most (an instruction's transfer is named seq * this + i).
constexpr uint64_t kMaxTransfers = 1024;

// A dma_copy whose transfers are done; its data and signal land at done_ps.
struct PendingDma {
  uint64_t done_ps;
  uint64_t seq;  // issue order breaks ties
  const Instruction* inst;
  Engine trigger;
  uint32_t index;
  bool operator>(const PendingDma& o) const {
    return std::tie(done_ps, seq) > std::tie(o.done_ps, o.seq);
  }
};

}  // namespace

// The state of one core during one run: its streams as the scheduling rules see them
// (schedule.h), and its timed state.
struct CoreRun : CoreStreams {
  CoreState* state = nullptr;  // null in timing-only runs
  ChipRun* chip = nullptr;
  const spec::GenerationConfig* gen = nullptr;
  const RunOptions* options = nullptr;
  RunResult* result = nullptr;
  CoreStats stats;
  uint64_t start_ps = 0;   // the run's start
  uint64_t offset_ps = 0;  // this core starts this long after it

  struct Signal {
    Engine engine = Engine::SP;
    uint32_t index = 0;
    bool dma = false;
    uint64_t ps = 0;
  };
  std::array<Signal, isa::kNumSemaphores> last_signal{};
  sc_core::sc_event sem_changed;
  sc_core::sc_event dma_issued;

  // A dma_copy from its trigger until it lands: its transfers on the DMA engines' lanes.
  struct InFlight {
    const Instruction* inst = nullptr;
    Engine trigger = Engine::SP;
    uint32_t index = 0;
    uint32_t outstanding = 0;  // transfers not finished
    uint64_t end_ps = 0;       // the latest finish so far
    std::vector<DmaTransfer> transfers;
    std::vector<uint64_t> floor_ps;  // per transfer: no end before (the core's and HBM's rates)
    std::vector<uint32_t> lane;      // per transfer: the DMA engine
  };
  std::map<uint64_t, InFlight> in_flight;  // by issue order
  // Transfers waiting for their DMA instruction's issue time: (issue, seq).
  std::priority_queue<std::pair<uint64_t, uint64_t>, std::vector<std::pair<uint64_t, uint64_t>>,
                      std::greater<>>
      arriving;
  std::vector<DmaLane> lanes;  // the DMA engines of the core's physical cores
  uint64_t dma_held_ps = 0;    // transfers held past their lane's finish by a shared rate
  // A DMA queue: (triggering engine, queue id); its instructions not landed, in issue order,
  // and its last landing.
  struct Queue {
    std::deque<uint64_t> order;
    uint64_t landed_ps = 0;
  };
  std::map<int, Queue> queues;
  static int queue_of(Engine trigger, const Instruction& in) {
    return static_cast<int>(trigger) << 16 | in.ints[0];
  }
  // Per physical core: when its DMA engines together can take the next byte
  // (dma_core_bytes_per_ns, served in issue order like HBM; 0 ps per byte: no such limit).
  std::vector<uint64_t> dma_core_free;
  // When each triggering engine's hardware DGE is free (dma_copy hwdge=true).
  std::array<uint64_t, isa::kNumEngines> dge_free{};
  double dma_core_ps_per_byte = 0;
  std::priority_queue<PendingDma, std::vector<PendingDma>, std::greater<>> pending;
  uint64_t dma_seq = 0;
  int engines_running = isa::kNumEngines;
  CollectiveHub* hub = nullptr;                  // the run's collectives
  sc_core::sc_event* collective_done = nullptr;  // notified when any collective of the run finishes

  bool* abort = nullptr;
  std::exception_ptr* error = nullptr;
  uint64_t* done_instructions = nullptr;
  uint64_t total_instructions = 0;

  // The physical cores the program is split over (isa::Program::lnc).
  uint32_t lnc() const { return program->lnc; }
  // An engine's time for an instruction of the logical core: its physical cores' engines share
  // the work evenly (docs/cost-model.md §6.2).
  uint64_t split_ps(uint64_t ps) const { return (ps + lnc() - 1) / lnc(); }

  void engine_thread(Engine e);
  void dma_thread();
  void complete(const Instruction& in, Engine engine, uint32_t index, bool dma);
  // Lands the signal of `in` (CoreStreams::signal), remembering who sent it for the trace's
  // flows, and wakes the engines that wait.
  void land_signal(const Instruction& in, Engine engine, uint32_t index, bool dma);
  // Runs a collective from its arrival to its finish; returns false when the run aborted.
  bool collective(const Instruction& in, Engine e, uint32_t index, uint64_t ready, bool waited);
  void issue_dma(const Instruction& in, Engine engine, uint32_t index);
  // The DMA process's steps at the current time (dma_thread).
  void admit_arrivals(uint64_t now);
  void finish_transfer(const DmaLane::Transfer& t, uint64_t finish_ps);
  void land_queues();
  uint64_t next_dma_event() const;
  void fail(std::exception_ptr e) {
    if (!*error) *error = e;
    *abort = true;
    sem_changed.notify(sc_core::SC_ZERO_TIME);
    dma_issued.notify(sc_core::SC_ZERO_TIME);
    collective_done->notify(sc_core::SC_ZERO_TIME);
  }
  void report_progress() {
    ++*done_instructions;
    if (!options->progress) return;
    const uint64_t step = std::max<uint64_t>(1, total_instructions / 100);
    if (*done_instructions % step == 0) options->progress(*done_instructions, total_instructions);
  }
};

void CoreRun::complete(const Instruction& in, Engine engine, uint32_t index, bool dma) {
  if (state) execute(in, *state);
  land_signal(in, engine, index, dma);
}

void CoreRun::land_signal(const Instruction& in, Engine engine, uint32_t index, bool dma) {
  if (in.signal.op == isa::SemOp::none) return;
  signal(in);
  last_signal[in.signal.sem] = {engine, index, dma, now_ps()};
  sem_changed.notify(sc_core::SC_ZERO_TIME);
}

void CoreRun::engine_thread(Engine e) {
  try {
    wait_ps(offset_ps);
    const auto& stream = program->stream(e);
    const Instruction* previous = nullptr;
    EngineStats& es = stats.engines[static_cast<size_t>(e)];
    for (uint32_t i = 0; i < stream.size(); ++i) {
      pc[static_cast<size_t>(e)] = i;
      const Instruction& in = stream[i];
      const uint64_t ready = now_ps();
      bool waited = false;
      while (!may_start(e)) {
        waited = true;
        blocked[static_cast<size_t>(e)] = Block::semaphore;
        sc_core::wait(sem_changed);
        if (*abort) return;
      }
      blocked[static_cast<size_t>(e)] = Block::none;
      if (isa::is_collective(in.opcode)) {
        if (!collective(in, e, i, ready, waited)) return;
        previous = &in;
        continue;
      }
      const uint64_t start = now_ps();
      const uint64_t busy = split_ps(instruction_ps(in, *gen, {waited, previous}));
      wait_ps(busy);
      if (*abort) return;
      es.busy_ps += busy;
      ++es.instructions;
      const uint64_t flops = instruction_flops(in);
      stats.flops += flops;
      if (in.opcode == Opcode::matmul) stats.matmul_flops += flops;
      if (options->record) {
        result->instructions.push_back(
            {core_id, e, i, &in, start - start_ps, now_ps() - start_ps, start - ready});
        if (waited)
          result->flows.push_back({core_id, in.wait.sem, last_signal[in.wait.sem].engine,
                                   last_signal[in.wait.sem].index, last_signal[in.wait.sem].dma,
                                   last_signal[in.wait.sem].ps - start_ps, e, i, start - start_ps});
      }
      if (in.opcode == Opcode::dma_copy)
        issue_dma(in, e, i);
      else
        complete(in, e, i, false);
      stats.end_ps = std::max(stats.end_ps, now_ps());
      previous = &in;
      report_progress();
    }
  } catch (...) {
    fail(std::current_exception());
    return;
  }
  pc[static_cast<size_t>(e)] = static_cast<uint32_t>(program->stream(e).size());
  if (--engines_running == 0) dma_issued.notify(sc_core::SC_ZERO_TIME);
}

// The engine holds the collective from its arrival until its rank's finish time: it reads
// src, waits for the other ranks (the communicator runs when the last one arrives), then
// resumes at its finish time, never before now, writes dst and signals. The cost model has
// no part in it: the time comes from the collectives layer.
bool CoreRun::collective(const Instruction& in, Engine e, uint32_t index, uint64_t ready,
                         bool waited) {
  const uint64_t arrival = now_ps();
  const CollectiveSite site{core_id, e, index, program};
  const auto done = hub->arrive(site, state, arrival - start_ps);
  if (done->done)
    collective_done->notify(sc_core::SC_ZERO_TIME);  // the last arrival wakes the others
  while (!done->done) {
    blocked[static_cast<size_t>(e)] = Block::collective;
    sc_core::wait(*collective_done);
    if (*abort) return false;
  }
  blocked[static_cast<size_t>(e)] = Block::none;
  const uint64_t resume = std::max(now_ps(), start_ps + done->finish_ps);
  wait_ps(resume - now_ps());
  if (*abort) return false;
  hub->finish(site, state, *done);
  for (const isa::Operand& op : in.operands)
    if (op.ap.space == isa::MemSpace::HBM)
      (isa::is_output(op.role) ? stats.hbm_write_bytes : stats.hbm_read_bytes) +=
          op.ap.total_elems() * isa::dtype_size(op.ap.dtype);
  EngineStats& es = stats.engines[static_cast<size_t>(e)];
  es.busy_ps += resume - arrival;
  ++es.instructions;
  if (options->record) {
    result->instructions.push_back(
        {core_id, e, index, &in, arrival - start_ps, resume - start_ps, arrival - ready});
    if (waited)
      result->flows.push_back({core_id, in.wait.sem, last_signal[in.wait.sem].engine,
                               last_signal[in.wait.sem].index, last_signal[in.wait.sem].dma,
                               last_signal[in.wait.sem].ps - start_ps, e, index,
                               arrival - start_ps});
  }
  land_signal(in, e, index, false);
  stats.end_ps = std::max(stats.end_ps, now_ps());
  report_progress();
  return true;
}

void CoreRun::issue_dma(const Instruction& in, Engine engine, uint32_t index) {
  uint64_t triggered = now_ps();
  if (in.has_flag(isa::kHwDge)) {
    // The engine's DGE makes the descriptors, one instruction after another, before the
    // transfer can start.
    uint64_t& dge = dge_free[static_cast<size_t>(engine)];
    dge =
        std::max(dge, triggered) + static_cast<uint64_t>(std::llround(gen->dma_hwdge_ns * 1000.0));
    triggered = dge;
  }
  const uint64_t issue =
      triggered + static_cast<uint64_t>(std::llround(gen->dma_issue_ns * 1000.0));
  const uint64_t seq = dma_seq++;
  InFlight& f = in_flight[seq];
  f.inst = &in;
  f.trigger = engine;
  f.index = index;
  f.end_ps = issue;
  f.transfers = plan_dma(in, *gen);
  if (f.transfers.size() >= kMaxTransfers)
    throw std::logic_error(fmt::format("a dma_copy of {} transfers", f.transfers.size()));
  f.outstanding = static_cast<uint32_t>(f.transfers.size());
  // A logical core's DMA instructions take its physical cores' DMA engines in turn.
  const uint32_t first_engine = gen->dma_engines * static_cast<uint32_t>(seq % lnc());
  for (const DmaTransfer& t : f.transfers) {
    const uint32_t lane = first_engine + t.dma_engine;
    uint64_t floor = issue;
    if (dma_core_ps_per_byte > 0) {
      // The core's engines share what they move together, in the order it is issued.
      uint64_t& core_free = dma_core_free.at(lane / gen->dma_engines);
      core_free =
          std::max(issue, core_free) +
          static_cast<uint64_t>(std::llround(static_cast<double>(t.bytes) * dma_core_ps_per_byte));
      floor = std::max(floor, core_free);
    }
    if (t.hbm_bytes > 0) {
      // HBM serves the chip's transfers in issue order at its bandwidth.
      chip->free_ps =
          std::max(issue, chip->free_ps) +
          static_cast<uint64_t>(std::llround(static_cast<double>(t.hbm_bytes) * chip->ps_per_byte));
      floor = std::max(floor, chip->free_ps);
    }
    f.floor_ps.push_back(floor);
    f.lane.push_back(lane);
    stats.dma_bytes += t.bytes;
    ++stats.dma_transfers;
  }
  // Elements moved: an indirect copy's table side moves only the rows its index names,
  // as many elements as the other side holds.
  const isa::AccessPattern* src = in.operand(isa::Role::src);
  const isa::AccessPattern* dst = in.operand(isa::Role::dst);
  const bool indirect = in.operand(isa::Role::index) != nullptr;
  const bool scatter = indirect && in.has_flag(isa::kScatter);
  const uint64_t moved = scatter ? src->total_elems() : dst->total_elems();
  if (src->space == isa::MemSpace::HBM)
    stats.hbm_read_bytes += (indirect ? moved : src->total_elems()) * isa::dtype_size(src->dtype);
  if (dst->space == isa::MemSpace::HBM) {
    stats.hbm_write_bytes += moved * isa::dtype_size(dst->dtype);
    if (in.has_flag(isa::kAddToDst))  // the read of the read-add-write
      stats.hbm_read_bytes += moved * isa::dtype_size(dst->dtype);
  }
  queues[queue_of(engine, in)].order.push_back(seq);
  arriving.push({issue, seq});
  dma_issued.notify(sc_core::SC_ZERO_TIME);
}

// The transfers of DMA instructions whose issue time has come join their engines' lanes, on
// their queue: (triggering engine, queue), so that each engine serves every queue in turn.
void CoreRun::admit_arrivals(uint64_t now) {
  const DmaLane::Done done = [this](const DmaLane::Transfer& t, uint64_t finish) {
    finish_transfer(t, finish);
  };
  while (!arriving.empty() && arriving.top().first <= now) {
    const auto [issue, seq] = arriving.top();
    arriving.pop();
    InFlight& f = in_flight.at(seq);
    const int queue = queue_of(f.trigger, *f.inst);
    for (size_t i = 0; i < f.transfers.size(); ++i) {
      const DmaTransfer& t = f.transfers[i];
      DmaLane& lane = lanes.at(f.lane[i]);
      lane.advance(issue, done);
      lane.add(issue, queue, dma_transfer_ps(t.bytes, t.descriptors, *gen, t.bandwidth_fraction),
               seq * kMaxTransfers + i);
    }
    if (f.transfers.empty()) f.outstanding = 0;
  }
  for (DmaLane& lane : lanes) lane.advance(now, done);
}

void CoreRun::finish_transfer(const DmaLane::Transfer& t, uint64_t finish_ps) {
  InFlight& f = in_flight.at(t.id / kMaxTransfers);
  const size_t i = t.id % kMaxTransfers;
  const uint64_t end = std::max(finish_ps, f.floor_ps[i]);
  dma_held_ps += end - finish_ps;
  f.end_ps = std::max(f.end_ps, end);
  --f.outstanding;
  if (options->record) {
    const DmaTransfer& d = f.transfers[i];
    result->dmas.push_back({core_id, f.trigger, f.index, static_cast<uint32_t>(f.inst->ints[0]),
                            f.lane[i], d.bytes, d.hbm_bytes, t.head_ps - start_ps, end - start_ps,
                            d.descriptors});
  }
}

// A queue completes in order: its first instruction lands once all its transfers are done (at
// the latest of their ends and the landing before it), then the next may.
void CoreRun::land_queues() {
  for (auto& [key, q] : queues) {
    while (!q.order.empty()) {
      const auto it = in_flight.find(q.order.front());
      const InFlight& f = it->second;
      if (f.outstanding > 0) break;
      q.landed_ps = std::max(q.landed_ps, f.end_ps);
      pending.push({q.landed_ps, it->first, f.inst, f.trigger, f.index});
      in_flight.erase(it);
      q.order.pop_front();
    }
  }
}

uint64_t CoreRun::next_dma_event() const {
  uint64_t next = std::numeric_limits<uint64_t>::max();
  if (!arriving.empty()) next = arriving.top().first;
  if (!pending.empty()) next = std::min(next, pending.top().done_ps);
  for (const DmaLane& lane : lanes) next = std::min(next, lane.next_finish());
  return next;
}

void CoreRun::dma_thread() {
  try {
    for (;;) {
      if (*abort) return;
      const uint64_t now = now_ps();
      admit_arrivals(now);
      land_queues();
      while (!pending.empty() && pending.top().done_ps <= now) {
        const PendingDma next = pending.top();
        pending.pop();
        complete(*next.inst, next.trigger, next.index, true);
        stats.end_ps = std::max(stats.end_ps, now_ps());
      }
      const uint64_t next = next_dma_event();
      if (next == std::numeric_limits<uint64_t>::max()) {
        if (engines_running == 0 && in_flight.empty()) break;
        sc_core::wait(dma_issued);
      } else {
        sc_core::wait(sc_core::sc_time(static_cast<double>(next - now), sc_core::SC_PS),
                      dma_issued);
      }
    }
    for (const DmaLane& lane : lanes) stats.dma_busy_ps += lane.busy_ps();
    stats.dma_busy_ps += dma_held_ps;
  } catch (...) {
    fail(std::current_exception());
  }
}

struct Simulator::Impl {
  // A core's processes (its engines, then its DMA), each asleep on its own `go` event between
  // runs. A run wakes them in a chain, in core order and then process order: each process, as
  // it wakes, wakes the next one at once, so every run starts its processes in the same order
  // (the order they were first spawned in), whatever order they went to sleep in.
  static constexpr int kProcesses = isa::kNumEngines + 1;
  struct CoreSlot {
    CoreRun* run = nullptr;
    bool quit = false;
    std::array<sc_core::sc_event, kProcesses> go;
    std::array<sc_core::sc_event*, kProcesses> next{};  // the process to wake after this one
  };
  std::vector<std::unique_ptr<CoreSlot>> slots;  // by core; null until its first timed run
  // Names the processes apart from those of other Simulators alive in the process.
  const uint64_t id = [] {
    static std::atomic<uint64_t> next{0};
    return next++;
  }();

  // The slot of `core`, its processes spawned (asleep) on first use (kernel lock held).
  CoreSlot& slot(uint32_t core) {
    if (slots.size() <= core) slots.resize(core + 1);
    if (slots[core]) return *slots[core];
    auto slot = std::make_unique<CoreSlot>();
    CoreSlot* s = slot.get();
    for (int e = 0; e < kProcesses; ++e) {
      sc_core::sc_spawn_options asleep;
      asleep.dont_initialize();
      asleep.set_sensitivity(&s->go[e]);
      sc_core::sc_spawn(
          [s, e] {
            for (;;) {
              if (s->quit) return;
              if (sc_core::sc_event* next = s->next[e]) next->notify();
              if (e < isa::kNumEngines)
                s->run->engine_thread(static_cast<Engine>(e));
              else
                s->run->dma_thread();
              sc_core::wait(s->go[e]);
            }
          },
          fmt::format("sim{}_core{}_{}", id, core,
                      e < isa::kNumEngines ? isa::engine_name(static_cast<Engine>(e)) : "dma")
              .c_str(),
          &asleep);
    }
    slots[core] = std::move(slot);  // only once all of them exist
    return *s;
  }

  // Hands each core of a run its CoreRun and wakes the first process of the chain.
  void start(const std::vector<std::unique_ptr<CoreRun>>& runs) {
    sc_core::sc_event* previous_next = nullptr;
    sc_core::sc_event** link = &previous_next;
    for (const auto& r : runs) {
      CoreSlot& s = slot(r->core_id);
      s.run = r.get();
      for (int e = 0; e < kProcesses; ++e) {
        *link = &s.go[e];
        link = &s.next[e];
      }
    }
    *link = nullptr;
    if (previous_next) previous_next->notify(sc_core::SC_ZERO_TIME);
  }

  // Lets every process return, so that none waits on an event that goes with this object.
  ~Impl() {
    if (std::none_of(slots.begin(), slots.end(), [](const auto& s) { return s != nullptr; }))
      return;
    std::lock_guard lock(kernel_mutex());
    for (auto& s : slots)
      if (s) {
        s->quit = true;
        for (auto& go : s->go) go.notify(sc_core::SC_ZERO_TIME);
      }
    sc_core::sc_start();
  }

  static ExecError deadlock(const std::vector<std::unique_ptr<CoreRun>>& runs,
                            const CollectiveHub& hub) {
    std::vector<const CoreStreams*> streams;
    for (const auto& r : runs) streams.push_back(r.get());
    return deadlock_error(streams, true, [&hub](const CoreStreams& c, Engine e) {
      return hub.waiting(c.core_id, e);
    });
  }
};

namespace {

// Collectives in functional-only runs: an engine at a collective arrives once, then is asked
// again until its round has run.
class FunctionalCollectives final : public CollectiveStepper {
 public:
  FunctionalCollectives(CollectiveHub& hub, std::span<const FunctionalCore> cores)
      : hub_(hub), cores_(cores) {}

  bool step(size_t core, Engine e, uint32_t index) override {
    const FunctionalCore& c = cores_[core];
    const CollectiveSite site{c.id, e, index, c.program};
    auto& done = arrived_[{core, e}];
    if (!done) done = hub_.arrive(site, c.state, 0);
    if (!done->done) return false;
    hub_.finish(site, c.state, *done);
    arrived_.erase({core, e});
    return true;
  }

  std::string waiting(size_t core, Engine e) const override {
    return hub_.waiting(cores_[core].id, e);
  }

 private:
  CollectiveHub& hub_;
  std::span<const FunctionalCore> cores_;
  std::map<std::pair<size_t, Engine>, std::shared_ptr<const CollectiveDone>> arrived_;
};

}  // namespace

Simulator::Simulator(spec::InstanceConfig instance, spec::GenerationConfig generation)
    : instance_(std::move(instance)),
      generation_(std::move(generation)),
      impl_(std::make_unique<Impl>()) {
  hbm_.resize(instance_.chips);
  cores_.resize(num_cores());
  programs_.assign(num_cores(), nullptr);
}

Simulator::~Simulator() = default;

SparseMemory& Simulator::hbm(uint32_t chip) {
  if (chip >= hbm_.size())
    throw std::out_of_range(
        fmt::format("{} has {} chips, no chip {}", instance_.name, hbm_.size(), chip));
  if (!hbm_[chip]) hbm_[chip] = std::make_unique<SparseMemory>(generation_.hbm_bytes);
  return *hbm_[chip];
}

CoreState& Simulator::core(uint32_t core) {
  if (core >= num_cores())
    throw std::out_of_range(
        fmt::format("{} has {} NeuronCores, no core {}", instance_.name, num_cores(), core));
  if (!cores_[core])
    cores_[core] =
        std::make_unique<CoreState>(*generation_.target, hbm(core / instance_.cores_per_chip));
  return *cores_[core];
}

void Simulator::load(uint32_t core_id, const isa::Program& program) {
  core(core_id);  // checks the index
  for (const isa::TensorDecl& t : program.tensors)
    if (!cores_[core_id]->tensors.count(t.var_id))
      throw std::invalid_argument(
          fmt::format("core {}: tensor '{}' is not bound to HBM", core_id, t.name));
  programs_[core_id] = &program;
}

void Simulator::unload(uint32_t core) {
  programs_.at(core) = nullptr;
}

bool Simulator::loaded(uint32_t core) const {
  return programs_.at(core) != nullptr;
}

RunResult Simulator::run(const RunOptions& options) {
  RunResult result;
  result.instance = instance_.name;
  result.generation = generation_.name;
  result.peak_flops_per_core = generation_.peak_bf16_flops();
  result.hbm_bytes_per_ns = generation_.hbm_bytes_per_ns;
  result.hbm_stacks = generation_.hbm_stacks;

  std::set<uint32_t> loaded;
  for (uint32_t c = 0; c < num_cores(); ++c)
    if (programs_[c]) loaded.insert(c);
  CollectiveHub hub(options.collectives, loaded, options.mode != Mode::timing_only);

  if (options.mode == Mode::functional_only) {
    std::vector<FunctionalCore> cores;
    for (uint32_t c : loaded) cores.push_back({c, programs_[c], cores_[c].get()});
    FunctionalCollectives collectives(hub, cores);
    run_functional(cores, collectives);
    for (uint32_t c : loaded) {
      CoreStats stats;
      for (int e = 0; e < isa::kNumEngines; ++e)
        stats.engines[e].instructions = programs_[c]->streams[e].size();
      result.cores.push_back(stats);
      result.core_ids.push_back(c);
    }
    return result;
  }

  std::lock_guard lock(kernel_mutex());
  init_kernel();
  std::vector<ChipRun> chips(instance_.chips);
  for (ChipRun& chip : chips) chip.ps_per_byte = 1000.0 / generation_.hbm_bytes_per_ns;
  bool abort = false;
  std::exception_ptr error;
  uint64_t done_instructions = 0;
  uint64_t total_instructions = 0;
  for (const isa::Program* p : programs_)
    if (p) total_instructions += p->num_instructions();

  const uint64_t start = now_ps();
  sc_core::sc_event collective_done;
  std::vector<std::unique_ptr<CoreRun>> runs;
  for (uint32_t c = 0; c < num_cores(); ++c) {
    if (!programs_[c]) continue;
    auto r = std::make_unique<CoreRun>();
    r->core_id = c;
    r->program = programs_[c];
    r->state = options.mode == Mode::timing_only ? nullptr : cores_[c].get();
    r->chip = &chips[c / instance_.cores_per_chip];
    r->gen = &generation_;
    r->options = &options;
    r->result = &result;
    r->start_ps = start;
    if (auto it = options.core_start_ps.find(c); it != options.core_start_ps.end())
      r->offset_ps = it->second;
    r->stats.end_ps = start + r->offset_ps;
    r->lanes.assign(generation_.dma_engines * r->lnc(), DmaLane{});
    r->dma_core_free.assign(r->lnc(), 0);
    // No limit beyond the engines' own where the core's rate is their sum.
    r->dma_core_ps_per_byte =
        generation_.dma_core_bytes_per_ns <
                generation_.dma_engines * generation_.dma_engine_bytes_per_ns * (1 - 1e-9)
            ? 1000.0 / generation_.dma_core_bytes_per_ns
            : 0;
    r->stats.physical_cores = r->lnc();
    r->abort = &abort;
    r->error = &error;
    r->done_instructions = &done_instructions;
    r->total_instructions = total_instructions;
    r->hub = &hub;
    r->collective_done = &collective_done;
    runs.push_back(std::move(r));
  }
  // The time every core waits before its first instruction passes before the processes start,
  // so that a core alone (or cores starting together) runs its body the same whatever its start:
  // processes resuming from waits of equal length would take ties, such as two DMAs issued at
  // once, in another order. Cores starting later than the others still wait each on its own.
  uint64_t common = UINT64_MAX;
  for (const auto& r : runs) common = std::min(common, r->offset_ps);
  if (!runs.empty() && common > 0) {
    sc_core::sc_start(sc_core::sc_time(static_cast<double>(common), sc_core::SC_PS));
    for (auto& r : runs) r->offset_ps -= common;
  }
  impl_->start(runs);
  sc_core::sc_start();

  const bool finished = std::all_of(runs.begin(), runs.end(), [](const auto& r) {
    return r->engines_running == 0 && r->pending.empty() && r->in_flight.empty();
  });
  if (!finished || error) {
    // Wake every process still waiting so it returns before its state goes away.
    // Nothing may throw before they have returned (a process left waiting on this run's events
    // would break every later run), so the report is built without letting an error out.
    std::optional<ExecError> report;
    if (!error) {
      try {
        report = Impl::deadlock(runs, hub);
      } catch (...) {
        report = ExecError(ExecError::Kind::deadlock,
                           "deadlock: no engine can go on (no report could be built)");
      }
    }
    abort = true;
    for (auto& r : runs) {
      r->sem_changed.notify(sc_core::SC_ZERO_TIME);
      r->dma_issued.notify(sc_core::SC_ZERO_TIME);
    }
    collective_done.notify(sc_core::SC_ZERO_TIME);
    sc_core::sc_start();
    if (error) std::rethrow_exception(error);
    throw *report;
  }
  for (auto& r : runs) {
    result.total_ps = std::max(result.total_ps, r->stats.end_ps - start);
    r->stats.end_ps -= start;
    result.cores.push_back(r->stats);
    result.core_ids.push_back(r->core_id);
  }
  if (options.progress) options.progress(total_instructions, total_instructions);
  return result;
}

}  // namespace neuronsim::sim
