// The in-process fabric model. Its figures are spec data, each with its source
// (docs/sources/neuron-hardware.md; docs/collectives.md, "Fabric model", lists them):
//   per instance (spec/configs/instances.json): the NeuronLink bandwidth of one chip-to-chip link,
//     the bandwidth and latency of a link between the instances of an UltraServer (Z), and the
//     EFA bandwidth of one instance and its latency;
//   per generation (spec/configs/<generation>.json): the latency of a NeuronLink hop, and core to
//     core inside a chip through HBM at the chip's HBM bandwidth with its own latency.
// An instance's EFA is split evenly over its chips (Trn2: 200 Gbps per chip, as [R4] states;
// trn1: 50 Gbps, our split [D]). We read the per-chip figures as per direction of each link (the
// sources do not say); see docs/collectives.md, "Open questions".
#include "neuronsim/cc/fabric.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace neuronsim::cc {

namespace {
constexpr uint64_t kGbps = 1000ull * 1000 * 1000 / 8;  // bytes per second of 10^9 bit/s

Picos ns_to_ps(double ns) {
  return static_cast<Picos>(std::llround(ns * static_cast<double>(kPicosPerNs)));
}

// Signed steps round a ring of n positions: the short way, the half-way tie positive.
int ring_steps(uint32_t from, uint32_t to, uint32_t n) {
  const uint32_t d = (to + n - from) % n;
  return d <= n / 2 ? static_cast<int>(d) : -static_cast<int>(n - d);
}
}  // namespace

FabricParams FabricParams::for_instance(const spec::InstanceConfig& inst,
                                        const spec::GenerationConfig& gen) {
  FabricParams p;
  p.link_latency_ps = ns_to_ps(gen.neuronlink_latency_ns);
  p.intra_chip_latency_ps = ns_to_ps(gen.intra_chip_latency_ns);
  p.intra_chip_bytes_per_s = static_cast<uint64_t>(gen.hbm_bytes_per_ns * 1e9 + 0.5);
  // The engines that move collective data (compute-comm-overlap.rst: collectives and compute
  // share a core's DMA engines) at their sustained rate, at most what the core's engines move
  // together, all figures from the generation.
  double dma_bytes_per_ns = gen.dma_engines * gen.dma_engine_bytes_per_ns;
  if (gen.dma_core_bytes_per_ns > 0)
    dma_bytes_per_ns = std::min(dma_bytes_per_ns, gen.dma_core_bytes_per_ns);
  p.rank_dma_bytes_per_s = static_cast<uint64_t>(dma_bytes_per_ns * 1e9 + 0.5);
  // A reduction is the DMA's read-add-write through its collective compute engines, at this
  // fraction of a copy (trainium3_arch.rst: 50 % of a DMA copy before NeuronCore-v4).
  p.reduce_bytes_per_s =
      static_cast<uint64_t>(dma_bytes_per_ns * gen.dma_add_efficiency * 1e9 + 0.5);
  p.link_bytes_per_s = inst.topology == "none" ? 0 : inst.neuronlink_bytes_per_s;
  if (inst.topology != "none" && p.link_bytes_per_s == 0)
    throw std::invalid_argument(fmt::format("no NeuronLink figures for instance '{}'", inst.name));
  if (inst.instance_link == "ring") {
    if (inst.instance_link_bytes_per_s == 0)
      throw std::invalid_argument(
          fmt::format("no figures for the links between the instances of '{}'", inst.name));
    p.z_link_bytes_per_s = inst.instance_link_bytes_per_s;
    p.z_link_latency_ps = ns_to_ps(inst.instance_link_latency_ns);
  }
  p.efa_bytes_per_s = inst.efa_gbps * kGbps / inst.chips_per_instance();  // one chip's share
  p.efa_latency_ps = p.efa_bytes_per_s ? ns_to_ps(inst.efa_latency_ns) : 0;
  if (p.intra_chip_bytes_per_s == 0)
    throw std::invalid_argument(fmt::format("generation '{}' has no HBM bandwidth", gen.name));
  return p;
}

int Fabric::ranks_per_entry(const spec::InstanceConfig& inst, const std::vector<CoreId>& cores) {
  if (cores.empty() || inst.instances == 0) return 0;
  auto entry = [&](const CoreId& c) { return c.instance / inst.instances; };
  size_t per = 0;
  while (per < cores.size() && entry(cores[per]) == entry(cores[0])) ++per;
  if (per == cores.size() || cores.size() % per != 0) return 0;
  std::set<uint32_t> seen;  // every block on its own entry
  for (size_t r = 0; r < cores.size(); ++r)
    if (entry(cores[r]) != entry(cores[r - r % per]) ||
        (r % per == 0 && !seen.insert(entry(cores[r])).second))
      return 0;
  return static_cast<int>(per);
}

FabricParams FabricParams::for_instance(const spec::InstanceConfig& inst, int lnc) {
  FabricParams p = for_instance(inst, generation_of(inst));
  // A logical core drives the DMA engines of all its physical cores (logical-neuroncore-config
  // .rst: LNC=2 joins two physical cores, their engines and their HBM).
  p.rank_dma_bytes_per_s *= static_cast<uint64_t>(std::max(lnc, 1));
  p.reduce_bytes_per_s *= static_cast<uint64_t>(std::max(lnc, 1));
  return p;
}

const spec::GenerationConfig& generation_of(const spec::InstanceConfig& inst) {
  if (inst.generation_config.name.empty() || inst.generation_config.name != inst.generation)
    throw std::invalid_argument(
        fmt::format("instance '{}' carries no figures of its generation '{}' (load it with "
                    "spec::load_instance)",
                    inst.name, inst.generation));
  return inst.generation_config;
}

std::vector<CoreId> Fabric::place(const spec::InstanceConfig& inst, int ranks, Placement placement,
                                  int lnc) {
  if (ranks <= 0) throw std::invalid_argument("need at least one rank");
  check_lnc(inst, lnc);
  const uint32_t chips = inst.chips_per_instance();
  const uint32_t per_chip = inst.cores_per_chip / static_cast<uint32_t>(lnc);  // logical cores
  std::vector<CoreId> cores;
  for (int r = 0; r < ranks; ++r) {
    auto ur = static_cast<uint32_t>(r);
    // Chips count on across instances: chip g of the job is chip g % chips of instance g / chips.
    // A logical core is named by its first physical core.
    uint32_t g = placement == Placement::packed ? ur / per_chip : ur;
    uint32_t core = placement == Placement::packed ? ur % per_chip * static_cast<uint32_t>(lnc) : 0;
    cores.push_back({g % chips, core, g / chips});
  }
  return cores;
}

void Fabric::check_lnc(const spec::InstanceConfig& inst, int lnc) {
  if (lnc < 1 || inst.cores_per_chip % static_cast<uint32_t>(lnc) != 0)
    throw std::invalid_argument(fmt::format(
        "logical cores of {} physical cores (LNC={}) do not divide {}'s {} cores per chip", lnc,
        lnc, inst.name, inst.cores_per_chip));
}

Fabric Fabric::make(const spec::InstanceConfig& inst, int ranks, Placement placement, int lnc) {
  return Fabric(inst, FabricParams::for_instance(inst, lnc), place(inst, ranks, placement, lnc));
}

Fabric::Fabric(spec::InstanceConfig inst, FabricParams params, std::vector<CoreId> cores)
    : inst_(std::move(inst)), params_(params), cores_(std::move(cores)) {
  check_cores();
  uint32_t used = 0;
  for (const auto& c : cores_) used = std::max(used, c.instance + 1);
  const uint32_t per_entry = inst_.instances;
  instances_ = (used + per_entry - 1) / per_entry * per_entry;  // whole entries (UltraServers)
  if (instances_ > per_entry && params_.efa_bytes_per_s == 0)
    throw std::invalid_argument(
        fmt::format("{} ranks need {} instances of {} ({} cores, {} chips each), but {} has no EFA "
                    "figure to join "
                    "instances (docs/collectives.md, Fabric model)",
                    cores_.size(), used, inst_.name, inst_.cores_per_instance(),
                    inst_.chips_per_instance(), inst_.name));
  add_links();
}

void Fabric::check_cores() const {
  if (cores_.empty()) throw std::invalid_argument("need at least one rank");
  if (inst_.instances == 0 || inst_.chips % inst_.instances != 0)
    throw std::invalid_argument(fmt::format("{}: {} chips do not split into {} instances",
                                            inst_.name, inst_.chips, inst_.instances));
  // Guards against an absurd instance index (every instance gets links): a job of R ranks uses
  // at most R instances, rounded up to whole entries.
  const uint64_t max_instances = cores_.size() * inst_.instances;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, size_t> seen;
  for (size_t i = 0; i < cores_.size(); ++i) {
    const auto& c = cores_[i];
    if (c.chip >= inst_.chips_per_instance() || c.core >= inst_.cores_per_chip ||
        c.instance >= max_instances)
      throw std::invalid_argument(
          fmt::format("rank {} placed on instance {} chip {} core {}, outside {} ({} chips x {} "
                      "cores per instance)",
                      i, c.instance, c.chip, c.core, inst_.name, inst_.chips_per_instance(),
                      inst_.cores_per_chip));
    auto [it, fresh] = seen.emplace(std::make_tuple(c.instance, c.chip, c.core), i);
    if (!fresh)
      throw std::invalid_argument(fmt::format("ranks {} and {} share instance {} chip {} core {}",
                                              it->second, i, c.instance, c.chip, c.core));
  }
}

// Links in index order: per chip of the job (instance-major) its plane and Z links, then one HBM
// resource per chip, then an EFA egress and ingress per chip where the job needs EFA.
void Fabric::add_links() {
  const uint32_t chips = inst_.chips_per_instance();
  if (inst_.topology == "torus-4x4") {
    if (chips != 16) throw std::invalid_argument("torus-4x4 needs 16 chips per instance");
    plane_links_ = 4;
  } else if (inst_.topology == "ring") {
    plane_links_ = 2;
  } else if (inst_.topology == "none") {
    plane_links_ = 0;
    if (chips != 1) throw std::invalid_argument("topology 'none' with more than one chip");
  } else {
    throw std::invalid_argument(fmt::format("unknown topology '{}'", inst_.topology));
  }
  const bool z = inst_.instance_link == "ring";
  if (!z && inst_.instance_link != "none")
    throw std::invalid_argument(fmt::format("unknown instance link '{}'", inst_.instance_link));
  if (z && params_.z_link_bytes_per_s == 0)
    throw std::invalid_argument("ring between instances without bandwidth");
  links_per_chip_ = plane_links_ + (z ? 2 : 0);
  static const char* kDirs[] = {"+x", "-x", "+y", "-y"};
  static const char* kRingDirs[] = {"+", "-"};
  static const char* kZDirs[] = {"+z", "-z"};
  auto prefix = [this](uint32_t g) {
    return instances_ > 1 ? fmt::format("inst{}.", g) : std::string();
  };
  for (uint32_t g = 0; g < instances_; ++g)
    for (uint32_t chip = 0; chip < chips; ++chip)
      for (int d = 0; d < links_per_chip_; ++d) {
        bool zd = d >= plane_links_;
        const char* dir = zd                  ? kZDirs[d - plane_links_]
                          : plane_links_ == 4 ? kDirs[d]
                                              : kRingDirs[d];
        links_.push_back({fmt::format("{}chip{}{}", prefix(g), chip, dir),
                          zd ? params_.z_link_bytes_per_s : params_.link_bytes_per_s,
                          zd ? params_.z_link_latency_ps : params_.link_latency_ps, 0, 0, 0});
      }
  for (uint32_t g = 0; g < instances_; ++g)
    for (uint32_t chip = 0; chip < chips; ++chip)
      links_.push_back({fmt::format("{}chip{}.hbm", prefix(g), chip),
                        params_.intra_chip_bytes_per_s, params_.intra_chip_latency_ps, 0, 0, 0});
  if (instances_ > inst_.instances) {  // more than one entry: EFA
    // The whole EFA latency sits on the egress; the ingress only serializes (and contends).
    for (uint32_t g = 0; g < instances_; ++g)
      for (uint32_t chip = 0; chip < chips; ++chip) {
        links_.push_back({fmt::format("inst{}.chip{}.efa.out", g, chip), params_.efa_bytes_per_s,
                          params_.efa_latency_ps, 0, 0, 0});
        links_.push_back(
            {fmt::format("inst{}.chip{}.efa.in", g, chip), params_.efa_bytes_per_s, 0, 0, 0, 0});
      }
  }
  if (params_.rank_dma_bytes_per_s == 0) return;  // figures without it: no DMA limit
  dma_base_ = static_cast<int>(links_.size());
  for (size_t r = 0; r < cores_.size(); ++r)
    links_.push_back({fmt::format("rank{}.dma", r), params_.rank_dma_bytes_per_s, 0, 0, 0, 0});
}

int Fabric::dma_link(int rank) const {
  return dma_base_ < 0 ? -1 : dma_base_ + rank;
}

int Fabric::chip_link(uint32_t instance, uint32_t chip, int dir) const {
  return static_cast<int>(instance * inst_.chips_per_instance() + chip) * links_per_chip_ + dir;
}

int Fabric::hbm_link(const CoreId& c) const {
  const uint32_t chips = inst_.chips_per_instance();
  const auto chip = static_cast<int>(c.instance * chips + c.chip);
  return static_cast<int>(instances_ * chips) * links_per_chip_ + chip;
}

int Fabric::efa_link(const CoreId& c, bool ingress) const {
  const auto chips = inst_.chips_per_instance();
  const auto all_chips = static_cast<int>(instances_ * chips);
  const auto chip = static_cast<int>(c.instance * chips + c.chip);
  return all_chips * (links_per_chip_ + 1) + 2 * chip + (ingress ? 1 : 0);
}

std::vector<int> Fabric::route(int src, int dst) const {
  std::vector<int> path;
  const CoreId a = cores_.at(static_cast<size_t>(src)), b = cores_.at(static_cast<size_t>(dst));
  if (src == dst) return path;
  if (a.instance == b.instance && a.chip == b.chip) return {hbm_link(a)};
  const uint32_t m = inst_.instances;  // instances joined by NeuronLink
  // Different entries: straight from the source chip's EFA share to the destination chip's (no
  // torus hops).
  if (a.instance / m != b.instance / m) return {efa_link(a, false), efa_link(b, true)};
  // Dimension order: X (within the row) then Y on the torus (or the ring), then Z across instances;
  // each dimension the short way round, the half-way tie positive.
  uint32_t g = a.instance, c = a.chip;
  auto walk = [&](int steps, int plus, auto&& step) {
    for (int s = 0; s < std::abs(steps); ++s) {
      path.push_back(chip_link(g, c, steps > 0 ? plus : plus + 1));
      step(steps > 0);
    }
  };
  const uint32_t n = inst_.chips_per_instance();
  if (plane_links_ == 4) {
    walk(ring_steps(c % 4, b.chip % 4, 4), 0,
         [&](bool pos) { c = (c / 4) * 4 + (c % 4 + (pos ? 1 : 3)) % 4; });
    walk(ring_steps(c / 4, b.chip / 4, 4), 2,
         [&](bool pos) { c = ((c / 4 + (pos ? 1 : 3)) % 4) * 4 + c % 4; });
  } else if (plane_links_ == 2) {
    walk(ring_steps(c, b.chip, n), 0, [&](bool pos) { c = (c + (pos ? 1 : n - 1)) % n; });
  }
  const uint32_t base = g - g % m;
  walk(ring_steps(g % m, b.instance % m, m), plane_links_,
       [&](bool pos) { g = base + (g % m + (pos ? 1 : m - 1)) % m; });
  return path;
}

Picos Fabric::serialize_ps(uint64_t bytes, uint64_t bytes_per_s) {
  if (bytes == 0) return 0;
  if (bytes_per_s == 0) throw std::logic_error("link without bandwidth");
  __extension__ typedef unsigned __int128 u128;
  u128 num = static_cast<u128>(bytes) * 1000000000000ull;
  return static_cast<Picos>((num + bytes_per_s - 1) / bytes_per_s);
}

void Fabric::send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
                  Callback on_done) {
  post(src, dst, data, bytes, tag, std::move(on_done), false);
}

void Fabric::send_reduced(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
                          Callback on_done) {
  post(src, dst, data, bytes, tag, std::move(on_done), true);
}

void Fabric::post(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
                  Callback on_done, bool reduced) {
  if (src < 0 || dst < 0 || src >= num_ranks() || dst >= num_ranks())
    throw std::out_of_range(fmt::format("send {} -> {}: no such rank", src, dst));
  Message msg;
  msg.bytes = bytes;
  if (data) {
    msg.has_data = true;
    msg.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  }
  ++messages_;
  auto path = std::make_shared<std::vector<int>>(route(src, dst));
  // Data leaves a core through its DMA engines, whatever links it then takes; combined on the
  // way (send_reduced), at their reduction rate.
  auto m = std::make_shared<Sending>();
  if (!path->empty() && dma_link(src) >= 0) {
    path->insert(path->begin(), dma_link(src));
    m->dma_bytes_per_s = reduced && params_.reduce_bytes_per_s > 0 ? params_.reduce_bytes_per_s
                                                                   : params_.rank_dma_bytes_per_s;
  }
  const uint64_t chunk = chunk_size(bytes);
  m->key = Key{dst, src, tag};
  m->msg = std::move(msg);
  m->on_done = std::move(on_done);
  m->path = std::move(path);
  m->bytes = bytes;
  // A rank sending to itself crosses no link: one piece, delivered at once.
  m->chunks = m->chunks_left =
      m->path->empty() ? 1 : std::max<uint64_t>(1, (bytes + chunk - 1) / chunk);
  inject(m);
}

uint64_t Fabric::chunk_size(uint64_t bytes) const {
  return params_.chunk_bytes ? params_.chunk_bytes : std::max<uint64_t>(bytes, 1);
}

void Fabric::inject(const std::shared_ptr<Sending>& m) {
  const uint64_t chunk = chunk_size(m->bytes), i = m->next_chunk++;
  auto c = std::make_shared<Chunk>();
  c->message = m;
  c->path = m->path;
  c->first = i == 0;
  c->offset = chunk * i;
  c->bytes = i + 1 < m->chunks ? chunk : m->bytes - c->offset;
  c->tail_end = now_;
  advance(c);
}

// Cut-through over the path, chunk by chunk: a link is reserved when a chunk's head reaches it,
// so each link serves chunks in the order they arrive there, at its bandwidth (a message sent
// later that reaches a link sooner goes first; chunks of messages that share a link
// interleave; nothing holds a link before it gets there). The head moves on after the link's
// latency; the tail cannot leave a link before it has left the previous one. The message is
// delivered when its last chunk arrives.
void Fabric::advance(const std::shared_ptr<Chunk>& c) {
  const std::vector<int>& path = *c->path;
  if (c->hop == path.size()) {  // the tail has crossed the last link (or there was none)
    events_.push({c->tail_end + c->tail_lat, seq_++, [this, m = c->message] {
                    if (--m->chunks_left > 0) return;
                    deliver(m->key, std::move(m->msg));
                    if (m->on_done) m->on_done();
                  }});
    return;
  }
  Link& l = links_[static_cast<size_t>(path[c->hop])];
  const Picos start = std::max(now_, l.free_at);
  // The sender's DMA engines at the message's own rate (a copy, or a read-add-write).
  const uint64_t rate =
      c->hop == 0 && c->message->dma_bytes_per_s ? c->message->dma_bytes_per_s : l.bytes_per_s;
  // Rounded over the message, not per chunk: its chunks together take serialize_ps(bytes).
  Picos end = start + serialize_ps(c->offset + c->bytes, rate) - serialize_ps(c->offset, rate);
  if (c->hop > 0) end = std::max(end, c->tail_end + c->tail_lat);
  l.free_at = end;
  l.bytes_carried += c->bytes;
  if (c->first) ++l.messages;
  c->tail_end = end;
  c->tail_lat = l.latency_ps;
  // The next chunk of the message starts when this one has left the first link (the DMA
  // engines), so the messages of one rank take turns there.
  if (c->hop == 0 && c->message->next_chunk < c->message->chunks)
    events_.push({end, seq_++, [this, m = c->message] { inject(m); }});
  ++c->hop;
  if (c->hop == path.size()) return advance(c);
  events_.push({start + l.latency_ps, seq_++, [this, c] { advance(c); }});
}

void Fabric::complete(Message& msg, PostedRecv& r) {
  if (msg.bytes != r.bytes)
    throw std::runtime_error(
        fmt::format("message of {} bytes matched a receive of {} bytes", msg.bytes, r.bytes));
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

void Fabric::schedule(Picos delay, Callback fn) {
  events_.push({now_ + delay, seq_++, std::move(fn)});
}

Picos Fabric::run() {
  while (!events_.empty()) {
    Event ev = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    now_ = ev.time;
    if (ev.fn) ev.fn();
  }
  if (!posted_.empty() || !unexpected_.empty())
    throw std::runtime_error(
        fmt::format("fabric idle with {} unmatched receives and {} unmatched messages",
                    posted_.size(), unexpected_.size()));
  return now_;
}

}  // namespace neuronsim::cc
