// The in-process fabric model: ranks placed on the NeuronCores of one instance, links from the
// instance topology, dimension-order routing, and per-link FIFO contention, in integer
// picoseconds. Every figure and its source: docs/collectives.md, "Fabric model".
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "neuronsim/cc/network.h"
#include "neuronsim/sim/config.h"

namespace neuronsim::cc {

// Bandwidths are bytes per second (integers, so that time is exact integer arithmetic).
struct FabricParams {
  uint64_t link_bytes_per_s = 0;     // one direction of one chip-to-chip NeuronLink
  Picos link_latency_ps = 0;         // per hop between chips
  uint64_t intra_chip_bytes_per_s = 0;  // core-to-core inside a chip, through HBM
  Picos intra_chip_latency_ps = 0;
  // Figures for an instance (see fabric.cpp for the sources); throws std::invalid_argument
  // for an instance whose link figures are not known.
  static FabricParams for_instance(const sim::InstanceConfig& inst, const sim::GenerationConfig& gen);
};

// Where the ranks sit. packed: rank r on core r (chip r / cores_per_chip), as a launcher fills
// an instance; one_per_chip: rank r on core 0 of chip r, so every pair of ranks crosses NeuronLink.
enum class Placement { packed, one_per_chip };

struct CoreId {
  uint32_t chip = 0;
  uint32_t core = 0;
};

// Pending events refer to the fabric: do not move or copy one once it has been used.
class Fabric final : public Network {
 public:
  // `cores` gives each rank's core; every entry must lie inside the instance and be distinct.
  Fabric(sim::InstanceConfig inst, FabricParams params, std::vector<CoreId> cores);
  // Convenience: load the generation config for the figures and place `ranks` ranks.
  static Fabric make(const sim::InstanceConfig& inst, int ranks, Placement placement = Placement::packed);
  static std::vector<CoreId> place(const sim::InstanceConfig& inst, int ranks, Placement placement);

  int num_ranks() const override { return static_cast<int>(cores_.size()); }
  Picos now() const override { return now_; }
  void send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag, Callback on_done) override;
  void recv(int dst, int src, void* buffer, uint64_t bytes, uint64_t tag, Callback on_done) override;
  void schedule(Picos delay, Callback fn) override;
  Picos run() override;

  // The links (by index) a message from rank `src` to rank `dst` crosses, in order.
  std::vector<int> route(int src, int dst) const;
  struct Link {
    std::string name;  // "chip3+x", "chip0.hbm"
    uint64_t bytes_per_s = 0;
    Picos latency_ps = 0;
    Picos free_at = 0;     // when the last reserved message leaves it
    uint64_t bytes_carried = 0;
    uint64_t messages = 0;
  };
  const std::vector<Link>& links() const { return links_; }
  const FabricParams& params() const { return params_; }
  const sim::InstanceConfig& instance() const { return inst_; }
  uint64_t messages_sent() const { return messages_; }

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
  void deliver(const Key& key, Message msg);
  static void complete(Message& msg, PostedRecv& r);
  int chip_link(uint32_t chip, int dir) const;  // dir 0:+x 1:-x 2:+y 3:-y (ring: 0 +, 1 -)

  sim::InstanceConfig inst_;
  FabricParams params_;
  std::vector<CoreId> cores_;
  std::vector<Link> links_;
  int links_per_chip_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  uint64_t seq_ = 0;
  Picos now_ = 0;
  uint64_t messages_ = 0;
  std::map<Key, std::deque<Message>> unexpected_;
  std::map<Key, std::deque<PostedRecv>> posted_;
};

}  // namespace neuronsim::cc
