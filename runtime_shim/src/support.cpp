// Logging, environment parsing, the HBM allocator, storage and the device thread.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "neuronsim/sim/functional.h"
#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/metrics.h"
#include "runtime.h"

namespace nrtsim {

// ---- logging -------------------------------------------------------------
namespace {
std::atomic<int> g_level{-1};
std::mutex g_log_mu;

std::string upper(const char* s) {
  std::string out;
  for (; *s; ++s) out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(*s))));
  return out;
}
}  // namespace

std::optional<int> parse_log_level(const char* value) {
  if (value == nullptr || *value == '\0') return kError;
  const std::string v = upper(value);
  if (v == "QUIET" || v == "DISABLED" || v == "OFF") return kDisabled;
  if (v == "ERROR") return kError;
  if (v == "WARN" || v == "WARNING") return kWarn;
  if (v == "INFO") return kInfo;
  if (v == "DEBUG") return kDebug;
  if (v == "TRACE") return kTrace;
  return std::nullopt;
}

int log_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = parse_log_level(std::getenv("NEURON_RT_LOG_LEVEL")).value_or(kError);
    g_level.store(l, std::memory_order_relaxed);
  }
  return l;
}

void set_log_level(int level) { g_level.store(level, std::memory_order_relaxed); }

void log_line(int level, const char* function, const std::string& message) {
  static const char* const kNames[] = {"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long usec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  const std::string line =
      fmt::format("{:04d}-{}-{:02d} {:02d}:{:02d}:{:02d}.{:06d} {}:{} {:<6} NRT:{:<20} {}\n", tm.tm_year + 1900,
                  kMonths[tm.tm_mon], tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, usec, getpid(),
                  static_cast<long>(syscall(SYS_gettid)), kNames[level < 1 ? 1 : level > 5 ? 5 : level], function,
                  message);
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fputs(line.c_str(), stderr);
}

// ---- configuration -------------------------------------------------------
namespace {

bool parse_uint(const std::string& s, uint64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::optional<bool> parse_bool(const char* v) {
  if (v == nullptr) return false;
  const std::string s = upper(v);
  if (s.empty() || s == "0" || s == "FALSE" || s == "NO" || s == "OFF") return false;
  if (s == "1" || s == "TRUE" || s == "YES" || s == "ON") return true;
  return std::nullopt;
}

// "n", "a-b" or "a,b,c" (contiguous, ascending).
std::optional<std::string> parse_core_list(const std::string& text, std::vector<uint32_t>& out) {
  out.clear();
  std::string s = trim(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item = trim(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    const size_t dash = item.find('-');
    uint64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse_uint(item, a)) return fmt::format("'{}' is not a core index", item);
      b = a;
    } else {
      if (!parse_uint(trim(item.substr(0, dash)), a) || !parse_uint(trim(item.substr(dash + 1)), b))
        return fmt::format("'{}' is not a core range", item);
      if (b < a) return fmt::format("the range '{}' is descending", item);
    }
    for (uint64_t c = a; c <= b; ++c) {
      if (!out.empty() && c != out.back() + 1) return "the cores must be contiguous and ascending";
      out.push_back(static_cast<uint32_t>(c));
      if (out.size() > 100000) return "too many cores";
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) return "no cores listed";
  return std::nullopt;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

}  // namespace

std::optional<std::string> read_config(Config& c) {
  if (auto level = parse_log_level(std::getenv("NEURON_RT_LOG_LEVEL")))
    set_log_level(*level);
  else
    return fmt::format("NEURON_RT_LOG_LEVEL='{}' is not one of ERROR, WARN, INFO, DEBUG, TRACE, QUIET",
                       std::getenv("NEURON_RT_LOG_LEVEL"));

  c.instance_name = env_or("NEURONSIM_INSTANCE", "trn2.3xlarge");
  try {
    c.instance = spec::load_instance(c.instance_name);
    c.generation = spec::load_generation(c.instance.generation);
  } catch (const std::exception& e) {
    return fmt::format("NEURONSIM_INSTANCE='{}': {}", c.instance_name, e.what());
  }

  uint64_t lnc = 1;
  if (const char* v = std::getenv("NEURON_RT_VIRTUAL_CORE_SIZE"); v != nullptr && *v != '\0') {
    if (!parse_uint(trim(v), lnc) || lnc == 0 || c.instance.cores_per_chip % lnc != 0)
      return fmt::format("NEURON_RT_VIRTUAL_CORE_SIZE='{}' must be a positive divisor of the {} cores per chip of {}",
                         v, c.instance.cores_per_chip, c.instance.name);
  }
  c.lnc = static_cast<uint32_t>(lnc);
  const uint32_t total = c.instance.total_cores() / c.lnc;

  c.visible.clear();
  if (const char* v = std::getenv("NEURON_RT_VISIBLE_CORES"); v != nullptr && *v != '\0') {
    if (auto err = parse_core_list(v, c.visible)) return fmt::format("NEURON_RT_VISIBLE_CORES='{}': {}", v, *err);
    if (c.visible.back() >= total)
      return fmt::format("NEURON_RT_VISIBLE_CORES='{}': core {} does not exist; {} has {} logical cores (0-{})", v,
                         c.visible.back(), c.instance.name, total, total - 1);
  } else if (const char* n = std::getenv("NEURON_RT_NUM_CORES"); n != nullptr && *n != '\0') {
    uint64_t count = 0;
    if (!parse_uint(trim(n), count)) return fmt::format("NEURON_RT_NUM_CORES='{}' is not a number", n);
    if (count > total)
      return fmt::format("NEURON_RT_NUM_CORES={} asks for more cores than the {} logical cores of {}", count, total,
                         c.instance.name);
    if (count == 0) count = total;
    for (uint32_t i = 0; i < count; ++i) c.visible.push_back(i);
  } else {
    for (uint32_t i = 0; i < total; ++i) c.visible.push_back(i);
  }

  if (const char* v = std::getenv("NEURON_RT_EXEC_TIMEOUT"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(t >= 0))
      return fmt::format("NEURON_RT_EXEC_TIMEOUT='{}' is not a number of seconds", v);
    c.exec_timeout_s = t;
  }
  if (const char* v = std::getenv("NEURON_RT_ROOT_COMM_ID"); v != nullptr && *v != '\0')
    c.root_comm_id = v;
  auto nan = parse_bool(std::getenv("NEURON_FAIL_ON_NAN"));
  if (!nan) return fmt::format("NEURON_FAIL_ON_NAN='{}' is not 0 or 1", std::getenv("NEURON_FAIL_ON_NAN"));
  c.fail_on_nan = *nan;
  if (const char* v = std::getenv("NEURON_RT_NUMERICAL_ERRORS_VERBOSITY"); v != nullptr && upper(v) == "CRITICAL")
    c.fail_on_nan = true;

  const std::string mode = upper(env_or("NEURONSIM_MODE", "FUNCTIONAL-AND-TIMING").c_str());
  if (mode == "FUNCTIONAL-AND-TIMING" || mode == "DEFAULT")
    c.mode = sim::Mode::functional_and_timing;
  else if (mode == "TIMING-ONLY")
    c.mode = sim::Mode::timing_only;
  else if (mode == "FUNCTIONAL-ONLY")
    c.mode = sim::Mode::functional_only;
  else
    return fmt::format("NEURONSIM_MODE='{}' is not functional-and-timing, functional-only or timing-only",
                       std::getenv("NEURONSIM_MODE"));

  c.trace_path = env_or("NEURONSIM_TRACE", "");
  auto inspect = parse_bool(std::getenv("NEURON_RT_INSPECT_ENABLE"));
  if (!inspect)
    return fmt::format("NEURON_RT_INSPECT_ENABLE='{}' is not 0 or 1", std::getenv("NEURON_RT_INSPECT_ENABLE"));
  c.inspect = *inspect;
  c.inspect_dir = env_or("NEURON_RT_INSPECT_OUTPUT_DIR", "./output");
  return std::nullopt;
}

uint32_t total_logical_cores_from_env(uint32_t* visible) {
  Config c;
  if (!read_config(c)) {
    if (visible) *visible = static_cast<uint32_t>(c.visible.size());
    return c.instance.total_cores() / c.lnc;
  }
  return 0;
}

// ---- HBM allocator -------------------------------------------------------
HbmAllocator::HbmAllocator(uint64_t capacity) : capacity_(capacity) {
  // Leave the first page unused, so that no tensor sits at address 0.
  if (capacity > 4096) free_[4096] = capacity - 4096;
}

std::optional<uint64_t> HbmAllocator::allocate(uint64_t size) {
  const uint64_t need = (size + 63) / 64 * 64;
  if (need == 0 || need < size) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const uint64_t addr = it->first, left = it->second - need;
    free_.erase(it);
    if (left > 0) free_[addr + need] = left;
    taken_[addr] = need;
    used_ += need;
    return addr;
  }
  return std::nullopt;
}

void HbmAllocator::free(uint64_t addr) {
  auto t = taken_.find(addr);
  if (t == taken_.end()) return;
  uint64_t start = addr, size = t->second;
  used_ -= size;
  taken_.erase(t);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      prev->second += size;
      return;
    }
  }
  free_[start] = size;
}

// ---- storage -------------------------------------------------------------
Storage::~Storage() {
  if (chip >= 0) {
    if (auto dev = device.lock()) dev->unmap_host(static_cast<uint32_t>(chip), hbm_addr);
  }
  if (owned) std::free(data);
}

// ---- device --------------------------------------------------------------
Device::~Device() {
  {
    std::lock_guard<std::mutex> lock(q_mu);
    stop = true;
  }
  q_cv.notify_all();
  if (thread.joinable()) thread.join();
}

void Device::start() { thread = std::thread([this] { run_loop(); }); }

std::optional<uint64_t> Device::map_host(uint32_t chip, uint8_t* host, uint64_t size) {
  std::lock_guard<std::mutex> lock(sim_mu);
  auto addr = allocators.at(chip).allocate(size);
  if (!addr) return std::nullopt;
  sim->hbm(chip).map(*addr, host, size);
  return addr;
}

bool Device::fits(uint32_t chip, uint64_t size) {
  std::lock_guard<std::mutex> lock(sim_mu);
  const HbmAllocator& a = allocators.at(chip);
  return size <= a.capacity() - a.used();
}

void Device::unmap_host(uint32_t chip, uint64_t addr) {
  std::lock_guard<std::mutex> lock(sim_mu);
  sim->hbm(chip).unmap(addr);
  allocators.at(chip).free(addr);
}

void Device::enqueue(ExecRequest& r) {
  std::lock_guard<std::mutex> lock(q_mu);
  r.seq = ++exec_seq;
  queue.push_back(&r);
  q_cv.notify_all();
}

void Device::wait_done(ExecRequest& r) {
  std::unique_lock<std::mutex> lock(q_mu);
  q_cv.wait(lock, [&] { return r.done; });
}

void Device::submit(ExecRequest& r) {
  enqueue(r);
  wait_done(r);
}

namespace {

NRT_STATUS status_of(const sim::ExecError& e) {
  switch (e.kind()) {
    case sim::ExecError::Kind::out_of_bounds: return NRT_EXEC_OOB;
    case sim::ExecError::Kind::nan: return NRT_EXEC_COMPLETED_WITH_NUM_ERR;
    case sim::ExecError::Kind::deadlock: return NRT_TIMEOUT;
    case sim::ExecError::Kind::unsupported: return NRT_EXEC_COMPLETED_WITH_ERR;
  }
  return NRT_FAILURE;
}

void write_trace(const sim::RunResult& result, const traces::TraceOptions& options, const std::string& path,
                 bool metrics) {
  try {
    const std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    traces::write_chrome_trace(result, options, p);
    if (metrics) traces::write_metrics_json(result, {}, p.string() + ".metrics.json");
    log(kInfo, "nrt_execute", "wrote the trace of this execution to {}", path);
  } catch (const std::exception& e) {
    log(kWarn, "nrt_execute", "could not write the trace {}: {}", path, e.what());
  }
}

}  // namespace

std::pair<NRT_STATUS, std::string> Device::run_batch(const std::vector<ExecRequest*>& batch,
                                                     bool do_inspect, const std::string& dir,
                                                     const sim::CollectiveBinding& binding) {
  std::vector<uint32_t> loaded;
  NRT_STATUS status = NRT_SUCCESS;
  std::string error;
  try {
    for (ExecRequest* r : batch) {
      const ModelData& m = *r->model;
      sim::CoreState& cs = sim->core(m.core);
      cs.tensors = m.fixed;
      for (const auto& [id, b] : r->bindings) cs.tensors[id] = b;
      cs.fail_on_nan = config.fail_on_nan;
      if (!m.neff.subgraphs.empty()) cs.fp8 = m.neff.subgraphs.front().fp8;
      sim->load(m.core, m.program);
      loaded.push_back(m.core);
    }
    bool profile = false;
    for (ExecRequest* r : batch) profile |= !r->profile_path.empty();
    sim::RunOptions options;
    options.mode = config.mode;
    options.record = profile || do_inspect || !config.trace_path.empty();
    options.collectives = binding;
    const sim::RunResult result = sim->run(options);
    if (config.exec_timeout_s > 0 && config.mode != sim::Mode::functional_only) {
      for (size_t i = 0; i < result.cores.size(); ++i) {
        const double seconds = static_cast<double>(result.cores[i].end_ps) * 1e-12;
        if (seconds <= config.exec_timeout_s) continue;
        for (ExecRequest* r : batch)
          if (r->model->core == result.core_ids[i]) {
            r->status = NRT_TIMEOUT;
            log(kError, "nrt_execute",
                "execution on core {} took {} s of simulated time, more than NEURON_RT_EXEC_TIMEOUT={} s",
                result.core_ids[i], seconds, config.exec_timeout_s);
          }
      }
    }
    if (options.record) {
      traces::TraceOptions topts;
      for (ExecRequest* r : batch) topts.programs[r->model->core] = &r->model->program;
      for (ExecRequest* r : batch)
        if (!r->profile_path.empty()) write_trace(result, topts, r->profile_path, true);
      if (!config.trace_path.empty()) write_trace(result, topts, config.trace_path, false);
      if (do_inspect)
        write_trace(result, topts, fmt::format("{}/neuronsim_exec_{:06d}.trace.json", dir, batch.front()->seq), true);
    }
  } catch (const sim::ExecError& e) {
    status = status_of(e);
    error = e.what();
  } catch (const std::out_of_range& e) {
    status = NRT_EXEC_OOB;
    error = e.what();
  } catch (const std::exception& e) {
    status =
        comm_error_status(e).value_or(NRT_FAILURE);  // a CommError between ranks, or anything else
    error = e.what();
  }
  for (uint32_t core : loaded) {
    try {
      sim->unload(core);
    } catch (...) {
    }
  }
  return {status, error};
}

// Takes the next simulated run's requests off the queue (q_mu held): a collective round alone
// when it is first in line (a fault in it belongs to the whole job, and across processes it
// must not run twice), else every request on a distinct core, rounds left for later.
void Device::take_batch(std::vector<ExecRequest*>& batch) {
  if (!queue.front()->round.empty()) {
    batch.push_back(queue.front());
    queue.pop_front();
    return;
  }
  std::unordered_set<uint32_t> cores;
  for (auto it = queue.begin(); it != queue.end();) {
    if ((*it)->round.empty() && cores.insert((*it)->model->core).second) {
      batch.push_back(*it);
      it = queue.erase(it);
    } else {
      ++it;
    }
  }
}

void Device::run_loop() {
  for (;;) {
    std::vector<ExecRequest*> batch;
    bool do_inspect = false;
    std::string dir;
    {
      std::unique_lock<std::mutex> lock(q_mu);
      q_cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      // A short gathering window, so that executions submitted together on
      // different cores share one simulated run (and contend for HBM).
      q_cv.wait_for(lock, std::chrono::microseconds(200), [&] { return stop; });
      take_batch(batch);
      do_inspect = inspect;
      dir = inspect_dir;
    }
    if (batch.size() > 1)
      log(kDebug, "nrt_execute", "running a batch of {} executions together in one simulated run", batch.size());
    if (!batch.front()->round.empty()) {
      std::lock_guard<std::mutex> lock(sim_mu);
      run_round(*batch.front(), do_inspect, dir);
    } else {
      std::lock_guard<std::mutex> lock(sim_mu);
      auto [status, error] = run_batch(batch, do_inspect, dir);
      if (status != NRT_SUCCESS && batch.size() == 1) {
        batch.front()->status = status;
        log(kError, "nrt_execute", "execution failed (status {}): {}", static_cast<int>(status), error);
      } else if (status != NRT_SUCCESS) {
        // One simulated run covered them all: run each alone to find which one faulted.
        log(kWarn, "nrt_execute", "a batch of {} executions faulted ({}); running each alone to attribute it",
            batch.size(), error);
        for (ExecRequest* r : batch) {
          auto [s1, e1] = run_batch({r}, do_inspect, dir);
          if (s1 != NRT_SUCCESS) {
            r->status = s1;
            log(kError, "nrt_execute", "execution failed (status {}): {}", static_cast<int>(s1), e1);
          }
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(q_mu);
      for (ExecRequest* r : batch) {
        r->done = true;
        for (ExecRequest* m : r->round) m->done = true;
      }
    }
    q_cv.notify_all();
  }
}

}  // namespace nrtsim
