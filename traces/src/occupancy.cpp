#include "occupancy.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace neuronsim::traces::detail {
namespace {

using isa::MemSpace;
using isa::Role;

struct Region {
  MemSpace space;
  uint32_t p0, p1;  // partitions [p0, p1)
  int64_t b0, b1;   // bytes [b0, b1) of each partition
  uint64_t bytes() const { return uint64_t{p1 - p0} * static_cast<uint64_t>(b1 - b0); }
  bool overlaps(const Region& o) const {
    return space == o.space && p0 < o.p1 && o.p0 < p1 && b0 < o.b1 && o.b0 < b1;
  }
  bool covers(const Region& o) const {
    return space == o.space && p0 <= o.p0 && o.p1 <= p1 && b0 <= o.b0 && o.b1 <= b1;
  }
};

struct Access {
  uint64_t ps;
  bool write;  // reads at one instant come before writes (read-modify-write)
  Region region;
};

bool on_chip(const isa::AccessPattern& ap) {
  return ap.space == MemSpace::SBUF || ap.space == MemSpace::PSUM;
}

Region region_of(const isa::AccessPattern& ap) {
  int64_t lo = 0, hi = 0;
  for (const isa::Dim& d : ap.free_dims())
    (d.stride >= 0 ? hi : lo) += int64_t{d.stride} * (int64_t{d.size} - 1);
  const auto size = static_cast<int64_t>(isa::dtype_size(ap.dtype));
  const auto base = static_cast<int64_t>(ap.offset);
  // A partition broadcast reads its one start partition, however many rows it walks.
  return {ap.space, ap.start_partition, uint32_t{ap.start_partition} + ap.partition_footprint(),
          base + lo * size, base + (hi + 1) * size};
}

// The on-chip reads and writes of one instruction: reads when it ends (its last
// use of the data), writes when it ends (the data exists from then on).
void add_accesses(const isa::Instruction& in, uint64_t read_ps, uint64_t write_ps,
                  std::vector<Access>& out) {
  const bool reads_dst = in.opcode == isa::Opcode::copy_predicated ||
                         (in.opcode == isa::Opcode::matmul && in.has_flag(isa::kAccumulate));
  for (const isa::Operand& op : in.operands) {
    if (!on_chip(op.ap)) continue;
    const bool write = isa::is_output(op.role);
    if (!write || (op.role == Role::dst && reads_dst))
      out.push_back({read_ps, false, region_of(op.ap)});
    if (write) out.push_back({write_ps, true, region_of(op.ap)});
  }
}

}  // namespace

std::vector<OccupancyStep> live_occupancy(const sim::RunResult& run, uint32_t core) {
  std::vector<Access> accesses;
  std::map<std::pair<isa::Engine, uint32_t>, std::pair<uint64_t, uint64_t>>
      copies;  // dma_copy -> [start, end]
  for (const sim::DmaRecord& d : run.dmas) {
    if (d.core != core) continue;
    auto [it, fresh] = copies.try_emplace({d.trigger, d.index}, d.start_ps, d.end_ps);
    if (!fresh)
      it->second = {std::min(it->second.first, d.start_ps), std::max(it->second.second, d.end_ps)};
  }
  for (const sim::InstructionRecord& r : run.instructions) {
    if (r.core != core || r.inst == nullptr) continue;
    if (r.inst->opcode != isa::Opcode::dma_copy) {
      add_accesses(*r.inst, r.end_ps, r.end_ps, accesses);
    } else if (auto c = copies.find({r.engine, r.index}); c != copies.end()) {
      add_accesses(*r.inst, c->second.second, c->second.second,
                   accesses);  // the transfer reads and writes
    }
  }
  if (accesses.empty()) return {};
  std::stable_sort(accesses.begin(), accesses.end(), [](const Access& a, const Access& b) {
    return std::tie(a.ps, a.write) < std::tie(b.ps, b.write);
  });

  // Blocks of written data: live from their write to their last read.
  struct Block {
    Region region;
    uint64_t written, last_read;
    bool read;
  };
  std::vector<Block> live;
  std::map<uint64_t, std::pair<int64_t, int64_t>> delta;  // ps -> (sbuf, psum) change
  auto retire = [&](const Block& b) {
    if (!b.read || b.last_read <= b.written) return;
    const auto bytes = static_cast<int64_t>(b.region.bytes());
    auto& at_write = delta[b.written];
    auto& at_end = delta[b.last_read];
    if (b.region.space == MemSpace::SBUF) {
      at_write.first += bytes;
      at_end.first -= bytes;
    } else {
      at_write.second += bytes;
      at_end.second -= bytes;
    }
  };
  for (const Access& a : accesses) {
    if (!a.write) {
      for (Block& b : live)
        if (b.region.overlaps(a.region)) {
          b.last_read = std::max(b.last_read, a.ps);
          b.read = true;
        }
      continue;
    }
    // Data wholly overwritten is dead from here on.
    auto dead = std::stable_partition(live.begin(), live.end(),
                                      [&](const Block& b) { return !a.region.covers(b.region); });
    std::for_each(dead, live.end(), retire);
    live.erase(dead, live.end());
    live.push_back({a.region, a.ps, a.ps, false});
  }
  std::for_each(live.begin(), live.end(), retire);

  std::vector<OccupancyStep> steps = {{0, 0, 0}};
  int64_t sbuf = 0, psum = 0;
  for (const auto& [ps, d] : delta) {
    sbuf += d.first;
    psum += d.second;
    if (steps.back().ps == ps) steps.pop_back();
    steps.push_back({ps, static_cast<uint64_t>(sbuf), static_cast<uint64_t>(psum)});
  }
  return steps;
}

}  // namespace neuronsim::traces::detail
