// Internals of libnrt.so.1 (neuronsim's libnrt-compatible runtime), a C veneer over
// sim::Device. Not installed.
//
// One Runtime per process holds the lifecycle state and the live handles; each nrt_init ..
// nrt_close is one Session, which owns the simulated instance (a sim::Device) and the trace
// sessions running on it. Runtime::mu guards the handles and the session's bookkeeping; it is
// never held while waiting for the device, so allocations never wait behind an execution.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/isa/neff.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/sim/environment.h"
#include "neuronsim/spec/config.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_status.h"

namespace neuronsim::cc {
class Communicator;
}

namespace neuronsim::rt {

// For the C entry points, which live at global scope with `using namespace neuronsim::rt`.
namespace sim = ::neuronsim::sim;
namespace spec = ::neuronsim::spec;
namespace isa = ::neuronsim::isa;

// ---- logging (log.cpp) ---------------------------------------------------
enum LogLevel { kDisabled = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4, kTrace = 5 };
// Parses NEURON_RT_LOG_LEVEL-style values; nullopt when unknown.
std::optional<int> parse_log_level(const char* value);
int log_level();
void set_log_level(int level);
void log_line(int level, const char* function, const std::string& message);
std::string upper(const char* s);  // ASCII upper case

template <typename... Args>
void log(int level, const char* function, fmt::format_string<Args...> f, Args&&... args) {
  if (level > log_level()) return;
  log_line(level, function, fmt::format(f, std::forward<Args>(args)...));
}

// ---- configuration (env.cpp) ---------------------------------------------
struct Config : sim::Environment {
  double exec_timeout_s = 0;  // 0 = none
  std::string root_comm_id;   // NEURON_RT_ROOT_COMM_ID: collectives across processes
  std::string trace_path;     // NEURONSIM_TRACE
  bool inspect = false;       // NEURON_RT_INSPECT_ENABLE
  std::string inspect_dir = "./output";
  uint64_t inspect_max_events = 1000000;  // NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC
};
// Reads the environment. Returns an error message when something is invalid.
std::optional<std::string> read_config(Config& out);
// Total logical cores of the configured (or default) instance, for the pre-init getters.
uint32_t total_logical_cores_from_env(uint32_t* visible);

// ---- traces (profile.cpp) --------------------------------------------------
// A device trace session and where it goes when it ends.
struct TraceFile {
  uint64_t session = 0;   // sim::Device::start_trace
  std::string path;       // the Chrome trace
  std::string metrics;    // its metrics, or empty for none
  const char* what = "";  // "NEURONSIM_TRACE", "inspect", "profile": for log lines
};

// ---- one nrt_init .. nrt_close -------------------------------------------
struct CollectiveJob;
struct AsyncQueues;  // async.cpp

struct Session {
  Config config;
  // Shared with the storage of device tensors, which frees its HBM while the device lives.
  std::shared_ptr<sim::Device> device;
  // Trace sessions on the device (Runtime::mu): NEURONSIM_TRACE, inspect, and the per-model
  // profiles by file name.
  std::optional<TraceFile> env_trace, inspect;
  struct Profile {
    TraceFile file;
    sim::ProgramRef program;  // keeps the session's program filter meaningful
  };
  std::map<std::string, Profile> profiles;
  // The explicit async API's requests (nrta_*), from the first one on (Runtime::mu).
  std::shared_ptr<AsyncQueues> async;
  // Async executions not completed yet, which may still count completions of their outputs
  // (Runtime::mu; see nrt_tensor_check_output_completion).
  size_t async_executions = 0;
  ~Session();  // completes the async requests and waits for the work in the device's queues
};
// Completes every async request of the session and stops its thread (async.cpp). Call
// without Runtime::mu.
void finish_async(Session& s);

// Host bytes backing one or more tensors (slices share it). A device tensor's bytes are also
// its chip's HBM at hbm_addr (sim::Device::allocate with host bytes).
struct Storage {
  uint8_t* data = nullptr;
  size_t size = 0;
  bool owned = true;
  int chip = -1;  // >= 0: mapped into that chip's HBM at hbm_addr
  uint64_t hbm_addr = 0;
  std::weak_ptr<sim::Device> device;  // of the session it was allocated in
  // Whether it is in the HBM of `d` (the device of the current session).
  bool on(const std::shared_ptr<sim::Device>& d) const {
    return chip >= 0 && !device.owner_before(d) && !d.owner_before(device);
  }
  ~Storage();
};

// ---- models and executions -------------------------------------------------
struct ModelData {
  std::string name;  // the NEFF's name: shown on traces and in log lines
  std::vector<isa::neff::Tensor> inputs, outputs;  // for nrt_get_model_tensor_info
  sim::ProgramRef program;
  uint32_t vnc = 0;   // visible-relative logical core
  uint32_t core = 0;  // instance-wide physical core that runs it
  uint32_t chip = 0;
  std::shared_ptr<CollectiveJob> job;  // nrt_load_collectives
  uint32_t rank = 0;                   // in the job
};

// One nrt_execute: the execution and what it needs until it is done.
struct ExecRequest {
  std::shared_ptr<ModelData> model;
  std::shared_ptr<Session> session;
  sim::Execution execution;
  std::vector<std::shared_ptr<Storage>> keep;            // bound storage, alive until done
  std::vector<std::pair<uint32_t, uint64_t>> temp_maps;  // (chip, address) mapped for this run
  std::vector<const nrt_tensor*> outputs;
  NRT_STATUS status = NRT_SUCCESS;
  // In-process collective rounds (guarded by the job's mutex).
  bool in_round = false;  // taken into a round
  bool done = false;      // the round ran; status is final
};

// A collective job: the ranks whose models were loaded with nrt_load_collectives (libnrt's
// global communicator). In-process, every rank is loaded in this process and an execution
// waits here until every rank has submitted one; across processes (NEURON_RT_ROOT_COMM_ID)
// this process holds one rank and `comm` reaches the others.
struct CollectiveJob {
  uint32_t world = 0;
  int process_rank = -1;                   // across processes: the rank of this process
  std::shared_ptr<cc::Communicator> comm;  // across processes only
  std::mutex mu;
  std::condition_variable cv;
  // In-process: rank -> executions waiting for the others.
  std::map<uint32_t, std::deque<ExecRequest*>> waiting;
  // In-process: when each rank last had an execution waiting, so that a timeout names only
  // the ranks that never came while it waited.
  std::map<uint32_t, std::chrono::steady_clock::time_point> last_seen;
  bool across_processes() const { return comm != nullptr; }
};

// Wall-clock seconds an execution of a collective model waits for the other ranks when
// NEURON_RT_EXEC_TIMEOUT is not set (libnrt's default on trn1/inf2, spec §9).
inline constexpr double kDefaultCollectiveTimeoutS = 600;
double collective_timeout_s(const Config& c);
// The status of a failed exchange between ranks (a cc::CommError), or nullopt for other errors.
std::optional<NRT_STATUS> comm_error_status(const std::exception& e);

// ---- execution outcomes (execute.cpp) ---------------------------------------
// Binds every input and output of the model to the tensors of the sets (rt().mu held): fills
// req's session, model, execution, keep, temp_maps and outputs. On failure the caller unmaps
// what was mapped (unmap).
NRT_STATUS prepare(const char* fn, nrt_model_t* model, const nrt_tensor_set_t* input_set,
                   nrt_tensor_set_t* output_set, ExecRequest& req);
void unmap(sim::Device& device, std::vector<std::pair<uint32_t, uint64_t>>& temp_maps);
// The status and message of an execution's fault: sim::ExecError by kind, cc::CommError by
// fault, anything else NRT_FAILURE.
std::pair<NRT_STATUS, std::string> fault_of(const std::exception_ptr& error);
// Logs, once per window, that the execution shared it with others (DEBUG) or that the window
// faulted and each execution ran again alone (WARN).
void note_window(const sim::Completion& c);
// NRT_TIMEOUT (logged) when the execution took longer than NEURON_RT_EXEC_TIMEOUT of
// simulated time, else NRT_SUCCESS.
NRT_STATUS check_timeout(const Config& config, const sim::Completion& c);
// An execution of a collective model (collectives.cpp): meets the job's other ranks
// (in-process), runs the round as one group on the device, blocks until done.
NRT_STATUS execute_collective(ExecRequest& r);

// ---- the process-wide runtime (lifecycle.cpp) --------------------------------
enum State : int { kStart = 0, kInit = 1, kChild = 2, kClosed = 3 };

struct TensorSet {
  std::unordered_map<std::string, nrt_tensor*> tensors;
};

struct Runtime {
  std::mutex mu;
  std::atomic<int> state{kStart};
  std::shared_ptr<Session> session;  // while INIT
  std::unordered_set<const nrt_tensor*> tensors;
  std::unordered_set<const nrt_model*> models;
  std::unordered_set<const TensorSet*> sets;
  // The collective job of nrt_load_collectives (one per process, like libnrt's global
  // communicator).
  std::shared_ptr<CollectiveJob> job;
  // Notified (with mu) when async executions count completions of their output tensors.
  std::condition_variable completions;
};

Runtime& rt();
// The lifecycle gate of the stateful calls (spec §5.2): NRT_SUCCESS in INIT, else the
// state's status, logged.
NRT_STATUS gate(const char* function);

bool live(const nrt_tensor* t);    // rt().mu held
bool live(const nrt_model* m);     // rt().mu held
TensorSet* as_set(const void* s);  // rt().mu held; null when not a live set
const char* name_or(const char* n);

// Checks [offset, offset + size) against the tensor; logs and returns NRT_INVALID when outside
// or when the tensor has no storage.
NRT_STATUS check_range(const char* fn, const nrt_tensor* t, uint64_t offset, uint64_t size);
// Maps host bytes into a chip's HBM; nullopt (logged) when they do not fit.
std::optional<uint64_t> map_host(const char* fn, sim::Device& device, uint32_t chip, uint8_t* host,
                                 uint64_t size, const char* what);

// ---- traces (profile.cpp) ----------------------------------------------------
// Starts the sessions the environment asks for (NEURONSIM_TRACE, NEURON_RT_INSPECT_ENABLE).
void start_env_traces(Session& s);
// Takes every running trace session off the session (rt().mu held), to finish at nrt_close.
std::vector<TraceFile> take_traces(Session& s);
// Ends a trace session once the work queued before it is done, writes its file(s) and logs
// where (or why not). Call without rt().mu: it waits for the device.
void finish_trace(const char* fn, sim::Device& device, const TraceFile& file);

}  // namespace neuronsim::rt

#define NRT_GATE()                                                                            \
  do {                                                                                        \
    if (NRT_STATUS gate_status = ::neuronsim::rt::gate(__func__); gate_status != NRT_SUCCESS) \
      return gate_status;                                                                     \
  } while (0)

// The opaque handles.
struct nrt_tensor {
  std::string name;
  std::shared_ptr<neuronsim::rt::Storage> storage;  // null for allocate_empty without a buffer
  size_t offset = 0;
  size_t size = 0;
  nrt_tensor_placement_t placement = NRT_TENSOR_PLACEMENT_DEVICE;
  int vnc = -1;
  uint64_t completions = 0;
  uint8_t* bytes() const { return storage->data + offset; }
};

struct nrt_model {
  std::shared_ptr<neuronsim::rt::ModelData> data;
};
