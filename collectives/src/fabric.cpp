// The in-process fabric model. Figures (shared/research/neuron-hardware.md, keys from its §11):
//   trn1.32xlarge: 4x4 2-D torus, 384 GiB/s per chip over 4 NeuronLink-v2 links -> 96 GiB/s per
//     link [§1, §5: C S3, D]; trn1n.32xlarge: 768 GiB/s per chip -> 192 GiB/s per link [C S3, D].
//   inf2.24xlarge/48xlarge: ring, 192 GiB/s per chip over 2 links, diagram "96 GiB/sec" per
//     link [§1, §5: C S4].
//   trn2.48xlarge: 4x4 2-D torus, 1,024 GB/s per chip intra-instance -> 256 GB/s per link
//     [§1, §5: C S5, S7, D].
//   Per-hop latency intra-node ~1-2 us (HBM-load dependent) [§5: C R3]: we take 1.5 us.
//   Core-to-core inside a chip goes through HBM at the chip's HBM bandwidth (sim/configs
//     <generation>.json hbm_bytes_per_ns: 820 GB/s trn1, 2.9 TB/s trn2 [§1: C S1, S5]) with
//     the same 1.5 us latency (no public per-hop figure for this path; an assumption [I]).
// We read the per-chip figures as per direction of each link (the sources do not say); see
// docs/collectives.md, "Open questions".
#include "neuronsim/cc/fabric.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace neuronsim::cc {

namespace {
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kGB = 1000ull * 1000 * 1000;
constexpr Picos kHopLatencyPs = 1500 * kPicosPerNs;  // 1.5 us, middle of "~1-2 us" [R3]

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

FabricParams FabricParams::for_instance(const sim::InstanceConfig& inst,
                                         const sim::GenerationConfig& gen) {
  FabricParams p;
  p.link_latency_ps = kHopLatencyPs;
  p.intra_chip_latency_ps = kHopLatencyPs;
  p.intra_chip_bytes_per_s = static_cast<uint64_t>(gen.hbm_bytes_per_ns * 1e9 + 0.5);
  if (inst.topology == "none") {
    p.link_bytes_per_s = 0;  // no chip-to-chip links
  } else if (starts_with(inst.name, "trn1n")) {
    p.link_bytes_per_s = 768 * kGiB / 4;  // [C S3, D]
  } else if (starts_with(inst.name, "trn1")) {
    p.link_bytes_per_s = 384 * kGiB / 4;  // [C S3, D]
  } else if (starts_with(inst.name, "inf2")) {
    p.link_bytes_per_s = 192 * kGiB / 2;  // [C S4]
  } else if (starts_with(inst.name, "trn2")) {
    p.link_bytes_per_s = 1024 * kGB / 4;  // [C S5, S7, D]
  } else {
    throw std::invalid_argument(fmt::format("no NeuronLink figures for instance '{}'", inst.name));
  }
  if (p.intra_chip_bytes_per_s == 0)
    throw std::invalid_argument(fmt::format("generation '{}' has no HBM bandwidth", gen.name));
  return p;
}

std::vector<CoreId> Fabric::place(const sim::InstanceConfig& inst, int ranks, Placement placement) {
  if (ranks <= 0) throw std::invalid_argument("need at least one rank");
  std::vector<CoreId> cores;
  for (int r = 0; r < ranks; ++r) {
    auto ur = static_cast<uint32_t>(r);
    if (placement == Placement::packed)
      cores.push_back({ur / inst.cores_per_chip, ur % inst.cores_per_chip});
    else
      cores.push_back({ur, 0});
  }
  return cores;
}

Fabric Fabric::make(const sim::InstanceConfig& inst, int ranks, Placement placement) {
  auto gen = sim::load_generation(inst.generation);
  return Fabric(inst, FabricParams::for_instance(inst, gen), place(inst, ranks, placement));
}

Fabric::Fabric(sim::InstanceConfig inst, FabricParams params, std::vector<CoreId> cores)
    : inst_(std::move(inst)), params_(params), cores_(std::move(cores)) {
  if (cores_.empty()) throw std::invalid_argument("need at least one rank");
  for (size_t i = 0; i < cores_.size(); ++i) {
    const auto& c = cores_[i];
    if (c.chip >= inst_.chips || c.core >= inst_.cores_per_chip)
      throw std::invalid_argument(fmt::format("rank {} placed on chip {} core {}, outside {} ({} chips x {} cores)",
                                              i, c.chip, c.core, inst_.name, inst_.chips, inst_.cores_per_chip));
    for (size_t j = 0; j < i; ++j)
      if (cores_[j].chip == c.chip && cores_[j].core == c.core)
        throw std::invalid_argument(fmt::format("ranks {} and {} share chip {} core {}", j, i, c.chip, c.core));
  }
  if (inst_.topology == "torus-4x4") {
    if (inst_.chips != 16) throw std::invalid_argument("torus-4x4 needs 16 chips");
    links_per_chip_ = 4;
  } else if (inst_.topology == "ring") {
    links_per_chip_ = 2;
  } else if (inst_.topology == "none") {
    links_per_chip_ = 0;
    if (inst_.chips != 1) throw std::invalid_argument("topology 'none' with more than one chip");
  } else {
    throw std::invalid_argument(fmt::format("unknown topology '{}'", inst_.topology));
  }
  static const char* kDirs[] = {"+x", "-x", "+y", "-y"};
  static const char* kRingDirs[] = {"+", "-"};
  for (uint32_t chip = 0; chip < inst_.chips; ++chip)
    for (int d = 0; d < links_per_chip_; ++d)
      links_.push_back({fmt::format("chip{}{}", chip, links_per_chip_ == 4 ? kDirs[d] : kRingDirs[d]),
                        params_.link_bytes_per_s, params_.link_latency_ps, 0, 0, 0});
  for (uint32_t chip = 0; chip < inst_.chips; ++chip)
    links_.push_back({fmt::format("chip{}.hbm", chip), params_.intra_chip_bytes_per_s,
                      params_.intra_chip_latency_ps, 0, 0, 0});
}

int Fabric::chip_link(uint32_t chip, int dir) const {
  return static_cast<int>(chip) * links_per_chip_ + dir;
}

std::vector<int> Fabric::route(int src, int dst) const {
  std::vector<int> path;
  const CoreId a = cores_.at(static_cast<size_t>(src)), b = cores_.at(static_cast<size_t>(dst));
  if (src == dst) return path;
  if (a.chip == b.chip) {
    path.push_back(static_cast<int>(inst_.chips) * links_per_chip_ + static_cast<int>(a.chip));
    return path;
  }
  // Walk one ring dimension: shortest way round, ties (half-way) go the positive way.
  auto walk = [&](uint32_t from, uint32_t to, uint32_t n, auto&& step_chip, int plus, int minus,
                  uint32_t& cur) {
    uint32_t d = (to + n - from) % n;
    bool positive = d <= n / 2;
    uint32_t steps = positive ? d : n - d;
    for (uint32_t s = 0; s < steps; ++s) {
      path.push_back(chip_link(cur, positive ? plus : minus));
      cur = step_chip(cur, positive);
    }
  };
  uint32_t cur = a.chip;
  if (links_per_chip_ == 4) {  // dimension order: X (within a row) first, then Y
    auto stepx = [](uint32_t c, bool pos) { return (c / 4) * 4 + ((c % 4) + (pos ? 1 : 3)) % 4; };
    auto stepy = [](uint32_t c, bool pos) { return ((c / 4 + (pos ? 1 : 3)) % 4) * 4 + c % 4; };
    walk(a.chip % 4, b.chip % 4, 4, stepx, 0, 1, cur);
    walk(a.chip / 4, b.chip / 4, 4, stepy, 2, 3, cur);
  } else {
    uint32_t n = inst_.chips;
    auto step = [n](uint32_t c, bool pos) { return (c + (pos ? 1 : n - 1)) % n; };
    walk(a.chip, b.chip, n, step, 0, 1, cur);
  }
  return path;
}

Picos Fabric::serialize_ps(uint64_t bytes, uint64_t bytes_per_s) {
  if (bytes == 0) return 0;
  if (bytes_per_s == 0) throw std::logic_error("link without bandwidth");
  __extension__ typedef unsigned __int128 u128;
  u128 num = static_cast<u128>(bytes) * 1000000000000ull;
  return static_cast<Picos>((num + bytes_per_s - 1) / bytes_per_s);
}

void Fabric::send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag, Callback on_done) {
  if (src < 0 || dst < 0 || src >= num_ranks() || dst >= num_ranks())
    throw std::out_of_range(fmt::format("send {} -> {}: no such rank", src, dst));
  Message msg;
  msg.bytes = bytes;
  if (data) {
    msg.has_data = true;
    msg.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  }
  ++messages_;
  // Cut-through over the path: each link serves its messages in the order they were reserved, at
  // its bandwidth; the head moves on after the link's latency, the tail cannot leave a link before
  // it has left the previous one.
  Picos head = now_, prev_end = now_, prev_lat = 0;
  bool first = true;
  for (int li : route(src, dst)) {
    Link& l = links_[static_cast<size_t>(li)];
    Picos start = std::max(head, l.free_at);
    Picos end = start + serialize_ps(bytes, l.bytes_per_s);
    if (!first) end = std::max(end, prev_end + prev_lat);
    l.free_at = end;
    l.bytes_carried += bytes;
    ++l.messages;
    head = start + l.latency_ps;
    prev_end = end;
    prev_lat = l.latency_ps;
    first = false;
  }
  Picos arrival = prev_end + prev_lat;
  Key key{dst, src, tag};
  events_.push({arrival, seq_++, [this, key, m = std::move(msg), cb = std::move(on_done)]() mutable {
                  deliver(key, std::move(m));
                  if (cb) cb();
                }});
}

void Fabric::complete(Message& msg, PostedRecv& r) {
  if (msg.bytes != r.bytes)
    throw std::runtime_error(fmt::format("message of {} bytes matched a receive of {} bytes", msg.bytes, r.bytes));
  if (r.buffer && msg.has_data && msg.bytes) std::memcpy(r.buffer, msg.data.data(), msg.bytes);
}

void Fabric::deliver(const Key& key, Message msg) {
  auto it = posted_.find(key);
  if (it != posted_.end() && !it->second.empty()) {
    PostedRecv r = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    complete(msg, r);
    if (r.on_done) r.on_done();
    return;
  }
  unexpected_[key].push_back(std::move(msg));
}

void Fabric::recv(int dst, int src, void* buffer, uint64_t bytes, uint64_t tag, Callback on_done) {
  if (src < 0 || dst < 0 || src >= num_ranks() || dst >= num_ranks())
    throw std::out_of_range(fmt::format("recv {} <- {}: no such rank", dst, src));
  Key key{dst, src, tag};
  PostedRecv r{buffer, bytes, std::move(on_done)};
  auto it = unexpected_.find(key);
  if (it != unexpected_.end() && !it->second.empty()) {
    Message msg = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) unexpected_.erase(it);
    complete(msg, r);
    if (r.on_done) schedule(0, std::move(r.on_done));
    return;
  }
  posted_[key].push_back(std::move(r));
}

void Fabric::schedule(Picos delay, Callback fn) { events_.push({now_ + delay, seq_++, std::move(fn)}); }

Picos Fabric::run() {
  while (!events_.empty()) {
    Event ev = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    now_ = ev.time;
    if (ev.fn) ev.fn();
  }
  if (!posted_.empty() || !unexpected_.empty())
    throw std::runtime_error(fmt::format("fabric idle with {} unmatched receives and {} unmatched messages",
                                         posted_.size(), unexpected_.size()));
  return now_;
}

}  // namespace neuronsim::cc
