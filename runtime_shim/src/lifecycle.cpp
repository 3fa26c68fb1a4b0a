// The lifecycle (spec §5.2) and the topology: nrt_init, nrt_close, versions, core counts,
// instance and device ids, memory use, status names.
#include <pthread.h>

#include <cstdio>
#include <cstring>

#include "nrt/nrt_version.h"
#include "runtime.h"

namespace neuronsim::rt {

Runtime& rt() {
  static Runtime* r = new Runtime;  // never destroyed: API calls may come from atexit handlers
  return *r;
}

NRT_STATUS gate(const char* function) {
  switch (rt().state.load()) {
    case kInit:
      return NRT_SUCCESS;
    case kStart:
      log(kError, function, "NRT uninitialized: call nrt_init first");
      return NRT_UNINITIALIZED;
    case kClosed:
      log(kError, function, "NRT is closed");
      return NRT_CLOSED;
    default:
      log(kError, function,
          "Incompatible runtime state: NRT_STATE_CHILD (called in a forked child)");
      return NRT_FAILURE;
  }
}

bool live(const nrt_tensor* t) {
  return t != nullptr && rt().tensors.count(t) != 0;
}
bool live(const nrt_model* m) {
  return m != nullptr && rt().models.count(m) != 0;
}
TensorSet* as_set(const void* s) {
  auto* set = static_cast<const TensorSet*>(s);
  return s != nullptr && rt().sets.count(set) != 0 ? const_cast<TensorSet*>(set) : nullptr;
}
const char* name_or(const char* n) {
  return n != nullptr ? n : "(unnamed)";
}

Session::~Session() {
  finish_async(*this);
  device.reset();  // waits for the work in its queues
}

namespace {

void on_fork_child() {
  if (rt().state.load() == kInit) rt().state.store(kChild);
}

// The current session's configuration (rt().mu held, INIT).
const Config& config() {
  return rt().session->config;
}

}  // namespace
}  // namespace neuronsim::rt

using namespace neuronsim::rt;

extern "C" {

NRT_STATUS nrt_init(nrt_framework_type_t framework, const char* fw_version,
                    const char* fal_version) {
  Runtime& r = rt();
  if (r.state.load() == kChild) return gate(__func__);
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.state.load() == kInit) return NRT_SUCCESS;
  if (r.state.load() != kStart) return gate(__func__);
  static std::once_flag fork_once;
  std::call_once(fork_once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });

  auto s = std::make_shared<Session>();
  Config& c = s->config;
  if (auto err = read_config(c)) {
    log(kError, __func__, "invalid configuration: {}", *err);
    return NRT_INVALID;
  }
  try {
    sim::DeviceOptions options;
    options.mode = c.mode;
    options.fail_on_nan = c.fail_on_nan;
    options.launch = c.launch;
    s->device = std::make_shared<sim::Device>(c.instance, c.generation, std::move(options));
  } catch (const std::exception& e) {
    log(kError, __func__, "cannot create the simulated instance {}: {}", c.instance_name, e.what());
    return NRT_FAILURE;
  }
  start_env_traces(*s);
  r.session = std::move(s);
  r.state.store(kInit);
  log(kInfo, __func__,
      "neuronsim runtime on {} ({} logical cores of {} physical cores each; {} visible, from core "
      "{}); framework {}, {} {}",
      c.instance_name, c.instance.total_cores() / c.lnc, c.lnc, c.visible.size(), c.visible.front(),
      static_cast<int>(framework), fw_version != nullptr ? fw_version : "",
      fal_version != nullptr ? fal_version : "");
  return NRT_SUCCESS;
}

void nrt_close(void) {
  Runtime& r = rt();
  if (r.state.load() != kInit) return;
  std::shared_ptr<Session> s;
  std::vector<TraceFile> traces;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.state.load() != kInit) return;
    r.state.store(kClosed);
    for (const nrt_model* m : r.models) delete m;
    r.models.clear();
    r.job.reset();
    s = std::move(r.session);
    traces = take_traces(*s);
  }
  // Written once the executions queued before now are done; the device goes when the last
  // execution in flight lets go of the session.
  for (const TraceFile& t : traces) finish_trace(__func__, *s->device, t);
  s.reset();
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
  std::snprintf(ver->rt_detail, sizeof ver->rt_detail,
                "libnrt version %d.%d.0.0 (neuronsim simulator runtime)",
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
      const Config& c = r.session->config;
      *out = visible ? static_cast<uint32_t>(c.visible.size()) : c.instance.total_cores() / c.lnc;
      return NRT_SUCCESS;
    }
  }
  uint32_t vis = 0;
  const uint32_t total = total_logical_cores_from_env(&vis);
  if (total == 0) {
    log(kError, fn,
        "the environment does not describe a valid configuration (see NEURONSIM_INSTANCE, "
        "NEURON_RT_*)");
    return NRT_INVALID;
  }
  *out = visible ? vis : total;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_total_nc_count(uint32_t* n) {
  return count_cores(__func__, n, false);
}
NRT_STATUS nrt_get_total_vnc_count(uint32_t* n) {
  return count_cores(__func__, n, false);
}
NRT_STATUS nrt_get_visible_nc_count(uint32_t* n) {
  return count_cores(__func__, n, true);
}
NRT_STATUS nrt_get_visible_vnc_count(uint32_t* n) {
  return count_cores(__func__, n, true);
}

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t len) {
  NRT_GATE();
  if (info == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = config();
  nrt_instance_info_t out{};
  // The instance's family and size come from its spec (instances.json).
  static const std::pair<const char*, uint32_t> kFamilies[] = {
      {"inf2", NRT_INSTANCE_INF2}, {"trn1", NRT_INSTANCE_TRN1},   {"trn1n", NRT_INSTANCE_TRN1N},
      {"trn2", NRT_INSTANCE_TRN2}, {"trn2u", NRT_INSTANCE_TRN2U}, {"trn3", NRT_INSTANCE_TRN3}};
  out.family = NRT_INSTANCE_UNKNOWN;
  for (const auto& [f, v] : kFamilies)
    if (c.instance.family == f) out.family = v;
  static const std::pair<const char*, uint32_t> kSizes[] = {
      {"xlarge", NRT_INSTANCE_SIZE_1XL},    {"2xlarge", NRT_INSTANCE_SIZE_2XL},
      {"4xlarge", NRT_INSTANCE_SIZE_4XL},   {"6xlarge", NRT_INSTANCE_SIZE_6XL},
      {"8xlarge", NRT_INSTANCE_SIZE_8XL},   {"24xlarge", NRT_INSTANCE_SIZE_24XL},
      {"32xlarge", NRT_INSTANCE_SIZE_32XL}, {"48xlarge", NRT_INSTANCE_SIZE_48XL},
      {"3xlarge", NRT_INSTANCE_SIZE_3XL}};
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
    case NRT_SUCCESS:
      return "NRT_SUCCESS";
    case NRT_FAILURE:
      return "NRT_FAILURE";
    case NRT_INVALID:
      return "NRT_INVALID";
    case NRT_INVALID_HANDLE:
      return "NRT_INVALID_HANDLE";
    case NRT_RESOURCE:
      return "NRT_RESOURCE";
    case NRT_TIMEOUT:
      return "NRT_TIMEOUT";
    case NRT_HW_ERROR:
      return "NRT_HW_ERROR";
    case NRT_QUEUE_FULL:
      return "NRT_QUEUE_FULL";
    case NRT_LOAD_NOT_ENOUGH_NC:
      return "NRT_LOAD_NOT_ENOUGH_NC";
    case NRT_UNSUPPORTED_NEFF_VERSION:
      return "NRT_UNSUPPORTED_NEFF_VERSION";
    case NRT_FAIL_HOST_MEM_ALLOC:
      return "NRT_FAIL_HOST_MEM_ALLOC";
    case NRT_UNINITIALIZED:
      return "NRT_UNINITIALIZED";
    case NRT_CLOSED:
      return "NRT_CLOSED";
    case NRT_QUEUE_EMPTY:
      return "NRT_QUEUE_EMPTY";
    case NRT_EXEC_UNIT_UNRECOVERABLE:
      return "NRT_EXEC_UNIT_UNRECOVERABLE";
    case NRT_EXEC_BAD_INPUT:
      return "NRT_EXEC_BAD_INPUT";
    case NRT_EXEC_COMPLETED_WITH_NUM_ERR:
      return "NRT_EXEC_COMPLETED_WITH_NUM_ERR";
    case NRT_EXEC_COMPLETED_WITH_ERR:
      return "NRT_EXEC_COMPLETED_WITH_ERR";
    case NRT_EXEC_NC_BUSY:
      return "NRT_EXEC_NC_BUSY";
    case NRT_EXEC_OOB:
      return "NRT_EXEC_OOB";
    case NRT_COLL_PENDING:
      return "NRT_COLL_PENDING";
    case NRT_EXEC_HW_ERR_COLLECTIVES:
      return "NRT_EXEC_HW_ERR_COLLECTIVES";
    case NRT_EXEC_HW_ERR_HBM_UE:
      return "NRT_EXEC_HW_ERR_HBM_UE";
    case NRT_EXEC_HW_ERR_NC_UE:
      return "NRT_EXEC_HW_ERR_NC_UE";
    case NRT_EXEC_HW_ERR_DMA_ABORT:
      return "NRT_EXEC_HW_ERR_DMA_ABORT";
    case NRT_EXEC_SW_NQ_OVERFLOW:
      return "NRT_EXEC_SW_NQ_OVERFLOW";
    case NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE:
      return "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE";
    case NRT_NETWORK_PROXY_FAILURE:
      return "NRT_NETWORK_PROXY_FAILURE";
  }
  return "NRT_UNKNOWN_STATUS";
}

NRT_STATUS nrt_get_device_id(int lnc_idx, int* device_id) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = config();
  if (device_id == nullptr || lnc_idx < 0 || static_cast<size_t>(lnc_idx) >= c.visible.size()) {
    log(kError, __func__, "core {} is not one of the {} visible cores (or device_id is NULL)",
        lnc_idx, c.visible.size());
    return NRT_INVALID;
  }
  *device_id = static_cast<int>(c.chip_of(static_cast<uint32_t>(lnc_idx)));
  return NRT_SUCCESS;
}

NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t* host_device_id) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (host_device_id == nullptr || neuron_dev < 0 ||
      static_cast<uint32_t>(neuron_dev) >= config().instance.chips) {
    log(kError, __func__, "device {} does not exist (or host_device_id is NULL)", neuron_dev);
    return NRT_INVALID;
  }
  *host_device_id = static_cast<uint32_t>(neuron_dev);  // no container remapping in the simulator
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats,
                                    size_t stats_size_in, size_t* stats_size_out) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = config();
  if (stats == nullptr || vnc >= c.visible.size()) {
    log(kError, __func__, "core {} is not one of the {} visible cores (or stats is NULL)", vnc,
        c.visible.size());
    return NRT_INVALID;
  }
  nrt_vnc_memory_stats_t s{};
  const sim::Device::MemoryUse use = rt().session->device->memory(c.chip_of(vnc));
  s.bytes_used = use.used;
  s.bytes_limit = use.capacity;
  const size_t n = std::min(stats_size_in, sizeof s);
  std::memcpy(stats, &s, n);
  if (stats_size_out != nullptr) *stats_size_out = n;
  return NRT_SUCCESS;
}

}  // extern "C"
