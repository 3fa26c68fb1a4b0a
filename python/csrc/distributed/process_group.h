// The torch.distributed backend "neuron": a c10d::Backend whose collectives cross the
// simulated NeuronLink fabric between processes, one rank per process (torchrun's layout).
//
// Each process group connects, on its first collective, a cc::TcpCommunicator among its ranks:
// group rank 0 listens on a free port and publishes the address in the group's store (torchrun's
// rendezvous store), the others read it there; the job token (NEURONSIM_JOB_TOKEN, else
// TORCHELASTIC_RUN_ID, else one rank 0 draws and shares through the store) keeps strangers out.
// Each rank announces the physical core of its device, so the fabric model places the ranks where
// their tensors live.
//
// With symmetric ranks (GroupSetup::symmetric) one process stands for the whole job: see there.
//
// The data moves for real over TCP; the simulated time comes from the fabric model, on which all
// ranks agree (tcp.h): the collective starts when the rank's device clock reaches it, and the
// rank's core is held until the collective's simulated finish (sim::Hold), so profiles show
// communication beside compute. Collectives run to completion in the calling thread and return
// completed Work; send/recv run on a thread per peer, so that rings of them do not deadlock.
//
// Reductions of float32/bfloat16/float16 run on the fabric (rounded per step as the hardware
// does); other dtypes (integers, bool, float64, float8, complex) gather the bytes and reduce on
// the host in rank order, exactly, the same on every rank. Failures (a rank that dies, hangs past
// the group's timeout, or runs a different collective) raise c10::DistBackendError naming the
// group, the rank and the operation; the group is unusable afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace neuronsim::pytorch {

struct GroupSetup {
  c10::intrusive_ptr<c10d::Store> store;  // the group's own (prefixed) store
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::string name;                   // torch's group name, for messages
  std::vector<int64_t> global_ranks;  // the default group's rank of each group rank
  // Symmetric ranks (NEURONSIM_SYMMETRIC_RANKS=1, timing-only mode): this process is one rank
  // of a job whose ranks all run the same program on the same shapes, so every collective
  // starts on every rank when it starts here. No peer runs: each collective is timed on the
  // fabric model for the whole group, placed as torchrun places the ranks (LOCAL_WORLD_SIZE
  // per node, rank g on node g / it, device g mod it), and its outputs keep their bytes.
  // What this costs in fidelity: ranks that would arrive apart (stragglers, uneven shards,
  // data-dependent routing) are taken to arrive together (docs/distributed.md).
  bool symmetric = false;
};

class ProcessGroupNeuron final : public c10d::Backend {
 public:
  explicit ProcessGroupNeuron(GroupSetup setup);
  ~ProcessGroupNeuron() override;

  const std::string getBackendName() const override { return "neuron"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void shutdown() override;
  void abort() override { shutdown(); }

  // What the group has done: collectives run, bytes this rank put in, simulated picoseconds
  // its core spent in them (the profile's communication share).
  struct Stats {
    uint64_t collectives = 0;
    uint64_t bytes = 0;
    uint64_t simulated_ps = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// neuronsim._C: ProcessGroupNeuron and the function that makes one (distributed.py registers
// it with torch.distributed).
void register_distributed(pybind11::module_& m);

}  // namespace neuronsim::pytorch
