// Collective jobs: how executions of models loaded with nrt_load_collectives meet and run.
//
// In-process (NEURON_RT_ROOT_COMM_ID unset) every rank of the job is loaded in this process,
// typically one thread per rank. An execution waits here until every rank has submitted one;
// the thread that completes the set queues them as one round, a group that the device runs
// alone in one window with a FabricCommunicator placed on the ranks' cores, and waits for it
// on behalf of the round. Across processes the job's TcpCommunicator (connected by
// nrt_load_collectives) reaches the other ranks, and each execution is a round of one.
#include <algorithm>
#include <chrono>

#include <fmt/ranges.h>

#include "neuronsim/cc/communicator.h"
#include "neuronsim/cc/tcp.h"
#include "runtime.h"

namespace neuronsim::rt {

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
using Round = std::vector<ExecRequest*>;  // one execution per rank, in rank order

// Takes the oldest waiting execution of every rank when each rank has one; empty otherwise.
Round take_round(CollectiveJob& job) {
  for (uint32_t r = 0; r < job.world; ++r)
    if (job.waiting[r].empty()) return {};
  Round round;
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

// Fails every execution of the round that has not failed yet, with one log line for the round.
void fail_round(const Round& round, NRT_STATUS status, const std::string& message) {
  std::vector<uint32_t> ranks;
  for (const ExecRequest* m : round) ranks.push_back(m->model->rank);
  log(kError, "nrt_execute", "collective execution of rank{} {} failed (status {}): {}",
      ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", "), static_cast<int>(status), message);
  for (ExecRequest* m : round)
    if (m->status == NRT_SUCCESS) m->status = status;
}

// Queues the round as one group, its cores bound to the job's ranks. `fabric` receives the
// in-process communicator, which must outlive the group. Returns the sequence numbers, or
// nothing (every status set) when the round cannot run.
std::vector<uint64_t> queue_round(const Round& round, const CollectiveJob& job,
                                  std::unique_ptr<cc::FabricCommunicator>& fabric) {
  Session& s = *round.front()->session;
  try {
    sim::CollectiveBinding binding;
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
            {m->model->chip, m->model->core % s.config.instance.cores_per_chip});
      fabric = std::make_unique<cc::FabricCommunicator>(s.config.instance,
                                                        static_cast<int>(job.world), placement);
      binding.communicator = fabric.get();
    }
    std::vector<sim::Execution> group;
    for (ExecRequest* m : round) group.push_back(std::move(m->execution));
    return s.device->enqueue_group(std::move(group), std::move(binding));
  } catch (const std::exception& e) {
    fail_round(round, NRT_INVALID, e.what());
    return {};
  }
}

// Waits for a queued round and sets the status of each of its executions.
void finish_round(const Round& round, const std::vector<uint64_t>& seqs) {
  Session& s = *round.front()->session;
  std::vector<sim::Completion> done;
  for (uint64_t seq : seqs) done.push_back(s.device->wait(seq));
  // The executions of a group share one window, so a fault belongs to all of them.
  if (done.front().error) {
    const auto [status, message] = fault_of(done.front().error);
    fail_round(round, status, message);
    return;
  }
  for (size_t i = 0; i < round.size(); ++i) round[i]->status = check_timeout(s.config, done[i]);
}

// Runs a round that just formed (job.mu held by `lock`, released while it runs) and marks its
// executions done.
void lead_round(const Round& round, CollectiveJob& job, std::unique_lock<std::mutex>& lock) {
  std::unique_ptr<cc::FabricCommunicator> fabric;
  // Queued under the job's lock, so that rounds reach the queues in the order they formed.
  const std::vector<uint64_t> seqs = queue_round(round, job, fabric);
  job.cv.notify_all();
  lock.unlock();
  if (!seqs.empty()) finish_round(round, seqs);
  lock.lock();
  for (ExecRequest* m : round) m->done = true;
  job.cv.notify_all();
}

}  // namespace

NRT_STATUS execute_collective(ExecRequest& r) {
  CollectiveJob& job = *r.model->job;
  if (job.across_processes()) {
    const Round round{&r};
    std::unique_ptr<cc::FabricCommunicator> none;
    if (const std::vector<uint64_t> seqs = queue_round(round, job, none); !seqs.empty())
      finish_round(round, seqs);
    return r.status;
  }
  const uint32_t rank = r.model->rank;
  const auto arrived = Clock::now();
  std::unique_lock<std::mutex> lock(job.mu);
  job.waiting[rank].push_back(&r);
  job.last_seen[rank] = arrived;
  if (const Round round = take_round(job); !round.empty()) lead_round(round, job, lock);
  const auto timeout = std::chrono::duration<double>(collective_timeout_s(r.session->config));
  if (!job.cv.wait_for(lock, timeout, [&] { return r.in_round; })) {
    auto& mine = job.waiting[rank];
    mine.erase(std::find(mine.begin(), mine.end(), &r));
    job.last_seen[rank] = Clock::now();
    log(kError, "nrt_execute",
        "collective execution of rank {} (model '{}', core {}) waited {} s "
        "(NEURON_RT_EXEC_TIMEOUT) for the other ranks of its {}-rank job; rank(s) {} did not "
        "execute meanwhile, and every rank must call nrt_execute",
        rank, r.model->name, r.model->vnc, timeout.count(), job.world,
        fmt::join(missing_ranks(job, rank, arrived), ", "));
    r.status = NRT_TIMEOUT;
    return r.status;
  }
  job.cv.wait(lock, [&] { return r.done; });
  return r.status;
}

}  // namespace neuronsim::rt
