// The process's simulated instance and the one path by which kernels reach it.
#include "runtime/backend.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cmath>

#include "profiler/profiler.h"
#include "runtime/op_tracking.h"

namespace neuronsim::pytorch {

void fail(const std::string& message) {
  TORCH_CHECK(false, message);
}

namespace {

sim::Environment read_env_or_throw() {
  sim::Environment env;
  if (auto err = sim::read_environment(env)) fail("neuron: " + *err);
  if (env.visible.empty()) fail("neuron: no NeuronCores are visible");
  return env;
}

}  // namespace

Backend::Backend() : env_(read_env_or_throw()) {
  sim::DeviceOptions options;
  options.mode = env_.mode;
  options.fail_on_nan = env_.fail_on_nan;
  options.launch = env_.launch;
  device_ = std::make_unique<sim::Device>(env_.instance, env_.generation, options);
  if (env_.host_dispatch)
    host_op_ps_ = static_cast<uint64_t>(std::llround(env_.generation.host_op_ns * 1000));
}

void Backend::dispatch(const std::string& op) {
  device_->host_work(host_op_ps_, op);
}

void Backend::host_reads() {
  op_tracking::device_works();
  device_->synchronize();
}

namespace {
std::atomic<Backend*> opened{nullptr};  // set once get() has opened the backend
}  // namespace

Backend& Backend::get() {
  // Never destroyed: tensors may be freed during interpreter shutdown, after static
  // destructors would have run.
  static Backend* backend = [] {
    Backend* b = new Backend();
    opened = b;
    return b;
  }();
  return *backend;
}

bool Backend::is_open() {
  return opened.load() != nullptr;
}

int Backend::device_count_noexcept() {
  // Until the device opens, the environment is read afresh: a launcher may still set
  // NEURON_RT_VISIBLE_CORES (as TorchNeuron does in init_process_group), and the runtime
  // fixes what it sees only when it starts.
  if (Backend* b = opened.load()) return b->device_count();
  sim::Environment env;
  if (sim::read_environment(env)) return 0;
  return static_cast<int>(env.visible.size());
}

void Backend::check_index(int index) const {
  if (index < 0 || index >= device_count())
    fail(fmt::format("neuron:{} does not exist: {} has {} visible NeuronCore{} (neuron:0-{})",
                     index, env_.instance_name, device_count(), device_count() == 1 ? "" : "s",
                     device_count() - 1));
}

sim::ProgramRef Backend::program(int index, const std::string& key,
                                 const std::function<isa::Program()>& build, std::string* refusal,
                                 bool for_logical_core) {
  const std::string full = fmt::format("{}@{}", key, index);
  const auto kept = [&](const Built& b) {
    if (refusal != nullptr) *refusal = b.refusal;
    return b.program;
  };
  {
    std::lock_guard lock(mu_);
    if (auto it = programs_.find(full); it != programs_.end()) return kept(it->second);
  }
  isa::Program built;
  try {
    built = build();
  } catch (const std::invalid_argument& refused) {
    // The kernel does not cover this case: remembered, so the op falls back at once next time.
    std::lock_guard lock(mu_);
    return kept(programs_.emplace(full, Built{nullptr, refused.what()}).first->second);
  }
  sim::ProgramRef loaded = load(index, std::move(built), key, for_logical_core);
  uint64_t held = 0;  // its constants and scratch, in HBM while the program stays loaded
  for (const isa::TensorDecl& t : loaded->program().tensors)
    if (t.kind == isa::TensorKind::constant || t.kind == isa::TensorKind::scratch)
      held += t.size_bytes();
  std::lock_guard lock(mu_);
  program_bytes_[index] += held;
  return kept(programs_.emplace(full, Built{std::move(loaded), {}}).first->second);
}

sim::ProgramRef Backend::load(int index, isa::Program built, const std::string& name,
                              bool for_logical_core) {
  if (for_logical_core) built.lnc = env_.lnc;
  sim::ProgramRef loaded = device_->load(core_of(index), std::move(built), name);
  std::lock_guard lock(mu_);
  used_.insert(index);
  return loaded;
}

uint64_t Backend::program_bytes(int index) const {
  std::lock_guard lock(mu_);
  const auto it = program_bytes_.find(index);
  return it == program_bytes_.end() ? 0 : it->second;
}

void Backend::run_kernel(const std::string& op, const sim::ProgramRef& program,
                         const std::vector<NamedBinding>& tensors) {
  sim::Execution execution{program, {}, op};
  for (const auto& [name, binding] : tensors)
    execution.tensors[program->tensor(name).var_id] = binding;
  const int64_t launched = profiling::recording() ? profiling::host_now_ns() : 0;
  dispatch(op);
  const sim::Completion done = device_->complete(std::move(execution), host_waits());
  ++kernels_run_;
  op_tracking::device_works(op);
  if (launched) profile(done, "kernel", launched);
  if (done.error) {
    try {
      std::rethrow_exception(done.error);
    } catch (const std::exception& e) {
      fail(fmt::format("{}: the kernel faulted on the simulated NeuronCore: {}", op, e.what()));
    }
  }
}

void Backend::copy(int dst_index, uint64_t dst, int src_index, uint64_t src, uint64_t bytes) {
  sim::Copy c{chip_of(src_index), chip_of(dst_index), src, dst, bytes, "aten::copy_", env_.lnc};
  const int64_t launched = profiling::recording() ? profiling::host_now_ns() : 0;
  dispatch(c.name);
  op_tracking::device_works(c.name);
  const sim::Completion done =
      device_->wait(device_->enqueue(core_of(dst_index), std::move(c)), host_waits());
  if (done.error) std::rethrow_exception(done.error);
  if (launched) profile(done, "copy", launched);
}

int Backend::index_of_core(uint32_t core) const {
  for (int i = 0; i < device_count(); ++i)
    if (core_of(i) == core) return i;
  return -1;
}

void Backend::profile(const sim::Completion& done, const char* kind, int64_t launched_ns) {
  profiling::DeviceEvent e;
  e.name = done.name;
  e.kind = kind;
  e.device = index_of_core(done.core);
  e.core = done.core;
  e.start_ps = done.start_ps;
  e.end_ps = done.end_ps;
  e.launched_ns = launched_ns;
  if (done.run)
    for (size_t k = 0; k < done.run->core_ids.size(); ++k) {
      if (done.run->core_ids[k] != done.core) continue;
      const sim::CoreStats& c = done.run->cores[k];
      for (size_t g = 0; g < e.engine_busy_ps.size(); ++g)
        e.engine_busy_ps[g] = c.engines[g].busy_ps;
      e.dma_bytes = c.dma_bytes;
      e.flops = c.flops;
    }
  profiling::record(std::move(e));
}

}  // namespace neuronsim::pytorch
