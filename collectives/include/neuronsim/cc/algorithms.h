// Collective algorithms, written once as per-rank plans of steps and executed against the
// network API (network.h), so they run on the simulated fabric or any other transport.
//
// A plan is a list of steps per rank. In a step a rank posts its receives and its sends (sends
// capture their bytes when posted); when all of them have completed it applies the step's
// reductions, in the order the receives are listed (deterministic bits), and goes on to the next
// step. Ranks do not wait for each other except through messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "neuronsim/cc/network.h"
#include "neuronsim/isa/dtype.h"

namespace neuronsim::cc {

enum class Op {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  broadcast,
  reduce,
  permute,
  barrier,
  all_to_all_v
};
enum class ReduceOp { sum, prod, max, min, avg };
// ring; mesh (direct: every rank talks to every rank); rdh (recursive halving-doubling, and its
// tree forms for broadcast/reduce, dissemination for barrier); hier2d (all_reduce on a grid of
// rows of 4 ranks, a torus row when one rank sits on each chip: ring reduce-scatter in the row,
// ring all-reduce in the column, ring all-gather in the row; needs R a multiple of 4, R >= 8).
enum class Algorithm { auto_select, ring, mesh, rdh, hier2d, hierarchical };

std::string_view op_name(Op op);
std::string_view reduce_op_name(ReduceOp op);
std::string_view algorithm_name(Algorithm a);

// Size thresholds of the automatic choice, after the Neuron collectives library: mesh below
// mesh_below_bytes, RDH below rdh_below_bytes, ring above. The figures live in the generation
// configs (spec/configs/<gen>.json, cc_mesh_below_bytes and cc_rdh_below_bytes: 1 MB and 56 MB,
// neuron-hardware.md §5 [C R3]); thresholds_for() in runner.h reads them.
struct Thresholds {
  uint64_t mesh_below_bytes = 0;
  uint64_t rdh_below_bytes = 0;
};

// What to run. `count` is the elements of one block:
//   all_reduce:     in count            -> out count
//   all_gather:     in count            -> out count * ranks (block j from rank j)
//   reduce_scatter: in count * ranks    -> out count (block r of the reduction at rank r)
//   all_to_all:     in count * ranks    -> out count * ranks (block j of rank j's input's block r)
//   broadcast:      in count at root    -> out count everywhere
//   reduce:         in count            -> out count at root, empty elsewhere
//   permute:        in count            -> out count at peers[r] (empty where nobody sends);
//                   peers[r] is where rank r sends (-1: nowhere). send/recv is a permute of one
//                   pair.
//   barrier:        no data
//   all_to_all_v:   `count` unused; counts[s * ranks + d] elements go from rank s to rank d;
//                   in: the blocks for d = 0, 1, ... in order; out: the blocks from s = 0, 1, ...
struct CollectiveSpec {
  Op op = Op::all_reduce;
  ReduceOp reduce = ReduceOp::sum;
  isa::DType dtype = isa::DType::fp32;
  uint64_t count = 0;
  int root = 0;
  std::vector<int> peers;
  std::vector<uint64_t> counts;

  uint64_t input_bytes(int ranks, int rank) const;
  uint64_t output_bytes(int ranks, int rank) const;
  // The size the automatic choice looks at (the larger of one rank's input and output).
  uint64_t message_bytes(int ranks) const;
};

// send/recv: `count` elements of `dtype` from rank `src` to rank `dst` (a permute of one pair).
CollectiveSpec send_recv_spec(int ranks, int src, int dst, isa::DType dtype, uint64_t count);

// Which algorithms exist for an operation and rank count. rdh needs a power-of-two rank count
// for all_reduce, all_gather and reduce_scatter (broadcast/reduce trees and the dissemination
// barrier take any count); all_to_all(_v) and permute are mesh only; barrier has no ring form;
// hier2d is all_reduce only. The automatic choice never picks hier2d.
// hierarchical (all_reduce, all_gather, reduce_scatter across hosts): all_reduce is
// reduce-scatter inside each host, all-reduce of each shard across the hosts by all ranks at once
// (each on its own chip's EFA share), all-gather inside each host; all_gather is each rank's block
// across the hosts by its column, then every column's blocks inside each host; reduce_scatter
// the same backwards. It needs `group`, the ranks of each host (consecutive, equal counts, at least
// two hosts: Fabric::ranks_per_entry()); 0 means the job is on one host.
bool algorithm_supported(Op op, Algorithm a, int ranks, int group = 0);
// The automatic choice: across hosts (`group` > 0) an all_reduce, all_gather or reduce_scatter
// from the mesh threshold up is hierarchical; otherwise mesh / rdh / ring by message_bytes() and
// the thresholds, falling back to ring where rdh is not available (non-power-of-two ranks), and to
// what exists for the op.
Algorithm choose_algorithm(const CollectiveSpec& spec, int ranks, const Thresholds& t,
                           int group = 0);

// One transfer of a step: `bytes` at `offset` of buffer `buf` (0: work, 1: out).
struct Xfer {
  int peer = 0;
  int buf = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t tag = 0;
  bool reduce = false;  // receives only: combine into the buffer instead of overwriting
};
struct Step {
  std::vector<Xfer> recvs;
  std::vector<Xfer> sends;
  // Its reductions feed the next step's sends (a reduce-scatter step followed by another): on the
  // device one DMA operation reads both, adds and writes to the peer, so the next step sends
  // with Network::send_reduced (ExecutionCosts).
  bool reduction_streams = false;
};
struct RankPlan {
  std::vector<Step> steps;
};

// The steps of rank `rank` for a concrete algorithm (not auto_select: choose first). Throws
// std::invalid_argument where the algorithm is not supported.
RankPlan make_plan(const CollectiveSpec& spec, int ranks, int rank, Algorithm algorithm,
                   int group = 0);

// Per-rank state of an execution: the work buffer the algorithm runs in and the out buffer.
struct RankBuffers {
  std::vector<uint8_t> work;
  std::vector<uint8_t> out;
};

// Lays out a rank's buffers from its input (see CollectiveSpec), and extracts its result.
RankBuffers prepare_buffers(const CollectiveSpec& spec, int ranks, int rank,
                            const std::vector<uint8_t>& input);
std::vector<uint8_t> extract_output(const CollectiveSpec& spec, int ranks, int rank,
                                    RankBuffers& buffers);

// What a step costs besides its messages, where time is simulated (the fabric model; a transport
// that moves data between processes passes none and takes its times from the model).
struct ExecutionCosts {
  // A rank combines what its step received (the receives with `reduce`) at this rate, its DMA
  // engines' read-add-write (FabricParams::reduce_bytes_per_s), before its next step starts;
  // 0: at once. After a step whose reductions feed the next step's sends
  // (Step::reduction_streams) there is no wait: those sends are the reduction
  // (Network::send_reduced).
  uint64_t reduce_bytes_per_s = 0;
};

// Executes the plans of the ranks in `local` (all ranks in-process; one rank per process over a
// transport) on `net`. `buffers[i]` belongs to `local[i]`; with `buffers` null only time is
// simulated (messages carry sizes, no data). `starts`, when given, delays local rank i's first
// step by starts[i] from now (ranks that reach the collective at different times). Returns when
// net.run() does, with the time each local rank finished its last step.
std::vector<Picos> execute(Network& net, const CollectiveSpec& spec, const std::vector<int>& local,
                           const std::vector<RankPlan>& plans, std::vector<RankBuffers>* buffers,
                           const std::vector<Picos>* starts = nullptr,
                           const ExecutionCosts& costs = {});

// Several collectives at once on one network (all starting now, every rank in `local`): their
// messages share the links, so each may take longer than alone. Returns each job's finish
// times, per local rank.
struct ExecutionJob {
  const CollectiveSpec* spec = nullptr;
  const std::vector<RankPlan>* plans = nullptr;  // one per local rank
  std::vector<RankBuffers>* buffers = nullptr;   // null: time only
  Picos start_ps = 0;                            // every rank's first step this long after now
  ExecutionCosts costs;
};
std::vector<std::vector<Picos>> execute_together(Network& net, const std::vector<int>& local,
                                                 const std::vector<ExecutionJob>& jobs);

// Combines `n` elements: dst[i] = dst[i] op src[i], in FP32, rounded to the dtype (avg sums).
void reduce_into(isa::DType t, ReduceOp op, uint8_t* dst, const uint8_t* src, uint64_t n);

}  // namespace neuronsim::cc
