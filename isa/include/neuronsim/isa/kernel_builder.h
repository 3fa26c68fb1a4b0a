// KernelBuilder: builds a kernel from tile operations and makes it race-free by
// construction. Instructions are emitted on engines in program order; the
// builder records which agent (an engine, or a DMA queue) last wrote or read
// every byte region, and when finish() runs it adds the semaphore signals and
// waits that each cross-agent read-after-write, write-after-read and
// write-after-write needs. Instructions on one engine, and transfers on one DMA
// queue, complete in order, so they need no semaphores among themselves.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"

namespace neuronsim::isa {

// Views of access patterns, for tiling.
// Rows [first, first + count) of an HBM pattern, or partitions of an on-chip one (of a
// partition broadcast: fewer rows of the same partition).
AccessPattern rows(const AccessPattern& ap, uint32_t first, uint32_t count);
// Elements [first, first + count) of the innermost free dim.
AccessPattern cols(const AccessPattern& ap, uint32_t first, uint32_t count);

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string_view target = "trn2");

  const Target& target() const { return *target_; }

  // HBM tensors. The returned pattern covers the whole tensor as [shape[0] rows,
  // product of the other dims] with unit inner stride.
  AccessPattern input(const std::string& name, DType dtype, std::vector<int64_t> shape);
  AccessPattern output(const std::string& name, DType dtype, std::vector<int64_t> shape);
  AccessPattern scratch(const std::string& name, DType dtype, std::vector<int64_t> shape);
  AccessPattern constant(const std::string& name, DType dtype, std::vector<int64_t> shape,
                         std::vector<uint8_t> data);

  // On-chip tiles [partitions, free] with unit stride. SBUF is allocated upwards
  // per partition; PSUM tiles start on a bank boundary and stay in one bank when
  // they fit in one. Throws IsaError when the space is exhausted.
  AccessPattern sbuf_tile(DType dtype, uint16_t partitions, uint32_t free);
  AccessPattern psum_tile(DType dtype, uint16_t partitions, uint32_t free);
  // Frees every tile allocated since `mark` (from sbuf_mark()/psum_mark()).
  uint64_t sbuf_mark() const { return sbuf_used_; }
  uint64_t psum_mark() const { return psum_used_; }
  void release_sbuf(uint64_t mark) { sbuf_used_ = mark; }
  void release_psum(uint64_t mark) { psum_used_ = mark; }
  // Instructions emitted so far.
  size_t instructions() const { return nodes_.size(); }

  // Emits any instruction; its wait/signal fields must be empty (the builder owns them).
  void emit(Instruction inst);

  // Shorthands for the common instructions.
  void dma_copy(const AccessPattern& dst, const AccessPattern& src, Engine trigger = Engine::SP);
  // An indirect dma_copy: rows of src named by `index` (an on-chip int32 column) gathered
  // into dst, or with `scatter` src's rows written to the rows of dst that `index` names.
  void indirect_copy(const AccessPattern& dst, const AccessPattern& src, const AccessPattern& index,
                     Engine trigger = Engine::SP, bool scatter = false);
  void matmul(const AccessPattern& dst, const AccessPattern& stationary,
              const AccessPattern& moving, bool accumulate = false);
  void transpose(Engine engine, const AccessPattern& dst, const AccessPattern& src);
  void activation(const AccessPattern& dst, const AccessPattern& src, ActFunc func,
                  float scale = 1.0f, const AccessPattern* bias = nullptr,
                  const AccessPattern* reduce_dst = nullptr, AluOp reduce = AluOp::add);
  void tensor_tensor(Engine engine, const AccessPattern& dst, const AccessPattern& in0,
                     const AccessPattern& in1, AluOp op);
  // dst = (src op0 imm0) op1 imm1; per-partition operands replace the immediates when given.
  void tensor_scalar(Engine engine, const AccessPattern& dst, const AccessPattern& src, AluOp op0,
                     float imm0, AluOp op1 = AluOp::bypass, float imm1 = 0.0f,
                     const AccessPattern* operand0 = nullptr,
                     const AccessPattern* operand1 = nullptr);
  void tensor_reduce(Engine engine, const AccessPattern& dst, const AccessPattern& src, AluOp op,
                     uint8_t axes, bool negate = false);
  void tensor_copy(Engine engine, const AccessPattern& dst, const AccessPattern& src);
  void memset(Engine engine, const AccessPattern& dst, float value);
  void bn_stats(const AccessPattern& dst, const AccessPattern& src);
  void bn_aggr(const AccessPattern& dst, const AccessPattern& src);
  // VectorE's top-8 family: dst [P, 8] = the 8 largest of each partition of src; the
  // positions of vals in src; src with each of vals' first matches replaced by imm (and
  // their positions in dst_index when given).
  void max8(const AccessPattern& dst, const AccessPattern& src);
  void find_index8(const AccessPattern& dst, const AccessPattern& src, const AccessPattern& vals);
  void match_replace8(const AccessPattern& dst, const AccessPattern& src, const AccessPattern& vals,
                      float imm, const AccessPattern* dst_index = nullptr);

  // Adds the synchronisation and returns the validated program. The builder is
  // left empty.
  Program finish();
  neff::Neff finish_neff(const std::string& name = "file.neff");

 private:
  // Who executes an instruction and completes it in order: an engine, or one DMA
  // queue of the engine that triggers it.
  struct Agent {
    Engine engine;
    int queue;  // -1 for the engine itself
    bool operator==(const Agent&) const = default;
  };
  struct Region {
    MemSpace space;
    uint16_t tensor;
    uint32_t part_lo, part_hi;  // [lo, hi)
    int64_t byte_lo, byte_hi;   // [lo, hi)
  };
  // An emitted instruction. The instruction itself goes straight to its engine's stream in
  // program_ (finish only fills in its semaphore fields and inserts the sem_waits it needs),
  // so a large kernel holds each instruction once.
  struct Node {
    Engine engine;
    uint32_t index;                // in program_.stream(engine)
    int agent;                     // index into agents_
    uint32_t first_dep, num_deps;  // deps_[first_dep, first_dep + num_deps)
  };
  Instruction& instruction(const Node& n) { return program_.stream(n.engine)[n.index]; }
  // Finds, for a new access, the newest conflicting access of every other agent without
  // scanning the whole history. Per buffer (all of SBUF, all of PSUM, or one HBM tensor) the
  // bytes accessed so far are cut into disjoint segments at the ends of the accesses; each
  // segment lists the reads and the writes that cover all of its bytes, as pieces with a
  // partition range. A piece leaves a segment when a newer access of the same agent covers
  // its partitions there and conflicts with all it conflicts with (a write supersedes reads
  // and writes, a read only reads): whatever overlaps the old piece meets the newer one,
  // which wins. Pieces of other agents stay, even under a newer write: the old instruction
  // can still be its agent's newest conflict, and the semaphores depend on which one that is.
  // A search visits the segments its bytes cover, each with a few pieces per agent. Regions
  // are bounding boxes, so column tiles over the same rows of a wide HBM tensor all overlap
  // one another: an access to one of them visits about two segments per such tile.
  // Pieces are small and most segments (rows of HBM tensors) hold one or two, kept inline:
  // a segment is one allocation, and a large kernel's many segments stay compact.
  struct Piece {
    uint32_t part_lo, part_hi;  // [lo, hi)
    uint32_t node;
    uint16_t agent;
    bool write;
  };
  struct Segment {
    int64_t end;  // bytes [key, end)
    boost::container::small_vector<Piece, 2> pieces;
  };
  using Segments = std::pmr::map<int64_t, Segment>;
  // The segments of every buffer (SBUF, PSUM, then each HBM tensor by id). A large kernel has
  // tens of thousands; their nodes come from one arena and go with it at once, instead of
  // one heap block each.
  struct SegmentStore {
    // Declared before the buffers, so destroyed after them.
    std::unique_ptr<std::pmr::monotonic_buffer_resource> arena =
        std::make_unique<std::pmr::monotonic_buffer_resource>();
    std::deque<Segments> buffers;  // a deque: a new buffer moves none of the others

    SegmentStore() = default;
    SegmentStore(const SegmentStore& other) {
      for (const Segments& b : other.buffers) buffers.emplace_back(b, arena.get());
    }
    SegmentStore(SegmentStore&&) = default;
    SegmentStore& operator=(const SegmentStore& other) { return *this = SegmentStore(other); }
    SegmentStore& operator=(SegmentStore&& other) noexcept {
      buffers.clear();  // before the arena they live in goes
      arena = std::move(other.arena);
      buffers = std::move(other.buffers);
      return *this;
    }
    Segments& of(const Region& region);
  };
  // One operand's access while an instruction is emitted.
  struct Access {
    Segments* buffer;
    Region region;
    bool write;
  };

  AccessPattern tile(MemSpace space, uint64_t& used, uint64_t align, uint64_t capacity, DType dtype,
                     uint16_t partitions, uint32_t free);
  AccessPattern hbm_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                           TensorKind kind, std::vector<uint8_t> data);
  int agent_index(const Instruction& inst);
  static bool writes(Role role);
  static std::optional<Region> region_of(const AccessPattern& ap);
  static void find_conflicts(const Segments& buffer, const Region& region, bool write, int agent,
                             std::vector<std::optional<size_t>>& latest);
  static void record(Segments& buffer, const Region& region, const Piece& piece);

  const Target* target_;
  Program program_;
  std::vector<Agent> agents_;
  std::vector<Node> nodes_;
  std::vector<size_t> deps_;  // per node, the nodes that must complete first, in one array
  SegmentStore segments_;
  std::vector<std::optional<size_t>> latest_;  // emit's scratch, kept to spare allocations
  std::vector<Access> accesses_;
  uint64_t sbuf_used_ = 0;  // bytes per partition
  uint64_t psum_used_ = 0;

  friend struct KernelBuilderTestPeer;  // tests: compares the dependencies with a plain scan
};

}  // namespace neuronsim::isa
