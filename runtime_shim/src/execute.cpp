// Execution: nrt_execute binds a model's inputs and outputs by name, enqueues one execution
// (named after the model) on the model's core of the device and waits for it. Executions queued
// together on different cores share one simulated window; collective models meet their job's
// other ranks first (collectives.cpp).
#include <chrono>
#include <thread>

#include "neuronsim/sim/types.h"
#include "runtime.h"

namespace neuronsim::rt {

std::pair<NRT_STATUS, std::string> fault_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const sim::ExecError& e) {
    switch (e.kind()) {
      case sim::ExecError::Kind::out_of_bounds:
        return {NRT_EXEC_OOB, e.what()};
      case sim::ExecError::Kind::nan:
        return {NRT_EXEC_COMPLETED_WITH_NUM_ERR, e.what()};
      case sim::ExecError::Kind::deadlock:
        return {NRT_TIMEOUT, e.what()};
      case sim::ExecError::Kind::unsupported:
        return {NRT_EXEC_COMPLETED_WITH_ERR, e.what()};
    }
    return {NRT_FAILURE, e.what()};
  } catch (const std::exception& e) {
    // A CommError between ranks, or anything else.
    return {comm_error_status(e).value_or(NRT_FAILURE), e.what()};
  } catch (...) {
    return {NRT_FAILURE, "an unknown error"};
  }
}

void note_window(const sim::Completion& c) {
  // The last window and fault logged about (never destroyed: calls may come at exit).
  struct Last {
    std::mutex mu;
    std::weak_ptr<const sim::RunResult> window;
    std::exception_ptr fault;
  };
  static Last* last = new Last;
  if (c.batch_fault) {
    std::lock_guard<std::mutex> lock(last->mu);
    if (c.batch_fault == last->fault) return;
    last->fault = c.batch_fault;
    log(kWarn, "nrt_execute",
        "a batch of {} executions faulted ({}); running each alone to attribute it", c.batch_size,
        fault_of(c.batch_fault).second);
  } else if (c.run && c.run->cores.size() > 1 && log_level() >= kDebug) {
    std::lock_guard<std::mutex> lock(last->mu);
    if (last->window.lock() == c.run) return;
    last->window = c.run;
    log(kDebug, "nrt_execute", "running a batch of {} executions together in one simulated run",
        c.run->cores.size());
  }
}

NRT_STATUS check_timeout(const Config& config, const sim::Completion& c) {
  if (config.exec_timeout_s <= 0 || config.mode == sim::Mode::functional_only) return NRT_SUCCESS;
  const double seconds = static_cast<double>(c.end_ps - c.start_ps) * 1e-12;
  if (seconds <= config.exec_timeout_s) return NRT_SUCCESS;
  log(kError, "nrt_execute",
      "execution on core {} took {} s of simulated time, more than NEURON_RT_EXEC_TIMEOUT={} s",
      c.core, seconds, config.exec_timeout_s);
  return NRT_TIMEOUT;
}

// Host tensors, and device tensors of another chip or an earlier session, are mapped into the
// model's chip for the execution.
NRT_STATUS prepare(const char* fn, nrt_model_t* model, const nrt_tensor_set_t* input_set,
                   nrt_tensor_set_t* output_set, ExecRequest& req) {
  if (!live(model)) {
    log(kError, fn, "not a loaded model");
    return NRT_INVALID_HANDLE;
  }
  TensorSet* in = as_set(input_set);
  TensorSet* out = as_set(output_set);
  if (in == nullptr || out == nullptr) {
    log(kError, fn, "the {} tensor set is NULL or not live", in == nullptr ? "input" : "output");
    return NRT_INVALID;
  }
  req.session = rt().session;
  req.model = model->data;
  const ModelData& m = *req.model;
  sim::Device& device = *req.session->device;
  req.execution.program = m.program;
  req.execution.name = m.name;
  for (const isa::TensorDecl& d : m.program->program().tensors) {
    if (d.kind != isa::TensorKind::input && d.kind != isa::TensorKind::output) continue;
    const bool is_in = d.kind == isa::TensorKind::input;
    const TensorSet* set = is_in ? in : out;
    auto it = set->tensors.find(d.name);
    if (it == set->tensors.end()) {
      log(kError, fn, "{} tensor '{}' of the model is missing from the {} set",
          is_in ? "input" : "output", d.name, is_in ? "input" : "output");
      return NRT_INVALID;
    }
    const nrt_tensor* t = it->second;
    if (!live(t) || !t->storage) {
      log(kError, fn, "the tensor bound to '{}' has been freed or has no storage", d.name);
      return NRT_INVALID;
    }
    if (t->size != d.size_bytes()) {
      log(kError, fn, "{} tensor '{}' has {} bytes, the model expects {}",
          is_in ? "input" : "output", d.name, t->size, d.size_bytes());
      return NRT_INVALID;
    }
    req.keep.push_back(t->storage);
    if (!is_in) req.outputs.push_back(t);
    const Storage& s = *t->storage;
    if (s.chip == static_cast<int>(m.chip) && s.on(req.session->device)) {
      req.execution.tensors[d.var_id] = sim::TensorBinding{s.hbm_addr + t->offset, d.size_bytes()};
      continue;
    }
    // Host memory (or another chip's HBM): map it into this chip's HBM for the execution.
    const auto addr = map_host(fn, device, m.chip, s.data + t->offset, t->size, d.name.c_str());
    if (!addr) {
      log(kError, fn, "no device memory left to map host tensor '{}' of {} bytes", d.name, t->size);
      return NRT_RESOURCE;
    }
    req.temp_maps.emplace_back(m.chip, *addr);
    req.execution.tensors[d.var_id] = sim::TensorBinding{*addr, d.size_bytes()};
  }
  return NRT_SUCCESS;
}

void unmap(sim::Device& device, std::vector<std::pair<uint32_t, uint64_t>>& temp_maps) {
  for (auto [chip, addr] : temp_maps) device.free(chip, addr);
  temp_maps.clear();
}

namespace {

// An execution of a model without a collective job: one execution on its core's queue.
NRT_STATUS execute_plain(ExecRequest& req) {
  sim::Device& device = *req.session->device;
  sim::Completion c;
  try {
    c = device.complete(std::move(req.execution));
  } catch (const std::exception& e) {
    log(kError, "nrt_execute", "execution failed (status {}): {}", static_cast<int>(NRT_FAILURE),
        e.what());
    return NRT_FAILURE;
  }
  note_window(c);
  if (c.error) {
    const auto [status, message] = fault_of(c.error);
    log(kError, "nrt_execute", "execution failed (status {}): {}", static_cast<int>(status),
        message);
    return status;
  }
  return check_timeout(req.session->config, c);
}

}  // namespace
}  // namespace neuronsim::rt

using namespace neuronsim::rt;

extern "C" {

NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                       nrt_tensor_set_t* output_set) {
  NRT_GATE();
  ExecRequest req;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (NRT_STATUS s = prepare(__func__, model, input_set, output_set, req); s != NRT_SUCCESS) {
      if (req.session) unmap(*req.session->device, req.temp_maps);
      return s;
    }
  }
  // A collective model's execution meets the other ranks of its job first.
  const NRT_STATUS status = req.model->job ? execute_collective(req) : execute_plain(req);
  unmap(*req.session->device, req.temp_maps);
  if (status == NRT_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt().mu);
    for (const nrt_tensor* t : req.outputs)
      if (live(t)) const_cast<nrt_tensor*>(t)->completions++;
  }
  return status;
}

NRT_STATUS nrt_execute_repeat(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                              nrt_tensor_set_t* output_set, int repeat_count) {
  NRT_GATE();
  if (repeat_count < 1) {
    log(kError, __func__, "repeat_count {} must be at least 1", repeat_count);
    return NRT_INVALID;
  }
  for (int i = 0; i < repeat_count; ++i)
    if (NRT_STATUS s = nrt_execute(model, input_set, output_set); s != NRT_SUCCESS) return s;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (vnc < 0 || static_cast<size_t>(vnc) >= rt().session->config.visible.size())
    return NRT_INVALID;
  // The implicit-async queue: nrt_execute is synchronous here (no implicit-async mode), so it
  // is empty whenever this runs. The explicit nrta_* queues are drained by their own calls.
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t* tensor, int64_t timeout,
                                              uint64_t expected) {
  if (tensor == nullptr) return NRT_INVALID;
  std::unique_lock<std::mutex> lock(rt().mu);
  if (!live(tensor)) return NRT_INVALID;
  // Only async executions (nrta_execute_schedule) count completions while we wait; nrt_execute
  // has counted its own before it returns. Negative timeouts wait for as long as one is pending.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(std::max<int64_t>(timeout, 0));
  auto pending = [] { return rt().session != nullptr && rt().session->async_executions > 0; };
  while (live(tensor) && tensor->completions < expected && pending()) {
    if (timeout < 0)
      rt().completions.wait(lock);
    else if (rt().completions.wait_until(lock, deadline) == std::cv_status::timeout)
      break;
  }
  if (!live(tensor)) return NRT_INVALID;
  if (tensor->completions >= expected) return NRT_SUCCESS;
  log(kWarn, __func__, "tensor '{}' has completed {} of {} executions; {}", tensor->name,
      tensor->completions, expected, pending() ? "the timeout passed" : "no execution is pending");
  return NRT_TIMEOUT;
}

NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t* tensor) {
  if (tensor == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor)) return NRT_INVALID;
  tensor->completions = 0;
  return NRT_SUCCESS;
}

}  // extern "C"
