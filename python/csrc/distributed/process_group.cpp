// The torch.distributed backend "neuron" (process_group.h): how each c10d operation becomes one
// collective of the simulated fabric, and how a rank joins its group. The host's side of the
// bytes and reductions is in reductions.h; how the ranks reach each other, in transport.h.
#include "distributed/process_group.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/reductions.h"
#include "distributed/transport.h"
#include "neuronsim/cc/algorithms.h"
#include "neuronsim/cc/tcp.h"
#include "profiler/profiler.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {
namespace {

using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// ---- Work -----------------------------------------------------------------------------------

// A Work over a future: complete already for collectives (they ran in the calling thread), or
// completed by a peer thread for send/recv. wait() rethrows the operation's error.
class NeuronWork final : public c10d::Work {
 public:
  NeuronWork(c10d::OpType type, FuturePtr future, std::vector<at::Tensor> outputs)
      : Work(-1, type), future_(std::move(future)), outputs_(std::move(outputs)) {}

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  bool wait(std::chrono::milliseconds /*timeout: the group's own bounds every wait*/) override {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  void synchronize() override { wait(kNoTimeout); }
  std::vector<at::Tensor> result() override { return outputs_; }
  FuturePtr getFuture() override { return future_; }

 private:
  FuturePtr future_;
  std::vector<at::Tensor> outputs_;
};

FuturePtr new_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
}

WorkPtr done(c10d::OpType type, std::vector<at::Tensor> outputs) {
  FuturePtr f = new_future();
  f->markCompleted(c10::IValue(outputs));
  return c10::make_intrusive<NeuronWork>(type, std::move(f), std::move(outputs));
}

}  // namespace

// ---- The group --------------------------------------------------------------------------------

struct ProcessGroupNeuron::Impl {
  explicit Impl(GroupSetup s)
      : setup(std::move(s)), transport(setup.store, setup.timeout, current_core()) {}

  GroupSetup setup;
  std::mutex mu;  // one collective at a time
  std::unique_ptr<cc::TcpCommunicator> comm;
  std::optional<std::string> broken;  // why the group failed; every later call fails with it
  Transport transport;                // how the ranks reach each other
  bool coalescing = false;
  std::vector<FuturePtr> coalesced;
  mutable std::mutex stats_mu;
  Stats stats;
  uint64_t collectives_run = 0;  // this group's collectives, numbered alike on every rank (mu)

  int R() const { return setup.size; }
  int me() const { return setup.rank; }

  // "all_reduce on rank 1 of group 'default_pg' (2 ranks)" — who failed, doing what.
  std::string where(const std::string& op, int rank = -1) const {
    const int r = rank < 0 ? me() : rank;
    const std::string global =
        static_cast<size_t>(r) < setup.global_ranks.size() &&
                setup.global_ranks[static_cast<size_t>(r)] != r
            ? fmt::format(", global rank {}", setup.global_ranks[static_cast<size_t>(r)])
            : "";
    return fmt::format("{} on rank {}{} of process group '{}' ({} ranks)", op, r, global,
                       setup.name, R());
  }
  [[noreturn]] void fail(const std::string& op, const std::string& why) const {
    C10_THROW_ERROR(DistBackendError, fmt::format("neuron: {} failed: {}", where(op), why));
  }
  [[noreturn]] void refuse(const std::string& op, const std::string& why) const {
    C10_THROW_ERROR(ValueError, fmt::format("neuron: {}: {}", where(op), why));
  }
  // The root of a rooted collective, refused (as Gloo does) when it is not a rank of the
  // group: every rank checks it before it sends anything.
  int root_of(const std::string& op, int64_t root) const {
    if (root < 0 || root >= R())
      refuse(op, fmt::format("invalid root rank {}: the group has ranks 0..{}", root, R() - 1));
    return static_cast<int>(root);
  }

  // The rank's NeuronCore: the current device's when the group is made (torchrun's local rank,
  // distributed.py), announced to the other ranks as this rank's place on the fabric.
  static cc::CoreId current_core() {
    pytorch::Backend& b = pytorch::Backend::get();
    const uint32_t physical = b.core_of(current_device());
    const uint32_t per_chip = b.env().instance.cores_per_chip;
    const int node = std::atoi(env_or("GROUP_RANK", "0").c_str());
    return cc::CoreId{physical / per_chip, physical % per_chip, static_cast<uint32_t>(node)};
  }

  // The device of the first neuron tensor among `tensors` (or the current device when
  // `always`); none for a collective of CPU tensors.
  static std::optional<int> device_of(const std::vector<at::Tensor>& tensors, bool always) {
    for (const at::Tensor& t : tensors)
      if (t.defined() && t.device().is_privateuseone()) return t.device().index();
    if (always) return current_device();
    return std::nullopt;
  }

  // The HBM a collective of neuron `tensors` reads and writes.
  static std::vector<sim::TensorBinding> touches_of(const std::vector<at::Tensor>& tensors) {
    std::vector<sim::TensorBinding> out;
    for (const at::Tensor& t : tensors)
      if (t.defined() && t.device().is_privateuseone() && t.numel() > 0)
        out.push_back({pytorch::device_place(t).address, pytorch::extent_bytes(t)});
    return out;
  }

  // Where the collective starts on this rank. One of neuron tensors runs beside the kernels,
  // as the collective engines' DMA rings do: once the host has issued it, the rank's earlier
  // collectives are done and the work that reads or writes its tensors has finished. Others
  // (CPU tensors) start once all the work before them is done.
  static uint64_t arrival_ps(const std::vector<at::Tensor>& tensors) {
    pytorch::Backend& b = pytorch::Backend::get();
    b.drain();
    const std::vector<sim::TensorBinding> touches = touches_of(tensors);
    const std::optional<int> index = device_of(tensors, false);
    if (touches.empty() || !index) return b.now_ps();
    return b.device().side_ready_ps(b.core_of(*index), touches);
  }

  // Holds the core of the first device tensor among `tensors` (or of the current device when
  // `always`) until the collective's simulated finish, and counts it.
  // `link` names the collective the same way on every rank of the group ("group 0 #12"), so
  // that per-rank traces can be joined (neuronsim.tools.merge_traces); empty for p2p.
  void account(const std::string& op, const std::vector<at::Tensor>& tensors, uint64_t arrival,
               uint64_t finish, uint64_t bytes_in, bool always, const std::string& link = {}) {
    const std::string name = link.empty() ? op : fmt::format("{} [{}]", op, link);
    if (const std::optional<int> index = device_of(tensors, always)) {
      pytorch::Backend& b = pytorch::Backend::get();
      b.device().enqueue(b.core_of(*index), sim::Hold{finish, name, touches_of(tensors)});
      if (pytorch::profiling::recording()) {  // its time on the fabric, as the core waits
        pytorch::profiling::DeviceEvent e;
        e.name = name;
        e.kind = "collective";
        e.device = *index;
        e.core = b.core_of(*index);
        e.start_ps = arrival;
        e.end_ps = std::max(arrival, finish);
        e.launched_ns = pytorch::profiling::host_now_ns();
        e.dma_bytes = bytes_in;
        pytorch::profiling::record(std::move(e));
      }
    }
    std::lock_guard lock(stats_mu);
    ++stats.collectives;
    stats.bytes += bytes_in;
    stats.simulated_ps += finish > arrival ? finish - arrival : 0;
  }

  std::vector<cc::CoreId> placement;  // symmetric ranks: the core of each rank of the group

  // The core of each rank of the group as torchrun places symmetric ranks: global rank g on
  // node g / LOCAL_WORLD_SIZE, device g mod LOCAL_WORLD_SIZE of that node.
  std::vector<cc::CoreId> symmetric_cores() const {
    pytorch::Backend& b = pytorch::Backend::get();
    // torchrun's LOCAL_WORLD_SIZE; else the whole world (WORLD_SIZE, or this group) on one node.
    const std::string world = env_or("WORLD_SIZE", std::to_string(R()));
    const int per_node = std::max(1, std::atoi(env_or("LOCAL_WORLD_SIZE", world).c_str()));
    const uint32_t per_chip = b.env().instance.cores_per_chip;
    std::vector<cc::CoreId> cores;
    for (int r = 0; r < R(); ++r) {
      const int64_t g = static_cast<size_t>(r) < setup.global_ranks.size()
                            ? setup.global_ranks[static_cast<size_t>(r)]
                            : r;
      const int local = static_cast<int>(g % per_node);
      if (local >= b.device_count())
        refuse("new_group",
               fmt::format("symmetric ranks: LOCAL_WORLD_SIZE={} ranks per node, but the instance "
                           "{} shows {} NeuronCores",
                           per_node, b.env().instance_name, b.device_count()));
      const uint32_t physical = b.core_of(local);
      cores.push_back(cc::CoreId{physical / per_chip, physical % per_chip,
                                 static_cast<uint32_t>(g / per_node)});
    }
    return cores;
  }

  // A collective of symmetric ranks: every rank arrives when this one does; no bytes move
  // (symmetric_process), so the output is empty.
  Bytes run_symmetric(const std::string& op, const cc::CollectiveSpec& spec, uint64_t in_bytes,
                      const std::vector<at::Tensor>& tensors, bool hold_always) {
    const uint64_t arrival = arrival_ps(tensors);
    cc::RunOptions options;
    options.cores = placement;
    const cc::CollectiveOutcome out =
        cc::simulate_timing(pytorch::Backend::get().env().instance, spec,
                            std::vector<cc::Picos>(static_cast<size_t>(R()), arrival), options);
    account(op, tensors, arrival, out.finish_ps.at(static_cast<size_t>(me())), in_bytes,
            hold_always, fmt::format("group {} #{}", setup.name, ++collectives_run));
    return {};
  }

  // Runs one collective of the group, this rank contributing `input`; returns its output.
  Bytes run(const std::string& op, const cc::CollectiveSpec& spec, Bytes input,
            const std::vector<at::Tensor>& tensors, bool hold_always = false) {
    std::lock_guard lock(mu);
    if (broken) fail(op, "the group failed earlier: " + *broken);
    if (setup.symmetric) {
      for (const at::Tensor& t : tensors)
        if (t.defined() && !t.device().is_privateuseone())
          refuse(op,
                 "symmetric ranks (NEURONSIM_SYMMETRIC_RANKS) time the collectives of neuron "
                 "tensors; one of " +
                     t.device().str() +
                     " tensors has values that need "
                     "its peers, which are not run");
      return run_symmetric(op, spec, spec.input_bytes(R(), me()), tensors, hold_always);
    }
    const uint64_t arrival = arrival_ps(tensors);
    const uint64_t in_bytes = input.size();
    try {
      if (!comm) comm = transport.connect("neuronsim/root", me(), R());
      cc::CollectiveOutcome out = comm->run(spec, {cc::RankCall{me(), arrival, std::move(input)}},
                                            /*with_data=*/true);
      account(op, tensors, arrival, out.finish_ps.at(0), in_bytes, hold_always,
              fmt::format("group {} #{}", setup.name, ++collectives_run));
      return std::move(out.outputs.at(0));
    } catch (const cc::CommError& e) {
      broken = e.what();
      comm.reset();
      fail(op, e.what());
    }
  }

  // ---- The shapes of the operations ----

  static cc::CollectiveSpec spec_of(cc::Op op, isa::DType dtype, uint64_t count) {
    cc::CollectiveSpec s;
    s.op = op;
    s.dtype = dtype;
    s.count = count;
    return s;
  }
  static cc::CollectiveSpec bytes_spec(cc::Op op, uint64_t count) {
    return spec_of(op, isa::DType::uint8, count);
  }

  void check_reduction(const std::string& op, const at::Tensor& t, const c10d::ReduceOp& r) {
    const auto type = t.scalar_type();
    if (r.op_ == c10d::ReduceOp::UNUSED) refuse(op, "unknown reduce op");
    if (is_bitwise(r) && !(at::isIntegralType(type, /*includeBool=*/true)))
      refuse(op, fmt::format("reduce op {} needs integer or bool tensors, not {}", reduce_name(r),
                             c10::toString(type)));
    if (r.op_ == c10d::ReduceOp::AVG && !at::isFloatingType(type) && !at::isComplexType(type))
      refuse(op,
             fmt::format("reduce op avg of {} tensors (use sum and divide)", c10::toString(type)));
    if (at::isComplexType(type) &&
        (r.op_ == c10d::ReduceOp::MIN || r.op_ == c10d::ReduceOp::MAX || is_bitwise(r)))
      refuse(op, fmt::format("reduce op {} of complex tensors", reduce_name(r)));
  }

  // All-reduce of one tensor, in place.
  void all_reduce(const std::string& op, const at::Tensor& t, const c10d::ReduceOp& r) {
    check_reduction(op, t, r);
    const at::Tensor in = contribution(t, r);
    if (const auto dt = fabric_dtype(t.scalar_type())) {
      cc::CollectiveSpec s = spec_of(cc::Op::all_reduce, *dt, t.numel());
      s.reduce = fabric_op(r);
      write_result(t, run(op, s, bytes_of(in), {t}));
    } else {
      const Bytes all = run(op, bytes_spec(cc::Op::all_gather, nbytes(t)), bytes_of(in), {t});
      write_tensor(t, reduce_on_host(all, R(), t.numel(), t.scalar_type(), r));
    }
  }

  // Reduce-scatter: `input` holds R blocks the size of `output`; rank r gets block r reduced.
  void reduce_scatter(const std::string& op, const at::Tensor& output, const at::Tensor& input,
                      const c10d::ReduceOp& r) {
    check_reduction(op, input, r);
    if (input.numel() != output.numel() * R())
      refuse(op, fmt::format("input has {} elements, expected {} (output's {} × {} ranks)",
                             input.numel(), output.numel() * R(), output.numel(), R()));
    const at::Tensor in = contribution(input, r);
    if (const auto dt = fabric_dtype(input.scalar_type())) {
      cc::CollectiveSpec s = spec_of(cc::Op::reduce_scatter, *dt, output.numel());
      s.reduce = fabric_op(r);
      write_result(output, run(op, s, bytes_of(in), {output, input}));
    } else {
      const Bytes mine =
          run(op, bytes_spec(cc::Op::all_to_all, nbytes(output)), bytes_of(in), {output, input});
      write_tensor(output, reduce_on_host(mine, R(), output.numel(), output.scalar_type(), r));
    }
  }

  void write_result(const at::Tensor& t, const Bytes& b) { write_bytes(t, b.data(), b.size()); }
  static void write_tensor(const at::Tensor& t, const at::Tensor& value) {
    if (symmetric_process()) return;
    host_alias(t).copy_(value.reshape(t.sizes()));
  }

  // Everyone's sizes, so that every rank checks and shapes an exchange of uneven blocks alike:
  // rank s sends sends[s][d] bytes to d and expects recvs[s][d] from d.
  struct Matrix {
    std::vector<uint64_t> sends, recvs;  // R × R, row = rank
  };
  Matrix exchange_sizes(const std::string& op, const std::vector<uint64_t>& sends,
                        const std::vector<uint64_t>& recvs, const std::vector<at::Tensor>& ts) {
    std::vector<uint64_t> mine(sends);
    mine.insert(mine.end(), recvs.begin(), recvs.end());
    Bytes in(mine.size() * 8);
    std::memcpy(in.data(), mine.data(), in.size());
    Bytes all = run(op + " (sizes)", bytes_spec(cc::Op::all_gather, in.size()), in, ts);
    if (setup.symmetric) {  // every rank sends and expects what this one does
      all.clear();
      for (int r = 0; r < R(); ++r) all.insert(all.end(), in.begin(), in.end());
    }
    Matrix m;
    const size_t n = static_cast<size_t>(R());
    m.sends.resize(n * n);
    m.recvs.resize(n * n);
    for (size_t s = 0; s < n; ++s) {
      std::memcpy(&m.sends[s * n], all.data() + s * 2 * n * 8, n * 8);
      std::memcpy(&m.recvs[s * n], all.data() + s * 2 * n * 8 + n * 8, n * 8);
    }
    for (size_t s = 0; s < n; ++s)
      for (size_t d = 0; d < n; ++d)
        if (m.sends[s * n + d] != m.recvs[d * n + s])
          refuse(op, fmt::format("rank {} sends {} bytes to rank {}, which expects {}", s,
                                 m.sends[s * n + d], d, m.recvs[d * n + s]));
    return m;
  }

  // An all-to-all of uneven blocks (bytes): sends[d] to each d; returns the blocks received,
  // from rank 0 up.
  Bytes all_to_all_v(const std::string& op, const Bytes& input, const std::vector<uint64_t>& sends,
                     const std::vector<uint64_t>& recvs, const std::vector<at::Tensor>& ts) {
    const Matrix m = exchange_sizes(op, sends, recvs, ts);
    cc::CollectiveSpec s = bytes_spec(cc::Op::all_to_all_v, 0);
    s.counts = m.sends;
    return run(op, s, input, ts);
  }

  // ---- Point to point ----

  // A send (this rank's bytes to `other`) or a receive (into `t`), as a permute on the
  // channel from the source to the destination: a connection and a thread of its own for each
  // direction of each pair, so that sends match receives in order whatever else the two ranks
  // exchange.
  WorkPtr point_to_point(const std::string& op, const at::Tensor& t, int other, bool sending) {
    if (other < 0 || other >= R() || other == me())
      refuse(op, fmt::format("peer rank {} is not another rank of the group", other));
    if (setup.symmetric)
      refuse(op,
             "symmetric ranks (NEURONSIM_SYMMETRIC_RANKS) time collectives only: a send or "
             "receive pairs two ranks that do different things");
    if (broken) fail(op, "the group failed earlier: " + *broken);
    const uint64_t arrival = arrival_ps({t});
    // A permute takes the same size from every rank; the receiver's bytes are not sent.
    auto input = std::make_shared<Bytes>(sending ? bytes_of(t) : Bytes(nbytes(t), 0));
    FuturePtr future = new_future();
    const int source = sending ? me() : other, dest = sending ? other : me();
    const int pair_rank = sending ? 0 : 1;  // the source is rank 0 of the channel
    PeerThread& p = transport.channel(source, dest);
    const std::string what = fmt::format("{} {} rank {}", op, sending ? "to" : "from", other);
    p.post([this, &p, t, input, future, what, source, dest, pair_rank, sending, arrival] {
      try {
        if (p.broken) fail(what, "the connection failed earlier: " + *p.broken);
        try {
          if (!p.comm)
            p.comm =
                transport.connect(fmt::format("neuronsim/p2p/{}-{}", source, dest), pair_rank, 2);
          const cc::CollectiveSpec s = cc::send_recv_spec(2, 0, 1, isa::DType::uint8, nbytes(t));
          cc::CollectiveOutcome out =
              p.comm->run(s, {cc::RankCall{pair_rank, arrival, std::move(*input)}}, true);
          if (!sending) write_result(t, out.outputs.at(0));
          account(what, {t}, arrival, out.finish_ps.at(0), sending ? nbytes(t) : 0, false);
        } catch (const cc::CommError& e) {
          p.broken = e.what();
          p.comm.reset();
          fail(what, e.what());
        }
        future->markCompleted(c10::IValue(std::vector<at::Tensor>{t}));
      } catch (...) {
        future->setError(std::current_exception());
      }
    });
    if (coalescing) coalesced.push_back(future);
    return c10::make_intrusive<NeuronWork>(sending ? c10d::OpType::SEND : c10d::OpType::RECV,
                                           future, std::vector<at::Tensor>{t});
  }
};

namespace {

const at::Tensor& single(const ProcessGroupNeuron::Impl& impl, const std::string& op,
                         const std::vector<at::Tensor>& tensors) {
  if (tensors.size() != 1)
    impl.refuse(op, fmt::format("takes one tensor per rank, got {}", tensors.size()));
  return tensors[0];
}

// TorchNeuron's form of reduce_scatter's input: one tensor holding every rank's block, R times
// the output along the one dim where their sizes differ; rank r's block is the r-th slice.
std::vector<at::Tensor> blocks_by_rank(const ProcessGroupNeuron::Impl& impl, const std::string& op,
                                       const at::Tensor& input, const at::Tensor& out) {
  const int64_t ranks = impl.R();
  std::optional<int64_t> dim;
  bool fits = input.dim() == out.dim();
  for (int64_t d = 0; fits && d < input.dim(); ++d) {
    if (input.size(d) == out.size(d)) continue;
    fits = !dim && input.size(d) == out.size(d) * ranks;
    dim = d;
  }
  if (!fits || !dim)
    impl.refuse(op, fmt::format("one input tensor must be {} (the ranks) times the output along "
                                "one dim; got input {} and output {}",
                                ranks, c10::str(input.sizes()), c10::str(out.sizes())));
  return input.chunk(ranks, *dim);
}

}  // namespace

ProcessGroupNeuron::ProcessGroupNeuron(GroupSetup setup)
    : Backend(setup.rank, setup.size), impl_(std::make_unique<Impl>(std::move(setup))) {
  if (impl_->setup.symmetric) {
    if (pytorch::Backend::get().env().mode != sim::Mode::timing_only)
      impl_->refuse("new_group",
                    "symmetric ranks (NEURONSIM_SYMMETRIC_RANKS=1) need timing-only mode "
                    "(NEURONSIM_MODE=timing-only): their peers are not run, so no collective "
                    "has the values it would have");
    impl_->placement = impl_->symmetric_cores();  // refuses one the instance cannot hold
    return;
  }
  // Every rank of the job takes part in making a group (torch's new_group is collective), so
  // its ranks connect now, while the store, which the job's first rank hosts, is surely there:
  // a group of later ranks must not need the store after the first ranks have left.
  try {
    impl_->comm = impl_->transport.connect("neuronsim/root", impl_->me(), impl_->R());
  } catch (const cc::CommError& e) {
    impl_->broken = e.what();
    impl_->fail("new_group", e.what());
  }
}

ProcessGroupNeuron::~ProcessGroupNeuron() {
  shutdown();
}

void ProcessGroupNeuron::shutdown() {
  impl_->transport.close_channels();
  std::lock_guard lock(impl_->mu);
  impl_->comm.reset();
}

ProcessGroupNeuron::Stats ProcessGroupNeuron::stats() const {
  std::lock_guard lock(impl_->stats_mu);
  return impl_->stats;
}

void ProcessGroupNeuron::startCoalescing() {
  impl_->coalescing = true;
  impl_->coalesced.clear();
}

WorkPtr ProcessGroupNeuron::endCoalescing() {
  impl_->coalescing = false;
  std::vector<FuturePtr> pending;
  pending.swap(impl_->coalesced);
  // Collectives ran as they came; what remains is the sends and receives.
  FuturePtr all = new_future();
  if (pending.empty()) all->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
  auto remaining = std::make_shared<std::atomic<size_t>>(pending.size());
  for (const FuturePtr& f : pending)
    f->addCallback([all, remaining, pending](c10::ivalue::Future&) {
      if (--*remaining != 0) return;
      for (const FuturePtr& g : pending)
        if (g->hasError()) {
          all->setError(g->exception_ptr());
          return;
        }
      all->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    });
  return c10::make_intrusive<NeuronWork>(c10d::OpType::COALESCED, all, std::vector<at::Tensor>{});
}

WorkPtr ProcessGroupNeuron::broadcast(std::vector<at::Tensor>& tensors,
                                      const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(*impl_, "broadcast", tensors);
  cc::CollectiveSpec s = Impl::bytes_spec(cc::Op::broadcast, nbytes(t));
  s.root = impl_->root_of("broadcast", opts.rootRank);
  const bool root = s.root == impl_->me();
  impl_->write_result(t, impl_->run("broadcast", s, root ? bytes_of(t) : Bytes{}, {t}));
  return done(c10d::OpType::BROADCAST, tensors);
}

WorkPtr ProcessGroupNeuron::allreduce(std::vector<at::Tensor>& tensors,
                                      const c10d::AllreduceOptions& opts) {
  impl_->all_reduce("all_reduce", single(*impl_, "all_reduce", tensors), opts.reduceOp);
  return done(c10d::OpType::ALLREDUCE, tensors);
}

WorkPtr ProcessGroupNeuron::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                const c10d::AllreduceCoalescedOptions& opts) {
  for (const at::Tensor& t : tensors) impl_->all_reduce("all_reduce_coalesced", t, opts.reduceOp);
  return done(c10d::OpType::ALLREDUCE_COALESCED, tensors);
}

WorkPtr ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors,
                                   const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(*impl_, "reduce", tensors);
  const c10d::ReduceOp& r = opts.reduceOp;
  impl_->check_reduction("reduce", t, r);
  const int root = impl_->root_of("reduce", opts.rootRank);
  const at::Tensor in = contribution(t, r);
  if (const auto dt = fabric_dtype(t.scalar_type())) {
    cc::CollectiveSpec s = Impl::spec_of(cc::Op::reduce, *dt, t.numel());
    s.reduce = fabric_op(r);
    s.root = root;
    const Bytes out = impl_->run("reduce", s, bytes_of(in), {t});
    if (root == impl_->me()) impl_->write_result(t, out);
  } else {
    const Bytes all =
        impl_->run("reduce", Impl::bytes_spec(cc::Op::all_gather, nbytes(t)), bytes_of(in), {t});
    if (root == impl_->me())
      Impl::write_tensor(t, reduce_on_host(all, impl_->R(), t.numel(), t.scalar_type(), r));
  }
  return done(c10d::OpType::REDUCE, tensors);
}

WorkPtr ProcessGroupNeuron::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                      std::vector<at::Tensor>& inputs,
                                      const c10d::AllgatherOptions& /*opts*/) {
  const std::string op = "all_gather";
  const at::Tensor& in = single(*impl_, op, inputs);
  if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != impl_->R())
    impl_->refuse(op, fmt::format("needs one list of {} output tensors", impl_->R()));
  const std::vector<at::Tensor>& outs = outputs[0];
  bool even = true;
  for (const at::Tensor& o : outs) even = even && nbytes(o) == nbytes(in);
  if (even) {
    split_into(
        outs, impl_->run(op, Impl::bytes_spec(cc::Op::all_gather, nbytes(in)), bytes_of(in), {in}));
  } else {  // uneven sizes: everyone's tensor to everyone
    const size_t n = static_cast<size_t>(impl_->R());
    Bytes mine;
    const Bytes b = bytes_of(in);
    for (size_t d = 0; d < n; ++d) mine.insert(mine.end(), b.begin(), b.end());
    std::vector<uint64_t> recvs;
    for (const at::Tensor& o : outs) recvs.push_back(nbytes(o));
    split_into(outs,
               impl_->all_to_all_v(op, mine, std::vector<uint64_t>(n, b.size()), recvs, {in}));
  }
  return done(c10d::OpType::ALLGATHER, outs);
}

WorkPtr ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input,
                                            const c10d::AllgatherOptions& /*opts*/) {
  const std::string op = "all_gather_into_tensor";
  if (nbytes(output) != nbytes(input) * static_cast<size_t>(impl_->R()))
    impl_->refuse(op, fmt::format("output has {} elements, expected {} × {} ranks", output.numel(),
                                  input.numel(), impl_->R()));
  impl_->write_result(output, impl_->run(op, Impl::bytes_spec(cc::Op::all_gather, nbytes(input)),
                                         bytes_of(input), {output, input}));
  return done(c10d::OpType::_ALLGATHER_BASE, {output});
}

WorkPtr ProcessGroupNeuron::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                std::vector<at::Tensor>& inputs,
                                                const c10d::AllgatherOptions& opts) {
  if (outputs.size() != inputs.size())
    impl_->refuse("all_gather_coalesced", "needs one output list per input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<std::vector<at::Tensor>> out{outputs[i]};
    std::vector<at::Tensor> in{inputs[i]};
    allgather(out, in, opts);
  }
  return done(c10d::OpType::ALLGATHER_COALESCED, inputs);
}

WorkPtr ProcessGroupNeuron::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  if (outputs.size() != inputs.size())
    impl_->refuse("all_gather_into_tensor_coalesced", "needs one output per input");
  for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
  return done(c10d::OpType::COALESCED, outputs);
}

WorkPtr ProcessGroupNeuron::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                   std::vector<at::Tensor>& inputs,
                                   const c10d::GatherOptions& opts) {
  const std::string op = "gather";
  const at::Tensor& in = single(*impl_, op, inputs);
  const int root = impl_->root_of(op, opts.rootRank);
  const bool at_root = root == impl_->me();
  if (at_root && (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != impl_->R()))
    impl_->refuse(op, fmt::format("the root needs one list of {} output tensors", impl_->R()));
  const size_t n = static_cast<size_t>(impl_->R());
  std::vector<uint64_t> sends(n, 0), recvs(n, 0);
  sends[static_cast<size_t>(root)] = nbytes(in);
  if (at_root)
    for (size_t s = 0; s < n; ++s) recvs[s] = nbytes(outputs[0][s]);
  const Bytes got = impl_->all_to_all_v(op, bytes_of(in), sends, recvs, {in});
  if (at_root) split_into(outputs[0], got);
  return done(c10d::OpType::GATHER, at_root ? outputs[0] : inputs);
}

WorkPtr ProcessGroupNeuron::scatter(std::vector<at::Tensor>& outputs,
                                    std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ScatterOptions& opts) {
  const std::string op = "scatter";
  const at::Tensor& out = single(*impl_, op, outputs);
  const int root = impl_->root_of(op, opts.rootRank);
  const bool at_root = root == impl_->me();
  if (at_root && (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != impl_->R()))
    impl_->refuse(op, fmt::format("the root needs one list of {} input tensors", impl_->R()));
  const size_t n = static_cast<size_t>(impl_->R());
  std::vector<uint64_t> sends(n, 0), recvs(n, 0);
  recvs[static_cast<size_t>(root)] = nbytes(out);
  if (at_root)
    for (size_t d = 0; d < n; ++d) sends[d] = nbytes(inputs[0][d]);
  impl_->write_result(
      out, impl_->all_to_all_v(op, at_root ? concat(inputs[0]) : Bytes{}, sends, recvs, {out}));
  return done(c10d::OpType::SCATTER, outputs);
}

WorkPtr ProcessGroupNeuron::reduce_scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter";
  const at::Tensor& out = single(*impl_, op, outputs);
  if (inputs.size() != 1 ||
      (inputs[0].size() != 1 && static_cast<int>(inputs[0].size()) != impl_->R()))
    impl_->refuse(op, fmt::format("needs one list of {} input tensors, or of one tensor holding "
                                  "them all",
                                  impl_->R()));
  const std::vector<at::Tensor> blocks = inputs[0].size() == 1 && impl_->R() > 1
                                             ? blocks_by_rank(*impl_, op, inputs[0][0], out)
                                             : inputs[0];
  for (const at::Tensor& t : blocks)
    if (t.numel() != out.numel() || t.scalar_type() != out.scalar_type())
      impl_->refuse(op, "every input must have the output's size and dtype");
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : blocks) flat.push_back(host_alias(t).reshape({-1}));
  const at::Tensor input = at::cat(flat);
  impl_->reduce_scatter(op, out, input, opts.reduceOp);
  return done(c10d::OpType::REDUCE_SCATTER, outputs);
}

WorkPtr ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::ReduceScatterOptions& opts) {
  impl_->reduce_scatter("reduce_scatter_tensor", output, input, opts.reduceOp);
  return done(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

WorkPtr ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (outputs.size() != inputs.size())
    impl_->refuse("reduce_scatter_tensor_coalesced", "needs one output per input");
  for (size_t i = 0; i < inputs.size(); ++i)
    impl_->reduce_scatter("reduce_scatter_tensor_coalesced", outputs[i], inputs[i], opts.reduceOp);
  return done(c10d::OpType::COALESCED, outputs);
}

WorkPtr ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input,
                                          std::vector<int64_t>& output_split_sizes,
                                          std::vector<int64_t>& input_split_sizes,
                                          const c10d::AllToAllOptions& /*opts*/) {
  const std::string op = "all_to_all_single";
  const size_t n = static_cast<size_t>(impl_->R());
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    if (nbytes(input) % n != 0 || nbytes(output) != nbytes(input))
      impl_->refuse(op, fmt::format("input and output must have the same size, divisible by {} "
                                    "ranks (input {}, output {} elements)",
                                    n, input.numel(), output.numel()));
    impl_->write_result(output,
                        impl_->run(op, Impl::bytes_spec(cc::Op::all_to_all, nbytes(input) / n),
                                   bytes_of(input), {output, input}));
    return done(c10d::OpType::ALLTOALL_BASE, {output});
  }
  // Rows of dimension 0, as many to (from) each rank as the split sizes say.
  auto rows_to_bytes = [&](const at::Tensor& t, const std::vector<int64_t>& splits) {
    const size_t row = t.dim() == 0 || t.size(0) == 0 ? 0 : nbytes(t) / t.size(0);
    std::vector<uint64_t> b(n, 0);
    if (splits.empty()) {
      for (auto& v : b) v = nbytes(t) / n;
    } else {
      if (splits.size() != n) impl_->refuse(op, fmt::format("needs {} split sizes", n));
      for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint64_t>(splits[i]) * row;
    }
    return b;
  };
  const std::vector<uint64_t> sends = rows_to_bytes(input, input_split_sizes);
  const std::vector<uint64_t> recvs = rows_to_bytes(output, output_split_sizes);
  impl_->write_result(output,
                      impl_->all_to_all_v(op, bytes_of(input), sends, recvs, {output, input}));
  return done(c10d::OpType::ALLTOALL_BASE, {output});
}

WorkPtr ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs,
                                     std::vector<at::Tensor>& inputs,
                                     const c10d::AllToAllOptions& /*opts*/) {
  const std::string op = "all_to_all";
  const size_t n = static_cast<size_t>(impl_->R());
  if (outputs.size() != n || inputs.size() != n)
    impl_->refuse(op, fmt::format("needs {} input and {} output tensors", n, n));
  std::vector<uint64_t> sends, recvs;
  for (const at::Tensor& t : inputs) sends.push_back(nbytes(t));
  for (const at::Tensor& t : outputs) recvs.push_back(nbytes(t));
  split_into(outputs, impl_->all_to_all_v(op, concat(inputs), sends, recvs, inputs));
  return done(c10d::OpType::ALLTOALL, outputs);
}

WorkPtr ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors, int dst_rank, int /*tag*/) {
  return impl_->point_to_point("send", single(*impl_, "send", tensors), dst_rank, true);
}

WorkPtr ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors, int src_rank, int /*tag*/) {
  return impl_->point_to_point("recv", single(*impl_, "recv", tensors), src_rank, false);
}

WorkPtr ProcessGroupNeuron::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  impl_->refuse("recv", "receiving from any source is not supported: name the source rank");
}

WorkPtr ProcessGroupNeuron::barrier(const c10d::BarrierOptions& /*opts*/) {
  impl_->run("barrier", Impl::bytes_spec(cc::Op::barrier, 0), {}, {}, /*hold_always=*/true);
  return done(c10d::OpType::BARRIER, {});
}

void register_distributed(pybind11::module_& m) {
  // The class derives from torch's c10d Backend, which torch.distributed registers; so it is
  // defined on first use, after torch.distributed is imported.
  m.def("_define_process_group_class", [](pybind11::module_ mod) {
    if (pybind11::hasattr(mod, "ProcessGroupNeuron")) return;
    pybind11::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(
        mod, "ProcessGroupNeuron")
        .def(pybind11::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                               double timeout_s, std::string name,
                               std::vector<int64_t> global_ranks) {
               GroupSetup s;
               s.store = store;
               s.rank = rank;
               s.size = size;
               s.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
               s.name = std::move(name);
               s.global_ranks = std::move(global_ranks);
               s.symmetric = symmetric_process();
               return c10::make_intrusive<ProcessGroupNeuron>(std::move(s));
             }),
             pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"),
             pybind11::arg("timeout_s"), pybind11::arg("name"), pybind11::arg("global_ranks"))
        .def("stats", [](const ProcessGroupNeuron& pg) {
          const ProcessGroupNeuron::Stats s = pg.stats();
          pybind11::dict d;
          d["collectives"] = s.collectives;
          d["bytes"] = s.bytes;
          d["simulated_ps"] = s.simulated_ps;
          return d;
        });
  });
}

}  // namespace neuronsim::pytorch
