// The counted CPU fallback of every op the backend has no kernel for (see fallback.h).
//
// Each neuron tensor argument becomes a CPU tensor over the same storage (same base,
// sizes, strides, offset), so in-place ops and out= arguments write the device bytes
// directly. A returned tensor that is one of those aliases, or a view into one of
// their storages, maps back to the neuron tensor or a neuron view of the same
// storage; any other result is copied into a new neuron tensor.
#include "aten/fallback.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/library.h>

#include "aten/refusal.h"
#include "aten/timing_only.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/generator.h"
#include "runtime/op_tracking.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

std::mutex g_mu;
std::map<std::string, uint64_t> g_counts;
bool g_strict = [] {
  const char* v = std::getenv("NEURONSIM_STRICT");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}();

thread_local int t_inspecting = 0;

struct Refusal {
  std::string op, reason;
};
thread_local std::optional<Refusal> t_refusal;

std::string op_name(const c10::FunctionSchema& schema) {
  return schema.overload_name().empty() ? schema.name()
                                        : schema.name() + "." + schema.overload_name();
}

// What the fallback converted, so results can be mapped back.
struct Conversion {
  c10::optional<c10::Device> device;                                 // the op's neuron device
  std::unordered_map<const c10::TensorImpl*, at::Tensor> originals;  // alias -> neuron tensor
  std::unordered_map<const void*, at::Tensor> storages;    // storage base -> a neuron tensor on it
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (alias, neuron) of every argument
  uint64_t largest = 1;                                    // elements of the largest argument
  bool host_tensor = false;  // a CPU tensor of one or more dims among the tensor arguments
};

void note_device(Conversion& c, const c10::Device& d, const std::string& op) {
  if (!c.device) {
    c.device = d;
  } else if (*c.device != d) {
    fail(fmt::format("{}: expected all tensors on one device, but found {} and {}", op,
                     c.device->str(), d.str()));
  }
}

at::Tensor to_host(Conversion& c, const at::Tensor& t, const std::string& op) {
  if (!t.defined()) return t;
  if (!t.device().is_privateuseone()) {
    c.host_tensor = c.host_tensor || (t.device().is_cpu() && t.dim() > 0);
    return t;
  }
  note_device(c, t.device(), op);
  at::Tensor alias = host_alias(t);
  c.originals.emplace(alias.unsafeGetTensorImpl(), t);
  if (t.storage().data() != nullptr) c.storages.emplace(t.storage().data(), t);
  c.written.emplace_back(alias, t);
  c.largest = std::max<uint64_t>(c.largest, static_cast<uint64_t>(t.numel()));
  return alias;
}

c10::IValue arg_to_host(Conversion& c, const c10::IValue& v, const c10::Argument& arg,
                        const std::string& op) {
  if (v.isTensor()) return to_host(c, v.toTensor(), op);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_host(c, t, op));
    return out;
  }
  if (v.isList() && arg.type()->isSubtypeOf(*c10::ListType::ofOptionalTensors())) {
    // Indices (x[idx]) may live on the host, as on CUDA: not a device mismatch.
    const bool host_before = c.host_tensor;
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isNone() ? std::nullopt : std::optional(to_host(c, e.toTensor(), op)));
    c.host_tensor = host_before;
    return out;
  }
  if (v.isDevice() && v.toDevice().is_privateuseone()) {
    note_device(c, v.toDevice(), op);
    return c10::Device(c10::kCPU);
  }
  return v;
}

// A neuron tensor with the result's contents, made without copying where it aliases
// one of the arguments.
at::Tensor to_device(Conversion& c, const at::Tensor& r) {
  if (!r.defined() || !r.device().is_cpu()) return r;
  if (auto it = c.originals.find(r.unsafeGetTensorImpl()); it != c.originals.end())
    return it->second;
  if (auto it = c.storages.find(r.storage().data()); it != c.storages.end()) {
    const at::Tensor& base = it->second;
    return at::empty({0}, base.options().dtype(r.scalar_type()))
        .set_(base.storage(), r.storage_offset(), r.sizes(), r.strides());
  }
  return to_neuron(r, c.device.value_or(c10::Device(c10::DeviceType::PrivateUse1, 0)));
}

c10::IValue result_to_device(Conversion& c, const c10::IValue& v) {
  if (v.isTensor()) return to_device(c, v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_device(c, t));
    return out;
  }
  return v;
}

// A CPU op may have resized an out= argument, moving its alias to new host memory:
// the neuron tensor takes the new shape and bytes.
void write_back_resized(Conversion& c) {
  for (auto& [alias, original] : c.written) {
    if (alias.storage().data() == original.storage().data() && alias.sizes() == original.sizes() &&
        alias.strides() == original.strides())
      continue;
    if (alias.storage().data() == original.storage().data()) {
      original.unsafeGetTensorImpl()->set_sizes_and_strides(alias.sizes(), alias.strides(),
                                                            alias.storage_offset());
      continue;
    }
    // The CPU may lay the result out with gaps (LAPACK's padded leading dimensions): the
    // storage takes the extent of the layout, not just its element count.
    int64_t extent = alias.numel() > 0 ? 1 : 0;
    for (int64_t d = 0; d < alias.dim() && extent > 0; ++d)
      extent += (alias.size(d) - 1) * alias.stride(d);
    original.resize_({std::max<int64_t>(extent, alias.numel())});
    original.as_strided_(alias.sizes(), alias.strides(), original.storage_offset());
    host_alias(original).copy_(alias);
  }
}

std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "None";
  return fmt::format("{}[{}]{}", c10::getDtypeNames(t.scalar_type()).first,
                     fmt::join(t.sizes(), ", "), t.is_contiguous() ? "" : " (strided)");
}

// The tensors an op was called with: "float32[2, 8], bfloat16[8, 70000] (strided)".
std::string describe_tensors(const torch::jit::Stack& stack, size_t first, size_t count) {
  std::vector<std::string> parts;
  for (size_t i = first; i < first + count; ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      parts.push_back(describe(v.toTensor()));
    } else if (v.isTensorList()) {
      std::vector<std::string> items;
      for (const at::Tensor& t : v.toTensorList()) items.push_back(describe(t));
      if (items.size() > 4) items.resize(4), items.emplace_back("...");
      parts.push_back(fmt::format("[{}]", fmt::join(items, ", ")));
    }
  }
  return parts.empty() ? "no tensors" : fmt::format("{}", fmt::join(parts, ", "));
}

// Counts one CPU run of `op`; the first one warns, strict mode refuses it, each saying
// what ran on the CPU and why (`what`, called only then).
void count(const std::string& op, const std::function<std::string()>& what) {
  if (t_inspecting > 0) return;
  bool first = false;
  {
    std::lock_guard lock(g_mu);
    if (g_strict)
      fail(fmt::format("{}, and strict mode (NEURONSIM_STRICT=1) forbids running it on the CPU",
                       what()));
    first = g_counts[op]++ == 0;
  }
  op_tracking::falls_back();
  if (first)
    TORCH_WARN(what(),
               ": it runs on the CPU (counted in neuronsim.fallback_counts(); "
               "NEURONSIM_STRICT=1 makes it an error)");
  Backend::get().host_reads();  // the CPU computes on what the device wrote
}

// What sent `op` on `tensors` to the CPU: the kernel's own reason when it refused the case
// (which limit, which dtype), else whether the op has a neuron kernel at all.
std::string fallback_reason(const std::string& op, const std::string& tensors,
                            const std::optional<std::string>& refused, bool has_kernel) {
  if (refused)
    return fmt::format("{} on {} is not covered by its neuron kernel ({})", op, tensors, *refused);
  if (has_kernel)
    return fmt::format(
        "{} on {} is not covered by its neuron kernel (a dtype, layout or size it does not take)",
        op, tensors);
  return fmt::format("{} on {} has no neuron kernel", op, tensors);
}

// Ops whose output's shape depends on their inputs' values: in timing-only mode there are
// none to run them on.
bool shape_from_values(const std::string& op) {
  for (const char* name :
       {"aten::nonzero", "aten::nonzero_numpy", "aten::masked_select", "aten::_unique",
        "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::repeat_interleave",
        "aten::bincount", "aten::argwhere"})
    if (op == name || op.rfind(std::string(name) + ".", 0) == 0) return true;
  return false;
}

}  // namespace

void note_refusal(const std::string& op, const std::string& reason) {
  t_refusal = Refusal{op, reason};
}

std::optional<std::string> take_refusal(const std::string& op) {
  std::optional<Refusal> noted = std::exchange(t_refusal, std::nullopt);
  if (!noted || !(op == noted->op || op.rfind(noted->op + ".", 0) == 0)) return std::nullopt;
  return noted->reason;
}

void neuron_cpu_fallback(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = handle.schema();
  const std::string op = op_name(schema);
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  const std::optional<std::string> refused = take_refusal(op);
  if (values_unspecified() && shape_from_values(op))
    refuse_host_read(fmt::format("{} (its output's shape depends on its input's values)", op));
  count(op, [&] {
    return fallback_reason(op, describe_tensors(*stack, first, num_args), refused,
                           handle.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1));
  });

  Conversion c;
  std::optional<size_t> generator_arg;
  for (size_t i = 0; i < num_args; ++i) {
    const c10::Argument& arg = schema.arguments()[i];
    c10::IValue& v = (*stack)[first + i];
    if (arg.type()->kind() == c10::TypeKind::OptionalType &&
        arg.type()->expectRef<c10::OptionalType>().getElementType()->kind() ==
            c10::TypeKind::GeneratorType)
      generator_arg = i;
    v = arg_to_host(c, v, arg, op);
  }
  if (c.device && c.host_tensor)
    fail(fmt::format("{}: expected all tensors on one device, but found {} and cpu", op,
                     c.device->str()));
  // A random op draws from the device's generator, through a CPU generator seeded by it.
  if (generator_arg) {
    c10::IValue& v = (*stack)[first + *generator_arg];
    if (v.isNone() || is_neuron_generator(v.toGenerator())) {
      const c10::DeviceIndex index = c.device ? c.device->index() : current_device();
      const at::Generator neuron = v.isNone() ? default_generator(index) : v.toGenerator();
      v = cpu_generator_for(neuron, c.largest);
    }
  }

  if (!values_unspecified()) {
    handle.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } else {
    // The CPU computes on whatever the device memory holds, which timing-only mode leaves
    // unspecified: an op that checks its inputs (an index's range) may refuse them. Say so.
    try {
      handle.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    } catch (const c10::Error& e) {
      refuse_host_read(
          fmt::format("{}, which runs on the CPU without a neuron kernel (and failed "
                      "there: {}),",
                      op, e.what_without_backtrace()));
    }
  }

  write_back_resized(c);
  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i)
    (*stack)[i] = result_to_device(c, (*stack)[i]);
}

at::Tensor to_neuron(const at::Tensor& cpu, c10::Device device) {
  at::Tensor out = cpu.is_non_overlapping_and_dense()
                       ? at::empty_strided(cpu.sizes(), cpu.strides(), cpu.options().device(device))
                       : at::empty(cpu.sizes(), cpu.options().device(device));
  host_alias(out).copy_(cpu);
  return out;
}

void begin_host_inspection() {
  ++t_inspecting;
}
void end_host_inspection() {
  --t_inspecting;
}

void count_fallback(const std::string& op) {
  count(op, [&] { return op + " has no neuron kernel"; });
}

std::map<std::string, uint64_t> fallback_counts() {
  std::lock_guard lock(g_mu);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard lock(g_mu);
  g_counts.clear();
}

bool strict() {
  std::lock_guard lock(g_mu);
  return g_strict;
}

void set_strict(bool on) {
  std::lock_guard lock(g_mu);
  g_strict = on;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}

}  // namespace neuronsim::pytorch
