#include "neuronsim/sim/device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "device_memory.h"
#include "neuronsim/isa/validate.h"
#include "neuronsim/sim/cost_model.h"
#include "neuronsim/sim/simulator.h"
#include "trace_sessions.h"
#include "work_queue.h"

namespace neuronsim::sim {
namespace {

// Handing work to the worker thread and its completion back costs two sleeps and two
// wake-ups: two futex calls and two cross-CPU interrupts, tens of microseconds on a virtual
// machine, more than a small kernel's simulation. So each side first watches for the other
// a short while (a counter that changes under the mutex) and only then sleeps; notifying a
// thread that is not asleep costs nothing. Bounded, so an idle device uses no CPU, and off
// with a single hardware thread, where watching would only delay the other side.
constexpr auto kWatch = std::chrono::microseconds(200);

// Returns once `counter` differs from `seen` or the watch is over.
void watch(const std::atomic<uint64_t>& counter, uint64_t seen) {
  static const bool enabled = std::thread::hardware_concurrency() > 1;
  if (!enabled) return;
  const auto until = std::chrono::steady_clock::now() + kWatch;
  while (counter.load(std::memory_order_acquire) == seen) {
    for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() > until) return;
  }
}

// Waits on `cv` (lock held) until `ready()`, watching `counter` (which the other side changes
// under the lock before it notifies) a while first instead of sleeping at once.
template <typename Ready>
void watch_then_wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     const std::atomic<uint64_t>& counter, Ready ready) {
  if (!ready()) {
    const uint64_t seen = counter.load(std::memory_order_relaxed);
    lock.unlock();
    watch(counter, seen);
    lock.lock();
  }
  cv.wait(lock, ready);
}

}  // namespace

const isa::TensorDecl& LoadedProgram::tensor(std::string_view name) const {
  if (const isa::TensorDecl* t = program_.find_tensor(name)) return *t;
  std::vector<std::string> names;
  for (const isa::TensorDecl& t : program_.tensors) names.push_back(t.name);
  throw std::invalid_argument(fmt::format("program '{}' has no tensor '{}' (tensors: {})", name_,
                                          name, fmt::join(names, ", ")));
}

LoadedProgram::~LoadedProgram() {
  if (release_) release_();
}

namespace {

bool is_input(const isa::TensorDecl& t) {
  return t.kind == isa::TensorKind::input;
}
bool is_output(const isa::TensorDecl& t) {
  return t.kind == isa::TensorKind::output;
}

}  // namespace

// A device is its simulator and three rooms beside it: memory (device_memory.h), the work queue
// (work_queue.h) and the trace sessions (trace_sessions.h), and the worker thread that takes
// what may run from the queue and simulates it in windows.
struct Device::Impl : std::enable_shared_from_this<Device::Impl> {
  Impl(spec::InstanceConfig instance, spec::GenerationConfig generation, DeviceOptions opts)
      : sim(std::move(instance), std::move(generation)),
        options(std::move(opts)),
        memory(sim),
        work(sim.num_cores()) {}

  Simulator sim;
  DeviceOptions options;
  DeviceMemory memory;

  // The queues, the completions, the host clock and the sessions (mu).
  mutable std::mutex mu;
  WorkQueue work;
  TraceSessions traces;
  std::condition_variable work_cv;       // the worker waits here for work
  std::condition_variable done_cv;       // callers wait here for completions
  std::atomic<uint64_t> pushes{0};       // work pushed for the worker so far (under mu; see watch)
  std::atomic<uint64_t> completions{0};  // batches completed so far (changed under mu)
  bool stop = false;
  std::thread worker;
  // The host's clock: its own work (host_work) and the ends it waited for move it on; work
  // enqueued starts no earlier on the device.
  uint64_t host_ps = 0;
  bool busy = false;  // a thread is stepping (the worker, or a caller of run on an idle device)

  uint32_t chip_of(uint32_t core) const {
    if (core >= sim.num_cores())
      throw std::out_of_range(fmt::format("{} has {} NeuronCores, no core {}", sim.instance().name,
                                          sim.num_cores(), core));
    return core / sim.instance().cores_per_chip;
  }

  uint64_t push(Work w, bool wake_worker = true) {
    place(w);
    w.submit_ps = host_ps;
    const uint64_t seq = work.push(std::move(w));
    if (wake_worker) notify_worker();  // work a caller runs itself is not the worker's
    return seq;
  }

  // Tells the worker there is work, or that the device ends (mu held).
  void notify_worker() {
    pushes.fetch_add(1, std::memory_order_release);  // ends a watch
    work_cv.notify_one();                            // wakes a sleep
  }

  // What work reads and writes, computed once when it is queued.
  void place(Work& w) const {
    if (w.is_hold) {  // touches what it says it does (a collective's tensors), both ways
      const uint32_t chip = chip_of(w.core);
      for (const TensorBinding& t : w.hold_touches) {
        w.reads.push_back(memory.range(chip, t.address, t.size));
        w.writes.push_back(memory.range(chip, t.address, t.size));
      }
      return;
    }
    if (w.is_copy) {
      w.reads.push_back(memory.range(w.copy.src_chip, w.copy.src, w.copy.bytes));
      w.writes.push_back(memory.range(w.copy.dst_chip, w.copy.dst, w.copy.bytes));
      return;
    }
    const uint32_t chip = w.core / sim.instance().cores_per_chip;
    for (const isa::TensorDecl& t : w.execution.program->program().tensors)
      if (auto b = w.execution.tensors.find(t.var_id); b != w.execution.tensors.end())
        (is_output(t) ? w.writes : w.reads)
            .push_back(memory.range(chip, b->second.address, b->second.size));
  }

  // ---- the worker -----------------------------------------------------------

  void work_loop() {
    std::unique_lock lock(mu);
    for (;;) {
      watch_then_wait(lock, work_cv, pushes, [&] { return stop || (!work.idle() && !busy); });
      if (!step(lock)) {
        if (stop && work.idle()) return;
        work_cv.wait(lock);  // a group waits for members that are not at their heads yet
      }
    }
  }

  // Runs what can run next and records its completions (mu held, released while simulating).
  // False when nothing could run. Only one thread steps at a time (busy).
  bool step(std::unique_lock<std::mutex>& lock) {
    std::vector<Work*> batch = work.take();
    if (batch.empty()) return false;
    busy = true;
    std::vector<Completion> done;
    try {
      done = run_batch(batch, lock);
    } catch (...) {  // anything the windows did not catch fails the batch, never the worker
      if (!lock.owns_lock()) lock.lock();
      done.clear();
      for (Work* w : batch) {
        Completion c;
        c.seq = w->seq;
        c.core = w->core;
        c.error = std::current_exception();
        c.start_ps = c.end_ps = work.free_ps(w->queue);
        done.push_back(std::move(c));
      }
    }
    for (size_t i = 0; i < batch.size(); ++i) finish(*batch[i], done[i]);
    work.finish(batch, std::move(done));
    busy = false;
    completions.fetch_add(1, std::memory_order_release);
    done_cv.notify_all();
    if (!work.idle()) notify_worker();  // a caller stepped: what is left is the worker's
    return true;
  }

  // When work may start: after its queue, what it must follow (after_ps), the last writes of
  // what it reads, the last reads and writes of what it writes, and its submission by the
  // host; and how long of that the device waited for the host alone (mu held).
  struct Start {
    uint64_t at_ps = 0, host_bound_ps = 0;
  };
  Start start_of(const Work& w) const {
    const uint64_t ready = std::max(work.ready_ps(w), memory.ready_ps(w.reads, w.writes));
    if (options.mode == Mode::functional_only) return {ready, 0};
    return {std::max(ready, w.submit_ps), w.submit_ps > ready ? w.submit_ps - ready : 0};
  }

  // Work that is done moves the times of what it touched on, and the sessions record it (mu
  // held); the queue moves on after (WorkQueue::finish).
  void finish(const Work& w, Completion& c) {
    if (!w.is_copy) c.program = w.execution.program;
    if (!c.error) c.host_bound_ps = w.host_bound_ps;
    memory.touched(w.reads, w.writes, c.end_ps);
    if (!w.is_copy && !c.error) traces.record_execution(w, c);
    if (w.is_hold && !c.error) traces.record_hold(w, c);
  }

  // Runs a batch with mu released; returns the completions (mu held again).
  std::vector<Completion> run_batch(const std::vector<Work*>& batch,
                                    std::unique_lock<std::mutex>& lock) {
    std::vector<uint64_t> starts;
    for (Work* w : batch) {
      const Start s = start_of(*w);
      starts.push_back(s.at_ps);
      w->host_bound_ps = s.host_bound_ps;
    }
    if (batch.front()->is_copy) {
      lock.unlock();
      std::vector<Completion> out;
      for (size_t i = 0; i < batch.size(); ++i) out.push_back(run_copy(*batch[i], starts[i]));
      lock.lock();
      return out;
    }
    const bool record = traces.records_any(batch);
    lock.unlock();
    // Several executions that are no group share one window; when it faults, each runs again
    // alone to find which one faulted. What the window wrote is undone first, so that an
    // execution that updates its own bytes (out = in + 1 in place) is applied once. A single
    // execution or a group never runs again, and keeps no log.
    const bool may_rerun = batch.size() > 1 && !batch.front()->group;
    UndoLog undo;
    std::vector<Completion> out = simulate(batch, starts, record, may_rerun ? &undo : nullptr);
    if (out.front().error && may_rerun) {
      const std::exception_ptr fault = out.front().error;
      undo.restore();
      out.clear();
      for (size_t i = 0; i < batch.size(); ++i) {
        out.push_back(simulate({batch[i]}, {starts[i]}, record).front());
        out.back().batch_fault = fault;
        out.back().batch_size = static_cast<uint32_t>(batch.size());
      }
    }
    lock.lock();
    return out;
  }

  // One window: the executions of `batch`, each starting at its start on the device clock.
  // With `undo`, it keeps there what the executions' HBM writes overwrite.
  std::vector<Completion> simulate(const std::vector<Work*>& batch,
                                   const std::vector<uint64_t>& starts, bool record,
                                   UndoLog* undo = nullptr) {
    const uint64_t base = *std::min_element(starts.begin(), starts.end());
    RunOptions ro;
    ro.mode = options.mode;
    ro.record = record;
    ro.progress = options.progress;
    if (batch.front()->group) ro.collectives = *batch.front()->group;
    std::vector<Completion> out(batch.size());
    std::vector<uint64_t> launches(batch.size(), 0);
    std::vector<uint32_t> loaded;
    std::exception_ptr error;
    auto result = std::make_shared<RunResult>();
    try {
      for (size_t i = 0; i < batch.size(); ++i) {
        const Execution& e = batch[i]->execution;
        const LoadedProgram& p = *e.program;
        CoreState& cs = sim.core(p.core());
        cs.tensors = p.fixed_;
        uint64_t io = 0;
        for (const isa::TensorDecl& t : p.program().tensors) {
          if (t.kind != isa::TensorKind::input && t.kind != isa::TensorKind::output) continue;
          ++io;
          auto b = e.tensors.find(t.var_id);
          if (b == e.tensors.end())
            throw std::invalid_argument(fmt::format(
                "{}: {} '{}' of program '{}' is not bound", e.name.empty() ? p.name() : e.name,
                isa::tensor_kind_name(t.kind), t.name, p.name()));
          cs.tensors[t.var_id] = b->second;
        }
        cs.fail_on_nan = options.fail_on_nan;
        cs.fp8 = p.fp8_;
        sim.load(p.core(), p.program());
        loaded.push_back(p.core());
        cs.undo = undo;
        launches[i] = launch_ps(io);
        if (starts[i] + launches[i] > base)
          ro.core_start_ps[p.core()] = starts[i] + launches[i] - base;
      }
      *result = sim.run(ro);
      result->start_ps = base;
      for (size_t i = 0; i < batch.size(); ++i)
        for (size_t k = 0; k < result->core_ids.size(); ++k)
          if (result->core_ids[k] == batch[i]->core) result->cores[k].launch_ps = launches[i];
    } catch (...) {
      error = std::current_exception();
    }
    for (uint32_t core : loaded) {
      sim.unload(core);
      sim.core(core).undo = nullptr;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      Completion& c = out[i];
      const Work& w = *batch[i];
      c.seq = w.seq;
      c.core = w.core;
      c.name = w.execution.name;
      c.start_ps = starts[i];
      c.end_ps = starts[i];
      c.error = error;
      if (error) continue;
      c.launch_ps = launches[i];
      for (size_t k = 0; k < result->core_ids.size(); ++k)
        if (result->core_ids[k] == w.core && options.mode != Mode::functional_only)
          c.end_ps = std::max(c.end_ps, base + result->cores[k].end_ps);
      c.run = result;
    }
    return out;
  }

  // The runtime's cost of starting an execution with `tensors` inputs and outputs (cost_model.h,
  // docs/cost-model.md §6); none without timing or when the options leave it out.
  uint64_t launch_ps(uint64_t tensors) const {
    if (!options.launch || options.mode == Mode::functional_only) return 0;
    return sim::launch_ps(tensors, sim.generation());
  }

  Completion run_copy(const Work& w, uint64_t start) {
    Completion c;
    c.seq = w.seq;
    c.core = w.core;
    c.name = w.copy.name;
    c.start_ps = c.end_ps = start;
    try {
      const Copy& k = w.copy;
      if (options.mode != Mode::timing_only && k.bytes > 0) {
        std::vector<uint8_t> bytes(k.bytes);
        sim.hbm(k.src_chip).read(k.src, bytes.data(), k.bytes);
        sim.hbm(k.dst_chip).write(k.dst, bytes.data(), k.bytes);
      }
      if (options.mode != Mode::functional_only)
        c.end_ps = w.is_hold ? std::max(start, w.hold_until_ps)
                             : start + copy_ps(k.bytes, k.lnc, sim.generation());
    } catch (...) {
      c.error = std::current_exception();
    }
    return c;
  }
};

// ---- Device ---------------------------------------------------------------

std::unique_ptr<Device> Device::open(const std::string& instance, DeviceOptions options) {
  spec::InstanceConfig inst = spec::load_instance(instance);
  spec::GenerationConfig gen = spec::load_generation(inst.generation);
  return std::make_unique<Device>(std::move(inst), std::move(gen), std::move(options));
}

std::unique_ptr<Device> Device::open_generation(const std::string& generation,
                                                DeviceOptions options) {
  spec::GenerationConfig gen = spec::load_generation(generation);
  for (const std::string& name : spec::instance_names()) {
    spec::InstanceConfig inst = spec::load_instance(name);
    if (inst.generation == generation && inst.chips == 1)
      return std::make_unique<Device>(std::move(inst), std::move(gen), std::move(options));
  }
  spec::InstanceConfig chip;
  chip.name = generation + "-chip";
  chip.generation = generation;
  chip.cores_per_chip = gen.cores_per_chip;
  chip.topology = "none";
  chip.generation_config = gen;
  return std::make_unique<Device>(std::move(chip), std::move(gen), std::move(options));
}

Device::Device(spec::InstanceConfig instance, spec::GenerationConfig generation,
               DeviceOptions options)
    : impl_(
          std::make_shared<Impl>(std::move(instance), std::move(generation), std::move(options))) {
  impl_->worker = std::thread([impl = impl_.get()] { impl->work_loop(); });
}

Device::~Device() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
    impl_->notify_worker();
  }
  if (impl_->worker.joinable()) impl_->worker.join();
}

const spec::InstanceConfig& Device::instance() const {
  return impl_->sim.instance();
}
const spec::GenerationConfig& Device::generation() const {
  return impl_->sim.generation();
}
uint32_t Device::num_cores() const {
  return impl_->sim.num_cores();
}
uint32_t Device::chip_of(uint32_t core) const {
  return impl_->chip_of(core);
}
Mode Device::mode() const {
  return impl_->options.mode;
}

std::optional<uint64_t> Device::allocate(uint32_t chip, uint64_t size, uint8_t* host) {
  return impl_->memory.allocate(chip, size, host);
}

void Device::free(uint32_t chip, uint64_t address) {
  impl_->memory.free(chip, address);
}

Device::MemoryUse Device::memory(uint32_t chip) const {
  return impl_->memory.use(chip);
}

void Device::write(uint32_t chip, uint64_t address, std::span<const uint8_t> bytes) {
  impl_->memory.check_chip(chip);
  impl_->sim.hbm(chip).write(address, bytes.data(), bytes.size());
}

void Device::read(uint32_t chip, uint64_t address, std::span<uint8_t> bytes) const {
  impl_->memory.check_chip(chip);
  impl_->sim.hbm(chip).read(address, bytes.data(), bytes.size());
}

ProgramRef Device::load(uint32_t core, isa::Program program, std::string name, isa::Fp8Config fp8) {
  const uint32_t chip = chip_of(core);
  if (program.target != generation().name)
    throw std::invalid_argument(fmt::format("program '{}' was built for {}, but {} is {}", name,
                                            program.target, instance().name, generation().name));
  isa::validate(program);
  // A program compiled for a logical core of several physical cores runs on the first of them,
  // its partners being the next ones on the chip.
  if (core % program.lnc != 0 || instance().cores_per_chip % program.lnc != 0)
    throw std::invalid_argument(fmt::format(
        "program '{}' is compiled for a logical core of {} physical cores, which core {} of {} "
        "({} per chip) does not begin",
        name, program.lnc, core, instance().name, instance().cores_per_chip));
  std::shared_ptr<LoadedProgram> p(new LoadedProgram);
  p->program_ = std::move(program);
  p->fp8_ = fp8;
  p->core_ = core;
  p->name_ = std::move(name);
  const std::vector<uint64_t> placed =
      impl_->memory.place_fixed(chip, p->program_, p->name_, p->fixed_);
  p->release_ = [weak = std::weak_ptr<Impl>(impl_), chip, placed] {
    if (auto impl = weak.lock())
      for (uint64_t a : placed) impl->memory.free(chip, a);
  };
  return p;
}

ProgramRef Device::load(uint32_t core, const isa::neff::Neff& neff, std::string name) {
  isa::Program program = isa::from_neff(neff, name);
  const isa::Fp8Config fp8 = neff.subgraphs.empty() ? isa::Fp8Config{} : neff.subgraphs.front().fp8;
  return load(core, std::move(program), std::move(name), fp8);
}

Bindings Device::allocate_io(const LoadedProgram& program) {
  const uint32_t chip = chip_of(program.core());
  Bindings out;
  for (const isa::TensorDecl& t : program.program().tensors) {
    if (!is_input(t) && !is_output(t)) continue;
    const auto addr = allocate(chip, t.size_bytes());
    if (!addr)
      throw std::runtime_error(
          fmt::format("program '{}': {} '{}' of {} bytes does not fit the HBM of chip {}",
                      program.name(), isa::tensor_kind_name(t.kind), t.name, t.size_bytes(), chip));
    out[t.var_id] = TensorBinding{*addr, t.size_bytes()};
  }
  return out;
}

namespace {
const TensorBinding& bound(const LoadedProgram& program, const Bindings& bindings,
                           const isa::TensorDecl& t) {
  auto it = bindings.find(t.var_id);
  if (it == bindings.end())
    throw std::invalid_argument(
        fmt::format("program '{}': tensor '{}' is not bound", program.name(), t.name));
  return it->second;
}
}  // namespace

void Device::write_tensor(const LoadedProgram& program, const Bindings& bindings,
                          std::string_view name, std::span<const uint8_t> bytes) {
  const isa::TensorDecl& t = program.tensor(name);
  if (bytes.size() != t.size_bytes())
    throw std::invalid_argument(fmt::format("program '{}': tensor '{}' holds {} bytes, not {}",
                                            program.name(), name, t.size_bytes(), bytes.size()));
  write(chip_of(program.core()), bound(program, bindings, t).address, bytes);
}

std::vector<uint8_t> Device::read_tensor(const LoadedProgram& program, const Bindings& bindings,
                                         std::string_view name) const {
  const isa::TensorDecl& t = program.tensor(name);
  std::vector<uint8_t> out(t.size_bytes());
  read(chip_of(program.core()), bound(program, bindings, t).address, out);
  return out;
}

uint64_t Device::enqueue(Execution execution) {
  if (!execution.program) throw std::invalid_argument("enqueue: an execution without a program");
  Work w;
  w.core = execution.program->core();
  w.execution = std::move(execution);
  std::lock_guard lock(impl_->mu);
  return impl_->push(std::move(w));
}

uint64_t Device::enqueue(uint32_t core, Copy copy) {
  chip_of(core);
  impl_->memory.check_chip(copy.src_chip);
  impl_->memory.check_chip(copy.dst_chip);
  Work w;
  w.core = core;
  w.is_copy = true;
  w.copy = std::move(copy);
  std::lock_guard lock(impl_->mu);
  return impl_->push(std::move(w));
}

uint64_t Device::enqueue(uint32_t core, Hold hold) {
  chip_of(core);
  Work w;
  w.core = core;
  w.is_copy = w.is_hold = true;
  w.hold_until_ps = hold.until_ps;
  w.hold_touches = std::move(hold.touches);
  w.copy.name = std::move(hold.name);
  std::lock_guard lock(impl_->mu);
  return impl_->push(std::move(w));
}

uint64_t Device::side_ready_ps(uint32_t core, const std::vector<TensorBinding>& touches) const {
  chip_of(core);
  Work w;  // the hold as it would be queued now, asked when it would start
  w.core = core;
  w.is_copy = w.is_hold = true;
  w.hold_touches = touches;
  std::lock_guard lock(impl_->mu);
  impl_->place(w);
  w.queue = impl_->work.side_queue(core);
  w.submit_ps = impl_->host_ps;
  return impl_->start_of(w).at_ps;
}

std::vector<uint64_t> Device::enqueue_group(std::vector<Execution> executions,
                                            CollectiveBinding collectives) {
  auto binding = std::make_shared<const CollectiveBinding>(std::move(collectives));
  std::set<uint32_t> cores;
  for (const Execution& e : executions) {
    if (!e.program) throw std::invalid_argument("enqueue_group: an execution without a program");
    if (!cores.insert(e.program->core()).second)
      throw std::invalid_argument(
          fmt::format("enqueue_group: two executions on core {}", e.program->core()));
  }
  std::vector<uint64_t> seqs;
  std::lock_guard lock(impl_->mu);
  for (Execution& e : executions) {
    Work w;
    w.core = e.program->core();
    w.execution = std::move(e);
    w.group = binding;
    w.group_size = executions.size();
    seqs.push_back(impl_->push(std::move(w)));
  }
  return seqs;
}

bool Device::done(uint64_t seq) const {
  std::lock_guard lock(impl_->mu);
  return impl_->work.done(seq);
}

Completion Device::wait(uint64_t seq, Host host) {
  std::unique_lock lock(impl_->mu);
  if (!impl_->work.issued(seq))
    throw std::invalid_argument(fmt::format("wait: no work with sequence number {}", seq));
  watch_then_wait(lock, impl_->done_cv, impl_->completions, [&] { return impl_->work.done(seq); });
  std::optional<Completion> taken = impl_->work.take_completion(seq);
  if (!taken)
    throw std::invalid_argument(fmt::format("wait: the completion of {} was already taken", seq));
  Completion c = std::move(*taken);
  // The host has waited for this: what it queues from now on starts no earlier.
  if (host == Host::waits) impl_->host_ps = std::max(impl_->host_ps, c.end_ps);
  return c;
}

Completion Device::run(Execution execution) {
  Completion c = complete(std::move(execution));
  if (c.error) std::rethrow_exception(c.error);
  return c;
}

ProgramRun Device::run_program(uint32_t core, isa::Program program, std::string name,
                               const std::map<std::string, std::vector<uint8_t>>& inputs,
                               bool record, isa::Fp8Config fp8) {
  ProgramRun r;
  r.program = load(core, std::move(program), name, fp8);
  const Bindings io = allocate_io(*r.program);
  for (const auto& [tensor, bytes] : inputs) write_tensor(*r.program, io, tensor, bytes);
  const uint64_t session = record ? start_trace() : 0;
  r.completion = run({r.program, io, std::move(name)});
  if (session) r.trace = stop_trace(session);
  if (impl_->options.mode != Mode::timing_only)
    for (const isa::TensorDecl& t : r.program->program().tensors)
      if (t.kind == isa::TensorKind::output)
        r.outputs[t.name] = read_tensor(*r.program, io, t.name);
  return r;
}

Completion Device::complete(Execution execution, Host host) {
  if (!execution.program) throw std::invalid_argument("run: an execution without a program");
  uint64_t seq = 0;
  {
    // On an idle device a functional-only execution runs on the caller's thread: no hand-off
    // to the worker and back (two thread switches, most of a small op's cost). Functional-only
    // windows never touch SystemC, so which thread runs them does not matter.
    std::unique_lock lock(impl_->mu);
    const bool inline_run =
        impl_->options.mode == Mode::functional_only && !impl_->busy && impl_->work.idle();
    Work w;
    w.core = execution.program->core();
    w.execution = std::move(execution);
    seq = impl_->push(std::move(w), !inline_run);
    if (inline_run) impl_->step(lock);
  }
  return wait(seq, host);
}

void Device::synchronize(Host host) {
  std::unique_lock lock(impl_->mu);
  impl_->done_cv.wait(lock, [&] { return impl_->work.idle(); });
  if (host == Host::waits) impl_->host_ps = std::max(impl_->host_ps, impl_->work.clock_ps());
}

uint64_t Device::now_ps() const {
  std::lock_guard lock(impl_->mu);
  return impl_->work.clock_ps();
}

void Device::host_work(uint64_t ps, std::string name) {
  std::lock_guard lock(impl_->mu);
  if (impl_->options.mode == Mode::functional_only || ps == 0) return;
  const uint64_t start = impl_->host_ps;
  impl_->host_ps += ps;
  impl_->traces.record_host(name, start, impl_->host_ps);
}

uint64_t Device::host_ps() const {
  std::lock_guard lock(impl_->mu);
  return impl_->host_ps;
}

uint64_t Device::start_trace(TraceLimits limits) {
  std::lock_guard lock(impl_->mu);
  return impl_->traces.start(std::move(limits));
}

TraceSession Device::stop_trace(uint64_t session) {
  std::unique_lock lock(impl_->mu);
  if (!impl_->traces.has(session))
    throw std::invalid_argument(fmt::format("stop_trace: no trace session {}", session));
  const uint64_t last = impl_->work.last_seq();
  impl_->done_cv.wait(lock, [&] { return impl_->work.done_through(last); });
  return impl_->traces.stop(session);
}

}  // namespace neuronsim::sim
