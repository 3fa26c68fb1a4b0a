// The neuronsim instruction set: NKI-level instructions (mirroring the public
// nki.isa semantics), each bound to the engines that execute it, operating on
// access patterns over SBUF, PSUM and HBM. docs/isa.md is the reference.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "neuronsim/isa/dtype.h"

namespace neuronsim::isa {

// Version of the binary encoding and of the instruction semantics. A stream
// carries it in every instruction; readers refuse versions they do not know.
inline constexpr uint8_t kIsaVersion = 1;

// The five sequencers of a NeuronCore, each with its own in-order stream.
enum class Engine : uint8_t { PE = 0, ACT, DVE, POOL, SP };
inline constexpr int kNumEngines = 5;
std::string_view engine_name(Engine e);       // "pe", "act", "dve", "pool", "sp"
std::string_view engine_neff_name(Engine e);  // "PE", "Activation", "DVE", "Pool", "SP"
std::optional<Engine> parse_engine(std::string_view name);  // either spelling

enum class MemSpace : uint8_t {
  SBUF = 0,
  PSUM,
  HBM,
  Pattern,  // no memory: an index pattern (iota, affine_select), only dims are used
};
std::string_view mem_space_name(MemSpace s);

// One free dimension: `size` elements, `stride` elements apart.
struct Dim {
  int32_t stride = 1;
  uint32_t size = 1;
  bool operator==(const Dim&) const = default;
};

inline constexpr int kMaxDims = 4;

// Where an operand lives and how it is walked. On SBUF/PSUM the partition axis is
// [start_partition, start_partition + num_partitions) and `offset` is the byte
// offset inside every partition. On HBM `tensor` is the variable id of a NEFF
// tensor, `offset` a byte offset into it, and the rows play the role of
// partitions: row r starts `partition_stride` elements after row r-1. On chip
// num_partitions is at most 128; an HBM pattern may have up to 2^32 - 1 rows (the
// rows of an embedding table over a 262,144-token vocabulary).
// With `partition_broadcast` (on chip, only a dma_copy's src) every one of the
// num_partitions partitions of the walk reads partition start_partition: the
// DMA engines address SBUF by address and can read one row many times, which is
// how a [1, F] tile becomes [P, F] (nl.broadcast_to).
// Dims are listed outermost first; the innermost dim is the last one.
struct AccessPattern {
  MemSpace space = MemSpace::SBUF;
  DType dtype = DType::fp32;
  uint16_t tensor = 0;
  uint16_t start_partition = 0;
  uint32_t num_partitions = 1;
  int64_t partition_stride = 0;
  uint64_t offset = 0;
  uint8_t num_dims = 1;
  std::array<Dim, kMaxDims> dims{};
  bool partition_broadcast = false;

  std::span<const Dim> free_dims() const { return {dims.data(), num_dims}; }
  // Partitions an on-chip pattern touches, from start_partition on: num_partitions, or the
  // one partition a broadcast reads.
  uint32_t partition_footprint() const { return partition_broadcast ? 1 : num_partitions; }
  // The partition that row p (0 <= p < num_partitions) of an on-chip walk reads or writes.
  uint32_t partition_of(uint32_t p) const {
    return uint32_t{start_partition} + (partition_broadcast ? 0 : p);
  }
  uint64_t free_elems() const;   // product of the free dims' sizes
  uint64_t total_elems() const;  // free_elems() * num_partitions
  // Equal when every field and the used dims are equal (unused dims are ignored).
  bool operator==(const AccessPattern& other) const;
};

// Named operand slots. Each opcode uses a fixed subset (see OpcodeInfo).
enum class Role : uint8_t {
  dst = 0,
  src,
  in0,
  in1,
  stationary,
  moving,
  bias,
  scale,
  reduce_dst,
  operand0,
  operand1,
  pattern,
  on_true,
  on_false,
  predicate,
  index,
  initial,
  vals,       // max8's family: the 8 values per partition to find or replace
  dst_index,  // match_replace8: where the replaced values were (an output)
};
inline constexpr int kNumRoles = 19;
std::string_view role_name(Role r);
// The roles an instruction writes (every other operand is read).
constexpr bool is_output(Role r) {
  return r == Role::dst || r == Role::reduce_dst || r == Role::dst_index;
}

struct Operand {
  Role role;
  AccessPattern ap;
  bool operator==(const Operand&) const = default;
};

// Elementwise ALU operations of DVE/ACT/POOL. Comparisons give 1.0 or 0.0;
// logical ops treat non-zero as true; bitwise ops and shifts act on the
// operands converted to int32.
enum class AluOp : uint8_t {
  bypass = 0,  // result is the first operand; as op1 of tensor_scalar: no second op
  add,
  subtract,
  multiply,
  divide,
  max,
  min,
  pow,
  mod,
  abs_max,
  is_equal,
  not_equal,
  is_gt,
  is_ge,
  is_lt,
  is_le,
  logical_and,
  logical_or,
  logical_xor,
  bitwise_and,
  bitwise_or,
  bitwise_xor,
  left_shift,
  arith_shift_right,
  logical_shift_right,
};
inline constexpr int kNumAluOps = 25;
std::string_view alu_op_name(AluOp op);
std::optional<AluOp> parse_alu_op(std::string_view name);

// The ScalarE activation function table.
enum class ActFunc : uint8_t {
  identity = 0,
  exp,
  log,
  tanh,
  sigmoid,
  relu,
  gelu,
  gelu_tanh,
  silu,
  softplus,
  sqrt,
  rsqrt,
  reciprocal,
  square,
  sin,
  cos,
  erf,
  abs,
  sign,
  negate,
  arctan,
  mish,
};
inline constexpr int kNumActFuncs = 22;
std::string_view act_func_name(ActFunc f);
std::optional<ActFunc> parse_act_func(std::string_view name);
float apply_act_func(ActFunc f, float x);

enum class Opcode : uint8_t {
  // TensorE
  matmul = 0,
  transpose,
  // ScalarE
  activation,
  // VectorE / GpSimd / ScalarE elementwise and reductions
  tensor_tensor,
  tensor_scalar,
  tensor_reduce,
  tensor_copy,
  memset,
  select,
  copy_predicated,
  bn_stats,
  bn_aggr,
  tensor_tensor_scan,
  // GpSimd
  iota,
  affine_select,
  partition_reduce,
  partition_shuffle,
  local_gather,
  // DMA, triggered from an engine's stream, executed on one of its queues
  dma_copy,
  // Synchronisation
  sem_wait,
  sem_signal,
  sem_set,
  // Collectives over a rank group (run by the simulator through a cc::Communicator)
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  send,
  recv,
  // Random numbers (VectorE, GpSimd): a XORWOW generator per compute lane
  rng,
  rand_set_state,
  // VectorE: the 8 largest values of each partition, and their positions (top-k, sort)
  max8,
  find_index8,
  match_replace8,
  // VectorE: two ALU operations, the first with a per-partition scalar, the second with a tensor
  scalar_tensor_tensor,
  // VectorE: elements whose free index lies between two per-partition bounds, else a fill value
  range_select,
};
inline constexpr int kNumOpcodes = 35;
// Data elements per partition that max8, find_index8 and match_replace8 take at most
// (nki.isa.nc_find_index8's documented range is 8 to 16,384).
inline constexpr uint32_t kTop8MaxElems = 16384;
// Runs over a rank group: all_reduce .. recv.
constexpr bool is_collective(Opcode op) {
  return op >= Opcode::all_reduce && op <= Opcode::recv;
}

// Semaphore wait: the instruction does not start until sem `cond` value holds.
enum class WaitCond : uint8_t { none = 0, ge, eq };
// Semaphore update when the instruction completes (for dma_copy: when its
// transfer completes).
enum class SemOp : uint8_t { none = 0, add, set };

inline constexpr int kNumSemaphores = 256;  // per NeuronCore (driver constant)

struct SemWait {
  WaitCond cond = WaitCond::none;
  uint16_t sem = 0;
  uint32_t value = 0;
  bool operator==(const SemWait&) const = default;
};
struct SemSignal {
  SemOp op = SemOp::none;
  uint16_t sem = 0;
  uint32_t value = 0;
  bool operator==(const SemSignal&) const = default;
};

// Boolean instruction options, by opcode (see OpcodeInfo::params).
enum Flag : uint16_t {
  kAccumulate = 1u << 0,     // matmul: add into PSUM instead of overwriting
  kTransposeMode = 1u << 1,  // matmul: bit-exact transpose of `stationary`
  kNegate = 1u << 2,         // tensor_reduce: negate the result
  kKeepDims = 1u << 3,       // tensor_reduce: reduced dims stay (size 1) in dst
  kReverse0 = 1u << 4,       // tensor_scalar: operand0 <op0> data instead of data <op0> operand0
  kReverse1 = 1u << 5,       // tensor_scalar: same for op1
  kReversePred = 1u << 6,    // copy_predicated: copy where the predicate is zero
  kScatter = 1u << 7,        // dma_copy: `index` names rows of dst (scatter), not of src
  kDmaTranspose = 1u << 8,   // dma_copy: src's rows are walked innermost (the DMA transpose)
  kAddToDst = 1u << 9,       // dma_copy: dst = dst + src, the DMA's read-add-write (FP32, BF16)
  kHwDge = 1u << 10,         // dma_copy: descriptors made at run time by the hardware DGE (v3+)
  kDoubleRow = 1u << 11,     // matmul: FP8 double performance mode (v3+), K x 2 contraction
  kStationaryOneZero = 1u << 12,  // matmul: stationary holds only 0 and 1 (a speed hint)
  kMovingOneZero = 1u << 13,      // matmul: moving holds only 0 and 1 (a speed hint)
};

// What an instruction does with VectorE's accumulator (one value per partition, kept from one
// instruction to the next), in Instruction::ints[3] of the instructions that reduce
// (tensor_scalar, scalar_tensor_tensor, select, range_select on VectorE).
enum class ReduceCmd : int32_t {
  idle = 0,          // the accumulator is not used
  reset = 1,         // set to the reduction's identity; nothing is folded in
  reduce = 2,        // fold this instruction's results into the accumulator
  reset_reduce = 3,  // reset, then fold in
  load_reduce = 4,   // load the `initial` operand, then fold in
};
inline constexpr int kNumReduceCmds = 5;

// One instruction. Opcode-specific parameters live in the generic fields below;
// OpcodeInfo names which ones an opcode uses and what they mean.
struct Instruction {
  Opcode opcode = Opcode::tensor_copy;
  Engine engine = Engine::DVE;
  SemWait wait;
  SemSignal signal;
  std::vector<Operand> operands;
  ActFunc func = ActFunc::identity;
  AluOp alu0 = AluOp::bypass;
  AluOp alu1 = AluOp::bypass;
  AluOp alu2 = AluOp::bypass;  // the reduction of an instruction that also reduces (reduce=)
  uint8_t axes = 0;            // tensor_reduce: bit i reduces free dim i
  uint16_t flags = 0;
  float imm0 = 0.0f;
  float imm1 = 0.0f;
  std::array<int32_t, 4> ints{};
  std::array<uint8_t, 32> mask{};  // partition_shuffle: dst partition i takes src partition mask[i]

  const AccessPattern* operand(Role r) const;
  AccessPattern* operand(Role r);
  bool has_flag(Flag f) const { return (flags & f) != 0; }
  bool operator==(const Instruction&) const = default;
};

// A matmul's product, dst[m, n] summed over k contraction rows: k = the operands' partitions,
// m and n their free sizes; in double_row mode each partition holds two contraction rows
// ([K, 2, M] and [K, 2, N]), so k doubles and m and n are halves. Not for transpose mode.
struct MatmulDims {
  uint64_t k = 0, m = 0, n = 0;
};
MatmulDims matmul_dims(const Instruction& in);

// Where an opcode parameter is stored in Instruction.
enum class ParamField : uint8_t {
  func,
  alu0,
  alu1,
  alu2,
  axes,
  imm0,
  imm1,
  int0,
  int1,
  int2,
  int3,
  flag,
  mask
};

struct ParamInfo {
  std::string_view name;  // assembly keyword
  ParamField field;
  uint16_t flag = 0;  // for ParamField::flag
  std::string_view doc;
  float default_value = 0.0f;  // for imm0/imm1: the value when the assembly omits it
};

struct RoleInfo {
  Role role;
  bool required;
  std::string_view doc;
};

struct OpcodeInfo {
  Opcode opcode;
  std::string_view name;
  std::vector<Engine> engines;  // engines whose stream may carry it
  std::vector<RoleInfo> roles;
  std::vector<ParamInfo> params;
  std::string_view doc;
};

const OpcodeInfo& opcode_info(Opcode op);
std::optional<Opcode> parse_opcode(std::string_view name);
std::span<const OpcodeInfo> all_opcodes();

}  // namespace neuronsim::isa
