#include "neuronsim/isa/instruction.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace neuronsim::isa {
namespace {

template <typename E, size_t N>
std::optional<E> find_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

template <size_t N>
std::string_view name_at(const std::array<std::string_view, N>& names, size_t i) {
  return i < N ? names[i] : std::string_view("<invalid>");
}

constexpr std::array<std::string_view, kNumEngines> kEngineNames = {"pe", "act", "dve", "pool",
                                                                    "sp"};
constexpr std::array<std::string_view, kNumEngines> kEngineNeffNames = {"PE", "Activation", "DVE",
                                                                        "Pool", "SP"};
constexpr std::array<std::string_view, 4> kSpaceNames = {"sbuf", "psum", "hbm", "pattern"};
constexpr std::array<std::string_view, kNumRoles> kRoleNames = {
    "dst",       "src",        "in0",      "in1",      "stationary", "moving",  "bias",
    "scale",     "reduce_dst", "operand0", "operand1", "pattern",    "on_true", "on_false",
    "predicate", "index",      "initial",  "vals",     "dst_index"};
constexpr std::array<std::string_view, kNumAluOps> kAluNames = {"bypass",
                                                                "add",
                                                                "subtract",
                                                                "multiply",
                                                                "divide",
                                                                "max",
                                                                "min",
                                                                "pow",
                                                                "mod",
                                                                "abs_max",
                                                                "is_equal",
                                                                "not_equal",
                                                                "is_gt",
                                                                "is_ge",
                                                                "is_lt",
                                                                "is_le",
                                                                "logical_and",
                                                                "logical_or",
                                                                "logical_xor",
                                                                "bitwise_and",
                                                                "bitwise_or",
                                                                "bitwise_xor",
                                                                "left_shift",
                                                                "arith_shift_right",
                                                                "logical_shift_right"};
constexpr std::array<std::string_view, kNumActFuncs> kActNames = {
    "identity", "exp",      "log",  "tanh",   "sigmoid",    "relu",   "gelu", "gelu_tanh",
    "silu",     "softplus", "sqrt", "rsqrt",  "reciprocal", "square", "sin",  "cos",
    "erf",      "abs",      "sign", "negate", "arctan",     "mish"};

}  // namespace

std::string_view engine_name(Engine e) {
  return name_at(kEngineNames, static_cast<size_t>(e));
}
std::string_view engine_neff_name(Engine e) {
  return name_at(kEngineNeffNames, static_cast<size_t>(e));
}
std::optional<Engine> parse_engine(std::string_view name) {
  if (auto e = find_name<Engine>(kEngineNames, name)) return e;
  return find_name<Engine>(kEngineNeffNames, name);
}
std::string_view mem_space_name(MemSpace s) {
  return name_at(kSpaceNames, static_cast<size_t>(s));
}
MatmulDims matmul_dims(const Instruction& in) {
  const AccessPattern* st = in.operand(Role::stationary);
  const AccessPattern* mv = in.operand(Role::moving);
  if (!st || !mv) return {};
  const uint64_t rows = in.has_flag(kDoubleRow) ? 2 : 1;
  return {st->num_partitions * rows, st->free_elems() / rows, mv->free_elems() / rows};
}

std::string_view role_name(Role r) {
  return name_at(kRoleNames, static_cast<size_t>(r));
}
std::string_view alu_op_name(AluOp op) {
  return name_at(kAluNames, static_cast<size_t>(op));
}
std::optional<AluOp> parse_alu_op(std::string_view name) {
  return find_name<AluOp>(kAluNames, name);
}
std::string_view act_func_name(ActFunc f) {
  return name_at(kActNames, static_cast<size_t>(f));
}
std::optional<ActFunc> parse_act_func(std::string_view name) {
  return find_name<ActFunc>(kActNames, name);
}

float apply_act_func(ActFunc f, float x) {
  switch (f) {
    case ActFunc::identity:
      return x;
    case ActFunc::exp:
      return std::exp(x);
    case ActFunc::log:
      return std::log(x);
    case ActFunc::tanh:
      return std::tanh(x);
    case ActFunc::sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case ActFunc::relu:
      return x > 0.0f ? x : 0.0f;
    case ActFunc::gelu:
      return 0.5f * x * (1.0f + std::erf(x * std::numbers::sqrt2_v<float> / 2));
    case ActFunc::gelu_tanh: {
      // The tanh approximation of GELU used by GPT-2 style models.
      constexpr float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case ActFunc::silu:
      return x / (1.0f + std::exp(-x));
    case ActFunc::softplus:
      return x > 20.0f ? x : std::log1p(std::exp(x));
    case ActFunc::sqrt:
      return std::sqrt(x);
    case ActFunc::rsqrt:
      return 1.0f / std::sqrt(x);
    case ActFunc::reciprocal:
      return 1.0f / x;
    case ActFunc::square:
      return x * x;
    case ActFunc::sin:
      return std::sin(x);
    case ActFunc::cos:
      return std::cos(x);
    case ActFunc::erf:
      return std::erf(x);
    case ActFunc::abs:
      return std::fabs(x);
    case ActFunc::sign:
      return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
    case ActFunc::negate:
      return -x;
    case ActFunc::arctan:
      return std::atan(x);
    case ActFunc::mish:
      return x * std::tanh(x > 20.0f ? x : std::log1p(std::exp(x)));
  }
  return x;
}

uint64_t AccessPattern::free_elems() const {
  uint64_t n = 1;
  for (const Dim& d : free_dims()) n *= d.size;
  return n;
}

uint64_t AccessPattern::total_elems() const {
  return free_elems() * num_partitions;
}

bool AccessPattern::operator==(const AccessPattern& o) const {
  return space == o.space && dtype == o.dtype && tensor == o.tensor &&
         start_partition == o.start_partition && num_partitions == o.num_partitions &&
         partition_stride == o.partition_stride && offset == o.offset && num_dims == o.num_dims &&
         partition_broadcast == o.partition_broadcast &&
         std::equal(dims.begin(), dims.begin() + std::min<int>(num_dims, kMaxDims), o.dims.begin());
}

const AccessPattern* Instruction::operand(Role r) const {
  for (const Operand& o : operands)
    if (o.role == r) return &o.ap;
  return nullptr;
}

AccessPattern* Instruction::operand(Role r) {
  for (Operand& o : operands)
    if (o.role == r) return &o.ap;
  return nullptr;
}

namespace {

using enum Engine;
using R = Role;
using P = ParamField;

std::vector<OpcodeInfo> make_opcode_table() {
  const std::vector<Engine> elementwise = {DVE, POOL, ACT};
  const std::vector<Engine> dma_triggers = {SP, ACT, POOL};
  const std::vector<Engine> any = {PE, ACT, DVE, POOL, SP};
  const std::vector<Engine> collective = {SP, POOL};
  const RoleInfo dst{R::dst, true, "destination"};
  const RoleInfo src{R::src, true, "source"};
  const ParamInfo group{"group", P::int0, 0, "rank group id (declared by the runtime)"};
  const ParamInfo reduce_op{"op", P::alu0, 0, "reduction: add, multiply, max, min"};
  // VectorE's accumulator, shared by the instructions that also reduce their results.
  const RoleInfo reduce_dst{R::reduce_dst, false, "[P, 1]: the accumulator after this instruction"};
  const RoleInfo reduce_init{R::initial, false,
                             "[P, 1]: loaded into the accumulator (load_reduce)"};
  const ParamInfo reduce{"reduce", P::alu2, 0,
                         "the accumulator's reduction: add, multiply, max, min"};
  const ParamInfo reduce_cmd{
      "reduce_cmd", P::int3, 0,
      "accumulator: 0 idle, 1 reset, 2 reduce, 3 reset_reduce, 4 load_reduce"};
  return {
      {Opcode::matmul,
       "matmul",
       {PE},
       {dst,
        {R::stationary, true, "SBUF [K partitions, M] weights"},
        {R::moving, true, "SBUF [K partitions, N] activations"}},
       {{"accumulate", P::flag, kAccumulate, "add into PSUM instead of overwriting"},
        {"transpose", P::flag, kTransposeMode,
         "bit-exact transpose of stationary (moving is the identity)"},
        {"double_row", P::flag, kDoubleRow,
         "FP8 double performance mode (v3+): stationary [K, 2, M] and moving [K, 2, N] contract "
         "over K partitions x 2"},
        {"stationary_onezero", P::flag, kStationaryOneZero,
         "stationary holds only 0 and 1 (halves the FP32 cost)"},
        {"moving_onezero", P::flag, kMovingOneZero,
         "moving holds only 0 and 1 (halves the FP32 cost)"},
        {"row", P::int0, 0, "tile position: first PE row (multiple of 32)"},
        {"col", P::int1, 0, "tile position: first PE column (multiple of 32)"}},
       "dst[M, N] (+)= stationary[K, M]^T @ moving[K, N], FP32 accumulation in PSUM"},
      {Opcode::transpose,
       "transpose",
       {PE, DVE},
       {dst, src},
       {},
       "dst[F, P] = src[P, F], bit exact (DVE: at most 32x32)"},
      {Opcode::activation,
       "activation",
       {ACT},
       {dst,
        src,
        {R::bias, false, "per-partition [P, 1] bias"},
        {R::scale, false, "per-partition [P, 1] scale (else scale=imm)"},
        {R::reduce_dst, false, "per-partition [P, 1] reduction of the results"}},
       {{"func", P::func, 0, "activation function"},
        {"scale", P::imm0, 0, "immediate scale when no scale operand", 1.0f},
        {"reduce", P::alu0, 0, "reduction into reduce_dst: add, max, min"}},
       "dst = func(src * scale + bias); reduce_dst = reduce(dst) along the free axes"},
      {Opcode::tensor_tensor,
       "tensor_tensor",
       {DVE, POOL},
       {dst, {R::in0, true, "first input"}, {R::in1, true, "second input"}},
       {{"op", P::alu0, 0, "ALU operation"}},
       "dst = in0 <op> in1"},
      {Opcode::tensor_scalar,
       "tensor_scalar",
       elementwise,
       {dst,
        src,
        {R::operand0, false, "per-partition [P, 1] scalar for op0 (else imm0)"},
        {R::operand1, false, "per-partition [P, 1] scalar for op1 (else imm1)"},
        reduce_dst,
        reduce_init},
       {{"op0", P::alu0, 0, "first operation"},
        {"imm0", P::imm0, 0, "immediate for op0"},
        {"reverse0", P::flag, kReverse0, "compute operand0 <op0> src"},
        {"op1", P::alu1, 0, "second operation (bypass: none)"},
        {"imm1", P::imm1, 0, "immediate for op1"},
        {"reverse1", P::flag, kReverse1, "compute operand1 <op1> x"},
        reduce,
        reduce_cmd},
       "dst = (src <op0> operand0) <op1> operand1; VectorE may also reduce dst into its "
       "accumulator"},
      {Opcode::tensor_reduce,
       "tensor_reduce",
       {DVE, POOL},
       {dst, src},
       {{"op", P::alu0, 0, "add, multiply, max, min"},
        {"axes", P::axes, 0, "bit mask of the free dims of src to reduce"},
        {"negate", P::flag, kNegate, "negate the result"},
        {"keepdims", P::flag, kKeepDims, "dst keeps reduced dims with size 1"}},
       "dst = reduce_op over the selected free axes of src"},
      {Opcode::tensor_copy,
       "tensor_copy",
       elementwise,
       {dst, src},
       {},
       "dst = src, converted to dst's dtype"},
      {Opcode::memset,
       "memset",
       {DVE, POOL, ACT},
       {dst},
       {{"value", P::imm0, 0, "value written"}},
       "dst = value"},
      {Opcode::select,
       "select",
       {DVE, POOL},
       {dst,
        {R::predicate, true, "non-zero selects on_true"},
        {R::on_true, true, "values where true"},
        {R::on_false, false, "values where false: dst's shape, or [P, 1] (else on_false=imm)"},
        reduce_dst,
        reduce_init},
       {{"on_false", P::imm0, 0, "value where false when there is no on_false operand"},
        {"reverse", P::flag, kReversePred, "select on_true where the predicate is zero"},
        reduce,
        reduce_cmd},
       "dst = predicate != 0 ? on_true : on_false; VectorE may also reduce dst into its "
       "accumulator"},
      {Opcode::copy_predicated,
       "copy_predicated",
       {DVE, POOL},
       {dst, src, {R::predicate, true, "copy where non-zero"}},
       {{"reverse", P::flag, kReversePred, "copy where the predicate is zero"}},
       "dst = src where predicate != 0; other elements of dst unchanged"},
      {Opcode::bn_stats,
       "bn_stats",
       {DVE},
       {dst, src},
       {},
       "dst[P, 6] = (count, mean, M2) of the first and second halves of src's free elements"},
      {Opcode::bn_aggr,
       "bn_aggr",
       {DVE},
       {dst, src},
       {},
       "dst[P, 2] = (mean, variance) combining the bn_stats groups in src[P, 6*k]"},
      {Opcode::tensor_tensor_scan,
       "tensor_tensor_scan",
       {DVE},
       {dst,
        {R::in0, true, "first input"},
        {R::in1, true, "second input"},
        {R::initial, false, "per-partition [P, 1] initial state (else initial=imm)"}},
       {{"op0", P::alu0, 0, "first operation"},
        {"op1", P::alu1, 0, "second operation"},
        {"initial", P::imm0, 0, "immediate initial state"},
        {"reverse0", P::flag, kReverse0, "compute s <op0> in0[j]"},
        {"reverse1", P::flag, kReverse1, "compute in1[j] <op1> (...)"}},
       "s = initial; for each free element j: s = (in0[j] <op0> s) <op1> in1[j]; dst[j] = s"},
      {Opcode::iota,
       "iota",
       {POOL},
       {dst, {R::pattern, true, "index pattern [[step, size], ...]"}},
       {{"offset", P::int0, 0, "value at index 0"},
        {"channel_multiplier", P::int1, 0, "added per partition"}},
       "dst[p, i...] = offset + channel_multiplier * p + sum(step_k * i_k)"},
      {Opcode::affine_select,
       "affine_select",
       {POOL},
       {dst,
        {R::on_true, true, "values where the condition holds"},
        {R::pattern, true, "index pattern [[step, size], ...]"}},
       {{"offset", P::int0, 0, "constant term"},
        {"channel_multiplier", P::int1, 0, "partition coefficient"},
        {"cmp", P::alu0, 0, "comparison with 0: is_gt, is_ge, is_lt, is_le, is_equal, not_equal"},
        {"on_false", P::imm0, 0, "value where the condition fails"}},
       "dst = (offset + channel_multiplier*p + sum(step_k*i_k)) <cmp> 0 ? on_true : on_false"},
      {Opcode::partition_reduce,
       "partition_reduce",
       {POOL},
       {dst, src},
       {{"op", P::alu0, 0, "add, multiply, max, min"}},
       "dst[1, F] = reduce_op over the partitions of src[P, F]"},
      {Opcode::partition_shuffle,
       "partition_shuffle",
       {POOL},
       {dst, src},
       {{"mask", P::mask, 0, "dst partition i takes src partition mask[i] (up to 32 entries)"}},
       "dst[i, :] = src[mask[i], :] for the partitions of dst"},
      {Opcode::local_gather,
       "local_gather",
       {POOL},
       {dst, src, {R::index, true, "per-partition element-group indices (integer dtype)"}},
       {{"elems_per_index", P::int0, 0, "elements gathered per index"},
        {"num_indices", P::int1, 0, "valid indices per partition"}},
       "dst[p, j*E:(j+1)*E] = src[p, index[p, j]*E:(index[p, j]+1)*E] for j < num_indices"},
      {Opcode::dma_copy,
       "dma_copy",
       dma_triggers,
       {dst, src, {R::index, false, "row indices into src (indirect gather), or dst (scatter)"}},
       {{"queue", P::int0, 0, "DMA queue of the triggering engine (0-15)"},
        {"scatter", P::flag, kScatter, "index names rows of dst, not of src"},
        {"transpose", P::flag, kDmaTranspose,
         "src's rows are walked innermost: dst [F, R] = src [R, F] transposed"},
        {"add", P::flag, kAddToDst,
         "dst = dst + src, read, added in FP32 and written back by the DMA (FP32 or BF16 dst)"},
        {"hwdge", P::flag, kHwDge,
         "the descriptors are made at run time by the triggering engine's hardware DGE "
         "(NeuronCore-v3+, sp or act), not read pre-built from HBM"}},
       "dst = src (cast between dtypes via FP32); with index, src row r = index[r] "
       "(scatter: dst row index[r] = src's r-th row, in index order, so that with add a "
       "repeated index sums its rows); with transpose, src is read column by column"},
      {Opcode::sem_wait, "sem_wait", any, {}, {}, "waits on its semaphore condition"},
      {Opcode::sem_signal, "sem_signal", any, {}, {}, "adds to a semaphore"},
      {Opcode::sem_set, "sem_set", any, {}, {}, "sets a semaphore"},
      {Opcode::all_reduce,
       "all_reduce",
       collective,
       {dst, src},
       {group, reduce_op},
       "dst = reduce_op over the group's ranks of src"},
      {Opcode::all_gather,
       "all_gather",
       collective,
       {dst, src},
       {group},
       "dst = concatenation of every rank's src, in rank order"},
      {Opcode::reduce_scatter,
       "reduce_scatter",
       collective,
       {dst, src},
       {group, reduce_op},
       "dst = this rank's slice of reduce_op over the group's ranks of src"},
      {Opcode::all_to_all,
       "all_to_all",
       collective,
       {dst, src},
       {group},
       "slice j of src goes to rank j; dst slice i comes from rank i"},
      {Opcode::send,
       "send",
       collective,
       {src},
       {group, {"peer", P::int1, 0, "destination rank"}},
       "sends src to peer"},
      {Opcode::recv,
       "recv",
       collective,
       {dst},
       {group, {"peer", P::int1, 0, "source rank"}},
       "receives dst from peer"},
      {Opcode::rng,
       "rng",
       {DVE, POOL},
       {{R::dst, true, "destination (an integer dtype)"}},
       {},
       "dst = the low bits of one 32-bit draw per element from its lane's generator"},
      {Opcode::rand_set_state,
       "rand_set_state",
       {DVE, POOL},
       {{R::src, true, "uint32 [P, 6]: x0..x4 and d of each lane's XORWOW state"}},
       {},
       "each lane's generator state = its partition of src"},
      {Opcode::max8,
       "max8",
       {DVE},
       {{R::dst, true, "[P, 8]: the 8 largest values of each partition, largest first"},
        {R::src, true, "data, 8 to 16,384 elements per partition"}},
       {},
       "dst[p, :] = the 8 largest elements of src[p, :], in descending order (NaN first)"},
      {Opcode::find_index8,
       "find_index8",
       {DVE},
       {{R::dst, true, "[P, 8] uint16 or uint32 indices"},
        {R::src, true, "data, 8 to 16,384 elements per partition"},
        {R::vals, true, "[P, 8] values to find"}},
       {},
       "dst[p, j] = the position of the first element of src[p, :] equal to vals[p, j]"},
      {Opcode::match_replace8,
       "match_replace8",
       {DVE},
       {{R::dst, true, "src with the matched elements replaced (src's shape)"},
        {R::src, true, "data, 8 to 16,384 elements per partition"},
        {R::vals, true, "[P, 8] values to match, in order"},
        {R::dst_index, false, "[P, 8] uint16 or uint32: the positions of the matches"}},
       {{"imm", P::imm0, 0, "value written over each match"}},
       "for j in 0..7: the first element of src[p, :] still equal to vals[p, j] becomes imm"},
      {Opcode::scalar_tensor_tensor,
       "scalar_tensor_tensor",
       {DVE},
       {dst,
        {R::in0, true, "data"},
        {R::operand0, false, "per-partition [P, 1] scalar for op0 (else imm0)"},
        {R::in1, true, "second tensor, dst's shape"},
        reduce_dst,
        reduce_init},
       {{"op0", P::alu0, 0, "operation with the scalar"},
        {"imm0", P::imm0, 0, "immediate for op0"},
        {"reverse0", P::flag, kReverse0, "compute operand0 <op0> in0"},
        {"op1", P::alu1, 0, "operation with in1"},
        {"reverse1", P::flag, kReverse1, "compute in1 <op1> x"},
        reduce,
        reduce_cmd},
       "dst = (in0 <op0> operand0) <op1> in1; may also reduce dst into the accumulator"},
      {Opcode::range_select,
       "range_select",
       {DVE},
       {dst,
        {R::on_true, true, "values kept where the free index is in range"},
        {R::operand0, true, "[P, 1] fp32 bound compared by cmp0"},
        {R::operand1, true, "[P, 1] fp32 bound compared by cmp1"},
        reduce_dst,
        reduce_init},
       {{"cmp0", P::alu0, 0, "comparison of the index with operand0"},
        {"cmp1", P::alu1, 0, "comparison of the index with operand1"},
        {"range_start", P::int0, 0, "index of the first free element"},
        {"on_false", P::imm0, 0, "value where the index is out of range"},
        reduce,
        reduce_cmd},
       "i = range_start + j; dst[p, j] = (i <cmp0> operand0[p]) and (i <cmp1> operand1[p]) ? "
       "on_true[p, j] : on_false; may also reduce dst into the accumulator"},
  };
}

}  // namespace

std::span<const OpcodeInfo> all_opcodes() {
  static const std::vector<OpcodeInfo> table = make_opcode_table();
  return table;
}

const OpcodeInfo& opcode_info(Opcode op) {
  return all_opcodes()[static_cast<size_t>(op)];
}

std::optional<Opcode> parse_opcode(std::string_view name) {
  for (const OpcodeInfo& info : all_opcodes())
    if (info.name == name) return info.opcode;
  return std::nullopt;
}

}  // namespace neuronsim::isa
