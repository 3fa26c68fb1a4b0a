// neuronsim._C: what the Python package needs from the backend. Importing it registers
// the allocator, the guard, the hooks and the kernels (static registrations).
#include <string>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/extension.h>

#include "aten/fallback.h"
#include "aten/kernel_call.h"
#include "aten/refusal.h"
#include "compiler/graph.h"
#include "distributed/process_group.h"
#include "neuronsim/sim/types.h"
#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/profile_summary.h"
#include "nki/kernel.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/generator.h"
#include "runtime/op_tracking.h"
#include "runtime/place.h"

namespace py = pybind11;
using neuronsim::pytorch::Backend;

namespace {

py::dict device_properties(int index) {
  Backend& b = Backend::get();
  b.check_index(index);
  const auto& env = b.env();
  py::dict d;
  d["name"] =
      fmt::format("NeuronCore ({} {}, simulated)", env.instance.generation, env.instance_name);
  d["instance"] = env.instance_name;
  d["generation"] = env.instance.generation;
  d["chip"] = b.chip_of(index);
  d["physical_core"] = b.core_of(index);
  d["physical_cores_per_device"] = env.lnc;
  // The HBM stack beside the core, which its tensors are allocated in (allocator.h).
  d["total_memory"] = neuronsim::pytorch::hbm_stack_bytes();
  d["physical_cores_per_hbm_stack"] = neuronsim::pytorch::cores_per_hbm_stack();
  // The rates a roofline takes, from the chip config: TensorE's BF16 peak of the device's
  // physical cores (its kernels are compiled for all of them), their DMA engines together, and
  // its HBM stack.
  const auto& g = env.generation;
  d["peak_bf16_flops"] = g.peak_bf16_flops() * env.lnc;
  d["dma_bytes_per_s"] = g.dma_core_bytes_per_ns * 1e9 * env.lnc;  // at most the engines' sum
  d["hbm_bytes_per_s"] = g.hbm_bytes_per_ns * 1e9 / std::max<uint32_t>(1, g.hbm_stacks);
  // The host's dispatch of one op (0 when NEURONSIM_HOST_DISPATCH=0 leaves it out).
  d["host_dispatch_s"] = static_cast<double>(b.host_op_ps()) / 1e12;
  return d;
}

// One small backward pass on each device a kernel was loaded for, from C++ (neuronsim/_exit.py says
// why): each device's autograd thread takes it only after letting go of the passes before it,
// and no tensor of it has a Python object, so letting go of it needs no GIL.
void drain_autograd_threads() {
  Backend& b = Backend::get();
  for (int i = 0; i < b.device_count(); ++i) {
    if (!b.used(i)) continue;
    const at::TensorOptions on(c10::Device(c10::DeviceType::PrivateUse1, i));
    const at::Tensor leaf = at::zeros({}, on).requires_grad_(true);
    const at::Tensor out = leaf.clone();  // its backward node runs on device i's thread
    torch::autograd::backward({out}, {at::ones_like(out)}, false, false, {leaf});
  }
}

// An NKI kernel (neuronsim.nki) on tensors of device "neuron": its program, built for this
// device's generation, runs as one kernel on the device's core, its HBM tensors bound to the
// tensors by name. Cached by `key` (the kernel and its arguments' layouts).
void run_nki(int index, const std::string& name, const std::string& key,
             const std::shared_ptr<neuronsim::isa::Program>& program,
             const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  const std::string op = "nki::" + name;
  std::vector<at::Tensor> all;
  for (const auto& [tensor_name, t] : tensors) {
    if (!t.device().is_privateuseone() || !t.is_contiguous())
      throw std::invalid_argument(
          fmt::format("{}: tensor {} must be a contiguous neuron tensor", op, tensor_name));
    all.push_back(t);
  }
  const int device = neuronsim::pytorch::op_device(op.c_str(), all);
  if (device != index)
    throw std::invalid_argument(
        fmt::format("{}: tensors on neuron:{}, kernel for neuron:{}", op, device, index));
  // Written for one physical core: on a logical core of two it runs on the first, as an NKI
  // kernel launched without a grid does.
  Backend& b = Backend::get();
  std::string refusal;
  const auto loaded = b.program(
      device, key, [&] { return *program; }, &refusal, false);
  if (!loaded)
    throw std::runtime_error(fmt::format("{}: the device refused the kernel: {}", op, refusal));
  b.run_kernel(op, loaded, neuronsim::pytorch::bindings_of(tensors));
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "neuronsim's PyTorch backend (device 'neuron' over the simulator)";
  m.def("device_count", &Backend::device_count_noexcept);
  m.def("init", [] { Backend::get(); });
  m.def("current_device", [] { return static_cast<int>(neuronsim::pytorch::current_device()); });
  m.def("set_device", [](int index) {
    neuronsim::pytorch::set_current_device(static_cast<c10::DeviceIndex>(index));
  });
  m.def("synchronize", [] {
    py::gil_scoped_release release;
    Backend::get().device().synchronize();
  });
  m.def("drain", [] {  // the work queued done, the simulated host not waiting for it
    py::gil_scoped_release release;
    Backend::get().drain();
  });
  m.def("device_properties", &device_properties);
  // The instance's generation from the environment, without starting the device.
  m.def("environment_generation", [] {
    neuronsim::sim::Environment env;
    if (auto err = neuronsim::sim::read_environment(env)) throw std::runtime_error(*err);
    return env.instance.generation;
  });
  m.def("default_generator", [](int index) {
    const at::Generator& g =
        neuronsim::pytorch::default_generator(static_cast<c10::DeviceIndex>(index));
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(g));
  });
  m.def("instance", [] { return Backend::get().env().instance_name; });
  m.def("mode", [] { return std::string(neuronsim::sim::mode_name(Backend::get().env().mode)); });
  m.def(
      "simulated_time_ps", [] { return Backend::get().now_ps(); },
      "The device clock: simulated picoseconds of work done on the device.");
  m.def("kernels_run", [] { return Backend::get().kernels_run(); });
  m.def("backend_opened", &Backend::is_open);
  m.def("drain_autograd_threads", &drain_autograd_threads,
        py::call_guard<py::gil_scoped_release>());
  m.def("kernels_built", [] { return Backend::get().kernels_built(); });
  m.def("program_hbm_bytes", [](int index) { return Backend::get().program_bytes(index); });
  m.def("fallback_counts", &neuronsim::pytorch::fallback_counts);
  m.def("reset_fallback_counts", &neuronsim::pytorch::reset_fallback_counts);
  m.def("executed_ops", &neuronsim::pytorch::op_tracking::executed);
  m.def("start_op_tracking", &neuronsim::pytorch::op_tracking::start);
  m.def("stop_op_tracking", &neuronsim::pytorch::op_tracking::stop);
  m.def("op_tracking", &neuronsim::pytorch::op_tracking::watching);
  m.def("record_memory_history", &neuronsim::pytorch::record_memory_history);
  m.def("memory_blocks", [] {
    py::list out;
    for (const auto& b : neuronsim::pytorch::memory_blocks()) {
      py::dict d;
      d["device"] = b.device;
      d["address"] = b.address;
      d["size"] = b.size;
      d["requested_size"] = b.requested;
      d["active"] = b.active;
      out.append(d);
    }
    return out;
  });
  m.def("memory_history", [] {
    py::list out;
    for (const auto& e : neuronsim::pytorch::memory_history()) {
      py::dict d;
      d["device"] = e.device;
      d["action"] = e.action;
      d["addr"] = e.address;
      d["size"] = e.size;
      d["time_us"] = e.time_us;
      out.append(d);
    }
    return out;
  });
  m.def("clear_executed_ops", &neuronsim::pytorch::op_tracking::clear);
  m.def("strict", &neuronsim::pytorch::strict);
  m.def("set_strict", &neuronsim::pytorch::set_strict);
  m.def("rng_source", [] {
    return std::string(
        neuronsim::pytorch::rng_source() == neuronsim::pytorch::RngSource::cpu ? "cpu" : "device");
  });
  m.def("set_rng_source", [](const std::string& name) {
    neuronsim::pytorch::set_rng_source(
        neuronsim::pytorch::parse_rng_source(name, "neuronsim.set_rng_source"));
  });
  m.def("begin_host_inspection", &neuronsim::pytorch::begin_host_inspection);
  m.def("end_host_inspection", &neuronsim::pytorch::end_host_inspection);
  m.def("start_trace", [] { return Backend::get().device().start_trace(); });
  m.def(
      "stop_trace",
      [](uint64_t session, const std::string& path, const std::string& summary_json) {
        py::gil_scoped_release release;
        const neuronsim::sim::TraceSession t = Backend::get().device().stop_trace(session);
        if (!path.empty()) neuronsim::traces::write_chrome_trace(t.result, {}, path);
        if (!summary_json.empty())
          neuronsim::traces::write_profile_summary_json(t.result, {}, summary_json);
        return t.result.executions.size();
      },
      py::arg("session"), py::arg("path"), py::arg("summary_json") = "");
  neuronsim::pytorch::register_graph_functions(m);
  neuronsim::pytorch::register_distributed(m);
  neuronsim::nki::register_nki(m);
  m.def("run_nki", &run_nki);
}
