#include "neuronsim/isa/kernel_builder.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>

#include <fmt/format.h>

#include "neuronsim/isa/error.h"
#include "neuronsim/isa/validate.h"

namespace neuronsim::isa {
namespace {

// The queue of the DMAs an engine triggers with descriptors built before the run: a queue is
// tied to its trigger engine and its descriptor method (the NKI DMA overview), so all of them.
constexpr int kStaticQueue = 0;

// Smallest and largest element offsets of the free dims (relative to the start).
std::pair<int64_t, int64_t> free_extent(const AccessPattern& ap) {
  int64_t lo = 0, hi = 0;
  for (const Dim& d : ap.free_dims()) {
    const int64_t span = int64_t{d.stride} * (int64_t{d.size} - 1);
    (span >= 0 ? hi : lo) += span;
  }
  return {lo, hi};
}

Instruction make(Opcode op, Engine engine, std::vector<Operand> operands) {
  Instruction in;
  in.opcode = op;
  in.engine = engine;
  in.operands = std::move(operands);
  return in;
}

// A sem_wait that finish() puts before an instruction of a stream.
struct ExtraWait {
  uint32_t before;  // index of the instruction in its stream
  SemWait wait;
};

// Inserts `waits` (in stream order) into `stream`; a stream with none is left in place.
void insert_waits(std::vector<Instruction>& stream, Engine engine,
                  const std::vector<ExtraWait>& waits) {
  if (waits.empty()) return;
  std::vector<Instruction> out;
  out.reserve(stream.size() + waits.size());
  size_t next = 0;
  for (uint32_t i = 0; i < stream.size(); ++i) {
    for (; next < waits.size() && waits[next].before == i; ++next) {
      Instruction wait = make(Opcode::sem_wait, engine, {});
      wait.wait = waits[next].wait;
      out.push_back(std::move(wait));
    }
    out.push_back(std::move(stream[i]));
  }
  stream = std::move(out);
}

}  // namespace

AccessPattern rows(const AccessPattern& ap, uint32_t first, uint32_t count) {
  if (first + count > ap.num_partitions)
    throw IsaError(fmt::format("rows {}..{} exceed the pattern's {} rows", first, first + count,
                               ap.num_partitions));
  AccessPattern out = ap;
  out.num_partitions = count;
  if (ap.space == MemSpace::HBM)
    out.offset += static_cast<uint64_t>(ap.partition_stride * first) * dtype_size(ap.dtype);
  else
    out.start_partition = static_cast<uint16_t>(ap.partition_of(first));
  return out;
}

AccessPattern cols(const AccessPattern& ap, uint32_t first, uint32_t count) {
  const Dim inner = ap.dims[ap.num_dims - 1];
  if (first + count > inner.size)
    throw IsaError(fmt::format("columns {}..{} exceed the pattern's {} columns", first,
                               first + count, inner.size));
  AccessPattern out = ap;
  out.dims[ap.num_dims - 1].size = count;
  out.offset += static_cast<uint64_t>(int64_t{inner.stride} * first) * dtype_size(ap.dtype);
  return out;
}

KernelBuilder::KernelBuilder(std::string_view target) : target_(&target_by_name(target)) {
  program_.target = std::string(target_->name);
}

AccessPattern KernelBuilder::hbm_tensor(const std::string& name, DType dtype,
                                        std::vector<int64_t> shape, TensorKind kind,
                                        std::vector<uint8_t> data) {
  if (shape.empty()) shape = {1};
  if (program_.find_tensor(name))
    throw IsaError(fmt::format("tensor '{}' is declared twice", name));
  TensorDecl t{
      name,           dtype, shape, kind, static_cast<uint16_t>(program_.tensors.size() + 1),
      std::move(data)};
  validate(t);
  int64_t inner = 1;
  for (size_t i = 1; i < shape.size(); ++i) inner *= shape[i];
  if (shape[0] > 0xffffffffLL || inner > 0xffffffffLL)
    throw IsaError(fmt::format("tensor '{}': shape too large for one access pattern", name));
  AccessPattern ap;
  ap.space = MemSpace::HBM;
  ap.dtype = dtype;
  ap.tensor = t.var_id;
  ap.num_partitions = static_cast<uint32_t>(shape[0]);
  ap.partition_stride = inner;
  ap.dims[0] = {1, static_cast<uint32_t>(inner)};
  program_.tensors.push_back(std::move(t));
  return ap;
}

AccessPattern KernelBuilder::input(const std::string& name, DType dtype,
                                   std::vector<int64_t> shape) {
  return hbm_tensor(name, dtype, std::move(shape), TensorKind::input, {});
}
AccessPattern KernelBuilder::output(const std::string& name, DType dtype,
                                    std::vector<int64_t> shape) {
  return hbm_tensor(name, dtype, std::move(shape), TensorKind::output, {});
}
AccessPattern KernelBuilder::scratch(const std::string& name, DType dtype,
                                     std::vector<int64_t> shape) {
  return hbm_tensor(name, dtype, std::move(shape), TensorKind::scratch, {});
}
AccessPattern KernelBuilder::constant(const std::string& name, DType dtype,
                                      std::vector<int64_t> shape, std::vector<uint8_t> data) {
  return hbm_tensor(name, dtype, std::move(shape), TensorKind::constant, std::move(data));
}

// Bump allocation in one on-chip space: `used` bytes per partition are taken,
// the next tile starts at a multiple of `align`.
AccessPattern KernelBuilder::tile(MemSpace space, uint64_t& used, uint64_t align, uint64_t capacity,
                                  DType dtype, uint16_t partitions, uint32_t free) {
  const uint64_t bytes = uint64_t{free} * dtype_size(dtype);
  const uint64_t offset = (used + align - 1) / align * align;
  if (partitions == 0 || partitions > target_->num_partitions || offset + bytes > capacity)
    throw IsaError(fmt::format(
        "{} exhausted: a [{}, {}] {} tile needs {} bytes per partition at {}, {} has {}",
        space == MemSpace::SBUF ? "SBUF" : "PSUM", partitions, free, dtype_name(dtype), bytes,
        offset, target_->name, capacity));
  used = offset + bytes;
  AccessPattern ap;
  ap.space = space;
  ap.dtype = dtype;
  ap.num_partitions = partitions;
  ap.offset = offset;
  ap.dims[0] = {1, free};
  return ap;
}

AccessPattern KernelBuilder::sbuf_tile(DType dtype, uint16_t partitions, uint32_t free) {
  return tile(MemSpace::SBUF, sbuf_used_, 64, target_->sbuf_partition_bytes, dtype, partitions,
              free);
}

// PSUM tiles start on a bank boundary, so a tile that fits in a bank stays in one.
AccessPattern KernelBuilder::psum_tile(DType dtype, uint16_t partitions, uint32_t free) {
  return tile(MemSpace::PSUM, psum_used_, target_->psum_bank_bytes, target_->psum_partition_bytes,
              dtype, partitions, free);
}

std::optional<KernelBuilder::Region> KernelBuilder::region_of(const AccessPattern& ap) {
  if (ap.space == MemSpace::Pattern) return std::nullopt;
  const auto [lo, hi] = free_extent(ap);
  const auto size = static_cast<int64_t>(dtype_size(ap.dtype));
  const auto base = static_cast<int64_t>(ap.offset);
  if (ap.space == MemSpace::HBM) {
    // HBM rows are strided elements of one tensor: one byte range covers them all.
    const int64_t rows = ap.partition_stride * (ap.num_partitions - 1);
    return Region{ap.space,
                  ap.tensor,
                  0,
                  1,
                  base + (std::min<int64_t>(0, rows) + lo) * size,
                  base + (std::max<int64_t>(0, rows) + hi + 1) * size};
  }
  // A partition broadcast reads its one start partition however many rows it walks.
  return Region{ap.space,           0,
                ap.start_partition, uint32_t{ap.start_partition} + ap.partition_footprint(),
                base + lo * size,   base + (hi + 1) * size};
}

bool KernelBuilder::writes(Role role) {
  return isa::is_output(role);
}

// Raises latest[a] to the newest access of each other agent a that overlaps `region` and
// conflicts with it: RAW, WAR or WAW; only read after read is free.
void KernelBuilder::find_conflicts(const Segments& buffer, const Region& region, bool write,
                                   int agent, std::vector<std::optional<size_t>>& latest) {
  auto it = buffer.upper_bound(region.byte_lo);
  if (it != buffer.begin() && std::prev(it)->second.end > region.byte_lo) --it;
  for (; it != buffer.end() && it->first < region.byte_hi; ++it)
    for (const Piece& p : it->second.pieces) {
      if ((!write && !p.write) || p.agent == agent || p.part_lo >= region.part_hi ||
          region.part_lo >= p.part_hi)
        continue;
      auto& l = latest[p.agent];
      if (!l || *l < p.node) l = p.node;
    }
}

// Adds `piece` to every segment of region's bytes, splitting the segments at the ends of
// the region and filling the gaps, and drops the pieces it supersedes (see Piece).
void KernelBuilder::record(Segments& buffer, const Region& region, const Piece& piece) {
  for (const int64_t at : {region.byte_lo, region.byte_hi}) {
    auto it = buffer.upper_bound(at);
    if (it == buffer.begin()) continue;
    --it;
    if (it->first == at || it->second.end <= at) continue;
    Segment right = it->second;
    it->second.end = at;
    buffer.emplace_hint(std::next(it), at, std::move(right));
  }
  // A write supersedes the agent's reads and writes it covers, a read only its reads.
  auto superseded = [&](const Piece& p) {
    return p.agent == piece.agent && (piece.write || !p.write) && piece.part_lo <= p.part_lo &&
           p.part_hi <= piece.part_hi;
  };
  int64_t at = region.byte_lo;
  auto it = buffer.lower_bound(at);
  while (at < region.byte_hi) {
    if (it == buffer.end() || it->first > at) {
      const int64_t end = it == buffer.end() ? region.byte_hi : std::min(it->first, region.byte_hi);
      it = buffer.emplace_hint(it, at, Segment{end, {}});
    }
    Segment& seg = it->second;
    seg.pieces.erase(std::remove_if(seg.pieces.begin(), seg.pieces.end(), superseded),
                     seg.pieces.end());
    seg.pieces.push_back(piece);
    at = seg.end;
    ++it;
  }
}

KernelBuilder::Segments& KernelBuilder::SegmentStore::of(const Region& region) {
  const size_t index = region.space == MemSpace::SBUF   ? 0
                       : region.space == MemSpace::PSUM ? 1
                                                        : size_t{2} + region.tensor;
  while (buffers.size() <= index) buffers.emplace_back(arena.get());
  return buffers[index];
}

int KernelBuilder::agent_index(const Instruction& in) {
  const Agent agent{in.engine, in.opcode == Opcode::dma_copy ? in.ints[0] : -1};
  auto it = std::find(agents_.begin(), agents_.end(), agent);
  if (it != agents_.end()) return static_cast<int>(it - agents_.begin());
  agents_.push_back(agent);
  return static_cast<int>(agents_.size() - 1);
}

void KernelBuilder::emit(Instruction in) {
  if (in.wait.cond != WaitCond::none || in.signal.op != SemOp::none)
    throw IsaError(
        fmt::format("{}: KernelBuilder owns the semaphores; emit instructions without wait/signal",
                    opcode_info(in.opcode).name));
  // Named by its place among the instructions emitted on its engine (finish's sem_waits come
  // later), formatted only if a rule fails.
  auto& stream = program_.stream(in.engine);
  validate(in, program_, Where("kernel", in.engine, stream.size()));
  const int agent = agent_index(in);
  const size_t id = nodes_.size();
  // Latest conflicting access per other agent: that one covers the earlier ones,
  // because an agent completes in order. A dst that is also read (matmul accumulate,
  // copy_predicated) needs no read of its own: a write already conflicts with everything.
  std::vector<std::optional<size_t>>& latest = latest_;  // scratch kept between calls
  latest.assign(agents_.size(), std::nullopt);
  std::vector<Access>& accesses = accesses_;
  accesses.clear();
  for (const Operand& op : in.operands) {
    const auto region = region_of(op.ap);
    if (!region || region->part_lo >= region->part_hi) continue;  // overlaps nothing
    const bool w = writes(op.role);
    Segments& buffer = segments_.of(*region);
    find_conflicts(buffer, *region, w, agent, latest);
    accesses.push_back({&buffer, *region, w});
  }
  // Recorded after the search, as an instruction does not depend on itself; reads first, so
  // that a write of the same bytes (an in-place operation) supersedes them at once.
  for (const bool write : {false, true})
    for (const Access& a : accesses)
      if (a.write == write)
        record(*a.buffer, a.region,
               {a.region.part_lo, a.region.part_hi, static_cast<uint32_t>(id),
                static_cast<uint16_t>(agent), write});
  const auto first_dep = static_cast<uint32_t>(deps_.size());
  for (const auto& dep : latest)
    if (dep) deps_.push_back(*dep);
  const auto num_deps = static_cast<uint32_t>(deps_.size()) - first_dep;
  nodes_.push_back({in.engine, static_cast<uint32_t>(stream.size()), agent, first_dep, num_deps});
  stream.push_back(std::move(in));
}

Program KernelBuilder::finish() {
  // Number the signalling instructions of each agent and give each agent a semaphore.
  constexpr uint32_t kNotProducer = UINT32_MAX;
  const size_t num_agents = agents_.size();
  std::vector<uint32_t> producer(nodes_.size(), kNotProducer);  // index among the producers
  for (size_t d : deps_) producer[d] = 0;
  std::vector<int> sem_of_agent(num_agents, -1);
  int num_sems = 0;
  uint32_t num_producers = 0;
  std::vector<uint32_t> count(num_agents, 0);
  std::vector<uint32_t> signal_value(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (producer[i] == kNotProducer) continue;
    producer[i] = num_producers++;
    const auto a = static_cast<size_t>(nodes_[i].agent);
    if (sem_of_agent[a] < 0) {
      if (num_sems >= kNumSemaphores)
        throw IsaError("kernel needs more semaphores than a core has");
      sem_of_agent[a] = num_sems++;
    }
    signal_value[i] = ++count[a];
    instruction(nodes_[i]).signal = {SemOp::add, static_cast<uint16_t>(sem_of_agent[a]), 1};
  }
  // Each stream waits only for what it does not already know to be complete.
  // Knowledge is a vector clock over agents: what a stream has waited for, and
  // what the producers it waited for knew in turn (one row of node_knows each).
  std::vector<std::vector<uint32_t>> stream_knows(kNumEngines,
                                                  std::vector<uint32_t>(num_agents, 0));
  // Every row is written before it is read: no zeroing of a large kernel's table.
  const auto node_knows =
      std::make_unique_for_overwrite<uint32_t[]>(size_t{num_producers} * num_agents);
  auto knows_of = [&](size_t node) {
    return node_knows.get() + size_t{producer[node]} * num_agents;
  };
  // An instruction that waits for more than one producer gets sem_waits before it for all
  // but the last; they are inserted once every stream is done.
  std::array<std::vector<ExtraWait>, kNumEngines> extra_waits;
  std::vector<size_t> waits_for;  // producers not yet known complete and not implied by another
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    auto& knows = stream_knows[static_cast<size_t>(n.engine)];
    const std::span<const size_t> deps(deps_.data() + n.first_dep, n.num_deps);
    waits_for.clear();
    for (size_t d : deps) {
      const auto a = static_cast<size_t>(nodes_[d].agent);
      if (knows[a] >= signal_value[d]) continue;
      const bool implied = std::any_of(deps.begin(), deps.end(), [&](size_t other) {
        return other != d && knows_of(other)[a] >= signal_value[d];
      });
      if (!implied) waits_for.push_back(d);
    }
    for (size_t w = 0; w < waits_for.size(); ++w) {
      const size_t d = waits_for[w];
      const auto sem = static_cast<uint16_t>(sem_of_agent[static_cast<size_t>(nodes_[d].agent)]);
      const SemWait wait{WaitCond::ge, sem, signal_value[d]};
      const uint32_t* known = knows_of(d);
      for (size_t a = 0; a < num_agents; ++a) knows[a] = std::max(knows[a], known[a]);
      if (w + 1 == waits_for.size())
        instruction(n).wait = wait;
      else
        extra_waits[static_cast<size_t>(n.engine)].push_back({n.index, wait});
    }
    if (producer[i] != kNotProducer) {
      uint32_t* mine = knows_of(i);
      std::copy(knows.begin(), knows.end(), mine);
      mine[static_cast<size_t>(n.agent)] = signal_value[i];
      // An engine finishes its instructions in order, so its own stream knows them complete.
      if (agents_[n.agent].queue < 0) knows[static_cast<size_t>(n.agent)] = signal_value[i];
    }
  }
  for (int e = 0; e < kNumEngines; ++e)
    insert_waits(program_.streams[e], static_cast<Engine>(e), extra_waits[e]);
  Program out = std::move(program_);
  *this = KernelBuilder(target_->name);
  // emit() validated every instruction and hbm_tensor() every declaration; finish only set
  // the semaphore fields and added sem_waits, so those are all that is left to check.
  for (int e = 0; e < kNumEngines; ++e)
    for (size_t i = 0; i < out.streams[e].size(); ++i)
      validate_sync(out.streams[e][i], Where("kernel", static_cast<Engine>(e), i));
  return out;
}

neff::Neff KernelBuilder::finish_neff(const std::string& name) {
  return to_neff(finish(), name);
}

void KernelBuilder::dma_copy(const AccessPattern& dst, const AccessPattern& src, Engine trigger) {
  Instruction in = make(Opcode::dma_copy, trigger, {{Role::dst, dst}, {Role::src, src}});
  in.ints[0] = kStaticQueue;
  emit(std::move(in));
}

void KernelBuilder::indirect_copy(const AccessPattern& dst, const AccessPattern& src,
                                  const AccessPattern& index, Engine trigger, bool scatter) {
  Instruction in =
      make(Opcode::dma_copy, trigger, {{Role::dst, dst}, {Role::src, src}, {Role::index, index}});
  if (scatter) in.flags = kScatter;
  in.ints[0] = kStaticQueue;
  emit(std::move(in));
}

void KernelBuilder::matmul(const AccessPattern& dst, const AccessPattern& stationary,
                           const AccessPattern& moving, bool accumulate) {
  Instruction in = make(Opcode::matmul, Engine::PE,
                        {{Role::dst, dst}, {Role::stationary, stationary}, {Role::moving, moving}});
  if (accumulate) in.flags = kAccumulate;
  emit(std::move(in));
}

void KernelBuilder::transpose(Engine engine, const AccessPattern& dst, const AccessPattern& src) {
  emit(make(Opcode::transpose, engine, {{Role::dst, dst}, {Role::src, src}}));
}

void KernelBuilder::activation(const AccessPattern& dst, const AccessPattern& src, ActFunc func,
                               float scale, const AccessPattern* bias,
                               const AccessPattern* reduce_dst, AluOp reduce) {
  Instruction in = make(Opcode::activation, Engine::ACT, {{Role::dst, dst}, {Role::src, src}});
  in.func = func;
  in.imm0 = scale;
  if (bias) in.operands.push_back({Role::bias, *bias});
  if (reduce_dst) {
    in.operands.push_back({Role::reduce_dst, *reduce_dst});
    in.alu0 = reduce;
  }
  emit(std::move(in));
}

void KernelBuilder::tensor_tensor(Engine engine, const AccessPattern& dst, const AccessPattern& in0,
                                  const AccessPattern& in1, AluOp op) {
  Instruction in =
      make(Opcode::tensor_tensor, engine, {{Role::dst, dst}, {Role::in0, in0}, {Role::in1, in1}});
  in.alu0 = op;
  emit(std::move(in));
}

void KernelBuilder::tensor_scalar(Engine engine, const AccessPattern& dst, const AccessPattern& src,
                                  AluOp op0, float imm0, AluOp op1, float imm1,
                                  const AccessPattern* operand0, const AccessPattern* operand1) {
  Instruction in = make(Opcode::tensor_scalar, engine, {{Role::dst, dst}, {Role::src, src}});
  in.alu0 = op0;
  in.alu1 = op1;
  in.imm0 = operand0 ? 0.0f : imm0;
  in.imm1 = operand1 ? 0.0f : imm1;
  if (operand0) in.operands.push_back({Role::operand0, *operand0});
  if (operand1) in.operands.push_back({Role::operand1, *operand1});
  emit(std::move(in));
}

void KernelBuilder::tensor_reduce(Engine engine, const AccessPattern& dst, const AccessPattern& src,
                                  AluOp op, uint8_t axes, bool negate) {
  Instruction in = make(Opcode::tensor_reduce, engine, {{Role::dst, dst}, {Role::src, src}});
  in.alu0 = op;
  in.axes = axes;
  if (negate) in.flags = kNegate;
  emit(std::move(in));
}

void KernelBuilder::tensor_copy(Engine engine, const AccessPattern& dst, const AccessPattern& src) {
  emit(make(Opcode::tensor_copy, engine, {{Role::dst, dst}, {Role::src, src}}));
}

void KernelBuilder::memset(Engine engine, const AccessPattern& dst, float value) {
  Instruction in = make(Opcode::memset, engine, {{Role::dst, dst}});
  in.imm0 = value;
  emit(std::move(in));
}

void KernelBuilder::bn_stats(const AccessPattern& dst, const AccessPattern& src) {
  emit(make(Opcode::bn_stats, Engine::DVE, {{Role::dst, dst}, {Role::src, src}}));
}

void KernelBuilder::bn_aggr(const AccessPattern& dst, const AccessPattern& src) {
  emit(make(Opcode::bn_aggr, Engine::DVE, {{Role::dst, dst}, {Role::src, src}}));
}

void KernelBuilder::max8(const AccessPattern& dst, const AccessPattern& src) {
  emit(make(Opcode::max8, Engine::DVE, {{Role::dst, dst}, {Role::src, src}}));
}

void KernelBuilder::find_index8(const AccessPattern& dst, const AccessPattern& src,
                                const AccessPattern& vals) {
  emit(make(Opcode::find_index8, Engine::DVE,
            {{Role::dst, dst}, {Role::src, src}, {Role::vals, vals}}));
}

void KernelBuilder::match_replace8(const AccessPattern& dst, const AccessPattern& src,
                                   const AccessPattern& vals, float imm,
                                   const AccessPattern* dst_index) {
  Instruction in = make(Opcode::match_replace8, Engine::DVE,
                        {{Role::dst, dst}, {Role::src, src}, {Role::vals, vals}});
  if (dst_index) in.operands.push_back({Role::dst_index, *dst_index});
  in.imm0 = imm;
  emit(std::move(in));
}

}  // namespace neuronsim::isa
