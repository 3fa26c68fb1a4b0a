#include "neuronsim/cc/algorithms.h"

#include "plans.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::cc {

using namespace plans;  // the algorithms' steps and their integer helpers (plans.h)

std::string_view op_name(Op op) {
  switch (op) {
    case Op::all_reduce:
      return "all_reduce";
    case Op::all_gather:
      return "all_gather";
    case Op::reduce_scatter:
      return "reduce_scatter";
    case Op::all_to_all:
      return "all_to_all";
    case Op::broadcast:
      return "broadcast";
    case Op::reduce:
      return "reduce";
    case Op::permute:
      return "permute";
    case Op::barrier:
      return "barrier";
    case Op::all_to_all_v:
      return "all_to_all_v";
  }
  return "?";
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
    case ReduceOp::avg:
      return "avg";
  }
  return "?";
}

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::auto_select:
      return "auto";
    case Algorithm::ring:
      return "ring";
    case Algorithm::mesh:
      return "mesh";
    case Algorithm::rdh:
      return "rdh";
    case Algorithm::hier2d:
      return "hier2d";
    case Algorithm::hierarchical:
      return "hierarchical";
  }
  return "?";
}

namespace {
constexpr int kHierRow = 4;  // ranks per row of the hier2d grid
}  // namespace

namespace {
// all_to_all_v: elements from s to d, and the element offsets of the blocks.
uint64_t vcount(const CollectiveSpec& s, int R, int from, int to) {
  if (s.counts.size() != static_cast<size_t>(R) * static_cast<size_t>(R))
    throw std::invalid_argument(
        fmt::format("all_to_all_v needs {}x{} counts, got {}", R, R, s.counts.size()));
  return s.counts[static_cast<size_t>(from) * static_cast<size_t>(R) + static_cast<size_t>(to)];
}
uint64_t vsend_off(const CollectiveSpec& s, int R, int r, int d) {  // in rank r's input
  uint64_t o = 0;
  for (int j = 0; j < d; ++j) o += vcount(s, R, r, j);
  return o * isa::dtype_size(s.dtype);
}
uint64_t vrecv_off(const CollectiveSpec& s, int R, int r, int src) {  // in rank r's output
  uint64_t o = 0;
  for (int j = 0; j < src; ++j) o += vcount(s, R, j, r);
  return o * isa::dtype_size(s.dtype);
}
}  // namespace

uint64_t CollectiveSpec::input_bytes(int ranks, int rank) const {
  const uint64_t b = count * isa::dtype_size(dtype);
  switch (op) {
    case Op::all_to_all_v:
      return vsend_off(*this, ranks, rank, ranks);
    case Op::reduce_scatter:
    case Op::all_to_all:
      return b * static_cast<uint64_t>(ranks);
    case Op::broadcast:
      return rank == root ? b : 0;
    case Op::barrier:
      return 0;
    default:
      return b;
  }
}

uint64_t CollectiveSpec::output_bytes(int ranks, int rank) const {
  const uint64_t b = count * isa::dtype_size(dtype);
  switch (op) {
    case Op::all_to_all_v:
      return vrecv_off(*this, ranks, rank, ranks);
    case Op::all_gather:
    case Op::all_to_all:
      return b * static_cast<uint64_t>(ranks);
    case Op::reduce:
      return rank == root ? b : 0;
    case Op::permute:
      for (int s = 0; s < static_cast<int>(peers.size()); ++s)
        if (peers[static_cast<size_t>(s)] == rank) return b;
      return 0;
    case Op::barrier:
      return 0;
    default:
      return b;
  }
}

uint64_t CollectiveSpec::message_bytes(int ranks) const {
  uint64_t m = 0;
  for (int r = 0; r < ranks; ++r) m = std::max({m, input_bytes(ranks, r), output_bytes(ranks, r)});
  return m;
}

CollectiveSpec send_recv_spec(int ranks, int src, int dst, isa::DType dtype, uint64_t count) {
  if (src < 0 || dst < 0 || src >= ranks || dst >= ranks || src == dst)
    throw std::invalid_argument(fmt::format("send/recv {} -> {} among {} ranks", src, dst, ranks));
  CollectiveSpec s;
  s.op = Op::permute;
  s.dtype = dtype;
  s.count = count;
  s.peers.assign(static_cast<size_t>(ranks), -1);
  s.peers[static_cast<size_t>(src)] = dst;
  return s;
}

bool algorithm_supported(Op op, Algorithm a, int ranks, int group) {
  if (ranks < 1) return false;
  if (a == Algorithm::auto_select) return true;
  if (a == Algorithm::hierarchical)
    return (op == Op::all_reduce || op == Op::all_gather || op == Op::reduce_scatter) &&
           group >= 1 && ranks % group == 0 && ranks / group >= 2;
  if (a == Algorithm::hier2d)
    return op == Op::all_reduce && ranks % kHierRow == 0 && ranks >= 2 * kHierRow;
  switch (op) {
    case Op::all_reduce:
    case Op::all_gather:
    case Op::reduce_scatter:
      return a != Algorithm::rdh || pow2(ranks);
    case Op::broadcast:
    case Op::reduce:
      return true;
    case Op::all_to_all:
    case Op::all_to_all_v:
    case Op::permute:
      return a == Algorithm::mesh;
    case Op::barrier:
      return a != Algorithm::ring && a != Algorithm::hier2d;
  }
  return false;
}

Algorithm choose_algorithm(const CollectiveSpec& spec, int ranks, const Thresholds& t, int group) {
  switch (spec.op) {
    case Op::all_to_all:
    case Op::all_to_all_v:
    case Op::permute:
      return Algorithm::mesh;
    case Op::barrier:
      return Algorithm::rdh;
    default:
      break;
  }
  const uint64_t bytes = spec.message_bytes(ranks);
  // Across hosts, as the Neuron collectives library does (neuron-hardware.md §5 [C R3]): the
  // flat schedules cross EFA through one chip's share, the hierarchy through every chip's.
  if (bytes >= t.mesh_below_bytes &&
      algorithm_supported(spec.op, Algorithm::hierarchical, ranks, group))
    return Algorithm::hierarchical;
  if (bytes < t.mesh_below_bytes) return Algorithm::mesh;
  if (bytes < t.rdh_below_bytes && algorithm_supported(spec.op, Algorithm::rdh, ranks))
    return Algorithm::rdh;
  return Algorithm::ring;
}

RankPlan make_plan(const CollectiveSpec& spec, int R, int r, Algorithm a, int group) {
  if (R < 1 || r < 0 || r >= R) throw std::invalid_argument(fmt::format("rank {} of {}", r, R));
  if (a == Algorithm::auto_select)
    throw std::invalid_argument(
        "make_plan needs a concrete algorithm (choose_algorithm picks one)");
  if (!algorithm_supported(spec.op, a, R, group))
    throw std::invalid_argument(fmt::format(
        "{} has no {} form for {} ranks{}", op_name(spec.op), algorithm_name(a), R,
        a == Algorithm::rdh            ? " (rdh needs a power-of-two rank count)"
        : a == Algorithm::hierarchical ? " (hierarchical is all_reduce, all_gather or "
                                         "reduce_scatter across two or more hosts holding equal "
                                         "runs of ranks)"
                                       : ""));
  if ((spec.op == Op::broadcast || spec.op == Op::reduce) && (spec.root < 0 || spec.root >= R))
    throw std::invalid_argument(fmt::format("root {} of {} ranks", spec.root, R));
  const uint64_t es = isa::dtype_size(spec.dtype);
  RankPlan p;
  const Chunks per_rank{spec.count * static_cast<uint64_t>(R), es, R};  // R blocks of count
  const Chunks split{spec.count, es, R};                                // count split R ways
  const uint64_t B = spec.count * es;
  switch (spec.op) {
    case Op::all_reduce:
      if (a == Algorithm::ring) {
        ring_reduce_scatter(p, R, r, split, 0);
        ring_all_gather(p, R, r, split, static_cast<uint64_t>(R));
      } else if (a == Algorithm::mesh) {
        mesh_reduce_scatter(p, R, r, split, 0);
        mesh_all_gather(p, R, r, split, 1);
      } else if (a == Algorithm::hier2d) {
        grid_all_reduce(p, R, r, spec.count, es, kHierRow);
      } else if (a == Algorithm::hierarchical) {
        grid_all_reduce(p, R, r, spec.count, es, group);
      } else {
        rdh_reduce_scatter(p, R, r, split, 0);
        rdh_all_gather(p, R, r, split, 64);
      }
      break;
    case Op::all_gather:
      if (a == Algorithm::hierarchical)
        grid_gather_or_scatter(p, R, r, per_rank, group, false);
      else if (a == Algorithm::ring)
        ring_all_gather(p, R, r, per_rank, 0);
      else if (a == Algorithm::mesh)
        mesh_all_gather(p, R, r, per_rank, 0);
      else
        rdh_all_gather(p, R, r, per_rank, 0);
      break;
    case Op::reduce_scatter:
      if (a == Algorithm::hierarchical)
        grid_gather_or_scatter(p, R, r, per_rank, group, true);
      else if (a == Algorithm::ring)
        ring_reduce_scatter(p, R, r, per_rank, 0);
      else if (a == Algorithm::mesh)
        mesh_reduce_scatter(p, R, r, per_rank, 0);
      else
        rdh_reduce_scatter(p, R, r, per_rank, 0);
      break;
    case Op::all_to_all: {
      Step st;
      for (int j = 0; j < R; ++j) {
        if (j == r) continue;
        st.sends.push_back({j, 0, per_rank.off(j), B, 0, false});
        st.recvs.push_back({j, 1, per_rank.off(j), B, 0, false});
      }
      p.steps.push_back(std::move(st));
      break;
    }
    case Op::all_to_all_v: {
      Step st;
      for (int j = 0; j < R; ++j) {
        if (j == r) continue;
        st.sends.push_back({j, 0, vsend_off(spec, R, r, j), vcount(spec, R, r, j) * es, 0, false});
        st.recvs.push_back({j, 1, vrecv_off(spec, R, r, j), vcount(spec, R, j, r) * es, 0, false});
      }
      p.steps.push_back(std::move(st));
      break;
    }
    case Op::broadcast: {
      const int v = mod(r - spec.root, R);  // position relative to the root
      auto real = [&](int pos) { return mod(pos + spec.root, R); };
      if (a == Algorithm::mesh) {
        Step st;
        if (v == 0)
          for (int j = 1; j < R; ++j) st.sends.push_back({real(j), 0, 0, B, 0, false});
        else
          st.recvs.push_back({spec.root, 0, 0, B, 0, false});
        p.steps.push_back(std::move(st));
      } else if (a == Algorithm::ring) {
        // A pipelined chain root -> root+1 -> ...: the buffer in R pieces; a middle rank forwards
        // piece i-1 while it receives piece i.
        const int P = R;
        for (int i = 0; i <= P; ++i) {
          Step st;
          if (v < R - 1 && i >= 1 && R > 1)
            st.sends.push_back({real(v + 1), 0, split.off(i - 1), split.bytes(i - 1, i),
                                static_cast<uint64_t>(i - 1), false});
          if (v > 0 && i < P)
            st.recvs.push_back({real(v - 1), 0, split.off(i), split.bytes(i, i + 1),
                                static_cast<uint64_t>(i), false});
          if (v == 0 && i < P && R > 1)  // the root sends piece i at step i
            st.sends.assign(1, {real(1), 0, split.off(i), split.bytes(i, i + 1),
                                static_cast<uint64_t>(i), false});
          if (v == 0 && i == P) st.sends.clear();
          p.steps.push_back(std::move(st));
        }
      } else {  // binomial tree
        for (int k = 0, d = 1; d < R; ++k, d <<= 1) {
          Step st;
          if (v < d && v + d < R)
            st.sends.push_back({real(v + d), 0, 0, B, static_cast<uint64_t>(k), false});
          else if (v >= d && v < 2 * d)
            st.recvs.push_back({real(v - d), 0, 0, B, static_cast<uint64_t>(k), false});
          p.steps.push_back(std::move(st));
        }
      }
      break;
    }
    case Op::reduce: {
      const int v = mod(r - spec.root, R);
      auto real = [&](int pos) { return mod(pos + spec.root, R); };
      if (a == Algorithm::mesh) {
        Step st;
        if (r == spec.root) {
          for (int j = 0; j < R; ++j)
            if (j != r) st.recvs.push_back({j, 0, 0, B, 0, true});  // reduced in rank order
        } else {
          st.sends.push_back({spec.root, 0, 0, B, 0, false});
        }
        p.steps.push_back(std::move(st));
      } else if (a == Algorithm::ring) {
        // Ring reduce-scatter, then every rank sends its reduced chunk to the root.
        ring_reduce_scatter(p, R, r, split, 0);
        Step st;
        if (r == spec.root) {
          for (int j = 0; j < R; ++j)
            if (j != r)
              st.recvs.push_back(
                  {j, 0, split.off(j), split.bytes(j, j + 1), static_cast<uint64_t>(R), false});
        } else {
          st.sends.push_back(
              {spec.root, 0, split.off(r), split.bytes(r, r + 1), static_cast<uint64_t>(R), false});
        }
        p.steps.push_back(std::move(st));
      } else {  // binomial tree towards the root
        for (int k = 0, d = 1; d < R; ++k, d <<= 1) {
          Step st;
          if (v % (2 * d) == d)
            st.sends.push_back({real(v - d), 0, 0, B, static_cast<uint64_t>(k), false});
          else if (v % (2 * d) == 0 && v + d < R)
            st.recvs.push_back({real(v + d), 0, 0, B, static_cast<uint64_t>(k), true});
          p.steps.push_back(std::move(st));
        }
      }
      break;
    }
    case Op::permute: {
      if (spec.peers.size() != static_cast<size_t>(R))
        throw std::invalid_argument(
            fmt::format("permute needs {} peers, got {}", R, spec.peers.size()));
      Step st;
      int senders = 0;
      for (int s = 0; s < R; ++s) {
        int d = spec.peers[static_cast<size_t>(s)];
        if (d < -1 || d >= R)
          throw std::invalid_argument(fmt::format("permute: rank {} sends to {}", s, d));
        if (d == r) {
          ++senders;
          st.recvs.push_back({s, 1, 0, B, 0, false});
        }
      }
      if (senders > 1)
        throw std::invalid_argument(fmt::format("permute: {} ranks send to rank {}", senders, r));
      if (int d = spec.peers[static_cast<size_t>(r)]; d >= 0)
        st.sends.push_back({d, 0, 0, B, 0, false});
      p.steps.push_back(std::move(st));
      break;
    }
    case Op::barrier: {
      if (a == Algorithm::mesh) {
        Step st;
        for (int j = 0; j < R; ++j)
          if (j != r) {
            st.sends.push_back({j, 0, 0, 0, 0, false});
            st.recvs.push_back({j, 0, 0, 0, 0, false});
          }
        p.steps.push_back(std::move(st));
      } else {  // dissemination: round k, distance 2^k
        for (int k = 0, d = 1; d < R; ++k, d <<= 1) {
          Step st;
          st.sends.push_back({mod(r + d, R), 0, 0, 0, static_cast<uint64_t>(k), false});
          st.recvs.push_back({mod(r - d, R), 0, 0, 0, static_cast<uint64_t>(k), false});
          p.steps.push_back(std::move(st));
        }
      }
      break;
    }
  }
  return p;
}

void reduce_into(isa::DType t, ReduceOp op, uint8_t* dst, const uint8_t* src, uint64_t n) {
  const size_t es = isa::dtype_size(t);
  for (uint64_t i = 0; i < n; ++i) {
    float a = isa::load_as_float(t, dst + i * es), b = isa::load_as_float(t, src + i * es), v = 0;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        v = a + b;
        break;
      case ReduceOp::prod:
        v = a * b;
        break;
      case ReduceOp::max:
        v = std::max(a, b);
        break;
      case ReduceOp::min:
        v = std::min(a, b);
        break;
    }
    isa::store_from_float(t, v, dst + i * es);
  }
}

RankBuffers prepare_buffers(const CollectiveSpec& spec, int R, int r,
                            const std::vector<uint8_t>& input) {
  const uint64_t B = spec.count * isa::dtype_size(spec.dtype);
  const uint64_t want = spec.input_bytes(R, r);
  if (!(spec.op == Op::broadcast && r != spec.root && input.empty()) && input.size() != want)
    throw std::invalid_argument(fmt::format("{}: rank {} input has {} bytes, expected {}",
                                            op_name(spec.op), r, input.size(), want));
  RankBuffers b;
  switch (spec.op) {
    case Op::all_gather:
      b.work.assign(B * static_cast<uint64_t>(R), 0);
      std::copy(input.begin(), input.end(),
                b.work.begin() + static_cast<std::ptrdiff_t>(B * static_cast<uint64_t>(r)));
      break;
    case Op::all_to_all:
      b.work = input;
      b.out.assign(B * static_cast<uint64_t>(R), 0);
      std::copy_n(input.begin() + static_cast<std::ptrdiff_t>(B * static_cast<uint64_t>(r)), B,
                  b.out.begin() + static_cast<std::ptrdiff_t>(B * static_cast<uint64_t>(r)));
      break;
    case Op::all_to_all_v: {
      b.work = input;
      b.out.assign(spec.output_bytes(R, r), 0);
      const uint64_t n = vcount(spec, R, r, r) * isa::dtype_size(spec.dtype);
      std::copy_n(input.begin() + static_cast<std::ptrdiff_t>(vsend_off(spec, R, r, r)), n,
                  b.out.begin() + static_cast<std::ptrdiff_t>(vrecv_off(spec, R, r, r)));
      break;
    }
    case Op::broadcast:
      b.work = r == spec.root ? input : std::vector<uint8_t>(B, 0);
      break;
    case Op::permute:
      b.work = input;
      b.out.assign(spec.output_bytes(R, r), 0);
      break;
    case Op::barrier:
      break;
    default:
      b.work = input;
      break;
  }
  return b;
}

std::vector<uint8_t> extract_output(const CollectiveSpec& spec, int R, int r, RankBuffers& b) {
  const size_t es = isa::dtype_size(spec.dtype);
  const uint64_t B = spec.count * es;
  auto average = [&](std::vector<uint8_t>& v) {
    if (spec.reduce != ReduceOp::avg) return;
    for (uint64_t i = 0; i < v.size() / es; ++i)
      isa::store_from_float(
          spec.dtype, isa::load_as_float(spec.dtype, v.data() + i * es) / static_cast<float>(R),
          v.data() + i * es);
  };
  switch (spec.op) {
    case Op::all_reduce:
      average(b.work);
      return std::move(b.work);
    case Op::reduce_scatter: {
      auto first = b.work.begin() + static_cast<std::ptrdiff_t>(B * static_cast<uint64_t>(r));
      std::vector<uint8_t> out(first, first + static_cast<std::ptrdiff_t>(B));
      average(out);
      return out;
    }
    case Op::reduce:
      if (r != spec.root) return {};
      average(b.work);
      return std::move(b.work);
    case Op::all_to_all:
    case Op::all_to_all_v:
    case Op::permute:
      return std::move(b.out);
    case Op::barrier:
      return {};
    default:
      return std::move(b.work);
  }
}

namespace {

struct Execution : std::enable_shared_from_this<Execution> {
  Network& net;
  const CollectiveSpec& spec;
  std::vector<int> local;
  const std::vector<RankPlan>& plans;
  std::vector<RankBuffers>* buffers;
  uint64_t tag_base = 0;  // keeps apart the messages of collectives that run at once
  ExecutionCosts costs;
  struct State {
    size_t step = 0;
    size_t pending = 0;
    Picos done_at = 0;
    std::vector<std::vector<uint8_t>> temps;  // one per reducing receive of the current step
  };
  std::vector<State> states;

  Execution(Network& n, const CollectiveSpec& s, std::vector<int> l, const std::vector<RankPlan>& p,
            std::vector<RankBuffers>* b, uint64_t tags = 0, ExecutionCosts c = {})
      : net(n),
        spec(s),
        local(std::move(l)),
        plans(p),
        buffers(b),
        tag_base(tags),
        costs(c),
        states(local.size()) {}

  uint8_t* addr(size_t i, const Xfer& x) {
    if (!buffers) return nullptr;
    auto& rb = (*buffers)[i];
    auto& v = x.buf == 0 ? rb.work : rb.out;
    if (x.offset + x.bytes > v.size())
      throw std::logic_error(fmt::format("transfer [{}, +{}) outside a buffer of {} bytes",
                                         x.offset, x.bytes, v.size()));
    return v.data() + x.offset;
  }

  void start(size_t i) {
    State& st = states[i];
    const auto& steps = plans[i].steps;
    if (st.step >= steps.size()) {
      st.done_at = net.now();
      return;
    }
    const Step& s = steps[st.step];
    const int me = local[i];
    // One extra count, dropped after everything is posted, so that a transport that completes
    // an operation inside send()/recv() cannot finish the step while it is still being posted.
    st.pending = s.recvs.size() + s.sends.size() + 1;
    st.temps.assign(s.recvs.size(), {});
    auto self = shared_from_this();
    auto done = [self, i]() {
      if (--self->states[i].pending == 0) self->finish(i);
    };
    if (st.pending == 1) {
      net.schedule(0, [self, i]() { self->finish(i); });
      return;
    }
    for (size_t k = 0; k < s.recvs.size(); ++k) {
      const Xfer& x = s.recvs[k];
      void* dst = nullptr;
      if (buffers) {
        if (x.reduce) {
          st.temps[k].resize(x.bytes);
          dst = st.temps[k].data();
        } else {
          dst = addr(i, x);
        }
      }
      net.recv(me, x.peer, dst, x.bytes, tag_base + x.tag, done);
    }
    // After a step whose reductions feed this one, its sends are those reductions.
    const bool reduced = st.step > 0 && steps[st.step - 1].reduction_streams;
    for (const Xfer& x : s.sends) {
      if (reduced)
        net.send_reduced(me, x.peer, addr(i, x), x.bytes, tag_base + x.tag, done);
      else
        net.send(me, x.peer, addr(i, x), x.bytes, tag_base + x.tag, done);
    }
    done();
  }

  void finish(size_t i) {
    State& st = states[i];
    const Step& s = plans[i].steps[st.step];
    uint64_t reduced = 0;
    for (const Xfer& x : s.recvs)
      if (x.reduce) reduced += x.bytes;
    if (buffers) {
      const size_t es = isa::dtype_size(spec.dtype);
      for (size_t k = 0; k < s.recvs.size(); ++k)
        if (s.recvs[k].reduce)
          reduce_into(spec.dtype, spec.reduce, addr(i, s.recvs[k]), st.temps[k].data(),
                      s.recvs[k].bytes / es);
    }
    st.temps.clear();
    ++st.step;
    // The rank's DMA engines combine what it received before its next step, unless that step's
    // sends carry the combining (send_reduced).
    if (reduced == 0 || costs.reduce_bytes_per_s == 0 || s.reduction_streams) return start(i);
    net.schedule(transfer_ps(reduced, costs.reduce_bytes_per_s),
                 [self = shared_from_this(), i]() { self->start(i); });
  }

  // `bytes` at `bytes_per_s`, rounded up to whole picoseconds.
  static Picos transfer_ps(uint64_t bytes, uint64_t bytes_per_s) {
    __extension__ typedef unsigned __int128 u128;
    return static_cast<Picos>((static_cast<u128>(bytes) * 1000000000000ull + bytes_per_s - 1) /
                              bytes_per_s);
  }
};

std::vector<Picos> finish_times(const Execution& ex) {
  for (size_t i = 0; i < ex.local.size(); ++i)
    if (ex.states[i].step != ex.plans[i].steps.size())
      throw std::runtime_error(fmt::format("rank {} stopped at step {} of {}", ex.local[i],
                                           ex.states[i].step, ex.plans[i].steps.size()));
  std::vector<Picos> done;
  for (const auto& st : ex.states) done.push_back(st.done_at);
  return done;
}

}  // namespace

std::vector<Picos> execute(Network& net, const CollectiveSpec& spec, const std::vector<int>& local,
                           const std::vector<RankPlan>& plans, std::vector<RankBuffers>* buffers,
                           const std::vector<Picos>* starts, const ExecutionCosts& costs) {
  if (plans.size() != local.size() || (buffers && buffers->size() != local.size()) ||
      (starts && starts->size() != local.size()))
    throw std::invalid_argument(
        "execute: one plan (and one set of buffers, one start) per local rank");
  auto ex = std::make_shared<Execution>(net, spec, local, plans, buffers, 0, costs);
  for (size_t i = 0; i < local.size(); ++i) {
    if (starts && (*starts)[i] > 0)
      net.schedule((*starts)[i], [ex, i]() { ex->start(i); });
    else
      ex->start(i);
  }
  net.run();
  return finish_times(*ex);
}

std::vector<std::vector<Picos>> execute_together(Network& net, const std::vector<int>& local,
                                                 const std::vector<ExecutionJob>& jobs) {
  std::vector<std::shared_ptr<Execution>> running;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const ExecutionJob& job = jobs[j];
    if (!job.spec || !job.plans || job.plans->size() != local.size() ||
        (job.buffers && job.buffers->size() != local.size()))
      throw std::invalid_argument("execute_together: a spec and one plan per local rank per job");
    // Plans number their messages below 2^21 (the hierarchical ones' second phase starts at
    // 2^20); each job gets its own range.
    running.push_back(std::make_shared<Execution>(net, *job.spec, local, *job.plans, job.buffers,
                                                  static_cast<uint64_t>(j) << 40, job.costs));
  }
  for (size_t j = 0; j < jobs.size(); ++j)
    for (size_t i = 0; i < local.size(); ++i) {
      auto& ex = running[j];
      if (jobs[j].start_ps > 0)
        net.schedule(jobs[j].start_ps, [ex, i]() { ex->start(i); });
      else
        ex->start(i);
    }
  net.run();
  std::vector<std::vector<Picos>> done;
  for (auto& ex : running) done.push_back(finish_times(*ex));
  return done;
}

}  // namespace neuronsim::cc
