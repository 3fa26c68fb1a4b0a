// The cost model (cost_model.h). Every rule, its parameters and its source are
// in docs/cost-model.md; section numbers (§) refer to the hardware notes,
// docs/sources/neuron-hardware.md. Cycles are integers of the
// instruction's engine clock; picoseconds are derived from them at the end.
#include "neuronsim/sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace neuronsim::sim {
namespace {

using isa::AccessPattern;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;
using isa::Role;

// Control instructions: assumptions, not published figures (docs/cost-model.md).
constexpr uint64_t kSemCycles = 1;          // sem_wait / sem_signal / sem_set on any engine
constexpr uint64_t kDmaTriggerCycles = 64;  // a dma_copy occupies its triggering engine this long

[[noreturn]] void bad(const Instruction& inst, const std::string& what) {
  throw std::invalid_argument(std::string(isa::opcode_info(inst.opcode).name) + " on " +
                              std::string(isa::engine_name(inst.engine)) + ": " + what);
}

const AccessPattern& need(const Instruction& inst, Role r) {
  const AccessPattern* ap = inst.operand(r);
  if (!ap) bad(inst, "missing operand " + std::string(isa::role_name(r)));
  return *ap;
}

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}
uint64_t ceil_to_u64(double x) {
  return x <= 0 ? 0 : static_cast<uint64_t>(std::ceil(x - 1e-9));
}

bool is_16bit_float(DType t) {
  return t == DType::bf16 || t == DType::fp16;
}
bool unit_inner(const AccessPattern& ap) {
  return ap.num_dims == 0 || ap.dims[ap.num_dims - 1].stride == 1;
}

// ---- TensorE (§4.1, §4.2) ----

// A PE transpose multiplies the data, loaded as the stationary, by an identity streamed as the
// moving tensor (the architecture guides), so it is costed as that matmul: max(P, min(64, F))
// of the data [P, F] (the published nc_transpose cost), its FP32 passes x
// pe_fp32_transpose_factor (v3's transpose mode halves the FP32 matmul's), and the load of the
// data as weights.
const AccessPattern& transposed_data(const Instruction& inst) {
  return need(inst, inst.opcode == Opcode::transpose ? Role::src : Role::stationary);
}
bool is_pe_transpose(const Instruction& inst) {
  return inst.engine == Engine::PE &&
         (inst.opcode == Opcode::transpose || inst.has_flag(isa::kTransposeMode));
}
uint64_t pe_transpose_cycles(const AccessPattern& data, const spec::GenerationConfig& g) {
  const uint64_t c = std::max<uint64_t>(data.num_partitions,
                                        std::min<uint64_t>(g.pe_min_interval, data.free_elems()));
  return data.dtype == DType::fp32 ? c * g.pe_fp32_transpose_factor : c;
}

// The FP32 passes of a matmul: pe_fp32_factor, halved when the FP32 operand is hinted to hold
// only zeros and ones (nc_matmul's is_*_onezero: "could lead to 2x better performance").
uint64_t fp32_passes(const Instruction& inst, const spec::GenerationConfig& g) {
  const AccessPattern& mov = need(inst, Role::moving);
  const AccessPattern& stat = need(inst, Role::stationary);
  if (stat.dtype != DType::fp32 && mov.dtype != DType::fp32) return 1;
  const bool hinted = inst.has_flag(isa::kStationaryOneZero) || inst.has_flag(isa::kMovingOneZero);
  return hinted ? std::max<uint64_t>(1, g.pe_fp32_factor / 2) : g.pe_fp32_factor;
}

// The MultiplyMoving part: max(min(64, M), N) of the columns streamed, x the FP32 passes. In
// FP8 double performance mode a column of the moving [K, 2, N] carries two contraction rows
// per PE row, so the same N cycles do twice the work (the mode's 2x throughput); FP8 without it
// runs at the BF16 rate.
uint64_t matmul_mm_cycles(const Instruction& inst, const spec::GenerationConfig& g) {
  if (is_pe_transpose(inst)) return pe_transpose_cycles(transposed_data(inst), g);
  const auto [k, m, n] = isa::matmul_dims(inst);  // double_row: the PE array's columns
  const uint64_t c = std::max<uint64_t>(std::min<uint64_t>(g.pe_min_interval, m), n);
  return c * fp32_passes(inst, g);
}

// Own cycles of a PE instruction, without any exposed weight load.
uint64_t pe_own_cycles(const Instruction& inst, const spec::GenerationConfig& g) {
  if (inst.opcode == Opcode::matmul || inst.opcode == Opcode::transpose)
    return matmul_mm_cycles(inst, g);
  return 0;
}

// The LoadStationary part that is not hidden. A new stationary loads in
// ceil(M / speedup) cycles (x the FP32 factor for FP32 weights) in the background
// of the previous PE instruction; only what outlasts that instruction shows.
// Nothing to load when the previous PE instruction was a matmul on the same
// stationary; nothing to hide behind when there is no previous PE instruction
// or this one waited on a semaphore (the engine sat idle before it). A
// transpose loads its data as weights, a new stationary every time.
uint64_t matmul_exposed_weight_load(const Instruction& inst, const spec::GenerationConfig& g,
                                    const IssueContext& ctx) {
  const bool transpose = is_pe_transpose(inst);
  const AccessPattern& stat = transpose ? transposed_data(inst) : need(inst, Role::stationary);
  const Instruction* prev = ctx.previous;
  if (!transpose && prev && prev->engine == Engine::PE && prev->opcode == Opcode::matmul &&
      !is_pe_transpose(*prev)) {
    const AccessPattern* prev_stat = prev->operand(Role::stationary);
    if (prev_stat && *prev_stat == stat) return 0;
  }
  // double_row: a pair of FP8 weights in each PE, so half the free size in columns.
  uint64_t load = ceil_div(transpose ? stat.free_elems() : isa::matmul_dims(inst).m,
                           std::max<uint32_t>(1, g.pe_weight_load_speedup));
  if (stat.dtype == DType::fp32)
    load *= transpose ? g.pe_fp32_transpose_factor : fp32_passes(inst, g);
  const uint64_t hidden = (prev && prev->engine == Engine::PE && !ctx.waited_on_semaphore)
                              ? pe_own_cycles(*prev, g)
                              : 0;
  return load > hidden ? load - hidden : 0;
}

// ---- ScalarE / VectorE / GpSimdE (§4.1, §4.2) ----

// The v3+ VectorE performance mode for tensor_copy / tensor_scalar (§4.1 [N2]):
// 4x when src and dst are BF16/FP16, both in SBUF, unit innermost stride; 2x
// when BF16/FP16 and either both in SBUF (stride not unit) or unit stride with
// one side in PSUM. 1 on other engines and on NC-v2 (dve_elems_per_cycle_16bit = 1).
uint64_t dve_copy_mode(const Instruction& inst, const AccessPattern& src, const AccessPattern& dst,
                       const spec::GenerationConfig& g) {
  if (inst.engine != Engine::DVE || !is_16bit_float(src.dtype) || !is_16bit_float(dst.dtype))
    return 1;
  const uint64_t mode4 = std::max<uint32_t>(1, g.dve_elems_per_cycle_16bit);
  const uint64_t mode2 = std::max<uint64_t>(1, mode4 / 2);
  const bool both_sbuf = src.space == MemSpace::SBUF && dst.space == MemSpace::SBUF;
  const bool unit = unit_inner(src) && unit_inner(dst);
  const bool one_psum = (src.space == MemSpace::PSUM && dst.space == MemSpace::SBUF) ||
                        (src.space == MemSpace::SBUF && dst.space == MemSpace::PSUM);
  if (both_sbuf && unit) return mode4;
  if (both_sbuf || (unit && one_psum)) return mode2;
  return 1;
}

// True when the instruction folds its results into VectorE's accumulator.
bool reduces(const Instruction& inst) {
  return inst.ints[3] != static_cast<int32_t>(isa::ReduceCmd::idle) &&
         inst.ints[3] != static_cast<int32_t>(isa::ReduceCmd::reset);
}

// Cycles of an ACT/DVE/POOL instruction before the fixed overheads.
uint64_t vector_cycles(const Instruction& inst, const spec::GenerationConfig& g) {
  const uint64_t min_ii = g.min_interval;
  auto clamp = [&](uint64_t n) { return std::max(min_ii, n); };
  switch (inst.opcode) {
    case Opcode::transpose:  // DVE 32x32 blocks
      return clamp(need(inst, Role::src).free_elems());
    case Opcode::activation:  // + ActReadAccumulator with a reduction
      return clamp(need(inst, Role::src).free_elems()) +
             (inst.operand(Role::reduce_dst) ? min_ii : 0);
    case Opcode::tensor_tensor: {
      const AccessPattern& a = need(inst, Role::in0);
      const AccessPattern& b = need(inst, Role::in1);
      const AccessPattern& d = need(inst, Role::dst);
      const uint64_t n = a.free_elems();
      const bool psum_and_sbuf = (a.space == MemSpace::PSUM && b.space == MemSpace::SBUF) ||
                                 (a.space == MemSpace::SBUF && b.space == MemSpace::PSUM);
      const bool all_sbuf =
          a.space == MemSpace::SBUF && b.space == MemSpace::SBUF && d.space == MemSpace::SBUF;
      const bool bf16_fast =
          all_sbuf && a.dtype == DType::bf16 && b.dtype == DType::bf16 && d.dtype == DType::bf16 &&
          unit_inner(a) && unit_inner(b) && unit_inner(d) &&
          (inst.alu0 == AluOp::add || inst.alu0 == AluOp::subtract || inst.alu0 == AluOp::multiply);
      uint64_t c = (psum_and_sbuf || bf16_fast) ? n : 2 * n;
      // v3+ 2x mode: both inputs in SBUF and every tensor BF16/FP16 (§4.1 [N2]).
      if (inst.engine == Engine::DVE && a.space == MemSpace::SBUF && b.space == MemSpace::SBUF &&
          is_16bit_float(a.dtype) && is_16bit_float(b.dtype) && is_16bit_float(d.dtype))
        c = ceil_div(c, std::max<uint64_t>(1, g.dve_elems_per_cycle_16bit / 2));
      return clamp(c);
    }
    case Opcode::tensor_scalar:
    case Opcode::tensor_copy: {
      const AccessPattern& s = need(inst, Role::src);
      const AccessPattern& d = need(inst, Role::dst);
      // tensor_scalar_reduce: max(MIN_II, N) + MIN_II (§4.2 [N9]); the fast modes are only
      // published for the plain instructions, so one that reduces runs at one per cycle.
      if (reduces(inst)) return clamp(s.free_elems()) + min_ii;
      return clamp(ceil_div(s.free_elems(), dve_copy_mode(inst, s, d, g)));
    }
    case Opcode::scalar_tensor_tensor: {
      // N when in0 and in1 are BF16, op0 subtract, op1 multiply and N even, else 2N
      // (§4.2 [N9]); the MIN_II clamp and the MIN_II of a reduction (as tensor_scalar_reduce's)
      // are ours.
      const AccessPattern& a = need(inst, Role::in0);
      const AccessPattern& b = need(inst, Role::in1);
      const uint64_t n = a.free_elems();
      const bool fast = a.dtype == DType::bf16 && b.dtype == DType::bf16 &&
                        inst.alu0 == AluOp::subtract && inst.alu1 == AluOp::multiply && n % 2 == 0;
      return clamp(fast ? n : 2 * n) + (reduces(inst) ? min_ii : 0);
    }
    case Opcode::range_select:  // max(MIN_II, N), the reduction included (§4.2 [N9])
      return clamp(need(inst, Role::on_true).free_elems());
    case Opcode::tensor_reduce: {
      const AccessPattern& s = need(inst, Role::src);
      const AccessPattern& d = need(inst, Role::dst);
      const uint64_t n = s.free_elems();
      const bool half = s.dtype == DType::bf16 && d.dtype == DType::bf16 &&
                        (inst.alu0 == AluOp::add || inst.alu0 == AluOp::max);
      return clamp(half ? ceil_div(n, 2) : n);  // MIN_II clamp: our assumption
    }
    case Opcode::memset: {
      const AccessPattern& d = need(inst, Role::dst);
      const uint64_t n = d.free_elems();
      const bool half = inst.imm0 == 0.0f && is_16bit_float(d.dtype);
      return clamp(half ? ceil_div(n, 2) : n);
    }
    case Opcode::select:
      return clamp(need(inst, Role::dst).free_elems());
    case Opcode::copy_predicated: {
      const AccessPattern& s = need(inst, Role::src);
      const AccessPattern& p = need(inst, Role::predicate);
      const uint64_t n = s.free_elems();
      const bool both_sbuf = s.space == MemSpace::SBUF && p.space == MemSpace::SBUF;
      return clamp(both_sbuf ? 2 * n : n);
    }
    case Opcode::bn_stats:
      return clamp(need(inst, Role::src).free_elems());
    case Opcode::bn_aggr:
      return clamp(ceil_div(13 * need(inst, Role::src).free_elems(), 3));
    case Opcode::tensor_tensor_scan:
      return clamp(2 * need(inst, Role::in0).free_elems());
    case Opcode::iota:
    case Opcode::affine_select:
      return g.pool_startup + need(inst, Role::dst).free_elems();
    case Opcode::rng:  // no published cost: assumed one element per cycle, as iota and memset
      return inst.engine == Engine::POOL ? g.pool_startup + need(inst, Role::dst).free_elems()
                                         : clamp(need(inst, Role::dst).free_elems());
    case Opcode::rand_set_state:  // no published cost: assumed like rng's for its 6 words
      return inst.engine == Engine::POOL ? g.pool_startup + need(inst, Role::src).free_elems()
                                         : clamp(need(inst, Role::src).free_elems());
    case Opcode::max8:
    case Opcode::find_index8:
    case Opcode::match_replace8:  // N, the data's elements per partition (§4.2 [N9]); MIN_II ours
      return clamp(need(inst, Role::src).free_elems());
    case Opcode::partition_reduce:
    case Opcode::partition_shuffle:  // no published cost: assumed like iota
      return g.pool_startup + need(inst, Role::src).free_elems();
    case Opcode::local_gather: {
      // 150 + nv*ne/C, C = ((28 + 4 ne) / (4 ne)) / min(4 / dtype_bytes, ne)   (§4.2 [N9])
      const AccessPattern& s = need(inst, Role::src);
      const double ne = std::max(0, inst.ints[0]);
      const double nv = std::max(0, inst.ints[1]);
      if (ne == 0 || nv == 0) return g.pool_startup;
      const double bytes = static_cast<double>(isa::dtype_size(s.dtype));
      const double c = ((28.0 + 4.0 * ne) / (4.0 * ne)) / std::min(4.0 / bytes, ne);
      return g.pool_startup + ceil_to_u64(nv * ne / c);
    }
    default:
      bad(inst, "no ACT/DVE/POOL cost rule");
  }
}

// ---- dependence on the previous instruction of the same engine ----

// Where an SBUF/PSUM pattern lies: partitions [p0, p1), bytes [b0, b1) of each partition.
struct Extent {
  MemSpace space;
  int64_t p0, p1, b0, b1;
};

bool on_chip_extent(const AccessPattern& ap, Extent& out) {
  if (ap.space != MemSpace::SBUF && ap.space != MemSpace::PSUM) return false;
  int64_t lo = 0, hi = 0;
  for (const isa::Dim& d : ap.free_dims()) {
    if (d.size == 0) return false;
    const int64_t span = static_cast<int64_t>(d.stride) * static_cast<int64_t>(d.size - 1);
    (span < 0 ? lo : hi) += span;
  }
  const int64_t esize = static_cast<int64_t>(isa::dtype_size(ap.dtype));
  const int64_t off = static_cast<int64_t>(ap.offset);
  out = {ap.space, ap.start_partition, int64_t{ap.start_partition} + ap.partition_footprint(),
         off + lo * esize, off + (hi + 1) * esize};
  return true;
}

bool overlap(const AccessPattern& a, const AccessPattern& b) {
  Extent x{}, y{};
  if (!on_chip_extent(a, x) || !on_chip_extent(b, y) || x.space != y.space) return false;
  return x.p0 < y.p1 && y.p0 < x.p1 && x.b0 < y.b1 && y.b0 < x.b1;
}

using isa::is_output;

// True when `inst` reads what `prev` wrote (read after write, bounding boxes).
bool reads_output_of(const Instruction& inst, const Instruction& prev) {
  for (const isa::Operand& out : prev.operands) {
    if (!is_output(out.role)) continue;
    for (const isa::Operand& in : inst.operands)
      if (!is_output(in.role) && overlap(in.ap, out.ap)) return true;
  }
  return false;
}

}  // namespace

uint64_t instruction_cycles(const Instruction& inst, const spec::GenerationConfig& gen,
                            const IssueContext& ctx) {
  if (isa::is_collective(inst.opcode)) bad(inst, "collectives are costed by a later layer");
  switch (inst.opcode) {
    case Opcode::sem_wait:
    case Opcode::sem_signal:
    case Opcode::sem_set:
      return kSemCycles;
    case Opcode::dma_copy:
      return kDmaTriggerCycles;
    default:
      break;
  }
  switch (inst.engine) {
    case Engine::PE:
      if (inst.opcode == Opcode::matmul || inst.opcode == Opcode::transpose)
        return matmul_mm_cycles(inst, gen) + matmul_exposed_weight_load(inst, gen, ctx);
      bad(inst, "not a PE instruction");
    case Engine::ACT:
    case Engine::DVE:
    case Engine::POOL: {
      const bool dependent =
          ctx.waited_on_semaphore || (ctx.previous && ctx.previous->engine == inst.engine &&
                                      reads_output_of(inst, *ctx.previous));
      return vector_cycles(inst, gen) + gen.access_overhead +
             (dependent ? gen.dependent_overhead : 0);
    }
    case Engine::SP:
      break;
  }
  bad(inst, "no cost rule for this engine");
}

uint64_t instruction_ps(const Instruction& inst, const spec::GenerationConfig& gen,
                        const IssueContext& ctx) {
  const uint64_t cycles = instruction_cycles(inst, gen, ctx);
  const double ps_per_cycle = 1000.0 / gen.ghz(inst.engine);
  return static_cast<uint64_t>(std::llround(static_cast<double>(cycles) * ps_per_cycle));
}

namespace {

// Elements of the longest run of consecutive addresses the pattern walks (its innermost free
// dims while each continues the run; dims of size 1 do not break it). A row of SBUF or PSUM is
// its own piece of memory, so a run never crosses partitions; in HBM it crosses rows when the
// rows follow each other.
uint64_t contiguous_run_elems(const AccessPattern& ap) {
  uint64_t run = 1;
  for (int k = ap.num_dims - 1; k >= 0; --k) {
    const isa::Dim& d = ap.dims[k];
    if (d.size == 1) continue;
    if (d.stride != static_cast<int64_t>(run)) return run;
    run *= d.size;
  }
  if (ap.space == MemSpace::HBM && ap.num_partitions > 1 &&
      ap.partition_stride == static_cast<int64_t>(run))
    run *= ap.num_partitions;
  return run;
}

// Descriptors the pattern needs: one per run, runs longer than a descriptor split.
uint64_t descriptors_of(const AccessPattern& ap, uint64_t elems,
                        const spec::GenerationConfig& gen) {
  if (elems == 0) return 0;
  const uint64_t run = std::min(contiguous_run_elems(ap), elems);
  const uint64_t run_bytes = run * isa::dtype_size(ap.dtype);
  const uint64_t max_bytes = std::max<uint64_t>(1, gen.dma_descriptor_max_bytes);
  return (elems + run - 1) / run * std::max<uint64_t>(1, (run_bytes + max_bytes - 1) / max_bytes);
}

}  // namespace

std::vector<DmaTransfer> plan_dma(const Instruction& inst, const spec::GenerationConfig& gen) {
  if (inst.opcode != Opcode::dma_copy) bad(inst, "plan_dma takes a dma_copy");
  const AccessPattern& src = need(inst, Role::src);
  const AccessPattern& dst = need(inst, Role::dst);
  const bool indirect = inst.operand(Role::index) != nullptr;
  const bool scatter = indirect && inst.has_flag(isa::kScatter);
  auto on_chip = [](const AccessPattern& ap) {
    return ap.space == MemSpace::SBUF || ap.space == MemSpace::PSUM;
  };
  if (src.space == MemSpace::Pattern || dst.space == MemSpace::Pattern)
    bad(inst, "a DMA cannot move a pattern");

  // Bytes read and written: every destination element comes from one source element.
  const uint64_t elems = indirect && !scatter ? dst.total_elems() : src.total_elems();
  const uint64_t src_bytes = elems * isa::dtype_size(src.dtype);
  // A scatter writes one destination element per source element (the rows its index
  // names), not the whole table its pattern spans.
  const uint64_t dst_bytes = (scatter ? elems : dst.total_elems()) * isa::dtype_size(dst.dtype);

  // The side whose rows decide the split: the on-chip side (dst first), else
  // the HBM destination's rows (HBM->HBM, and indirect gathers into HBM).
  // (An indexed side's rows are the indices', not a layout: the other side decides.)
  const AccessPattern& side = on_chip(dst) && !scatter                 ? dst
                              : on_chip(src) && (!indirect || scatter) ? src
                              : scatter                                ? src
                                                                       : dst;
  uint64_t first_row = 0, rows = 1;
  if (on_chip(side)) {
    // Relative to partition 0 of the core. A broadcast source (deciding only when dst is in
    // HBM) is split as the copy of its walk's rows from partition 0 would be: the same
    // destination bytes, in the same pieces.
    first_row = side.partition_broadcast ? 0 : side.start_partition;
    rows = side.num_partitions;
  } else if (side.num_partitions > 1) {
    rows = side.num_partitions;
  } else if (side.num_dims >= 2) {
    rows = side.dims[0].size;  // an HBM tensor written as [[row stride, rows], ...]
  }
  rows = std::max<uint64_t>(1, rows);

  // A descriptor moves one contiguous piece of both sides, so the side in more pieces decides.
  // The indexed side of a gather or scatter is its rows one by one, each the pieces of its
  // free pattern (docs/isa.md: row v of src, or of dst with scatter, per index value).
  const bool src_indexed = indirect && !scatter, dst_indexed = scatter;
  auto pieces = [&](const AccessPattern& ap, bool indexed) {
    if (!indexed) return descriptors_of(ap, ap.total_elems(), gen);
    AccessPattern row = ap;  // one row: its free pattern, never merged with the next
    row.num_partitions = 1;
    const uint64_t rows = std::max<uint64_t>(1, inst.operand(Role::index)->total_elems());
    return rows * descriptors_of(row, std::max<uint64_t>(1, elems / rows), gen);
  };
  // A DMA transpose: the DMA engines gather [rows, 16] blocks of the source and write whole
  // partitions (neuron-hardware.md §3), so the destination's pieces decide, and the bytes
  // stream at the transpose's fraction of a copy's bandwidth.
  const bool transpose = inst.has_flag(isa::kDmaTranspose);
  // A read-add-write also reads the destination: in HBM, its bytes cross HBM twice.
  const bool add = inst.has_flag(isa::kAddToDst);
  const uint64_t descriptors =
      transpose ? pieces(dst, false) : std::max(pieces(src, src_indexed), pieces(dst, dst_indexed));
  const double efficiency = (!transpose                   ? 1.0
                             : src.space == MemSpace::HBM ? gen.dma_transpose_hbm_efficiency
                                                          : gen.dma_transpose_sbuf_efficiency) *
                            (add ? gen.dma_add_efficiency : 1.0);

  // Row r goes to engine (r / group) mod engines, group = partitions / engines (8).
  const uint64_t engines = std::max<uint32_t>(1, gen.dma_engines);
  const uint64_t group = std::max<uint64_t>(1, gen.partitions / engines);
  std::vector<uint64_t> rows_on(engines, 0);
  {
    uint64_t r = first_row;
    const uint64_t end = first_row + rows;
    while (r < end) {
      const uint64_t group_end = std::min(end, (r / group + 1) * group);
      rows_on[(r / group) % engines] += group_end - r;
      r = group_end;
    }
  }

  // Bytes in proportion to rows; cumulative rounding keeps the totals exact.
  std::vector<DmaTransfer> out;
  uint64_t rows_before = 0;
  auto share = [&](uint64_t total, uint64_t upto) {  // floor(total * upto / rows) without overflow
    return total / rows * upto + (total % rows) * upto / rows;
  };
  for (uint64_t e = 0; e < engines; ++e) {
    if (rows_on[e] == 0) continue;
    const uint64_t upto = rows_before + rows_on[e];
    const uint64_t s = share(src_bytes, upto) - share(src_bytes, rows_before);
    const uint64_t d = share(dst_bytes, upto) - share(dst_bytes, rows_before);
    const uint64_t k = share(descriptors, upto) - share(descriptors, rows_before);
    rows_before = upto;
    DmaTransfer t;
    t.dma_engine = static_cast<uint32_t>(e);
    t.bytes = std::max(s, d);
    t.bandwidth_fraction = efficiency;
    t.descriptors = std::max<uint64_t>(1, k);
    t.hbm_bytes =
        (src.space == MemSpace::HBM ? s : 0) + (dst.space == MemSpace::HBM ? (add ? 2 * d : d) : 0);
    if (t.bytes > 0) out.push_back(t);
  }
  return out;
}

uint64_t dma_transfer_ps(uint64_t bytes, uint64_t descriptors, const spec::GenerationConfig& gen,
                         double bandwidth_fraction) {
  const double ns = gen.dma_fixed_ns + static_cast<double>(descriptors) * gen.dma_descriptor_ns +
                    static_cast<double>(bytes) / (gen.dma_engine_bytes_per_ns * bandwidth_fraction);
  return static_cast<uint64_t>(std::llround(ns * 1000.0));
}

uint64_t instruction_flops(const Instruction& inst) {
  switch (inst.opcode) {
    case Opcode::matmul: {
      if (inst.has_flag(isa::kTransposeMode)) return 0;
      const auto [k, m, n] = isa::matmul_dims(inst);
      return 2 * k * m * n;
    }
    case Opcode::activation:
    case Opcode::tensor_tensor:
    case Opcode::tensor_scalar:
    case Opcode::tensor_tensor_scan: {
      const AccessPattern* dst = inst.operand(Role::dst);
      return dst ? dst->total_elems() : 0;
    }
    default:
      return 0;
  }
}

uint64_t launch_ps(uint64_t tensors, const spec::GenerationConfig& gen) {
  return static_cast<uint64_t>(std::llround(
      (gen.launch_fixed_ns + static_cast<double>(tensors) * gen.launch_per_tensor_ns) * 1000));
}

uint64_t copy_ps(uint64_t bytes, uint32_t lnc, const spec::GenerationConfig& gen) {
  // At most the engines' sum (the loader refuses more).
  const double dma_ns = static_cast<double>(bytes) / (lnc * gen.dma_core_bytes_per_ns);
  const double hbm_ns = 2.0 * static_cast<double>(bytes) / gen.hbm_bytes_per_ns;
  return static_cast<uint64_t>(std::llround((gen.dma_issue_ns + std::max(dma_ns, hbm_ns)) * 1000));
}

}  // namespace neuronsim::sim
