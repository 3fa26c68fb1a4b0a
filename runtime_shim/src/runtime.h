// Internals of libnrt.so.1 (neuronsim's libnrt-compatible runtime). Not installed.
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
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/spec/config.h"
#include "neuronsim/sim/simulator.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_status.h"

namespace neuronsim::traces {}
namespace neuronsim::cc {
class Communicator;
}

namespace nrtsim {
namespace sim = neuronsim::sim;
namespace spec = neuronsim::spec;
namespace isa = neuronsim::isa;
namespace traces = neuronsim::traces;
namespace cc = neuronsim::cc;

// ---- logging -------------------------------------------------------------
enum LogLevel { kDisabled = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4, kTrace = 5 };
// Parses NEURON_RT_LOG_LEVEL-style values; nullopt when unknown.
std::optional<int> parse_log_level(const char* value);
int log_level();
void set_log_level(int level);
void log_line(int level, const char* function, const std::string& message);

template <typename... Args>
void log(int level, const char* function, fmt::format_string<Args...> f, Args&&... args) {
  if (level > log_level()) return;
  log_line(level, function, fmt::format(f, std::forward<Args>(args)...));
}
#define NRT_LOG_ERROR(...) ::nrtsim::log(::nrtsim::kError, __func__, __VA_ARGS__)
#define NRT_LOG_WARN(...) ::nrtsim::log(::nrtsim::kWarn, __func__, __VA_ARGS__)
#define NRT_LOG_INFO(...) ::nrtsim::log(::nrtsim::kInfo, __func__, __VA_ARGS__)
#define NRT_LOG_DEBUG(...) ::nrtsim::log(::nrtsim::kDebug, __func__, __VA_ARGS__)

// ---- configuration -------------------------------------------------------
struct Config {
  std::string instance_name;
  spec::InstanceConfig instance;
  spec::GenerationConfig generation;
  uint32_t lnc = 1;                   // physical cores per logical core
  std::vector<uint32_t> visible;      // absolute logical core ids, visible index -> id
  double exec_timeout_s = 0;          // 0 = none
  std::string root_comm_id;           // NEURON_RT_ROOT_COMM_ID: collectives across processes
  bool fail_on_nan = false;
  sim::Mode mode = sim::Mode::functional_and_timing;
  std::string trace_path;             // NEURONSIM_TRACE
  bool inspect = false;               // NEURON_RT_INSPECT_ENABLE
  std::string inspect_dir = "./output";
};
// Reads the environment. Returns an error message when something is invalid.
std::optional<std::string> read_config(Config& out);
// Total logical cores of the configured (or default) instance, for the pre-init getters.
uint32_t total_logical_cores_from_env(uint32_t* visible);

// ---- device memory -------------------------------------------------------
// First-fit allocator over one chip's HBM address space.
class HbmAllocator {
 public:
  explicit HbmAllocator(uint64_t capacity);
  std::optional<uint64_t> allocate(uint64_t size);
  void free(uint64_t addr);
  uint64_t used() const { return used_; }
  uint64_t capacity() const { return capacity_; }

 private:
  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_;   // start -> size
  std::map<uint64_t, uint64_t> taken_;  // start -> size
};

struct Device;

// Host bytes backing one or more tensors (slices share it).
struct Storage {
  uint8_t* data = nullptr;
  size_t size = 0;
  bool owned = true;
  int chip = -1;           // >= 0: mapped into that chip's HBM at hbm_addr
  uint64_t hbm_addr = 0;
  std::weak_ptr<Device> device;
  ~Storage();
};

// ---- models and executions -----------------------------------------------
struct ExecRequest;

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
  std::map<uint32_t, std::deque<ExecRequest*>>
      waiting;  // in-process: rank -> executions waiting for the others
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

struct ModelData {
  isa::neff::Neff neff;
  isa::Program program;
  uint32_t vnc = 0;         // visible-relative logical core
  uint32_t core = 0;        // instance-wide physical core that runs it
  uint32_t chip = 0;
  std::vector<std::shared_ptr<Storage>> owned;  // constants and scratch
  std::unordered_map<uint16_t, sim::TensorBinding> fixed;  // var_id -> binding (constants, scratch)
  std::string profile_path;  // nrt_profile_start
  uint64_t id = 0;
  std::shared_ptr<CollectiveJob> job;  // nrt_load_collectives
  uint32_t rank = 0;                   // in the job
};

struct ExecRequest {
  std::shared_ptr<ModelData> model;
  std::unordered_map<uint16_t, sim::TensorBinding> bindings;
  NRT_STATUS status = NRT_SUCCESS;
  bool done = false;
  uint64_t seq = 0;
  std::string profile_path;  // copied from the model at submit time
  // An execution of a collective model runs in a round with one execution of every local rank
  // of its job (rank order), alone in its simulated run. The request that completes the round
  // is queued and carries it; the others wait for `done`.
  std::vector<ExecRequest*> round;
  bool in_round = false;  // in-process: taken into a round (guarded by the job's mutex)
};

// The simulated instance and the one thread that runs it.
struct Device {
  Config config;
  std::unique_ptr<sim::Simulator> sim;
  std::mutex sim_mu;  // guards sim (HBM mappings, core states, runs) and allocators
  std::vector<HbmAllocator> allocators;  // per chip

  std::mutex q_mu;
  std::condition_variable q_cv;
  std::deque<ExecRequest*> queue;
  bool stop = false;
  std::thread thread;
  uint64_t exec_seq = 0;

  // Inspect state (guarded by q_mu).
  bool inspect = false;
  std::string inspect_dir;

  ~Device();
  void start();
  void run_loop();
  void take_batch(std::vector<ExecRequest*>& batch);
  // Runs the requests together in one simulated run (sim_mu held); returns the fault, if any.
  // `binding` ties the cores of a collective round to its communicator.
  std::pair<NRT_STATUS, std::string> run_batch(const std::vector<ExecRequest*>& batch,
                                               bool do_inspect, const std::string& dir,
                                               const sim::CollectiveBinding& binding = {});
  // A collective round: its requests in one run with their job's communicator.
  void run_round(ExecRequest& lead, bool do_inspect, const std::string& dir);
  // Queues the request for the device thread.
  void enqueue(ExecRequest& r);
  // Blocks until the request is done.
  void submit(ExecRequest& r);
  // Blocks until a request that another thread submitted (in a round) is done.
  void wait_done(ExecRequest& r);
  // An execution of a collective model: waits for the job's other ranks (in-process), runs the
  // round, blocks until done. Returns the status of the execution.
  NRT_STATUS submit_collective(ExecRequest& r);
  // Maps host bytes into chip HBM; returns the address, or nullopt when HBM is full. Locks sim_mu.
  std::optional<uint64_t> map_host(uint32_t chip, uint8_t* host, uint64_t size);
  void unmap_host(uint32_t chip, uint64_t addr);
  // Whether `size` bytes could be allocated in the chip's HBM now (checked before any host allocation).
  bool fits(uint32_t chip, uint64_t size);
};

}  // namespace nrtsim

// The opaque handles.
struct nrt_tensor {
  uint64_t magic = 0;
  std::string name;
  std::shared_ptr<nrtsim::Storage> storage;  // null for allocate_empty without a buffer
  size_t offset = 0;
  size_t size = 0;
  nrt_tensor_placement_t placement = NRT_TENSOR_PLACEMENT_DEVICE;
  int vnc = -1;
  uint64_t completions = 0;
};

struct nrt_model {
  uint64_t magic = 0;
  std::shared_ptr<nrtsim::ModelData> data;
};
