// The in-process fabric model: ranks placed on the NeuronCores of one or more instances, links
// from the instance topology (NeuronLink inside an instance and around an UltraServer's Z ring,
// EFA between instances), dimension-order routing, and per-link FIFO contention, in integer
// picoseconds. Every figure and its source: docs/collectives.md, "Fabric model".
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "neuronsim/cc/network.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::cc {

// Bandwidths are bytes per second (integers, so that time is exact integer arithmetic).
struct FabricParams {
  uint64_t link_bytes_per_s = 0;        // one direction of one chip-to-chip NeuronLink
  Picos link_latency_ps = 0;            // per hop between chips
  uint64_t intra_chip_bytes_per_s = 0;  // core-to-core inside a chip, through HBM
  Picos intra_chip_latency_ps = 0;
  // What one rank's DMA engines move at once (engines per core × sustained rate per engine, at
  // most what the core's engines move together): collective data leaves a core only through
  // them, whatever links it goes on to.
  uint64_t rank_dma_bytes_per_s = 0;
  // What one rank combines per second: received data reduced into its buffer by its DMA
  // engines' collective compute (read, read, add, write), at the generation's
  // dma_add_efficiency of their copy rate; 0: reductions take no time.
  uint64_t reduce_bytes_per_s = 0;
  // Messages cross the fabric in chunks of this size, each taking a link when it reaches it, so
  // messages sharing a link interleave instead of waiting for each other's whole length: the
  // default DMA packet of collectives, 64 KiB (compute-comm-overlap.rst, Neuron SDK 2.32: "64 KiB
  // for collective DMAs"; a DMA engine switches rings only at packet boundaries).
  uint64_t chunk_bytes = 64 * 1024;
  // Between the instances of one entry joined by NeuronLink (instance_link "ring", the Trn2
  // UltraServer's Z dimension): one direction of one link.
  uint64_t z_link_bytes_per_s = 0;
  Picos z_link_latency_ps = 0;
  // EFA between instances not joined by NeuronLink: one direction of all of one instance's NICs
  // together; 0 where the notes give no EFA figure (a job must then fit in one entry).
  uint64_t efa_bytes_per_s = 0;  // one chip's share of its instance's EFA, each way
  Picos efa_latency_ps = 0;      // instance to instance, charged once, on the egress
  // Figures for an instance (see fabric.cpp for the sources); throws std::invalid_argument
  // for an instance whose link figures are not known.
  static FabricParams for_instance(const spec::InstanceConfig& inst,
                                   const spec::GenerationConfig& gen);
  // The same with the instance's own generation (generation_of), a rank being `lnc` physical
  // cores (its DMA rate `lnc` times one core's).
  static FabricParams for_instance(const spec::InstanceConfig& inst, int lnc = 1);
};

// The figures of the instance's generation that came with it from spec::load_instance; throws
// std::invalid_argument for an instance that has none (not made by load_instance).
const spec::GenerationConfig& generation_of(const spec::InstanceConfig& inst);

// Where the ranks sit. packed: rank r on core r (chip r / cores_per_chip), as a launcher fills
// an instance; one_per_chip: rank r on core 0 of chip r, so every pair of ranks crosses NeuronLink.
// Cores and chips count on across instances: a job that does not fit one instance spans
// ceil(ranks / cores_per_instance) (packed) or ceil(ranks / chips_per_instance) (one_per_chip)
// instances, rounded up to whole entries (4 for an UltraServer).
enum class Placement { packed, one_per_chip };

struct CoreId {
  uint32_t chip = 0;  // inside its instance
  uint32_t core = 0;
  uint32_t instance = 0;  // which instance of the job: 0, 1, ...
};

// Pending events refer to the fabric: do not move or copy one once it has been used.
class Fabric final : public Network {
 public:
  // `cores` gives each rank's core; every entry must lie inside an instance and be distinct.
  // Throws std::invalid_argument when the ranks span instances that only EFA could join and the
  // instance has no EFA figure.
  Fabric(spec::InstanceConfig inst, FabricParams params, std::vector<CoreId> cores);
  // Convenience: the instance's figures (FabricParams::for_instance) and `ranks` ranks placed.
  // `lnc` physical cores make one logical core, one rank (Trn2's LNC=2: 4 ranks per chip, their
  // first cores 0, 2, 4, 6, each with the DMA engines of both its cores).
  static Fabric make(const spec::InstanceConfig& inst, int ranks,
                     Placement placement = Placement::packed, int lnc = 1);
  static std::vector<CoreId> place(const spec::InstanceConfig& inst, int ranks, Placement placement,
                                   int lnc = 1);
  // Throws std::invalid_argument unless `lnc` divides the instance's cores per chip.
  static void check_lnc(const spec::InstanceConfig& inst, int lnc);

  // send(): the message crosses in chunks that interleave with other messages, so callers must
  // not have two messages of the same (src, dst, tag) in flight at once (a shorter later one
  // could arrive first); the collective plans never do.
  int num_ranks() const override { return static_cast<int>(cores_.size()); }
  Picos now() const override { return now_; }
  void send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
            Callback on_done) override;
  // Crosses the sender's DMA engines at params().reduce_bytes_per_s (their read-add-write), then
  // the links as any message.
  void send_reduced(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
                    Callback on_done) override;
  void recv(int dst, int src, void* buffer, uint64_t bytes, uint64_t tag,
            Callback on_done) override;
  void schedule(Picos delay, Callback fn) override;
  Picos run() override;

  // The links (by index) of the network a message from rank `src` to rank `dst` crosses, in
  // order; before them it crosses `src`'s DMA engines (the link "rank<src>.dma").
  std::vector<int> route(int src, int dst) const;
  struct Link {
    std::string name;  // "chip3+x", "chip0.hbm"; with several instances "inst1.chip3+z",
                       // "inst0.chip3.efa.out"; a rank's DMA engines "rank5.dma"
    uint64_t bytes_per_s = 0;
    Picos latency_ps = 0;
    Picos free_at = 0;  // when the last message that reached it leaves it
    uint64_t bytes_carried = 0;
    uint64_t messages = 0;
  };
  const std::vector<Link>& links() const { return links_; }
  const FabricParams& params() const { return params_; }
  const spec::InstanceConfig& instance() const { return inst_; }
  uint32_t instances() const { return instances_; }  // instances the job spans (whole entries)
  uint64_t messages_sent() const { return messages_; }
  const std::vector<CoreId>& cores() const { return cores_; }

  // The ranks of each host where a job spans hosts joined only by EFA (entries: an instance, or
  // an UltraServer's instances) and each holds the same run of consecutive ranks; 0 otherwise
  // (one host, or an uneven layout). The hierarchical all-reduce works by it.
  static int ranks_per_entry(const spec::InstanceConfig& inst, const std::vector<CoreId>& cores);
  int ranks_per_entry() const { return ranks_per_entry(inst_, cores_); }

  // Time for `bytes` at `bytes_per_s`, rounded up to whole picoseconds.
  static Picos serialize_ps(uint64_t bytes, uint64_t bytes_per_s);

 private:
  struct Message {
    std::vector<uint8_t> data;
    bool has_data = false;
    uint64_t bytes = 0;
  };
  struct PostedRecv {
    void* buffer = nullptr;
    uint64_t bytes = 0;
    Callback on_done;
  };
  using Key = std::tuple<int, int, uint64_t>;  // (dst, src, tag)
  struct Event {
    Picos time;
    uint64_t seq;
    Callback fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  // A message on its way, cut into chunks that cross the links one after another.
  struct Sending {
    Key key;
    Message msg;
    Callback on_done;
    std::shared_ptr<const std::vector<int>> path;
    uint64_t bytes = 0, chunks = 0, next_chunk = 0, chunks_left = 0;
    uint64_t dma_bytes_per_s = 0;  // its rate on the sender's DMA engines (the path's first link)
  };
  // One chunk: the links it still has to cross and where its tail is.
  struct Chunk {
    std::shared_ptr<Sending> message;
    std::shared_ptr<const std::vector<int>> path;  // shared by the message's chunks
    uint64_t offset = 0, bytes = 0;                // in the message
    bool first = false;  // the message's first chunk (counts the message on each link)
    size_t hop = 0;      // the next link to reserve
    Picos tail_end = 0;  // when the tail left the previous link
    Picos tail_lat = 0;  // that link's latency
  };
  // Starts the message's next chunk now: a rank's DMA engines take the chunks of its messages
  // in turn, a chunk when the previous one of that message has left them.
  void inject(const std::shared_ptr<Sending>& m);
  // Reserves the next link of the chunk's path now, when its head reaches it.
  void advance(const std::shared_ptr<Chunk>& c);
  void deliver(const Key& key, Message msg);
  void post(int src, int dst, const void* data, uint64_t bytes, uint64_t tag, Callback on_done,
            bool reduced);
  static void complete(Message& msg, PostedRecv& r);
  void check_cores() const;
  void add_links();
  // dir 0:+x 1:-x 2:+y 3:-y (ring: 0 +, 1 -), then +z, -z
  int chip_link(uint32_t instance, uint32_t chip, int dir) const;
  int hbm_link(const CoreId& c) const;
  int efa_link(const CoreId& c, bool ingress) const;  // the chip's EFA share
  int dma_link(int rank) const;                       // the rank's DMA engines
  uint64_t chunk_size(uint64_t message_bytes) const;

  spec::InstanceConfig inst_;
  FabricParams params_;
  std::vector<CoreId> cores_;
  std::vector<Link> links_;
  uint32_t instances_ = 1;
  int plane_links_ = 0;     // per chip inside its instance: 4 on the torus, 2 on a ring
  int links_per_chip_ = 0;  // plane links, then 2 Z links where instances are joined in a ring
  int dma_base_ = -1;       // the first rank's DMA link (-1: the figures have no DMA rate)
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  uint64_t seq_ = 0;
  Picos now_ = 0;
  uint64_t messages_ = 0;
  std::map<Key, std::deque<Message>> unexpected_;
  std::map<Key, std::deque<PostedRecv>> posted_;
};

}  // namespace neuronsim::cc
