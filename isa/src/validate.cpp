#include "neuronsim/isa/validate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "neuronsim/isa/error.h"

namespace neuronsim::isa {
namespace {

// Smallest and largest element index (relative to the start) a pattern touches
// inside one partition or row.
struct Extent {
  int64_t lo = 0;
  int64_t hi = 0;
};

Extent free_extent(const AccessPattern& ap) {
  Extent e;
  for (const Dim& d : ap.free_dims()) {
    const int64_t span = static_cast<int64_t>(d.stride) * (static_cast<int64_t>(d.size) - 1);
    (span >= 0 ? e.hi : e.lo) += span;
  }
  return e;
}

bool is_reduce_op(AluOp op) {
  return op == AluOp::add || op == AluOp::multiply || op == AluOp::max || op == AluOp::min;
}

bool is_compare_op(AluOp op) {
  return op >= AluOp::is_equal && op <= AluOp::is_le;
}

bool is_int(DType t) {
  return !is_float(t) && t != DType::boolean;
}

// The synchronisation fields: the semaphores exist, unused fields hold their defaults, and
// the semaphore instructions have what they act on. `fail` does not return.
template <typename Fail>
void check_sync(const Instruction& in, Fail&& fail) {
  if (in.wait.cond != WaitCond::none && in.wait.sem >= kNumSemaphores)
    fail(fmt::format("waits on semaphore {} (a core has {})", in.wait.sem, kNumSemaphores));
  if (in.signal.op != SemOp::none && in.signal.sem >= kNumSemaphores)
    fail(fmt::format("updates semaphore {} (a core has {})", in.signal.sem, kNumSemaphores));
  if (in.wait.cond == WaitCond::none && (in.wait.sem != 0 || in.wait.value != 0))
    fail("a semaphore and value without a wait condition");
  if (in.signal.op == SemOp::none && (in.signal.sem != 0 || in.signal.value != 0))
    fail("a semaphore and value without a signal");
  if (in.opcode == Opcode::sem_wait && in.wait.cond == WaitCond::none)
    fail("sem_wait needs a wait condition");
  if (in.opcode == Opcode::sem_signal && in.signal.op != SemOp::add)
    fail("sem_signal needs a semaphore add");
  if (in.opcode == Opcode::sem_set && in.signal.op != SemOp::set)
    fail("sem_set needs a semaphore set");
}

class Checker {
 public:
  Checker(const Instruction& in, const Target& t, const Where& where)
      : in_(in), t_(t), where_(where), info_(opcode_info(in.opcode)) {}

  void run() {
    engine_and_sync();
    for (const Operand& op : in_.operands) operand(op);
    shapes();
  }

 private:
  [[noreturn]] void fail(const std::string& rule) const {
    throw IsaError(fmt::format("{}: {}: {}", where_.str(), info_.name, rule));
  }
  [[noreturn]] void fail(Role r, const std::string& rule) const {
    fail(fmt::format("operand {}: {}", role_name(r), rule));
  }

  const AccessPattern& get(Role r) const {
    const AccessPattern* ap = in_.operand(r);
    if (!ap) fail(r, "missing");
    return *ap;
  }
  const AccessPattern* opt(Role r) const { return in_.operand(r); }

  void engine_and_sync() const {
    if (std::find(info_.engines.begin(), info_.engines.end(), in_.engine) == info_.engines.end()) {
      std::string allowed;
      for (Engine e : info_.engines)
        allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", engine_name(e));
      fail(fmt::format("cannot run on engine {} (runs on: {})", engine_name(in_.engine), allowed));
    }
    for (const Operand& op : in_.operands) {
      const bool known = std::any_of(info_.roles.begin(), info_.roles.end(),
                                     [&](const RoleInfo& r) { return r.role == op.role; });
      if (!known) fail(op.role, "not an operand of this instruction");
    }
    for (const RoleInfo& r : info_.roles)
      if (r.required && !in_.operand(r.role)) fail(r.role, "missing");
    check_sync(in_, [this](const std::string& rule) { fail(rule); });
    if (in_.opcode != Opcode::partition_shuffle && in_.mask != std::array<uint8_t, 32>{})
      fail("only partition_shuffle takes a mask");
    if (std::isnan(in_.imm0) || std::isnan(in_.imm1)) fail("immediates cannot be NaN");
    // An operand replaces its immediate, which then keeps its default.
    if (in_.opcode == Opcode::activation && opt(Role::scale) && in_.imm0 != 1.0f)
      fail("scale is given as an operand and as an immediate");
    if (in_.opcode == Opcode::tensor_tensor_scan && opt(Role::initial) && in_.imm0 != 0.0f)
      fail("initial is given as an operand and as an immediate");
    if ((in_.opcode == Opcode::tensor_scalar || in_.opcode == Opcode::scalar_tensor_tensor) &&
        ((opt(Role::operand0) && in_.imm0 != 0.0f) || (opt(Role::operand1) && in_.imm1 != 0.0f)))
      fail("a scalar is given as an operand and as an immediate");
    if (in_.opcode == Opcode::select && opt(Role::on_false) && in_.imm0 != 0.0f)
      fail("on_false is given as an operand and as an immediate");
  }

  // Fields a memory space does not use must hold their defaults, so that every
  // valid instruction has one text form and one encoding.
  void canonical(const Operand& op) const {
    const AccessPattern& ap = op.ap;
    if (ap.num_dims < 1 || ap.num_dims > kMaxDims)
      fail(op.role, fmt::format("{} free dims (1 to {} allowed)", ap.num_dims, kMaxDims));
    const bool on_chip = ap.space == MemSpace::SBUF || ap.space == MemSpace::PSUM;
    if (on_chip && (ap.tensor != 0 || ap.partition_stride != 0))
      fail(op.role, "an on-chip operand has no tensor id or row stride");
    if (ap.space == MemSpace::HBM && ap.start_partition != 0)
      fail(op.role, "an HBM operand has no start partition");
    if (ap.space == MemSpace::Pattern &&
        (ap.dtype != DType::int32 || ap.offset != 0 || ap.tensor != 0 || ap.start_partition != 0 ||
         ap.num_partitions != 1 || ap.partition_stride != 0 || ap.partition_broadcast))
      fail(op.role, "a pattern has only dims");
  }

  // Only the DMA engines address SBUF/PSUM by address and can read one partition for many;
  // a compute engine's lanes each read their own partition, and a DMA transpose walks the
  // source's rows as its columns.
  void broadcast_rule(const Operand& op) const {
    const AccessPattern& ap = op.ap;
    if (!ap.partition_broadcast) return;
    if (ap.space != MemSpace::SBUF && ap.space != MemSpace::PSUM)
      fail(op.role, fmt::format("a partition broadcast reads SBUF or PSUM, not {}",
                                mem_space_name(ap.space)));
    if (in_.opcode != Opcode::dma_copy || op.role != Role::src)
      fail(op.role, "only the src of dma_copy can broadcast a partition");
    if (in_.has_flag(kDmaTranspose)) fail(op.role, "a DMA transpose cannot broadcast a partition");
  }

  void operand(const Operand& op) const {
    const AccessPattern& ap = op.ap;
    canonical(op);
    broadcast_rule(op);
    if ((op.role == Role::pattern) != (ap.space == MemSpace::Pattern))
      fail(op.role, op.role == Role::pattern ? "must be a pattern" : "a pattern is not memory");
    for (const Dim& d : ap.free_dims())
      if (d.size == 0) fail(op.role, "a free dim has size 0");
    if (ap.num_partitions == 0) fail(op.role, "zero partitions");
    switch (ap.space) {
      case MemSpace::SBUF:
        on_chip(op, t_.sbuf_partition_bytes, t_.sbuf_free_max);
        break;
      case MemSpace::PSUM:
        on_chip(op, t_.psum_partition_bytes, t_.psum_free_max);
        break;
      case MemSpace::HBM:
        if (in_.opcode != Opcode::dma_copy && !is_collective(in_.opcode))
          fail(op.role, "engines reach HBM only through dma_copy and collectives");
        if (ap.tensor == 0) fail(op.role, "HBM operand names no tensor");
        break;
      case MemSpace::Pattern:
        break;
    }
  }

  void on_chip(const Operand& op, uint32_t partition_bytes, uint32_t free_max) const {
    const AccessPattern& ap = op.ap;
    const uint32_t end = uint32_t{ap.start_partition} + ap.partition_footprint();
    if (end > t_.num_partitions)
      fail(op.role, fmt::format("partitions {}..{} exceed the {} partitions", ap.start_partition,
                                end - 1, t_.num_partitions));
    if (ap.num_partitions > t_.num_partitions)
      fail(op.role, fmt::format("broadcasts partition {} to {} partitions (at most {})",
                                ap.start_partition, ap.num_partitions, t_.num_partitions));
    if (in_.opcode != Opcode::dma_copy) start_partition_rule(op);
    const Extent e = free_extent(ap);
    const int64_t size = static_cast<int64_t>(dtype_size(ap.dtype));
    const int64_t first = static_cast<int64_t>(ap.offset) + e.lo * size;
    const int64_t last = static_cast<int64_t>(ap.offset) + (e.hi + 1) * size;
    if (first < 0 || last > partition_bytes)
      fail(op.role,
           fmt::format("bytes {}..{} of each partition are outside {} ({} bytes per partition)",
                       first, last, mem_space_name(ap.space), partition_bytes));
    const bool compute = in_.engine != Engine::PE && in_.opcode != Opcode::dma_copy;
    if (compute && ap.free_elems() > free_max)
      fail(op.role, fmt::format("{} free elements per partition from {} (at most {})",
                                ap.free_elems(), mem_space_name(ap.space), free_max));
  }

  // Engines reach partitions in aligned groups: a tile wider than 64 partitions
  // starts at 0, one of 33-64 at 0 or 64, one of up to 32 at a multiple of 32.
  void start_partition_rule(const Operand& op) const {
    const AccessPattern& ap = op.ap;
    const uint32_t n = ap.num_partitions;
    const uint32_t align = n > 64 ? 128 : n > 32 ? 64 : 32;
    if (ap.start_partition % align != 0)
      fail(op.role, fmt::format("a tile of {} partitions cannot start at partition {} "
                                "(legal starts are multiples of {})",
                                n, ap.start_partition, align));
  }

  void same_shape(Role a, Role b) const {
    const AccessPattern& x = get(a);
    const AccessPattern& y = get(b);
    if (x.num_partitions != y.num_partitions || x.free_elems() != y.free_elems())
      fail(b, fmt::format("shape [{}, {}] differs from {} [{}, {}]", y.num_partitions,
                          y.free_elems(), role_name(a), x.num_partitions, x.free_elems()));
  }

  void per_partition_scalar(Role r, Role like) const {
    const AccessPattern* ap = opt(r);
    if (!ap) return;
    if (ap->free_elems() != 1 || ap->num_partitions != get(like).num_partitions)
      fail(r, fmt::format("must be one value per partition [{}, 1], got [{}, {}]",
                          get(like).num_partitions, ap->num_partitions, ap->free_elems()));
  }

  void space_is(Role r, MemSpace s) const {
    if (get(r).space != s)
      fail(r,
           fmt::format("must be in {}, not {}", mem_space_name(s), mem_space_name(get(r).space)));
  }

  bool reduces() const { return in_.ints[3] != static_cast<int32_t>(ReduceCmd::idle); }

  // The accumulator's rules for an instruction that may reduce: VectorE's, a known command,
  // a reduction when it folds anything in, and the operands its command reads or writes.
  void accumulator(Role data) const {
    const int32_t cmd = in_.ints[3];
    if (cmd < 0 || cmd >= kNumReduceCmds) fail(fmt::format("reduce_cmd={} (0 to 4)", cmd));
    per_partition_scalar(Role::reduce_dst, data);
    per_partition_scalar(Role::initial, data);
    if (!reduces()) {
      if (in_.alu2 != AluOp::bypass || opt(Role::reduce_dst) || opt(Role::initial))
        fail("reduce, reduce_dst and initial need a reduce_cmd");
      return;
    }
    if (in_.engine != Engine::DVE) fail("only VectorE has the accumulator that reduce_cmd uses");
    reduce_op(in_.alu2, "reduce");
    if ((cmd == static_cast<int32_t>(ReduceCmd::load_reduce)) != (opt(Role::initial) != nullptr))
      fail("load_reduce, and only load_reduce, reads an initial operand");
  }

  void reduce_op(AluOp op, const char* param) const {
    if (!is_reduce_op(op))
      fail(fmt::format("{}={} is not a reduction (add, multiply, max, min)", param,
                       alu_op_name(op)));
  }

  void shapes() const {
    switch (in_.opcode) {
      case Opcode::matmul:
        matmul();
        break;
      case Opcode::transpose:
        transpose();
        break;
      case Opcode::activation:
        same_shape(Role::dst, Role::src);
        per_partition_scalar(Role::bias, Role::src);
        per_partition_scalar(Role::scale, Role::src);
        per_partition_scalar(Role::reduce_dst, Role::src);
        if (!opt(Role::reduce_dst) && in_.alu0 != AluOp::bypass)
          fail(fmt::format("reduce={} needs a reduce_dst operand", alu_op_name(in_.alu0)));
        if (opt(Role::reduce_dst) &&
            !(in_.alu0 == AluOp::add || in_.alu0 == AluOp::max || in_.alu0 == AluOp::min))
          fail(fmt::format("reduce={} (add, max or min)", alu_op_name(in_.alu0)));
        break;
      case Opcode::tensor_tensor:
        same_shape(Role::dst, Role::in0);
        same_shape(Role::dst, Role::in1);
        break;
      case Opcode::tensor_scalar:
        same_shape(Role::dst, Role::src);
        per_partition_scalar(Role::operand0, Role::src);
        per_partition_scalar(Role::operand1, Role::src);
        accumulator(Role::src);
        if (reduces() && in_.alu1 != AluOp::bypass)
          fail("a tensor_scalar that reduces has one operation (op1 must be bypass)");
        break;
      case Opcode::scalar_tensor_tensor:
        same_shape(Role::dst, Role::in0);
        same_shape(Role::dst, Role::in1);
        per_partition_scalar(Role::operand0, Role::in0);
        if (get(Role::in0).space == MemSpace::PSUM && get(Role::in1).space == MemSpace::PSUM)
          fail(Role::in1, "in0 and in1 cannot both be in PSUM");
        accumulator(Role::in0);
        break;
      case Opcode::range_select:
        same_shape(Role::dst, Role::on_true);
        per_partition_scalar(Role::operand0, Role::on_true);
        per_partition_scalar(Role::operand1, Role::on_true);
        for (Role r : {Role::operand0, Role::operand1})
          if (get(r).dtype != DType::fp32) fail(r, "a bound is fp32");
        for (AluOp op : {in_.alu0, in_.alu1})
          if (!is_compare_op(op) || op == AluOp::not_equal)
            fail(fmt::format("{} is not one of is_equal, is_lt, is_le, is_gt, is_ge",
                             alu_op_name(op)));
        accumulator(Role::on_true);
        break;
      case Opcode::tensor_reduce:
        tensor_reduce();
        break;
      case Opcode::tensor_copy:
        same_shape(Role::dst, Role::src);
        break;
      case Opcode::select:
        same_shape(Role::dst, Role::predicate);
        same_shape(Role::dst, Role::on_true);
        // on_false is dst's shape, or one value per partition.
        if (const AccessPattern* f = opt(Role::on_false)) {
          if (f->free_elems() == get(Role::dst).free_elems())
            same_shape(Role::dst, Role::on_false);
          else
            per_partition_scalar(Role::on_false, Role::on_true);
        }
        accumulator(Role::on_true);
        break;
      case Opcode::copy_predicated:
        same_shape(Role::dst, Role::src);
        same_shape(Role::dst, Role::predicate);
        break;
      case Opcode::bn_stats:
        bn(6, t_.bn_stats_fmax);
        break;
      case Opcode::bn_aggr:
        bn(2, 0);
        break;
      case Opcode::tensor_tensor_scan:
        same_shape(Role::dst, Role::in0);
        same_shape(Role::dst, Role::in1);
        per_partition_scalar(Role::initial, Role::in0);
        break;
      case Opcode::iota:
      case Opcode::affine_select:
        patterned();
        break;
      case Opcode::partition_reduce:
        reduce_op(in_.alu0, "op");
        if (get(Role::dst).num_partitions != 1) fail(Role::dst, "must have one partition");
        if (get(Role::dst).free_elems() != get(Role::src).free_elems())
          fail(Role::dst, "free size differs from src");
        break;
      case Opcode::partition_shuffle:
        shuffle();
        break;
      case Opcode::local_gather:
        local_gather();
        break;
      case Opcode::dma_copy:
        dma();
        break;
      case Opcode::all_reduce:
        reduce_op(in_.alu0, "op");
        if (get(Role::dst).total_elems() != get(Role::src).total_elems())
          fail(Role::dst, "element count differs from src");
        break;
      case Opcode::reduce_scatter:
        reduce_op(in_.alu0, "op");
        break;
      case Opcode::rng:
      case Opcode::rand_set_state:
        random();
        break;
      case Opcode::max8:
      case Opcode::find_index8:
      case Opcode::match_replace8:
        top8();
        break;
      default:
        break;
    }
  }

  void matmul() const {
    space_is(Role::dst, MemSpace::PSUM);
    space_is(Role::stationary, MemSpace::SBUF);
    space_is(Role::moving, MemSpace::SBUF);
    const AccessPattern& st = get(Role::stationary);
    const AccessPattern& mv = get(Role::moving);
    const AccessPattern& dst = get(Role::dst);
    if (st.num_partitions != mv.num_partitions || st.start_partition != mv.start_partition)
      fail(Role::moving, fmt::format("contraction partitions {}+{} differ from stationary's {}+{}",
                                     mv.start_partition, mv.num_partitions, st.start_partition,
                                     st.num_partitions));
    // NeuronCore-v2 splits the PE array in halves, v3+ also in quarters (§4.1 [N8, N9]).
    const int tile = t_.core_version >= 3 ? 32 : 64;
    for (int i : {0, 1})
      if (in_.ints[i] < 0 || in_.ints[i] % tile != 0 || in_.ints[i] >= 128)
        fail(fmt::format("tile position {}={} must be a multiple of {} below 128 on {}",
                         i ? "col" : "row", in_.ints[i], tile, t_.name));
    if (in_.ints[0] + st.num_partitions > 128)
      fail(fmt::format("row={} leaves {} PE rows, contraction needs {}", in_.ints[0],
                       128 - in_.ints[0], st.num_partitions));
    if (in_.has_flag(kTransposeMode)) {
      if (in_.has_flag(kAccumulate)) fail("transpose mode cannot accumulate");
      psum_bank_rule(dst);
      if (dst.num_partitions != st.free_elems() || dst.free_elems() != st.num_partitions)
        fail(Role::dst, "transpose mode writes stationary[K, M] as dst[M, K]");
      // Bit exact in stationary's dtype, or widened exactly to FP32 (the PSUM tiles NKI's
      // kernels give it).
      if (dst.dtype != st.dtype && dst.dtype != DType::fp32)
        fail(Role::dst, "transpose mode writes stationary's dtype or float32");
      if (mv.free_elems() != mv.num_partitions)
        fail(Role::moving, "transpose mode's moving is the [K, K] identity");
      return;
    }
    if (in_.has_flag(kDoubleRow)) double_row_rules(st, mv);
    const auto [k, m, n] = matmul_dims(in_);
    if (m > t_.pe_stationary_fmax)
      fail(Role::stationary, fmt::format("free size {} exceeds {}", m, t_.pe_stationary_fmax));
    if (n > t_.pe_moving_fmax)
      fail(Role::moving, fmt::format("free size {} exceeds {}", n, t_.pe_moving_fmax));
    if (in_.ints[1] + m > 128)
      fail(fmt::format("col={} leaves {} PE columns, stationary needs {}", in_.ints[1],
                       128 - in_.ints[1], m));
    if (dst.num_partitions != m || dst.free_elems() != n)
      fail(Role::dst, fmt::format("shape [{}, {}] is not [stationary free {}, moving free {}]",
                                  dst.num_partitions, dst.free_elems(), m, n));
    if (dst.dtype != DType::fp32 && !(t_.core_version >= 4 && dst.dtype == DType::bf16))
      fail(Role::dst, fmt::format("PSUM accumulates in float32, not {}", dtype_name(dst.dtype)));
    psum_bank_rule(dst);
  }

  // FP8 double performance mode (nc_matmul's perf_mode=double_row): NeuronCore-v3 and newer,
  // FP8 inputs, every partition holding two contraction rows, no column tiling.
  void double_row_rules(const AccessPattern& st, const AccessPattern& mv) const {
    if (t_.core_version < 3)
      fail(fmt::format("double_row needs NeuronCore-v3 or newer; {} has no performance mode",
                       t_.name));
    if (in_.has_flag(kTransposeMode)) fail("double_row cannot transpose");
    for (const auto& [role, ap] :
         {std::pair{Role::stationary, &st}, std::pair{Role::moving, &mv}}) {
      if (ap->dtype != DType::fp8_e4m3 && ap->dtype != DType::fp8_e5m2)
        fail(role, fmt::format("double_row multiplies FP8, not {}", dtype_name(ap->dtype)));
      if (ap->free_elems() % 2 != 0)
        fail(role,
             fmt::format("double_row needs [K, 2, *]: {} free elements is odd", ap->free_elems()));
    }
    if (in_.ints[1] != 0) fail("double_row cannot be combined with column tiling (col must be 0)");
  }

  // One matmul output must stay inside one 2 KiB PSUM bank (NeuronCore-v4 may span banks).
  void psum_bank_rule(const AccessPattern& dst) const {
    if (t_.core_version >= 4) return;
    const Extent e = free_extent(dst);
    const int64_t size = static_cast<int64_t>(dtype_size(dst.dtype));
    const int64_t first = static_cast<int64_t>(dst.offset) + e.lo * size;
    const int64_t last = static_cast<int64_t>(dst.offset) + (e.hi + 1) * size - 1;
    if (first / t_.psum_bank_bytes != last / t_.psum_bank_bytes)
      fail(Role::dst, fmt::format("bytes {}..{} span two PSUM banks of {} bytes", first, last,
                                  t_.psum_bank_bytes));
  }

  void transpose() const {
    const AccessPattern& src = get(Role::src);
    const AccessPattern& dst = get(Role::dst);
    if (dst.num_partitions != src.free_elems() || dst.free_elems() != src.num_partitions)
      fail(Role::dst,
           fmt::format("shape [{}, {}] is not the transpose of src [{}, {}]", dst.num_partitions,
                       dst.free_elems(), src.num_partitions, src.free_elems()));
    if (dst.dtype != src.dtype) fail(Role::dst, "a transpose keeps the dtype");
    if (in_.engine == Engine::DVE && (src.num_partitions > 32 || src.free_elems() > 32))
      fail(Role::src, "DVE transposes blocks of at most 32x32");
    if (in_.engine == Engine::PE) {
      space_is(Role::src, MemSpace::SBUF);
      space_is(Role::dst, MemSpace::PSUM);
      psum_bank_rule(dst);
    }
  }

  void tensor_reduce() const {
    reduce_op(in_.alu0, "op");
    const AccessPattern& src = get(Role::src);
    const uint8_t all = static_cast<uint8_t>((1u << src.num_dims) - 1);
    if (in_.axes == 0 || (in_.axes & ~all) != 0)
      fail(
          fmt::format("axes={:#x} must select some of src's {} free dims", in_.axes, src.num_dims));
    uint64_t kept = 1;
    for (int i = 0; i < src.num_dims; ++i)
      if (!(in_.axes & (1u << i))) kept *= src.dims[i].size;
    const AccessPattern& dst = get(Role::dst);
    if (dst.num_partitions != src.num_partitions || dst.free_elems() != kept)
      fail(Role::dst, fmt::format("shape [{}, {}] should be [{}, {}]", dst.num_partitions,
                                  dst.free_elems(), src.num_partitions, kept));
  }

  void bn(uint64_t dst_free, uint32_t src_max) const {
    const AccessPattern& src = get(Role::src);
    const AccessPattern& dst = get(Role::dst);
    if (dst.num_partitions != src.num_partitions)
      fail(Role::dst, "partition count differs from src");
    if (dst.free_elems() != dst_free)
      fail(Role::dst,
           fmt::format("must hold {} values per partition, has {}", dst_free, dst.free_elems()));
    if (src_max && src.free_elems() > src_max)
      fail(Role::src, fmt::format("bn_stats reads at most {} elements per partition, got {}",
                                  src_max, src.free_elems()));
    if (!src_max && src.free_elems() % 6 != 0)
      fail(Role::src, "must hold whole bn_stats records (a multiple of 6 values)");
    if (!is_float(dst.dtype)) fail(Role::dst, "statistics need a float dtype");
  }

  // The public NKI constraints of nki.isa.rng and nki.isa.rand_set_state.
  void random() const {
    const bool draw = in_.opcode == Opcode::rng;
    const Role r = draw ? Role::dst : Role::src;
    const AccessPattern& ap = get(r);
    if (draw && !is_int(ap.dtype))
      fail(r, fmt::format("must have an integer dtype, not {}", dtype_name(ap.dtype)));
    if (!draw && ap.dtype != DType::uint32)
      fail(r, fmt::format("must be uint32, not {}", dtype_name(ap.dtype)));
    if (!draw && ap.free_elems() != 6)
      fail(r, fmt::format("holds {} words per lane; a XORWOW state is 6", ap.free_elems()));
    if (in_.engine == Engine::POOL && ap.space != MemSpace::SBUF)
      fail(r, "GpSimd reaches SBUF only");
    if (in_.engine == Engine::POOL && t_.core_version < 3)
      fail(fmt::format("GpSimd has no random number generator on {} (NeuronCore-v{})", t_.name,
                       t_.core_version));
    if (!draw && t_.core_version < 3)
      fail(fmt::format("rand_set_state needs NeuronCore-v3 or later; {} is v{}", t_.name,
                       t_.core_version));
  }

  // The public NKI constraints of max8, nc_find_index8 and nc_match_replace8: 8 to 16,384
  // data elements per partition, 8 values (or indices) per partition out.
  void top8() const {
    const AccessPattern& src = get(Role::src);
    const uint64_t n = src.free_elems();
    if (n < 8 || n > kTop8MaxElems)
      fail(Role::src, fmt::format("holds {} elements per partition; the top-8 instructions take 8 "
                                  "to {}",
                                  n, kTop8MaxElems));
    const auto eight = [&](Role r) {
      const AccessPattern* ap = opt(r);
      if (!ap) return;
      if (ap->num_partitions != src.num_partitions || ap->free_elems() != 8)
        fail(r, fmt::format("must be [{}, 8], got [{}, {}]", src.num_partitions, ap->num_partitions,
                            ap->free_elems()));
    };
    const auto indices = [&](Role r) {
      const AccessPattern* ap = opt(r);
      if (ap && ap->dtype != DType::uint16 && ap->dtype != DType::uint32)
        fail(r, fmt::format("indices are uint16 or uint32, not {}", dtype_name(ap->dtype)));
    };
    switch (in_.opcode) {
      case Opcode::max8:
        eight(Role::dst);
        break;
      case Opcode::find_index8:
        eight(Role::dst);
        eight(Role::vals);
        indices(Role::dst);
        break;
      default:  // match_replace8
        same_shape(Role::src, Role::dst);
        eight(Role::vals);
        eight(Role::dst_index);
        indices(Role::dst_index);
        break;
    }
  }

  void patterned() const {
    const AccessPattern& dst = get(Role::dst);
    if (get(Role::pattern).free_elems() != dst.free_elems())
      fail(Role::pattern, fmt::format("covers {} elements, dst has {} per partition",
                                      get(Role::pattern).free_elems(), dst.free_elems()));
    if (in_.opcode == Opcode::affine_select) {
      same_shape(Role::dst, Role::on_true);
      if (!is_compare_op(in_.alu0))
        fail(fmt::format("cmp={} is not a comparison", alu_op_name(in_.alu0)));
    }
  }

  void shuffle() const {
    const AccessPattern& src = get(Role::src);
    const AccessPattern& dst = get(Role::dst);
    if (dst.num_partitions > 32 || src.num_partitions > 32)
      fail("shuffles within at most 32 partitions");
    if (dst.free_elems() != src.free_elems()) fail(Role::dst, "free size differs from src");
    for (uint32_t i = 0; i < dst.num_partitions; ++i)
      if (in_.mask[i] >= src.num_partitions)
        fail(fmt::format("mask[{}]={} is not a partition of src (0..{})", i, in_.mask[i],
                         src.num_partitions - 1));
  }

  void local_gather() const {
    const AccessPattern& idx = get(Role::index);
    if (!is_int(idx.dtype))
      fail(Role::index, fmt::format("must be an integer dtype, not {}", dtype_name(idx.dtype)));
    if (in_.ints[0] <= 0 || in_.ints[1] <= 0)
      fail("elems_per_index and num_indices must be positive");
    if (get(Role::src).num_partitions != get(Role::dst).num_partitions ||
        idx.num_partitions != get(Role::dst).num_partitions)
      fail(Role::src, "dst, src and index must cover the same partitions");
    if (idx.free_elems() < static_cast<uint64_t>(in_.ints[1]))
      fail(Role::index,
           fmt::format("holds {} indices, num_indices is {}", idx.free_elems(), in_.ints[1]));
    if (get(Role::dst).free_elems() != static_cast<uint64_t>(in_.ints[0]) * in_.ints[1])
      fail(Role::dst, "free size must be elems_per_index * num_indices");
  }

  void dma() const {
    if (in_.ints[0] < 0 || in_.ints[0] > 15) fail(fmt::format("queue={} (0-15)", in_.ints[0]));
    const AccessPattern& src = get(Role::src);
    const AccessPattern& dst = get(Role::dst);
    if (in_.has_flag(kScatter) && !opt(Role::index)) fail("scatter needs an index operand");
    if (in_.has_flag(kHwDge)) {
      if (t_.core_version < 3)
        fail(
            fmt::format("the hardware DGE (hwdge) needs NeuronCore-v3 or newer; {} is "
                        "NeuronCore-v{}",
                        t_.name, t_.core_version));
      if (in_.engine != Engine::SP && in_.engine != Engine::ACT)
        fail("the hardware DGE (hwdge) is triggered by sp or act");
      if (opt(Role::index))
        fail("the hardware DGE (hwdge) does not gather or scatter (the software DGE on pool does)");
    }
    if (in_.has_flag(kDmaTranspose) && opt(Role::index))
      fail("a DMA transpose takes no index (gather-transposes are not supported)");
    if (in_.has_flag(kAddToDst)) {
      if (dst.dtype != DType::fp32 && dst.dtype != DType::bf16)
        fail(Role::dst, "the DMA adds into FP32 or BF16 only");
      if (dst.space == MemSpace::PSUM) fail(Role::dst, "the DMA adds into HBM or SBUF, not PSUM");
      if (in_.has_flag(kDmaTranspose)) fail("a DMA transpose does not add");
    }
    if (const AccessPattern* idx = opt(Role::index)) {
      if (!is_int(idx->dtype)) fail(Role::index, "must be an integer dtype");
      if (in_.has_flag(kScatter)) {
        if (src.total_elems() != idx->total_elems() * dst.free_elems())
          fail(Role::src, fmt::format("holds {} elements; {} indices x {} per dst row = {}",
                                      src.total_elems(), idx->total_elems(), dst.free_elems(),
                                      idx->total_elems() * dst.free_elems()));
        return;
      }
      if (dst.total_elems() != idx->total_elems() * src.free_elems())
        fail(Role::dst, fmt::format("holds {} elements; {} indices x {} per row = {}",
                                    dst.total_elems(), idx->total_elems(), src.free_elems(),
                                    idx->total_elems() * src.free_elems()));
      return;
    }
    if (dst.total_elems() != src.total_elems())
      fail(Role::dst,
           fmt::format("holds {} elements, src {}", dst.total_elems(), src.total_elems()));
    if (in_.has_flag(kDmaTranspose)) {
      if (dst.space != MemSpace::SBUF) fail(Role::dst, "a DMA transpose writes SBUF");
      if (src.space == MemSpace::PSUM) fail(Role::src, "a DMA transpose reads HBM or SBUF");
      if (dtype_size(src.dtype) != 2 || src.dtype != dst.dtype)
        fail(Role::src, "a DMA transpose moves 2-byte elements of one dtype");
      // src's outermost free dim (in the order it is walked) becomes dst's partitions.
      if (dst.num_partitions != src.dims[0].size)
        fail(Role::dst, fmt::format("has {} partitions; a DMA transpose makes src's outermost "
                                    "free dim ({} elements) the partitions",
                                    dst.num_partitions, src.dims[0].size));
    }
  }

  const Instruction& in_;
  const Target& t_;
  const Where& where_;
  const OpcodeInfo& info_;
};

// HBM operands must name declared tensors and stay inside them.
void check_hbm(const Program& p, const Instruction& in, const Where& where) {
  for (const Operand& op : in.operands) {
    const AccessPattern& ap = op.ap;
    if (ap.space != MemSpace::HBM) continue;
    const TensorDecl* t = p.find_tensor(ap.tensor);
    auto fail = [&](const std::string& rule) {
      throw IsaError(fmt::format("{}: {}: operand {}: {}", where.str(), opcode_info(in.opcode).name,
                                 role_name(op.role), rule));
    };
    if (!t) fail(fmt::format("names tensor id {}, which is not declared", ap.tensor));
    const Extent e = free_extent(ap);
    const int64_t rows = static_cast<int64_t>(ap.partition_stride) * (ap.num_partitions - 1);
    const int64_t lo = std::min<int64_t>(0, rows) + e.lo;
    const int64_t hi = std::max<int64_t>(0, rows) + e.hi + 1;
    const int64_t size = static_cast<int64_t>(dtype_size(ap.dtype));
    const int64_t first = static_cast<int64_t>(ap.offset) + lo * size;
    const int64_t last = static_cast<int64_t>(ap.offset) + hi * size;
    if (first < 0 || last > static_cast<int64_t>(t->size_bytes()))
      fail(fmt::format("bytes {}..{} fall outside tensor '{}' ({} bytes)", first, last, t->name,
                       t->size_bytes()));
  }
}

}  // namespace

std::string Where::str() const {
  if (!indexed_) return std::string(text_);
  return fmt::format("{}{}{}[{}]", text_, text_.empty() ? "" : " ", engine_name(engine_), index_);
}

void validate(const Instruction& inst, const Target& target, const Where& where) {
  Checker(inst, target, where).run();
}

void validate_sync(const Instruction& inst, const Where& where) {
  check_sync(inst, [&](const std::string& rule) -> void {
    throw IsaError(fmt::format("{}: {}: {}", where.str(), opcode_info(inst.opcode).name, rule));
  });
}

void validate(const Instruction& inst, const Program& program, const Where& where) {
  validate(inst, target_by_name(program.target), where);
  check_hbm(program, inst, where);
}

void validate(const TensorDecl& t) {
  if (t.name.empty() || t.name == "SB")
    throw IsaError(fmt::format("tensor name '{}' is reserved (SB is the state buffer)", t.name));
  // Shapes must describe at most 2^48 bytes: no overflow in sizes, and far beyond any HBM.
  uint64_t bytes = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d <= 0 || static_cast<uint64_t>(d) > (uint64_t{1} << 48) / bytes)
      throw IsaError(fmt::format("tensor '{}': shape dimension {} is out of range", t.name, d));
    bytes *= static_cast<uint64_t>(d);
  }
  if (t.kind == TensorKind::constant && t.data.size() != t.size_bytes())
    throw IsaError(fmt::format("constant '{}' holds {} bytes, its shape needs {}", t.name,
                               t.data.size(), t.size_bytes()));
}

void validate(const Program& program) {
  const Target& target = target_by_name(program.target);
  if (program.lnc != 1 && program.lnc != 2)  // the degrees the Neuron SDK supports
    throw IsaError(
        fmt::format("the program is compiled for {} physical cores (LNC); 1 or 2 are "
                    "supported",
                    program.lnc));
  std::set<std::string> names;
  std::set<uint16_t> ids;
  for (const TensorDecl& t : program.tensors) {
    if (t.var_id == 0) throw IsaError(fmt::format("tensor '{}': var id 0 is reserved", t.name));
    validate(t);
    if (!names.insert(t.name).second || !ids.insert(t.var_id).second)
      throw IsaError(fmt::format("tensor '{}' (id {}) is declared twice", t.name, t.var_id));
  }
  for (int e = 0; e < kNumEngines; ++e) {
    const auto& stream = program.streams[e];
    for (size_t i = 0; i < stream.size(); ++i) {
      const Where where("", static_cast<Engine>(e), i);
      if (stream[i].engine != static_cast<Engine>(e))
        throw IsaError(fmt::format("{}: instruction says engine {}", where.str(),
                                   engine_name(stream[i].engine)));
      validate(stream[i], target, where);
      check_hbm(program, stream[i], where);
    }
  }
}

}  // namespace neuronsim::isa
