// Collective jobs: how executions of models loaded with nrt_load_collectives meet and run.
//
// In-process (NEURON_RT_ROOT_COMM_ID unset) every rank of the job is loaded in this process,
// typically one thread per rank. An execution waits here until every rank has submitted one;
// the thread that completes the set queues them as one round, and the device thread runs the
// round alone in one simulated run with a FabricCommunicator placed on the ranks' cores.
// Across processes the job's TcpCommunicator (connected by nrt_load_collectives) reaches the
// other ranks, and each execution is a round of one.
#include <algorithm>
#include <chrono>

#include <fmt/ranges.h>

#include "neuronsim/cc/communicator.h"
#include "neuronsim/cc/tcp.h"
#include "runtime.h"

namespace nrtsim {

double collective_timeout_s(const Config& c) {
  return c.exec_timeout_s > 0 ? c.exec_timeout_s : kDefaultCollectiveTimeoutS;
}

std::optional<NRT_STATUS> comm_error_status(const std::exception& e) {
  const auto* comm = dynamic_cast<const cc::CommError*>(&e);
  if (comm == nullptr) return std::nullopt;
  switch (comm->fault()) {
    case cc::CommFault::timeout:
      return NRT_TIMEOUT;
    case cc::CommFault::peer_lost:
      return NRT_EXEC_HW_ERR_COLLECTIVES;
    case cc::CommFault::rejected:
    case cc::CommFault::config:
      return NRT_INVALID;
    case cc::CommFault::protocol:
      return NRT_FAILURE;
  }
  return NRT_FAILURE;
}

namespace {

using Clock = std::chrono::steady_clock;

// Takes the oldest waiting execution of every rank when each rank has one; empty otherwise.
std::vector<ExecRequest*> take_round(CollectiveJob& job) {
  for (uint32_t r = 0; r < job.world; ++r)
    if (job.waiting[r].empty()) return {};
  std::vector<ExecRequest*> round;
  const auto now = Clock::now();
  for (uint32_t r = 0; r < job.world; ++r) {
    round.push_back(job.waiting[r].front());
    job.waiting[r].pop_front();
    round.back()->in_round = true;
    job.last_seen[r] = now;
  }
  return round;
}

// The ranks that had no execution waiting at any time since `since` (other than `self`).
std::vector<uint32_t> missing_ranks(CollectiveJob& job, uint32_t self, Clock::time_point since) {
  std::vector<uint32_t> out;
  for (uint32_t r = 0; r < job.world; ++r) {
    const auto seen = job.last_seen.find(r);
    if (r != self && job.waiting[r].empty() &&
        (seen == job.last_seen.end() || seen->second < since))
      out.push_back(r);
  }
  return out;
}

}  // namespace

NRT_STATUS Device::submit_collective(ExecRequest& r) {
  CollectiveJob& job = *r.model->job;
  if (job.across_processes()) {
    r.round = {&r};
    submit(r);
    return r.status;
  }
  const uint32_t rank = r.model->rank;
  const auto arrived = Clock::now();
  std::unique_lock<std::mutex> lock(job.mu);
  job.waiting[rank].push_back(&r);
  job.last_seen[rank] = arrived;
  if (std::vector<ExecRequest*> round = take_round(job); !round.empty()) {
    ExecRequest& lead = *round.front();
    lead.round = std::move(round);
    enqueue(lead);  // lock order job.mu -> q_mu; the device thread never takes job.mu
    job.cv.notify_all();
  }
  const auto timeout = std::chrono::duration<double>(collective_timeout_s(config));
  if (!job.cv.wait_for(lock, timeout, [&] { return r.in_round; })) {
    auto& mine = job.waiting[rank];
    mine.erase(std::find(mine.begin(), mine.end(), &r));
    job.last_seen[rank] = Clock::now();
    log(kError, "nrt_execute",
        "collective execution of rank {} (model '{}', core {}) waited {} s "
        "(NEURON_RT_EXEC_TIMEOUT) for the other ranks of its {}-rank job; rank(s) {} did not "
        "execute meanwhile, and every rank must call nrt_execute",
        rank, r.model->neff.header.name, r.model->vnc, timeout.count(), job.world,
        fmt::join(missing_ranks(job, rank, arrived), ", "));
    r.status = NRT_TIMEOUT;
    return r.status;
  }
  lock.unlock();
  wait_done(r);
  return r.status;
}

void Device::run_round(ExecRequest& lead, bool do_inspect, const std::string& dir) {
  const std::vector<ExecRequest*>& round = lead.round;
  const CollectiveJob& job = *lead.model->job;
  std::unique_ptr<cc::FabricCommunicator> fabric;
  sim::CollectiveBinding binding;
  std::pair<NRT_STATUS, std::string> outcome{NRT_SUCCESS, ""};
  try {
    for (const ExecRequest* m : round)
      if (auto [it, fresh] =
              binding.ranks.emplace(m->model->core, static_cast<int>(m->model->rank));
          !fresh)
        throw std::invalid_argument(
            fmt::format("ranks {} and {} of the collective job are both on core {}; each "
                        "rank needs a core of its own",
                        it->second, m->model->rank, m->model->core));
    if (job.across_processes()) {
      binding.communicator = job.comm.get();
    } else {
      // The fabric places rank r where rank r's model runs, so link times follow the cores.
      cc::RunOptions placement;
      for (const ExecRequest* m : round)
        placement.cores.push_back(
            {m->model->chip, m->model->core % config.instance.cores_per_chip});
      fabric = std::make_unique<cc::FabricCommunicator>(config.instance,
                                                        static_cast<int>(job.world), placement);
      binding.communicator = fabric.get();
    }
    outcome = run_batch(round, do_inspect, dir, binding);
  } catch (const std::exception& e) {
    outcome = {NRT_INVALID, e.what()};
  }
  if (outcome.first == NRT_SUCCESS) return;
  std::vector<uint32_t> ranks;
  for (const ExecRequest* m : round) ranks.push_back(m->model->rank);
  log(kError, "nrt_execute", "collective execution of rank{} {} failed (status {}): {}",
      ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", "), static_cast<int>(outcome.first),
      outcome.second);
  for (ExecRequest* m : round)
    if (m->status == NRT_SUCCESS) m->status = outcome.first;
}

}  // namespace nrtsim
