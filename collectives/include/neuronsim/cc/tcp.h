// Collectives across processes: one rank per process, connected by TCP (Boost.Asio).
//
// Rendezvous: rank 0 listens at the job's root address (NEURON_RT_ROOT_COMM_ID, "host:port");
// every other rank connects there, answers a challenge with an HMAC of the job token, and says
// who it is (rank, world size, placement, instance, its own listening port). Rank 0 admits only
// peers that prove the token and agree on the job, then sends everyone the table of addresses,
// and the ranks connect to each other (full mesh, the same challenge on every link). Strangers,
// garbage, a wrong world size or a duplicate rank are turned away with a message; a rank that
// never arrives or dies makes every other rank fail with CommError within the timeout.
//
// Data moves for real over the links. Simulated time does not come from the wall clock: the
// ranks exchange the simulated time at which each reached the collective, and each then runs
// the same fabric model (simulate_timing in communicator.h), so all agree on every collective's
// simulated duration, and the times equal those of the same job run in one process.
// docs/collectives.md, "Across processes".
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "neuronsim/cc/communicator.h"

namespace neuronsim::cc {

// What went wrong between ranks; the runtime maps it to an NRT_STATUS.
enum class CommFault {
  timeout,    // a rank did not arrive, or did not answer, within the timeout  (NRT_TIMEOUT)
  peer_lost,  // a rank's connection closed mid-job (it died or left) (NRT_EXEC_HW_ERR_COLLECTIVES)
  rejected,   // the job turned this rank away (world size, duplicate, token)   (NRT_INVALID)
  protocol,   // bad bytes on a link, or the ranks disagree on a collective    (NRT_FAILURE)
  config,     // bad settings: address, token missing                           (NRT_INVALID)
};

class CommError : public std::runtime_error {
 public:
  CommError(CommFault fault, const std::string& what) : std::runtime_error(what), fault_(fault) {}
  CommFault fault() const { return fault_; }

 private:
  CommFault fault_;
};

struct TcpOptions {
  std::string root;  // rank 0's address, "host:port" (NEURON_RT_ROOT_COMM_ID)
  int rank = 0;
  int world_size = 1;
  std::string token;  // the job's secret (NEURONSIM_JOB_TOKEN); every rank must have the same
  std::chrono::milliseconds timeout{30'000};  // rendezvous, and any wait for a peer mid-job
  spec::InstanceConfig instance;              // the simulated instance every rank must agree on
  RunOptions run;  // algorithm, thresholds, placement (run.cores is filled by connect)
  // This rank's core, announced to the others. When every rank gives one, the announced cores
  // are the placement; when none does, run.placement places the ranks. Mixing is an error.
  std::optional<CoreId> core;
  // Rank 0 only: called once it listens, with the address the others dial ("host:port"). With
  // port 0 in `root`, rank 0 listens on a free port and this is how the others learn it (the
  // c10d backend puts it in the job's store).
  std::function<void(const std::string&)> on_listening;
  // Where turned-away strangers are reported (stderr when empty); they do not stop the job.
  std::function<void(const std::string&)> warn;
};

// Reads the job settings from the environment: NEURON_RT_ROOT_COMM_ID (required) and
// NEURONSIM_JOB_TOKEN (required; TORCHELASTIC_RUN_ID is taken when it is set and not "none").
// Throws CommError(config) naming the variable that is missing or malformed.
void read_tcp_environment(TcpOptions& options);

class TcpCommunicator final : public Communicator {
 public:
  // Joins the job: rendezvous and full mesh. Blocks up to options.timeout; throws CommError.
  static std::unique_ptr<TcpCommunicator> connect(TcpOptions options);
  ~TcpCommunicator() override;

  int world_size() const override;
  const std::vector<int>& local_ranks() const override;
  // `calls` holds this process's one rank. Exchanges arrival times (and a digest of the spec,
  // so ranks that disagree on the collective fail with CommError(protocol), not a wrong result),
  // moves the data, and simulates the timing of the whole job.
  CollectiveOutcome run(const CollectiveSpec& spec, std::vector<RankCall> calls,
                        bool with_data) override;

  struct Impl;

 private:
  explicit TcpCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuronsim::cc
