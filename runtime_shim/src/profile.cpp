// Profiling: device trace sessions written as Chrome traces (traces/chrome_trace.h) with their
// metrics (traces/metrics.h). Each spans many executions on the device clock, one named
// kernel slice per execution:
//   - NEURONSIM_TRACE: the whole nrt_init .. nrt_close session, written at nrt_close;
//   - inspect (NEURON_RT_INSPECT_ENABLE, nrt_inspect_begin*): until nrt_inspect_stop or
//     nrt_close, to <output dir>/neuronsim_session.trace.json;
//   - nrt_profile_start(model, file) .. nrt_profile_stop(file): that model's executions.
#include <filesystem>

#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/metrics.h"
#include "runtime.h"

namespace neuronsim::rt {
namespace {

constexpr const char* kInspectTrace = "neuronsim_session.trace.json";
constexpr const char* kInspectMetrics = "neuronsim_session.metrics.json";

TraceFile start_trace(Session& s, sim::TraceLimits limits, std::string path, std::string metrics,
                      const char* what) {
  TraceFile f;
  f.session = s.device->start_trace(std::move(limits));
  f.path = std::move(path);
  f.metrics = std::move(metrics);
  f.what = what;
  return f;
}

TraceFile start_inspect(Session& s, const std::string& dir, uint64_t max_events_per_nc) {
  sim::TraceLimits limits;
  limits.max_events_per_core = max_events_per_nc;
  const std::filesystem::path d(dir);
  return start_trace(s, std::move(limits), (d / kInspectTrace).string(),
                     (d / kInspectMetrics).string(), "inspect");
}

}  // namespace

void start_env_traces(Session& s) {
  const Config& c = s.config;
  if (!c.trace_path.empty()) s.env_trace = start_trace(s, {}, c.trace_path, "", "NEURONSIM_TRACE");
  if (c.inspect) s.inspect = start_inspect(s, c.inspect_dir, c.inspect_max_events);
}

std::vector<TraceFile> take_traces(Session& s) {
  std::vector<TraceFile> out;
  if (s.env_trace) out.push_back(*s.env_trace);
  if (s.inspect) out.push_back(*s.inspect);
  for (const auto& [file, p] : s.profiles) out.push_back(p.file);
  s.env_trace.reset();
  s.inspect.reset();
  s.profiles.clear();
  return out;
}

void finish_trace(const char* fn, sim::Device& device, const TraceFile& f) {
  try {
    const sim::TraceSession t = device.stop_trace(f.session);
    const std::filesystem::path p(f.path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    traces::write_chrome_trace(t.result, {}, p);
    if (!f.metrics.empty()) traces::write_metrics_json(t.result, {}, f.metrics);
    log(kInfo, fn, "wrote the {} trace of {} executions to {}", f.what, t.result.executions.size(),
        f.path);
    if (t.dropped_events > 0)
      log(kWarn, fn,
          "the {} trace {} left out {} instruction, DMA and semaphore events (its event limit)",
          f.what, f.path, t.dropped_events);
  } catch (const std::exception& e) {
    log(kWarn, fn, "could not write the trace {}: {}", f.path, e.what());
  }
}

}  // namespace neuronsim::rt

using namespace neuronsim::rt;

// What nrt_inspect_begin_with_options honours. The other settings of libnrt's config are
// refused by their setters (here and in unsupported.cpp), so that none is silently ignored.
struct nrt_inspect_config {
  std::string output_dir = "./output";
  uint64_t max_events = 1000000;  // sys_trace_max_events_per_nc: a cap on each core's events
  bool enable_inspect = false;
};

namespace {

// Ends the running inspect session (writing it) and starts `next` when given.
NRT_STATUS restart_inspect(const char* fn, const std::optional<nrt_inspect_config>& next) {
  NRT_STATUS g = gate(fn);
  if (g != NRT_SUCCESS) return g;
  std::shared_ptr<Session> s;
  std::optional<TraceFile> old;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    s = rt().session;
    old = std::move(s->inspect);
    s->inspect.reset();
    if (next) {
      s->inspect = start_inspect(*s, next->output_dir, next->max_events);
      log(kInfo, fn,
          "tracing every execution to {} (Chrome trace) and {} (metrics), at most {} events per "
          "NeuronCore",
          s->inspect->path, s->inspect->metrics, next->max_events);
    }
  }
  if (old) finish_trace(fn, *s->device, *old);
  return NRT_SUCCESS;
}

}  // namespace

extern "C" {

// ---- per-model profiling ----------------------------------------------------

NRT_STATUS nrt_profile_start(nrt_model_t* model, const char* filename) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(model)) return NRT_INVALID_HANDLE;
  if (filename == nullptr || *filename == '\0') {
    log(kError, __func__, "filename is NULL or empty");
    return NRT_INVALID;
  }
  Session& s = *rt().session;
  if (s.profiles.count(filename) != 0) {
    log(kError, __func__, "a profile to {} is already running; stop it with nrt_profile_stop first",
        filename);
    return NRT_INVALID;
  }
  sim::TraceLimits limits;
  limits.programs = {model->data->program.get()};
  s.profiles[filename] = {start_trace(s, std::move(limits), filename,
                                      std::string(filename) + ".metrics.json", "profile"),
                          model->data->program};
  log(kInfo, __func__,
      "profiling executions of '{}' to {} (Chrome trace JSON, plus {}.metrics.json)",
      model->data->name, filename, filename);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_profile_stop(const char* filename) {
  NRT_GATE();
  if (filename == nullptr || *filename == '\0') return NRT_INVALID;
  std::shared_ptr<Session> s;
  TraceFile file;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    s = rt().session;
    auto it = s->profiles.find(filename);
    if (it == s->profiles.end()) {
      log(kError, __func__, "no profile was started with filename {}", filename);
      return NRT_INVALID;
    }
    file = it->second.file;
    s->profiles.erase(it);
  }
  finish_trace(__func__, *s->device, file);
  return NRT_SUCCESS;
}

// ---- inspect ------------------------------------------------------------------

NRT_STATUS nrt_inspect_begin(void) {
  nrt_inspect_config options;
  options.enable_inspect = true;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (rt().state.load() == kInit) {
      options.output_dir = rt().session->config.inspect_dir;
      options.max_events = rt().session->config.inspect_max_events;
    }
  }
  return restart_inspect(__func__, options);
}

NRT_STATUS nrt_inspect_stop(void) {
  return restart_inspect(__func__, std::nullopt);
}

NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t* options) {
  const nrt_inspect_config o = options != nullptr ? *options : nrt_inspect_config{};
  if (!o.enable_inspect) {
    if (gate(__func__) == NRT_SUCCESS)
      log(kInfo, __func__, "enable_inspect is off in the options: nothing is traced");
    return restart_inspect(__func__, std::nullopt);
  }
  return restart_inspect(__func__, o);
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
  log(kError, __func__,
      "session ids are not supported by neuronsim (session {} asked): each inspect session writes "
      "{} in its "
      "output directory",
      session_id, kInspectTrace);
  return NRT_FAILURE;
}

NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t* options,
                                             const char* output_dir) {
  if (options == nullptr || output_dir == nullptr || *output_dir == '\0') return NRT_INVALID;
  options->output_dir = output_dir;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_sys_trace_max_events_per_nc(nrt_inspect_config_t* options,
                                                              uint64_t n) {
  if (options == nullptr || n == 0) return NRT_INVALID;
  options->max_events = n;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_enable_inspect(nrt_inspect_config_t* options, bool enable) {
  if (options == nullptr) return NRT_INVALID;
  options->enable_inspect = enable;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_inspect_config_set_enable_inspect_on_fail(nrt_inspect_config_t* options,
                                                         bool enable) {
  if (options == nullptr) return NRT_INVALID;
  if (!enable) return NRT_SUCCESS;  // what neuronsim does: failed executions are not traced
  log(kError, __func__,
      "profiles of failed executions are not supported by neuronsim (only successful executions "
      "are traced)");
  return NRT_FAILURE;
}

}  // extern "C"
