// The implemented part of the libnrt C API: lifecycle, topology, tensors,
// tensor sets, models, execution and per-model profiling.
#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <span>

#include "neuronsim/cc/tcp.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/sim/functional.h"
#include "nrt/nrt_version.h"
#include "runtime.h"

using namespace nrtsim;

namespace nrtsim {

enum State : int { kStart = 0, kInit = 1, kChild = 2, kClosed = 3 };

struct TensorSet {
  uint64_t magic = 0;
  std::unordered_map<std::string, nrt_tensor*> tensors;
};

constexpr uint64_t kTensorMagic = 0x6e72745f74656e73ull;
constexpr uint64_t kModelMagic = 0x6e72745f6d6f646cull;
constexpr uint64_t kSetMagic = 0x6e72745f73657421ull;

struct Runtime {
  std::mutex mu;
  std::atomic<int> state{kStart};
  std::shared_ptr<Device> device;
  std::unordered_set<const nrt_tensor*> tensors;
  std::unordered_set<const nrt_model*> models;
  std::unordered_set<const TensorSet*> sets;
  uint64_t next_model_id = 1;
  // The collective job of nrt_load_collectives (one per process, like libnrt's global communicator).
  std::shared_ptr<CollectiveJob> job;
};

Runtime& rt() {
  static Runtime* r = new Runtime;  // never destroyed: API calls may come from atexit handlers
  return *r;
}

// The lifecycle gate of the stateful calls (spec §5.2).
NRT_STATUS gate(const char* function) {
  switch (rt().state.load()) {
    case kInit: return NRT_SUCCESS;
    case kStart: log(kError, function, "NRT uninitialized: call nrt_init first"); return NRT_UNINITIALIZED;
    case kClosed: log(kError, function, "NRT is closed"); return NRT_CLOSED;
    default: log(kError, function, "Incompatible runtime state: NRT_STATE_CHILD (called in a forked child)"); return NRT_FAILURE;
  }
}

bool live(const nrt_tensor* t) { return t != nullptr && rt().tensors.count(t) != 0; }
bool live(const nrt_model* m) { return m != nullptr && rt().models.count(m) != 0; }
TensorSet* as_set(const void* s) {
  auto* set = static_cast<const TensorSet*>(s);
  return s != nullptr && rt().sets.count(set) != 0 ? const_cast<TensorSet*>(set) : nullptr;
}

const char* name_or(const char* n) { return n != nullptr ? n : "(unnamed)"; }

// Checks [offset, offset + size) against the tensor; logs and returns NRT_INVALID when outside.
NRT_STATUS check_range(const char* fn, const nrt_tensor* t, uint64_t offset, uint64_t size) {
  if (!t->storage) {
    log(kError, fn, "tensor '{}' has no storage (allocate_empty without attach_buffer)", t->name);
    return NRT_INVALID;
  }
  if (offset > t->size || size > t->size - offset) {
    log(kError, fn, "access of {} bytes at offset {} is outside tensor '{}' of {} bytes", size, offset, t->name,
        t->size);
    return NRT_INVALID;
  }
  return NRT_SUCCESS;
}

uint8_t* bytes(const nrt_tensor* t) { return t->storage->data + t->offset; }

nrt_dtype_t hw_dtype(std::optional<isa::DType> d) {
  if (!d) return NRT_DTYPE_UNKNOWN;
  switch (*d) {
    case isa::DType::fp32: return NRT_DTYPE_FLOAT32;
    case isa::DType::bf16: return NRT_DTYPE_BFLOAT16;
    case isa::DType::fp16: return NRT_DTYPE_FLOAT16;
    case isa::DType::tf32: return NRT_DTYPE_FP32R;
    case isa::DType::fp8_e4m3: return NRT_DTYPE_FP8_E4;
    case isa::DType::fp8_e5m2: return NRT_DTYPE_FP8_E5;
    case isa::DType::int8: return NRT_DTYPE_INT8;
    case isa::DType::uint8: return NRT_DTYPE_UINT8;
    case isa::DType::int16: return NRT_DTYPE_INT16;
    case isa::DType::uint16: return NRT_DTYPE_UINT16;
    case isa::DType::int32: return NRT_DTYPE_INT32;
    case isa::DType::uint32: return NRT_DTYPE_UINT32;
    case isa::DType::boolean: return NRT_DTYPE_UINT8;
  }
  return NRT_DTYPE_UNKNOWN;
}

void on_fork_child() {
  if (rt().state.load() == kInit) rt().state.store(kChild);
}

// The instance-wide physical core and the chip of a visible logical core.
uint32_t physical_core(const Config& c, uint32_t vnc) { return c.visible.at(vnc) * c.lnc; }
uint32_t chip_of(const Config& c, uint32_t vnc) { return physical_core(c, vnc) / c.instance.cores_per_chip; }

constexpr uint64_t kNoAddress = ~uint64_t{0};

// Maps host bytes into a chip's HBM; kNoAddress (logged) when that fails.
uint64_t try_map(const char* fn, Device& dev, uint32_t chip, uint8_t* host, uint64_t size, const char* what) {
  try {
    if (auto addr = dev.map_host(chip, host, size)) return *addr;
  } catch (const std::exception& e) {
    log(kError, fn, "cannot map '{}' into the HBM of chip {}: {}", what, chip, e.what());
  }
  return kNoAddress;
}

// Creates a tensor with fresh zeroed storage, mapped into HBM when `chip` >= 0.
NRT_STATUS make_tensor(const char* fn, nrt_tensor_placement_t placement, int vnc, int chip, size_t size,
                       const char* name, nrt_tensor_t** out) {
  if (chip >= 0 && !rt().device->fits(static_cast<uint32_t>(chip), size)) {
    log(kError, fn, "out of device memory: tensor '{}' of {} bytes does not fit the HBM of chip {}", name_or(name),
        size, chip);
    return NRT_RESOURCE;
  }
  auto storage = std::make_shared<Storage>();
  storage->data = static_cast<uint8_t*>(std::calloc(size, 1));
  if (storage->data == nullptr) {
    log(kError, fn, "out of host memory for tensor '{}' of {} bytes", name_or(name), size);
    return NRT_RESOURCE;
  }
  storage->size = size;
  if (chip >= 0) {
    auto& dev = rt().device;
    const uint64_t addr = try_map(fn, *dev, static_cast<uint32_t>(chip), storage->data, size, name_or(name));
    if (addr == kNoAddress) {
      log(kError, fn, "out of device memory: tensor '{}' of {} bytes does not fit the HBM of chip {}", name_or(name),
          size, chip);
      return NRT_RESOURCE;
    }
    storage->chip = chip;
    storage->hbm_addr = addr;
    storage->device = dev;
  }
  auto* t = new nrt_tensor;
  t->magic = kTensorMagic;
  t->name = name_or(name);
  t->storage = std::move(storage);
  t->size = size;
  t->placement = placement;
  t->vnc = vnc;
  rt().tensors.insert(t);
  *out = t;
  return NRT_SUCCESS;
}

// nrt_load without the gate; `fn` names the API call in log lines.
NRT_STATUS load_model(const char* fn, const void* neff_bytes, size_t size, int32_t vnc,
                      int32_t vnc_count, nrt_model_t** model) {
  if (neff_bytes == nullptr || size == 0 || model == nullptr) {
    log(kError, fn, "neff_bytes or model is NULL, or size is 0");
    return NRT_INVALID;
  }
  std::lock_guard<std::mutex> lock(rt().mu);
  Device& dev = *rt().device;
  const Config& c = dev.config;
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

  auto m = std::make_shared<ModelData>();
  const auto* p = static_cast<const uint8_t*>(neff_bytes);
  try {
    m->neff = isa::neff::read_neff(std::span<const uint8_t>(p, size), "neff_bytes");
  } catch (const std::exception& e) {
    log(kError, fn, "not a valid NEFF: {}", e.what());
    return NRT_INVALID;
  }
  if (!m->neff.executable_by_neuronsim()) {
    log(kError, fn,
        "NEFF '{}' (produced by '{}', target '{}') has instruction streams in a format neuronsim "
        "cannot execute; only NEFFs whose streams use neuronsim's encoding run on the simulator",
        m->neff.header.name, m->neff.producer, m->neff.target);
    return NRT_UNSUPPORTED_NEFF_VERSION;
  }
  try {
    m->program = isa::from_neff(m->neff, m->neff.header.name);
  } catch (const std::exception& e) {
    log(kError, fn, "cannot decode NEFF '{}': {}", m->neff.header.name, e.what());
    return NRT_INVALID;
  }
  if (m->program.target != c.generation.name) {
    log(kError, fn, "NEFF '{}' was built for {}, but the simulated instance {} is {}",
        m->neff.header.name, m->program.target, c.instance.name, c.generation.name);
    return NRT_INVALID;
  }
  m->vnc = start;
  m->core = physical_core(c, start);
  m->chip = chip_of(c, start);
  for (const isa::TensorDecl& t : m->program.tensors) {
    if (t.kind != isa::TensorKind::constant && t.kind != isa::TensorKind::scratch) continue;
    nrt_tensor_t* tmp = nullptr;
    const size_t bytes_needed = std::max<size_t>(t.size_bytes(), 1);
    NRT_STATUS s = make_tensor(fn, NRT_TENSOR_PLACEMENT_DEVICE, static_cast<int>(start),
                               static_cast<int>(m->chip), bytes_needed, t.name.c_str(), &tmp);
    if (s != NRT_SUCCESS) return s;
    rt().tensors.erase(tmp);
    if (!t.data.empty())
      std::memcpy(tmp->storage->data, t.data.data(), std::min(t.data.size(), bytes_needed));
    m->fixed[t.var_id] = sim::TensorBinding{tmp->storage->hbm_addr, t.size_bytes()};
    m->owned.push_back(tmp->storage);
    delete tmp;
  }
  m->id = rt().next_model_id++;
  auto* handle = new nrt_model;
  handle->magic = kModelMagic;
  handle->data = std::move(m);
  rt().models.insert(handle);
  *model = handle;
  log(kInfo, fn, "loaded NEFF '{}' on core {} (physical core {})", handle->data->neff.header.name,
      start, handle->data->core);
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
    c = rt().device->config;
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

}  // namespace nrtsim

#define NRT_GATE()                                        \
  do {                                                    \
    if (NRT_STATUS gate_status = gate(__func__); gate_status != NRT_SUCCESS) return gate_status; \
  } while (0)

extern "C" {

// ---- lifecycle -------------------------------------------------------------

NRT_STATUS nrt_init(nrt_framework_type_t framework, const char* fw_version, const char* fal_version) {
  Runtime& r = rt();
  if (r.state.load() == kChild) return gate(__func__);
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.state.load() == kInit) return NRT_SUCCESS;
  if (r.state.load() != kStart) return gate(__func__);
  static std::once_flag fork_once;
  std::call_once(fork_once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });

  Config c;
  if (auto err = read_config(c)) {
    log(kError, __func__, "invalid configuration: {}", *err);
    return NRT_INVALID;
  }
  auto dev = std::make_shared<Device>();
  try {
    dev->sim = std::make_unique<sim::Simulator>(c.instance, c.generation);
    for (uint32_t chip = 0; chip < c.instance.chips; ++chip)
      dev->allocators.emplace_back(dev->sim->hbm(chip).capacity());
  } catch (const std::exception& e) {
    log(kError, __func__, "cannot create the simulated instance {}: {}", c.instance_name, e.what());
    return NRT_FAILURE;
  }
  dev->inspect = c.inspect;
  dev->inspect_dir = c.inspect_dir;
  dev->config = c;
  dev->start();
  r.device = std::move(dev);
  r.state.store(kInit);
  log(kInfo, __func__, "neuronsim runtime on {} ({} logical cores of {} physical cores each; {} visible, from core {}); framework {}, {} {}",
      c.instance_name, c.instance.total_cores() / c.lnc, c.lnc, c.visible.size(), c.visible.front(),
      static_cast<int>(framework), fw_version != nullptr ? fw_version : "", fal_version != nullptr ? fal_version : "");
  return NRT_SUCCESS;
}

void nrt_close(void) {
  Runtime& r = rt();
  if (r.state.load() != kInit) return;
  std::shared_ptr<Device> dev;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.state.load() != kInit) return;
    r.state.store(kClosed);
    for (const nrt_model* m : r.models) delete m;
    r.models.clear();
    r.job.reset();
    dev = std::move(r.device);
  }
  dev.reset();  // stops the device thread once queued executions are done
  r.state.store(kStart);
}

NRT_STATUS nrt_get_version(nrt_version_t* ver, size_t size) {
  if (ver == nullptr) return NRT_INVALID;
  if (size < offsetof(nrt_version_t, git_hash)) {
    log(kError, __func__, "size {} is smaller than the {} bytes of the version fields", size,
        offsetof(nrt_version_t, git_hash));
    return NRT_FAILURE;
  }
  std::memset(ver, 0, std::min(size, sizeof(nrt_version_t)));
  ver->rt_major = NEURONSIM_NRT_COMPAT_MAJOR;
  ver->rt_minor = NEURONSIM_NRT_COMPAT_MINOR;
  ver->rt_patch = 0;
  ver->rt_maintenance = 0;
  std::snprintf(ver->rt_detail, sizeof ver->rt_detail, "libnrt version %d.%d.0.0 (neuronsim simulator runtime)",
                NEURONSIM_NRT_COMPAT_MAJOR, NEURONSIM_NRT_COMPAT_MINOR);
  if (size > 200) std::snprintf(ver->git_hash, sizeof ver->git_hash, "neuronsim");
  return NRT_SUCCESS;
}

static NRT_STATUS count_cores(const char* fn, uint32_t* out, bool visible) {
  if (out == nullptr) return NRT_INVALID;
  Runtime& r = rt();
  if (r.state.load() == kChild) return gate(fn);
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.state.load() == kInit) {
      const Config& c = r.device->config;
      *out = visible ? static_cast<uint32_t>(c.visible.size()) : c.instance.total_cores() / c.lnc;
      return NRT_SUCCESS;
    }
  }
  uint32_t vis = 0;
  const uint32_t total = total_logical_cores_from_env(&vis);
  if (total == 0) {
    log(kError, fn, "the environment does not describe a valid configuration (see NEURONSIM_INSTANCE, NEURON_RT_*)");
    return NRT_INVALID;
  }
  *out = visible ? vis : total;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_total_nc_count(uint32_t* n) { return count_cores(__func__, n, false); }
NRT_STATUS nrt_get_total_vnc_count(uint32_t* n) { return count_cores(__func__, n, false); }
NRT_STATUS nrt_get_visible_nc_count(uint32_t* n) { return count_cores(__func__, n, true); }
NRT_STATUS nrt_get_visible_vnc_count(uint32_t* n) { return count_cores(__func__, n, true); }

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t len) {
  NRT_GATE();
  if (info == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = rt().device->config;
  nrt_instance_info_t out{};
  // The instance's family and size come from its spec (instances.json).
  static const std::pair<const char*, uint32_t> kFamilies[] = {
      {"inf2", NRT_INSTANCE_INF2},   {"trn1", NRT_INSTANCE_TRN1},   {"trn1n", NRT_INSTANCE_TRN1N},
      {"trn2", NRT_INSTANCE_TRN2},   {"trn2u", NRT_INSTANCE_TRN2U}, {"trn3", NRT_INSTANCE_TRN3}};
  out.family = NRT_INSTANCE_UNKNOWN;
  for (const auto& [f, v] : kFamilies)
    if (c.instance.family == f) out.family = v;
  static const std::pair<const char*, uint32_t> kSizes[] = {
      {"xlarge", NRT_INSTANCE_SIZE_1XL},   {"2xlarge", NRT_INSTANCE_SIZE_2XL},  {"4xlarge", NRT_INSTANCE_SIZE_4XL},
      {"6xlarge", NRT_INSTANCE_SIZE_6XL},  {"8xlarge", NRT_INSTANCE_SIZE_8XL},  {"24xlarge", NRT_INSTANCE_SIZE_24XL},
      {"32xlarge", NRT_INSTANCE_SIZE_32XL}, {"48xlarge", NRT_INSTANCE_SIZE_48XL}, {"3xlarge", NRT_INSTANCE_SIZE_3XL}};
  out.size = NRT_INSTANCE_SIZE_UNKNOWN;
  for (const auto& [s, v] : kSizes)
    if (c.instance.size == s) out.size = v;
  std::snprintf(out.arch_name, sizeof out.arch_name, "%s", c.generation.name.c_str());
  std::snprintf(out.device_revision, sizeof out.device_revision, "sim");
  std::memcpy(info, &out, std::min(len, sizeof out));
  return NRT_SUCCESS;
}

const char* nrt_get_status_as_str(NRT_STATUS status) {
  switch (status) {
    case NRT_SUCCESS: return "NRT_SUCCESS";
    case NRT_FAILURE: return "NRT_FAILURE";
    case NRT_INVALID: return "NRT_INVALID";
    case NRT_INVALID_HANDLE: return "NRT_INVALID_HANDLE";
    case NRT_RESOURCE: return "NRT_RESOURCE";
    case NRT_TIMEOUT: return "NRT_TIMEOUT";
    case NRT_HW_ERROR: return "NRT_HW_ERROR";
    case NRT_QUEUE_FULL: return "NRT_QUEUE_FULL";
    case NRT_LOAD_NOT_ENOUGH_NC: return "NRT_LOAD_NOT_ENOUGH_NC";
    case NRT_UNSUPPORTED_NEFF_VERSION: return "NRT_UNSUPPORTED_NEFF_VERSION";
    case NRT_FAIL_HOST_MEM_ALLOC: return "NRT_FAIL_HOST_MEM_ALLOC";
    case NRT_UNINITIALIZED: return "NRT_UNINITIALIZED";
    case NRT_CLOSED: return "NRT_CLOSED";
    case NRT_QUEUE_EMPTY: return "NRT_QUEUE_EMPTY";
    case NRT_EXEC_UNIT_UNRECOVERABLE: return "NRT_EXEC_UNIT_UNRECOVERABLE";
    case NRT_EXEC_BAD_INPUT: return "NRT_EXEC_BAD_INPUT";
    case NRT_EXEC_COMPLETED_WITH_NUM_ERR: return "NRT_EXEC_COMPLETED_WITH_NUM_ERR";
    case NRT_EXEC_COMPLETED_WITH_ERR: return "NRT_EXEC_COMPLETED_WITH_ERR";
    case NRT_EXEC_NC_BUSY: return "NRT_EXEC_NC_BUSY";
    case NRT_EXEC_OOB: return "NRT_EXEC_OOB";
    case NRT_COLL_PENDING: return "NRT_COLL_PENDING";
    case NRT_EXEC_HW_ERR_COLLECTIVES: return "NRT_EXEC_HW_ERR_COLLECTIVES";
    case NRT_EXEC_HW_ERR_HBM_UE: return "NRT_EXEC_HW_ERR_HBM_UE";
    case NRT_EXEC_HW_ERR_NC_UE: return "NRT_EXEC_HW_ERR_NC_UE";
    case NRT_EXEC_HW_ERR_DMA_ABORT: return "NRT_EXEC_HW_ERR_DMA_ABORT";
    case NRT_EXEC_SW_NQ_OVERFLOW: return "NRT_EXEC_SW_NQ_OVERFLOW";
    case NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE: return "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE";
    case NRT_NETWORK_PROXY_FAILURE: return "NRT_NETWORK_PROXY_FAILURE";
  }
  return "NRT_UNKNOWN_STATUS";
}

NRT_STATUS nrt_get_device_id(int lnc_idx, int* device_id) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = rt().device->config;
  if (device_id == nullptr || lnc_idx < 0 || static_cast<size_t>(lnc_idx) >= c.visible.size()) {
    log(kError, __func__, "core {} is not one of the {} visible cores (or device_id is NULL)", lnc_idx,
        c.visible.size());
    return NRT_INVALID;
  }
  *device_id = static_cast<int>(chip_of(c, static_cast<uint32_t>(lnc_idx)));
  return NRT_SUCCESS;
}

NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t* host_device_id) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (host_device_id == nullptr || neuron_dev < 0 ||
      static_cast<uint32_t>(neuron_dev) >= rt().device->config.instance.chips) {
    log(kError, __func__, "device {} does not exist (or host_device_id is NULL)", neuron_dev);
    return NRT_INVALID;
  }
  *host_device_id = static_cast<uint32_t>(neuron_dev);  // no container remapping in the simulator
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats, size_t stats_size_in,
                                    size_t* stats_size_out) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = rt().device->config;
  if (stats == nullptr || vnc >= c.visible.size()) {
    log(kError, __func__, "core {} is not one of the {} visible cores (or stats is NULL)", vnc, c.visible.size());
    return NRT_INVALID;
  }
  nrt_vnc_memory_stats_t s{};
  {
    Device& d = *rt().device;
    std::lock_guard<std::mutex> sl(d.sim_mu);
    const HbmAllocator& a = d.allocators.at(chip_of(c, vnc));
    s.bytes_used = a.used();
    s.bytes_limit = a.capacity();
  }
  const size_t n = std::min(stats_size_in, sizeof s);
  std::memcpy(stats, &s, n);
  if (stats_size_out != nullptr) *stats_size_out = n;
  return NRT_SUCCESS;
}

// ---- tensors ---------------------------------------------------------------

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int vnc, size_t size, const char* name,
                               nrt_tensor_t** tensor) {
  NRT_GATE();
  if (tensor == nullptr) {
    log(kError, __func__, "tensor is NULL");
    return NRT_INVALID;
  }
  if (size == 0) {
    log(kError, __func__, "tensor '{}': size 0", name_or(name));
    return NRT_INVALID;
  }
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = rt().device->config;
  switch (placement) {
    case NRT_TENSOR_PLACEMENT_DEVICE:
      if (vnc < 0 || static_cast<size_t>(vnc) >= c.visible.size()) {
        log(kError, __func__, "tensor '{}': core {} is not one of the {} visible cores", name_or(name), vnc,
            c.visible.size());
        return NRT_INVALID;
      }
      return make_tensor(__func__, placement, vnc, static_cast<int>(chip_of(c, static_cast<uint32_t>(vnc))), size,
                         name, tensor);
    case NRT_TENSOR_PLACEMENT_HOST:
    case NRT_TENSOR_PLACEMENT_VIRTUAL:
      return make_tensor(__func__, placement, vnc, -1, size, name, tensor);
  }
  log(kError, __func__, "tensor '{}': unknown placement {}", name_or(name), static_cast<int>(placement));
  return NRT_INVALID;
}

void nrt_tensor_free(nrt_tensor_t** tensor) {
  if (rt().state.load() == kChild || tensor == nullptr || *tensor == nullptr) return;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(*tensor)) {
    log(kError, __func__, "not a live tensor (already freed?)");
    return;
  }
  rt().tensors.erase(*tensor);
  delete *tensor;  // the storage goes with its last user (slices share it)
  *tensor = nullptr;
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || buf == nullptr) {
    log(kError, __func__, "{} is NULL or not a live tensor", buf == nullptr ? "buf" : "tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, tensor, offset, size)) return s;
  std::memcpy(buf, bytes(tensor) + offset, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || buf == nullptr) {
    log(kError, __func__, "{} is NULL or not a live tensor", buf == nullptr ? "buf" : "tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, tensor, offset, size)) return s;
  std::memcpy(bytes(tensor) + offset, buf, size);
  return NRT_SUCCESS;
}

static NRT_STATUS batch(const char* fn, const nrt_tensor_batch_t* batches, uint64_t num_batches, bool write) {
  NRT_STATUS g = gate(fn);
  if (g != NRT_SUCCESS) return g;
  if (batches == nullptr && num_batches > 0) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  for (uint64_t b = 0; b < num_batches; ++b) {
    const nrt_tensor_batch_t& tb = batches[b];
    if (!live(tb.tensor) || (tb.ops == nullptr && tb.num_ops > 0)) {
      log(kError, fn, "batch {}: not a live tensor, or ops is NULL", b);
      return NRT_INVALID;
    }
    for (uint32_t i = 0; i < tb.num_ops; ++i) {
      const nrt_tensor_batch_op_t& op = tb.ops[i];
      if (op.buffer == nullptr) return NRT_INVALID;
      if (NRT_STATUS s = check_range(fn, tb.tensor, op.offset, op.size)) return s;
      if (write)
        std::memcpy(bytes(tb.tensor) + op.offset, op.buffer, op.size);
      else
        std::memcpy(op.buffer, bytes(tb.tensor) + op.offset, op.size);
    }
  }
  return NRT_SUCCESS;
}

#ifdef NEURONSIM_NRT_BATCH_OPS_2_34
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches) {
  return batch(__func__, batches, num_batches, false);
}
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches) {
  return batch(__func__, batches, num_batches, true);
}
#else
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool) {
  return batch(__func__, batches, num_batches, false);
}
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool) {
  return batch(__func__, batches, num_batches, true);
}
#endif

NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* src, size_t src_offset, nrt_tensor_t* dst, size_t dst_offset,
                           size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(src) || !live(dst)) {
    log(kError, __func__, "src or dst is NULL or not a live tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, src, src_offset, size)) return s;
  if (NRT_STATUS s = check_range(__func__, dst, dst_offset, size)) return s;
  if (src->storage->chip >= 0 && dst->storage->chip >= 0 && src->storage->chip != dst->storage->chip) {
    log(kError, __func__, "device tensors '{}' (chip {}) and '{}' (chip {}) are in different HBMs", src->name,
        src->storage->chip, dst->name, dst->storage->chip);
    return NRT_INVALID;
  }
  std::memmove(bytes(dst) + dst_offset, bytes(src) + src_offset, size);
  return NRT_SUCCESS;
}

size_t nrt_tensor_get_size(const nrt_tensor_t* tensor) {
  if (tensor == nullptr) return 0;
  std::lock_guard<std::mutex> lock(rt().mu);
  return live(tensor) ? tensor->size : 0;
}

NRT_STATUS nrt_tensor_memset(nrt_tensor_t* tensor, uint64_t offset, int value, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor)) {
    log(kError, __func__, "tensor is NULL or not a live tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, tensor, offset, size)) return s;
  std::memset(bytes(tensor) + offset, value, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate_empty(const char* name, nrt_tensor_t** tensor) {
  NRT_GATE();
  if (tensor == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  auto* t = new nrt_tensor;
  t->magic = kTensorMagic;
  t->name = name_or(name);
  t->placement = NRT_TENSOR_PLACEMENT_VIRTUAL;
  rt().tensors.insert(t);
  *tensor = t;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || buffer == nullptr || size == 0) {
    log(kError, __func__, "tensor is not live, buffer is NULL or size is 0");
    return NRT_INVALID;
  }
  auto storage = std::make_shared<Storage>();
  storage->data = static_cast<uint8_t*>(buffer);
  storage->size = size;
  storage->owned = false;  // caller-owned, never freed by the runtime
  tensor->storage = std::move(storage);
  tensor->offset = 0;
  tensor->size = size;
  tensor->placement = NRT_TENSOR_PLACEMENT_VIRTUAL;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t* source, size_t offset, size_t size, const char* name,
                                     nrt_tensor_t** slice) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(source) || slice == nullptr || size == 0) {
    log(kError, __func__, "source is not a live tensor, tensor_slice is NULL, or size is 0");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, source, offset, size)) return s;
  auto* t = new nrt_tensor;
  t->magic = kTensorMagic;
  t->name = name_or(name);
  t->storage = source->storage;
  t->offset = source->offset + offset;
  t->size = size;
  t->placement = source->placement;
  t->vnc = source->vnc;
  rt().tensors.insert(t);
  *slice = t;
  return NRT_SUCCESS;
}

void* nrt_tensor_get_va(const nrt_tensor_t* tensor) {
  if (rt().state.load() != kInit) return nullptr;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || !tensor->storage) return nullptr;
  return bytes(tensor);
}

NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t* tensor,
                                                 nrt_tensor_device_allocation_info_t* info) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || info == nullptr || !tensor->storage || tensor->storage->chip < 0) {
    log(kError, __func__, "not a live device tensor, or alloc_info is NULL");
    return NRT_INVALID;
  }
  info->physical_address = tensor->storage->hbm_addr + tensor->offset;
  info->size = tensor->storage->size;
  info->hbm_index = 0;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_get_lnc_index(const nrt_tensor_t* tensor, int* lnc_idx) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || lnc_idx == nullptr) return NRT_INVALID;
  *lnc_idx = tensor->placement == NRT_TENSOR_PLACEMENT_DEVICE ? tensor->vnc : -1;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t* tensor, int64_t timeout, uint64_t expected) {
  if (tensor == nullptr) return NRT_INVALID;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!live(tensor)) return NRT_INVALID;
    if (tensor->completions >= expected) return NRT_SUCCESS;
  }
  // Executions are synchronous, so the counter cannot move while we wait.
  if (timeout > 0) std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(timeout, 1000000)));
  std::lock_guard<std::mutex> lock(rt().mu);
  if (live(tensor) && tensor->completions >= expected) return NRT_SUCCESS;
  log(kWarn, __func__, "tensor '{}' has completed {} of {} executions; no execution is pending (executions are synchronous)",
      tensor->name, tensor->completions, expected);
  return NRT_TIMEOUT;
}

NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t* tensor) {
  if (tensor == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor)) return NRT_INVALID;
  tensor->completions = 0;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_memcpy_to_device(void* dest, const void* src, size_t size) {
  if (size > 0 && (dest == nullptr || src == nullptr)) return NRT_INVALID;
  if (size > 0) std::memmove(dest, src, size);
  return NRT_SUCCESS;
}

// ---- tensor sets -----------------------------------------------------------

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** result) {
  NRT_GATE();
  if (result == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  auto* s = new TensorSet;
  s->magic = kSetMagic;
  rt().sets.insert(s);
  *result = s;
  return NRT_SUCCESS;
}

void nrt_destroy_tensor_set(nrt_tensor_set_t** tensor_set) {
  if (rt().state.load() == kChild || tensor_set == nullptr || *tensor_set == nullptr) return;
  std::lock_guard<std::mutex> lock(rt().mu);
  TensorSet* s = as_set(*tensor_set);
  if (s == nullptr) {
    log(kError, __func__, "not a live tensor set (already destroyed?)");
    return;
  }
  rt().sets.erase(s);
  delete s;  // member tensors are not freed
  *tensor_set = nullptr;
}

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* tensor_set, const char* name, nrt_tensor_t* tensor) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  TensorSet* s = as_set(tensor_set);
  if (s == nullptr || name == nullptr || !live(tensor)) {
    log(kError, __func__, "tensor_set, tensor_name or tensor is NULL or not live");
    return NRT_INVALID;
  }
  s->tensors[name] = tensor;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* tensor_set, const char* name, nrt_tensor_t** tensor) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  TensorSet* s = as_set(tensor_set);
  if (s == nullptr || name == nullptr || tensor == nullptr) {
    log(kError, __func__, "tensor_set, tensor_name or tensor is NULL or not live");
    return NRT_INVALID;
  }
  auto it = s->tensors.find(name);
  if (it == s->tensors.end()) {
    log(kDebug, __func__, "no tensor named '{}' in the set", name);
    return NRT_FAILURE;
  }
  *tensor = it->second;
  return NRT_SUCCESS;
}

// ---- models ----------------------------------------------------------------

NRT_STATUS nrt_load(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count, nrt_model_t** model) {
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
  log(kInfo, __func__, "NEFF '{}' is rank {} of a {}-rank collective job{}",
      m->data->neff.header.name, g_device_id, g_device_count,
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

NRT_STATUS nrt_get_model_nc_count(const nrt_model_t* model, uint32_t* n) { return model_count(__func__, model, n); }
NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t* model, uint32_t* n) { return model_count(__func__, model, n); }
NRT_STATUS nrt_get_model_instance_count(nrt_model_t* model, uint32_t* n) { return model_count(__func__, model, n); }

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
  std::vector<isa::neff::Tensor> all = model->data->neff.inputs();
  const size_t n_in = all.size();
  for (auto& t : model->data->neff.outputs()) all.push_back(std::move(t));
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
    for (uint32_t d = 0; d < e.ndim && e.shape != nullptr; ++d) e.shape[d] = static_cast<uint32_t>(all[i].shape[d]);
  }
  *tensor_info = arr;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* tensor_info) {
  if (tensor_info == nullptr) return NRT_SUCCESS;
  for (uint64_t i = 0; i < tensor_info->tensor_count; ++i) std::free(tensor_info->tensor_array[i].shape);
  std::free(tensor_info);
  return NRT_SUCCESS;
}

// ---- execution -------------------------------------------------------------

NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set, nrt_tensor_set_t* output_set) {
  NRT_GATE();
  ExecRequest req;
  std::shared_ptr<Device> dev;
  std::vector<std::shared_ptr<Storage>> keep;  // alive until the run is over
  std::vector<std::pair<uint32_t, uint64_t>> temp_maps;
  std::vector<const nrt_tensor*> outputs;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (!live(model)) {
      log(kError, __func__, "not a loaded model");
      return NRT_INVALID_HANDLE;
    }
    TensorSet* in = as_set(input_set);
    TensorSet* out = as_set(output_set);
    if (in == nullptr || out == nullptr) {
      log(kError, __func__, "the {} tensor set is NULL or not live", in == nullptr ? "input" : "output");
      return NRT_INVALID;
    }
    dev = rt().device;
    req.model = model->data;
    req.profile_path = model->data->profile_path;
    const ModelData& m = *req.model;
    NRT_STATUS bad = NRT_SUCCESS;
    for (const isa::TensorDecl& d : m.program.tensors) {
      if (d.kind != isa::TensorKind::input && d.kind != isa::TensorKind::output) continue;
      const bool is_in = d.kind == isa::TensorKind::input;
      TensorSet* set = is_in ? in : out;
      auto it = set->tensors.find(d.name);
      if (it == set->tensors.end()) {
        log(kError, __func__, "{} tensor '{}' of the model is missing from the {} set", is_in ? "input" : "output",
            d.name, is_in ? "input" : "output");
        bad = NRT_INVALID;
        break;
      }
      const nrt_tensor* t = it->second;
      if (!live(t) || !t->storage) {
        log(kError, __func__, "the tensor bound to '{}' has been freed or has no storage", d.name);
        bad = NRT_INVALID;
        break;
      }
      if (t->size != d.size_bytes()) {
        log(kError, __func__, "{} tensor '{}' has {} bytes, the model expects {}", is_in ? "input" : "output", d.name,
            t->size, d.size_bytes());
        bad = NRT_INVALID;
        break;
      }
      keep.push_back(t->storage);
      if (!is_in) outputs.push_back(t);
      const Storage& s = *t->storage;
      if (s.chip == static_cast<int>(m.chip) && s.device.lock() == dev) {
        req.bindings[d.var_id] = sim::TensorBinding{s.hbm_addr + t->offset, d.size_bytes()};
        continue;
      }
      // Host memory (or another chip's HBM): map it into this chip's HBM for the execution.
      const uint64_t addr = try_map(__func__, *dev, m.chip, s.data + t->offset, t->size, d.name.c_str());
      if (addr == kNoAddress) {
        log(kError, __func__, "no device memory left to map host tensor '{}' of {} bytes", d.name, t->size);
        bad = NRT_RESOURCE;
        break;
      }
      temp_maps.emplace_back(m.chip, addr);
      req.bindings[d.var_id] = sim::TensorBinding{addr, d.size_bytes()};
    }
    if (bad != NRT_SUCCESS) {
      for (auto [chip, addr] : temp_maps) dev->unmap_host(chip, addr);
      return bad;
    }
  }
  // A collective model's execution meets the other ranks of its job first.
  if (req.model->job)
    dev->submit_collective(req);
  else
    dev->submit(req);
  for (auto [chip, addr] : temp_maps) dev->unmap_host(chip, addr);
  if (req.status == NRT_SUCCESS) {
    std::lock_guard<std::mutex> lock(rt().mu);
    for (const nrt_tensor* t : outputs)
      if (live(t)) const_cast<nrt_tensor*>(t)->completions++;
  }
  return req.status;
}

NRT_STATUS nrt_execute_repeat(nrt_model_t* model, const nrt_tensor_set_t* input_set, nrt_tensor_set_t* output_set,
                              int repeat_count) {
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
  if (vnc < 0 || static_cast<size_t>(vnc) >= rt().device->config.visible.size()) return NRT_INVALID;
  return NRT_SUCCESS;  // executions are synchronous: nothing is ever queued when this runs
}

// ---- per-model profiling ----------------------------------------------------

NRT_STATUS nrt_profile_start(nrt_model_t* model, const char* filename) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(model)) return NRT_INVALID_HANDLE;
  if (filename == nullptr || *filename == '\0') {
    log(kError, __func__, "filename is NULL or empty");
    return NRT_INVALID;
  }
  model->data->profile_path = filename;
  log(kInfo, __func__, "profiling executions of '{}' to {} (Chrome trace JSON, plus {}.metrics.json)",
      model->data->neff.header.name, filename, filename);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_profile_stop(const char* filename) {
  NRT_GATE();
  if (filename == nullptr || *filename == '\0') return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  bool found = false;
  for (const nrt_model* m : rt().models) {
    if (m->data->profile_path == filename) {
      m->data->profile_path.clear();
      found = true;
    }
  }
  if (!found) {
    log(kError, __func__, "no profile was started with filename {}", filename);
    return NRT_INVALID;
  }
  return NRT_SUCCESS;
}

// ---- inspect (env-equivalent, writes our traces) ---------------------------

struct nrt_inspect_config {
  int session_id = 1;
  std::string output_dir = "./output";
  bool enable_inspect = false;
  bool enable_on_fail = false;
  uint64_t max_events = 1000000;
};

}  // extern "C"

namespace nrtsim {
NRT_STATUS set_inspect(const char* fn, bool on, const std::string& dir) {
  NRT_STATUS g = gate(fn);
  if (g != NRT_SUCCESS) return g;
  std::lock_guard<std::mutex> lock(rt().mu);
  Device& d = *rt().device;
  std::lock_guard<std::mutex> q(d.q_mu);
  d.inspect = on;
  d.inspect_dir = dir;
  if (on) log(kInfo, fn, "writing a Chrome trace and metrics of every execution to {}", dir);
  return NRT_SUCCESS;
}
}  // namespace nrtsim

extern "C" {

NRT_STATUS nrt_inspect_begin(void) {
  const char* dir = std::getenv("NEURON_RT_INSPECT_OUTPUT_DIR");
  return set_inspect(__func__, true, dir != nullptr && *dir != '\0' ? dir : "./output");
}

NRT_STATUS nrt_inspect_stop(void) { return set_inspect(__func__, false, "./output"); }

NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t* options) {
  return set_inspect(__func__, true, options != nullptr ? options->output_dir : std::string("./output"));
}

NRT_STATUS nrt_inspect_config_allocate(nrt_inspect_config_t** options) {
  if (options == nullptr) return NRT_INVALID;
  *options = new nrt_inspect_config;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_defaults(nrt_inspect_config_t* options) {
  if (options == nullptr) return NRT_INVALID;
  *options = nrt_inspect_config{};
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_free(nrt_inspect_config_t* options) {
  delete options;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_session_id(nrt_inspect_config_t* options, int session_id) {
  if (options == nullptr) return NRT_INVALID;
  options->session_id = session_id;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t* options, const char* output_dir) {
  if (options == nullptr || output_dir == nullptr || *output_dir == '\0') return NRT_INVALID;
  options->output_dir = output_dir;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_sys_trace_max_events_per_nc(nrt_inspect_config_t* options, uint64_t n) {
  if (options == nullptr) return NRT_INVALID;
  options->max_events = n;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_enable_inspect(nrt_inspect_config_t* options, bool enable) {
  if (options == nullptr) return NRT_INVALID;
  options->enable_inspect = enable;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_enable_inspect_on_fail(nrt_inspect_config_t* options, bool enable) {
  if (options == nullptr) return NRT_INVALID;
  options->enable_on_fail = enable;
  return NRT_SUCCESS;
}

}  // extern "C"
