// Models: loading NEFFs onto cores of the device (constants and scratch are the device's),
// collective jobs, and model metadata.
#include <cstdlib>
#include <cstring>
#include <span>

#include "neuronsim/cc/tcp.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/program.h"
#include "runtime.h"

namespace neuronsim::rt {
namespace {

nrt_dtype_t hw_dtype(std::optional<isa::DType> d) {
  if (!d) return NRT_DTYPE_UNKNOWN;
  switch (*d) {
    case isa::DType::fp32:
      return NRT_DTYPE_FLOAT32;
    case isa::DType::bf16:
      return NRT_DTYPE_BFLOAT16;
    case isa::DType::fp16:
      return NRT_DTYPE_FLOAT16;
    case isa::DType::tf32:
      return NRT_DTYPE_FP32R;
    case isa::DType::fp8_e4m3:
      return NRT_DTYPE_FP8_E4;
    case isa::DType::fp8_e5m2:
      return NRT_DTYPE_FP8_E5;
    case isa::DType::int8:
      return NRT_DTYPE_INT8;
    case isa::DType::uint8:
      return NRT_DTYPE_UINT8;
    case isa::DType::int16:
      return NRT_DTYPE_INT16;
    case isa::DType::uint16:
      return NRT_DTYPE_UINT16;
    case isa::DType::int32:
      return NRT_DTYPE_INT32;
    case isa::DType::uint32:
      return NRT_DTYPE_UINT32;
    case isa::DType::boolean:
      return NRT_DTYPE_UINT8;
  }
  return NRT_DTYPE_UNKNOWN;
}

// nrt_load without the gate; `fn` names the API call in log lines.
NRT_STATUS load_model(const char* fn, const void* neff_bytes, size_t size, int32_t vnc,
                      int32_t vnc_count, nrt_model_t** model) {
  if (neff_bytes == nullptr || size == 0 || model == nullptr) {
    log(kError, fn, "neff_bytes or model is NULL, or size is 0");
    return NRT_INVALID;
  }
  std::lock_guard<std::mutex> lock(rt().mu);
  Session& s = *rt().session;
  const Config& c = s.config;
  if (vnc < -1 || vnc_count < -1 || vnc_count == 0) {
    log(kError, fn, "invalid core {} / core count {}", vnc, vnc_count);
    return NRT_INVALID;
  }
  const uint32_t count = vnc_count < 0 ? 1 : static_cast<uint32_t>(vnc_count);
  uint32_t start = vnc < 0 ? 0 : static_cast<uint32_t>(vnc);
  if (vnc < 0) {
    // "The runtime picks the first free core": the first visible core with the fewest models.
    std::vector<uint32_t> models_on(c.visible.size(), 0);
    for (const nrt_model* other : rt().models)
      if (other->data->vnc < models_on.size()) models_on[other->data->vnc]++;
    for (uint32_t v = 0; v + count <= models_on.size(); ++v)
      if (models_on[v] < models_on[start]) start = v;
  }
  if (static_cast<uint64_t>(start) + count > c.visible.size()) {
    log(kError, fn, "cores {}..{} requested, but only {} cores are visible", start,
        start + count - 1, c.visible.size());
    return NRT_LOAD_NOT_ENOUGH_NC;
  }
  if (count > 1)
    log(kWarn, fn, "vnc_count {}: replication is not modelled; the model runs on core {}", count,
        start);

  isa::neff::Neff neff;
  const auto* p = static_cast<const uint8_t*>(neff_bytes);
  try {
    neff = isa::neff::read_neff(std::span<const uint8_t>(p, size), "neff_bytes");
  } catch (const std::exception& e) {
    log(kError, fn, "not a valid NEFF: {}", e.what());
    return NRT_INVALID;
  }
  const std::string& name = neff.header.name;
  if (!neff.executable_by_neuronsim()) {
    log(kError, fn,
        "NEFF '{}' (produced by '{}', target '{}') has instruction streams in a format neuronsim "
        "cannot execute; only NEFFs whose streams use neuronsim's encoding run on the simulator",
        name, neff.producer, neff.target);
    return NRT_UNSUPPORTED_NEFF_VERSION;
  }
  isa::Program program;
  try {
    program = isa::from_neff(neff, name);
  } catch (const std::exception& e) {
    log(kError, fn, "cannot decode NEFF '{}': {}", name, e.what());
    return NRT_INVALID;
  }
  if (program.target != c.generation.name) {
    log(kError, fn, "NEFF '{}' was built for {}, but the simulated instance {} is {}", name,
        program.target, c.instance.name, c.generation.name);
    return NRT_INVALID;
  }
  auto m = std::make_shared<ModelData>();
  m->name = name;
  m->inputs = neff.inputs();
  m->outputs = neff.outputs();
  m->vnc = start;
  m->core = c.physical_core(start);
  m->chip = c.chip_of(start);
  const isa::Fp8Config fp8 = neff.subgraphs.empty() ? isa::Fp8Config{} : neff.subgraphs.front().fp8;
  try {
    m->program = s.device->load(m->core, std::move(program), name, fp8);
  } catch (const isa::IsaError& e) {
    log(kError, fn, "cannot load NEFF '{}': {}", name, e.what());
    return NRT_INVALID;
  } catch (const std::invalid_argument& e) {
    log(kError, fn, "cannot load NEFF '{}': {}", name, e.what());
    return NRT_INVALID;
  } catch (const std::exception& e) {  // its constants and scratch do not fit the chip's HBM
    log(kError, fn, "out of device memory: {}", e.what());
    return NRT_RESOURCE;
  }
  auto* handle = new nrt_model;
  handle->data = std::move(m);
  rt().models.insert(handle);
  *model = handle;
  log(kInfo, fn, "loaded NEFF '{}' on core {} (physical core {})", handle->data->name, start,
      handle->data->core);
  return NRT_SUCCESS;
}

// Whether any loaded model belongs to `job` (rt().mu held).
bool job_in_use(const std::shared_ptr<CollectiveJob>& job) {
  for (const nrt_model* m : rt().models)
    if (m->data->job == job) return true;
  return false;
}

// The job a new collective model of `rank` joins: the process's job while any model uses it
// (it must agree), else a new one. Across processes the new job connects to its peers here, as
// libnrt builds its global communicator in nrt_load_collectives; rt().mu is free meanwhile.
NRT_STATUS join_job(const char* fn, ModelData& model, uint32_t rank, uint32_t world) {
  static std::mutex creating;  // one job created at a time
  std::lock_guard<std::mutex> hold(creating);
  Config c;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    c = rt().session->config;
    if (rt().job && job_in_use(rt().job)) {
      const CollectiveJob& job = *rt().job;
      if (job.world != world) {
        log(kError, fn,
            "this process's collective job has {} ranks; a load for {} ranks cannot join it",
            job.world, world);
        return NRT_INVALID;
      }
      if (job.across_processes() && static_cast<uint32_t>(job.process_rank) != rank) {
        log(kError, fn,
            "this process is rank {} of a job across processes (NEURON_RT_ROOT_COMM_ID); it cannot "
            "also load rank {}: one rank per process",
            job.process_rank, rank);
        return NRT_INVALID;
      }
      for (const nrt_model* m : rt().models)
        if (m->data->job == rt().job && m->data->rank != rank && m->data->core == model.core) {
          log(kError, fn,
              "rank {} would share physical core {} with rank {} of the same collective job; each "
              "rank needs a core of its own",
              rank, model.core, m->data->rank);
          return NRT_INVALID;
        }
      model.job = rt().job;
      model.rank = rank;
      return NRT_SUCCESS;
    }
  }
  auto job = std::make_shared<CollectiveJob>();
  job->world = world;
  if (!c.root_comm_id.empty()) {
    cc::TcpOptions o;
    o.rank = static_cast<int>(rank);
    o.world_size = static_cast<int>(world);
    o.instance = c.instance;
    o.core = cc::CoreId{model.chip, model.core % c.instance.cores_per_chip};
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(collective_timeout_s(c) * 1000.0));
    try {
      cc::read_tcp_environment(o);
      job->comm = cc::TcpCommunicator::connect(std::move(o));
    } catch (const std::exception& e) {
      log(kError, fn,
          "failed to create global communicator, global_device_id={}, global_device_count={}, "
          "ROOT_COMM_ID={}: {}",
          rank, world, c.root_comm_id, e.what());
      return comm_error_status(e).value_or(NRT_FAILURE);
    }
    job->process_rank = static_cast<int>(rank);
  }
  std::lock_guard<std::mutex> lock(rt().mu);
  rt().job = job;
  model.job = std::move(job);  // in use from now on: the next load joins it
  model.rank = rank;
  return NRT_SUCCESS;
}

}  // namespace
}  // namespace neuronsim::rt

using namespace neuronsim::rt;

extern "C" {

NRT_STATUS nrt_load(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                    nrt_model_t** model) {
  NRT_GATE();
  return load_model(__func__, neff_bytes, size, vnc, vnc_count, model);
}

NRT_STATUS nrt_load_collectives(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t g_device_id, uint32_t g_device_count,
                                nrt_model_t** model) {
  NRT_GATE();
  if (g_device_count == 0 || g_device_id >= g_device_count) {
    log(kError, __func__, "global_device_id={} is not a rank of a job of global_device_count={}",
        g_device_id, g_device_count);
    return NRT_INVALID;
  }
  nrt_model_t* m = nullptr;
  if (NRT_STATUS s = load_model(__func__, neff_bytes, size, vnc, vnc_count, &m); s != NRT_SUCCESS)
    return s;
  if (NRT_STATUS s = join_job(__func__, *m->data, g_device_id, g_device_count); s != NRT_SUCCESS) {
    nrt_unload(m);
    return s;
  }
  log(kInfo, __func__, "NEFF '{}' is rank {} of a {}-rank collective job{}", m->data->name,
      g_device_id, g_device_count,
      m->data->job->across_processes() ? " across processes" : " in this process");
  *model = m;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_unload(nrt_model_t* model) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(model)) {
    log(kError, __func__, "not a loaded model");
    return NRT_INVALID_HANDLE;
  }
  rt().models.erase(model);
  delete model;  // executions in flight keep the model's data alive until they finish
  return NRT_SUCCESS;
}

static NRT_STATUS model_count(const char* fn, const nrt_model_t* model, uint32_t* out) {
  NRT_STATUS g = gate(fn);
  if (g != NRT_SUCCESS) return g;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(model)) return NRT_INVALID_HANDLE;
  if (out == nullptr) return NRT_INVALID;
  *out = 1;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_model_nc_count(const nrt_model_t* model, uint32_t* n) {
  return model_count(__func__, model, n);
}
NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t* model, uint32_t* n) {
  return model_count(__func__, model, n);
}
NRT_STATUS nrt_get_model_instance_count(nrt_model_t* model, uint32_t* n) {
  return model_count(__func__, model, n);
}

NRT_STATUS nrt_get_model_info(const nrt_model_t* model, nrt_model_info_t* info, size_t info_size_in,
                              size_t* info_size_out) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(model)) return NRT_INVALID_HANDLE;
  if (info == nullptr || info_size_in < sizeof(uint32_t)) return NRT_INVALID;
  nrt_model_info_t out{};
  out.vnc = model->data->vnc;
  const size_t n = std::min(info_size_in, sizeof out);
  std::memcpy(info, &out, n);
  if (info_size_out != nullptr) *info_size_out = n;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model, nrt_tensor_info_array_t** tensor_info) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(model)) return NRT_INVALID_HANDLE;
  if (tensor_info == nullptr) return NRT_INVALID;
  std::vector<isa::neff::Tensor> all = model->data->inputs;
  const size_t n_in = all.size();
  for (const auto& t : model->data->outputs) all.push_back(t);
  auto* arr = static_cast<nrt_tensor_info_array_t*>(
      std::calloc(1, sizeof(nrt_tensor_info_array_t) + all.size() * sizeof(nrt_tensor_info_t)));
  if (arr == nullptr) return NRT_RESOURCE;
  arr->tensor_count = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    nrt_tensor_info_t& e = arr->tensor_array[i];
    std::snprintf(e.name, sizeof e.name, "%s", all[i].name.c_str());
    e.usage = i < n_in ? NRT_TENSOR_USAGE_INPUT : NRT_TENSOR_USAGE_OUTPUT;
    e.size = all[i].size_bytes();
    e.dtype = hw_dtype(all[i].dtype);
    e.ndim = static_cast<uint32_t>(all[i].shape.size());
    e.shape = static_cast<uint32_t*>(std::calloc(std::max<size_t>(e.ndim, 1), sizeof(uint32_t)));
    for (uint32_t d = 0; d < e.ndim && e.shape != nullptr; ++d)
      e.shape[d] = static_cast<uint32_t>(all[i].shape[d]);
  }
  *tensor_info = arr;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* tensor_info) {
  if (tensor_info == nullptr) return NRT_SUCCESS;
  for (uint64_t i = 0; i < tensor_info->tensor_count; ++i)
    std::free(tensor_info->tensor_array[i].shape);
  std::free(tensor_info);
  return NRT_SUCCESS;
}

}  // extern "C"
