#include "collective_hub.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuronsim/cc/communicator.h"
#include "neuronsim/isa/assembler.h"

namespace neuronsim::sim {
namespace {

using isa::AluOp;
using isa::Opcode;
using isa::Role;

[[noreturn]] void fail(const CollectiveSite& s, const std::string& what) {
  throw ExecError(ExecError::Kind::unsupported, fmt::format("{}: {}", s.describe(), what));
}

const isa::AccessPattern& operand(const CollectiveSite& s, Role r) {
  const isa::AccessPattern* ap = s.inst().operand(r);
  if (!ap) fail(s, fmt::format("operand {} is missing", isa::role_name(r)));
  return *ap;
}

bool is_p2p(Opcode op) {
  return op == Opcode::send || op == Opcode::recv;
}

// The instruction's alu0 as the reduction of the collective (docs/isa.md: add, multiply, max, min).
cc::ReduceOp reduce_of(const CollectiveSite& s) {
  switch (s.inst().alu0) {
    case AluOp::add:
      return cc::ReduceOp::sum;
    case AluOp::multiply:
      return cc::ReduceOp::prod;
    case AluOp::max:
      return cc::ReduceOp::max;
    case AluOp::min:
      return cc::ReduceOp::min;
    default:
      fail(s,
           fmt::format("op={} is not a reduction a collective can apply (add, multiply, max, min)",
                       isa::alu_op_name(s.inst().alu0)));
  }
}

void require(const CollectiveSite& s, bool ok, const std::string& what) {
  if (!ok) fail(s, what);
}

// send/recv: a permute of the pair (sender, receiver).
cc::CollectiveSpec p2p_spec(const CollectiveSite& s, int world, int rank) {
  const bool send = s.inst().opcode == Opcode::send;
  const int peer = s.inst().ints[1];
  require(s, peer >= 0 && peer < world,
          fmt::format("peer={} is not a rank of the job ({} ranks)", peer, world));
  require(s, peer != rank, fmt::format("peer={} is this core's own rank", peer));
  const isa::AccessPattern& ap = operand(s, send ? Role::src : Role::dst);
  return cc::send_recv_spec(world, send ? rank : peer, send ? peer : rank, ap.dtype,
                            ap.total_elems());
}

// The collective an instruction asks for, its sizes checked against the buffer conventions of
// cc::CollectiveSpec (all_gather dst = R x src, reduce_scatter src = R x dst, all_to_all R blocks).
cc::CollectiveSpec spec_of(const CollectiveSite& s, int world, int rank) {
  const isa::Instruction& in = s.inst();
  require(s, in.ints[0] == 0,
          fmt::format("group={}: only group 0 (every rank of the job) exists; other rank groups "
                      "are not modelled",
                      in.ints[0]));
  if (is_p2p(in.opcode)) return p2p_spec(s, world, rank);
  const isa::AccessPattern& src = operand(s, Role::src);
  const isa::AccessPattern& dst = operand(s, Role::dst);
  require(
      s, src.dtype == dst.dtype,
      fmt::format("dst is {} but src is {}: a collective moves elements without converting them",
                  isa::dtype_name(dst.dtype), isa::dtype_name(src.dtype)));
  const uint64_t R = static_cast<uint64_t>(world), ns = src.total_elems(), nd = dst.total_elems();
  cc::CollectiveSpec spec;
  spec.dtype = src.dtype;
  switch (in.opcode) {
    case Opcode::all_reduce:
      spec.op = cc::Op::all_reduce;
      spec.reduce = reduce_of(s);
      require(s, ns == nd,
              fmt::format("dst holds {} elements, src {}: they must be equal", nd, ns));
      spec.count = ns;
      break;
    case Opcode::all_gather:
      spec.op = cc::Op::all_gather;
      require(s, nd == R * ns,
              fmt::format(
                  "dst holds {} elements, but must hold {} ranks x src's {} (one block per rank)",
                  nd, R, ns));
      spec.count = ns;
      break;
    case Opcode::reduce_scatter:
      spec.op = cc::Op::reduce_scatter;
      spec.reduce = reduce_of(s);
      require(s, ns == R * nd,
              fmt::format(
                  "src holds {} elements, but must hold {} ranks x dst's {} (one block per rank)",
                  ns, R, nd));
      spec.count = nd;
      break;
    case Opcode::all_to_all:
      spec.op = cc::Op::all_to_all;
      require(s, ns == nd && ns % R == 0,
              fmt::format("src holds {} elements and dst {}: both must hold the same number, a "
                          "multiple of the {} ranks (one block per rank)",
                          ns, nd, R));
      spec.count = ns / R;
      break;
    default:
      fail(s, "not a collective instruction");
  }
  return spec;
}

bool same(const cc::CollectiveSpec& a, const cc::CollectiveSpec& b) {
  return a.op == b.op && a.reduce == b.reduce && a.dtype == b.dtype && a.count == b.count &&
         a.peers == b.peers;
}

std::string spec_text(const cc::CollectiveSpec& s) {
  std::string out =
      fmt::format("{} of {} {} elements", cc::op_name(s.op), s.count, isa::dtype_name(s.dtype));
  if (s.op == cc::Op::all_reduce || s.op == cc::Op::reduce_scatter)
    out += fmt::format(" ({})", cc::reduce_op_name(s.reduce));
  return out;
}

}  // namespace

std::string CollectiveSite::describe() const {
  return fmt::format("core {} {}[{}] `{}`", core, isa::engine_name(engine), index,
                     isa::format_instruction(inst(), program));
}

CollectiveHub::CollectiveHub(const CollectiveBinding& binding, const std::set<uint32_t>& loaded,
                             bool with_data)
    : comm_(binding.communicator), with_data_(with_data) {
  if (binding.ranks.empty()) return;
  if (!comm_)
    throw std::invalid_argument(
        "collective binding: cores are bound to ranks but no communicator is given");
  const std::vector<int>& local = comm_->local_ranks();
  for (size_t i = 0; i < local.size(); ++i) slot_of_rank_[local[i]] = i;
  for (const auto& [core, rank] : binding.ranks) {
    if (!loaded.count(core))
      throw std::invalid_argument(
          fmt::format("collective binding: core {} (rank {}) has no program loaded", core, rank));
    if (!slot_of_rank_.count(rank))
      throw std::invalid_argument(
          fmt::format("collective binding: core {} is bound to rank {}, which is not one of "
                      "the communicator's local ranks",
                      core, rank));
    if (!core_of_rank_.emplace(rank, core).second)
      throw std::invalid_argument(
          fmt::format("collective binding: rank {} is bound to cores {} and {}", rank,
                      core_of_rank_[rank], core));
    rank_of_core_[core] = rank;
    next_round_[rank] = 0;
  }
  if (core_of_rank_.size() != local.size())
    throw std::invalid_argument(
        fmt::format("collective binding: {} cores bound, but the communicator runs {} local "
                    "ranks; every local rank needs its core",
                    core_of_rank_.size(), local.size()));
}

int CollectiveHub::rank_of(const CollectiveSite& site) const {
  const auto it = rank_of_core_.find(site.core);
  if (it == rank_of_core_.end())
    fail(site,
         "collective instruction but the core is not part of a collective job (load with "
         "nrt_load_collectives)");
  return it->second;
}

std::string CollectiveHub::rank_name(int rank) const {
  const auto it = core_of_rank_.find(rank);
  return it == core_of_rank_.end() ? fmt::format("rank {}", rank)
                                   : fmt::format("rank {} (core {})", rank, it->second);
}

std::shared_ptr<const CollectiveDone> CollectiveHub::arrive(const CollectiveSite& site,
                                                            CoreState* state, uint64_t arrival_ps) {
  const int rank = rank_of(site);
  Part part{site,
            spec_of(site, comm_->world_size(), rank),
            {},
            arrival_ps,
            std::make_shared<CollectiveDone>()};
  const Opcode op = site.inst().opcode;
  if (with_data_ && state && op != Opcode::recv)
    part.input = read_operand(site.inst(), Role::src, *state, site.program);
  auto done = part.done;
  if (is_p2p(op))
    arrive_p2p(std::move(part), rank);
  else
    arrive_group(std::move(part), rank);
  return done;
}

void CollectiveHub::arrive_group(Part part, int rank) {
  const uint64_t k = next_round_[rank]++;
  Round& round = rounds_[k];
  round.parts.resize(slot_of_rank_.size());
  waits_[{part.site.core, part.site.engine}] = Wait{false, k, {}};
  round.parts[slot_of_rank_.at(rank)] = std::move(part);
  if (++round.arrived == round.parts.size()) run_round(k);
}

void CollectiveHub::run_round(uint64_t k) {
  Round round = std::move(rounds_.at(k));
  rounds_.erase(k);
  const Part& first = *round.parts.front();
  std::vector<cc::RankCall> calls;
  for (size_t i = 0; i < round.parts.size(); ++i) {
    Part& p = *round.parts[i];
    if (!same(p.spec, first.spec))
      fail(p.site,
           fmt::format(
               "collective #{} of the job is {} here, but {} on {}; every rank must run the same "
               "collective in the same order",
               k, spec_text(p.spec), spec_text(first.spec), first.site.describe()));
    calls.push_back({comm_->local_ranks()[i], p.arrival_ps, std::move(p.input)});
  }
  cc::CollectiveOutcome out;
  try {
    out = comm_->run(first.spec, std::move(calls), with_data_);
  } catch (const std::invalid_argument& e) {
    fail(first.site,
         fmt::format("collective #{} ({}) cannot run: {}", k, spec_text(first.spec), e.what()));
  }
  for (size_t i = 0; i < round.parts.size(); ++i) {
    CollectiveDone& d = *round.parts[i]->done;
    d.finish_ps = out.finish_ps.at(i);
    if (with_data_) d.output = std::move(out.outputs.at(i));
    d.done = true;
  }
}

void CollectiveHub::arrive_p2p(Part part, int rank) {
  // A pair runs as a permute in which the other ranks take no part; only a communicator that
  // holds every rank can stand in for them.
  if (static_cast<int>(comm_->local_ranks().size()) != comm_->world_size())
    fail(part.site,
         fmt::format(
             "send/recv needs every rank of the job in this process; this process runs {} of the "
             "{} ranks (across processes only all_reduce, all_gather, reduce_scatter and "
             "all_to_all run)",
             comm_->local_ranks().size(), comm_->world_size()));
  const bool send = part.site.inst().opcode == Opcode::send;
  const int peer = part.site.inst().ints[1];
  const std::pair<int, int> key = send ? std::pair{rank, peer} : std::pair{peer, rank};
  waits_[{part.site.core, part.site.engine}] = Wait{true, 0, key};
  PairQueue& q = pairs_[key];
  (send ? q.sends : q.recvs).push_back(std::move(part));
  if (!q.sends.empty() && !q.recvs.empty()) run_pair(key);
}

void CollectiveHub::run_pair(std::pair<int, int> key) {
  PairQueue& q = pairs_[key];
  Part send = std::move(q.sends.front());
  Part recv = std::move(q.recvs.front());
  q.sends.pop_front();
  q.recvs.pop_front();
  if (!same(send.spec, recv.spec))
    fail(recv.site,
         fmt::format("receives {} elements of {}, but the matching send on {} sends {} of {}",
                     recv.spec.count, isa::dtype_name(recv.spec.dtype), send.site.describe(),
                     send.spec.count, isa::dtype_name(send.spec.dtype)));
  const auto [src, dst] = key;
  const uint64_t bytes = send.spec.count * isa::dtype_size(send.spec.dtype);
  std::vector<cc::RankCall> calls;
  for (int r = 0; r < comm_->world_size(); ++r) {
    cc::RankCall c{r, std::min(send.arrival_ps, recv.arrival_ps), {}};
    if (r == src) c = {r, send.arrival_ps, std::move(send.input)};
    if (r == dst) c.arrival_ps = recv.arrival_ps;
    if (with_data_ && r != src)
      c.input.assign(bytes, 0);  // a permute gives every rank an input; unused here
    calls.push_back(std::move(c));
  }
  const cc::CollectiveOutcome out = comm_->run(send.spec, std::move(calls), with_data_);
  send.done->finish_ps = out.finish_ps.at(static_cast<size_t>(src));
  recv.done->finish_ps = out.finish_ps.at(static_cast<size_t>(dst));
  if (with_data_) recv.done->output = out.outputs.at(static_cast<size_t>(dst));
  send.done->done = recv.done->done = true;
}

void CollectiveHub::finish(const CollectiveSite& site, CoreState* state,
                           const CollectiveDone& done) {
  waits_.erase({site.core, site.engine});
  if (!with_data_ || !state || site.inst().opcode == Opcode::send) return;
  try {
    write_operand(site.inst(), Role::dst, *state, done.output, site.program);
  } catch (const ExecError& e) {
    throw ExecError(e.kind(), fmt::format("core {} {}[{}]: {}", site.core,
                                          isa::engine_name(site.engine), site.index, e.what()));
  }
}

std::string CollectiveHub::waiting(uint32_t core, isa::Engine engine) const {
  const auto it = waits_.find({core, engine});
  if (it == waits_.end()) return "waits at a collective";
  const Wait& w = it->second;
  if (w.p2p) {
    const auto [src, dst] = w.pair;
    const bool sender = rank_of_core_.at(core) == src;
    return sender ? fmt::format("waits at a send to {} for its matching recv (peer={})",
                                rank_name(dst), src)
                  : fmt::format("waits at a recv from {} for its matching send (peer={})",
                                rank_name(src), dst);
  }
  const Round& round = rounds_.at(w.round);
  std::vector<std::string> missing;
  for (const auto& [rank, slot] : slot_of_rank_)
    if (!round.parts[slot]) missing.push_back(rank_name(rank));
  return fmt::format("waits at collective #{} of the job for {}, which never reached it", w.round,
                     fmt::join(missing, ", "));
}

}  // namespace neuronsim::sim
