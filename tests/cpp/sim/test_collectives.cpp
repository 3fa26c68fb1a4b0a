// Collective instructions inside the SystemC model: every group op against a reference
// computed here, on 2, 4 and 8 ranks of trn1.32xlarge and trn2.48xlarge, ranks that arrive at
// different times, determinism, timing-only and functional-only runs, send/recv, and every
// error the simulator reports for them.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/cc/communicator.h"
#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/sim/simulator.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {
namespace {

using isa::AluOp;
using isa::DType;
using isa::Engine;
using isa::Opcode;
using isa::Role;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- a job of R ranks on one instance

// R ranks on chosen cores of one simulated instance, with a FabricCommunicator placed on the
// same cores, so the fabric times match where the programs run.
struct Job {
  spec::InstanceConfig inst;
  std::unique_ptr<Simulator> sim;
  std::vector<uint32_t> cores;  // core of each rank
  std::unique_ptr<cc::FabricCommunicator> comm;
  std::vector<isa::Program> programs;  // one per rank; must outlive the runs

  Job(const std::string& instance, std::vector<uint32_t> rank_cores)
      : cores(std::move(rank_cores)) {
    inst = spec::load_instance(instance);
    sim = std::make_unique<Simulator>(inst, spec::load_generation(inst.generation));
    cc::RunOptions o;
    for (uint32_t c : cores) o.cores.push_back({c / inst.cores_per_chip, c % inst.cores_per_chip});
    comm = std::make_unique<cc::FabricCommunicator>(inst, static_cast<int>(cores.size()), o);
    programs.resize(cores.size());
  }
  // R ranks spread evenly over the instance (rank r on core r * total / R).
  static Job spread(const std::string& instance, int ranks) {
    const uint32_t total = spec::load_instance(instance).total_cores();
    std::vector<uint32_t> cores;
    for (int r = 0; r < ranks; ++r)
      cores.push_back(static_cast<uint32_t>(r) * (total / static_cast<uint32_t>(ranks)));
    return Job(instance, cores);
  }
  int ranks() const { return static_cast<int>(cores.size()); }
  std::string target() const { return inst.generation; }

  // Binds the rank's tensors (each core of a chip in its own 16 MiB of the shared HBM) and loads
  // it.
  void load(int rank, isa::Program p) {
    const uint32_t core = cores[static_cast<size_t>(rank)];
    programs[static_cast<size_t>(rank)] = std::move(p);
    const isa::Program& prog = programs[static_cast<size_t>(rank)];
    bind_tensors(prog, sim->core(core), uint64_t{core % inst.cores_per_chip} << 24);
    sim->load(core, prog);
  }
  void write(int rank, const std::string& name, const std::vector<uint8_t>& bytes) {
    CoreState& st = sim->core(cores[static_cast<size_t>(rank)]);
    const isa::TensorDecl* t = programs[static_cast<size_t>(rank)].find_tensor(name);
    ASSERT_EQ(bytes.size(), t->size_bytes());
    st.hbm.write(st.tensors.at(t->var_id).address, bytes.data(), bytes.size());
  }
  std::vector<uint8_t> read(int rank, const std::string& name) {
    CoreState& st = sim->core(cores[static_cast<size_t>(rank)]);
    const isa::TensorDecl* t = programs[static_cast<size_t>(rank)].find_tensor(name);
    std::vector<uint8_t> bytes(t->size_bytes());
    st.hbm.read(st.tensors.at(t->var_id).address, bytes.data(), bytes.size());
    return bytes;
  }
  RunOptions options(Mode mode = Mode::functional_and_timing, bool record = true) const {
    RunOptions o;
    o.mode = mode;
    o.record = record;
    o.collectives.communicator = comm.get();
    for (int r = 0; r < ranks(); ++r) o.collectives.ranks[cores[static_cast<size_t>(r)]] = r;
    return o;
  }
  RunResult run(Mode mode = Mode::functional_and_timing) { return sim->run(options(mode)); }
};

isa::Instruction collective(Opcode op, Engine e, std::vector<isa::Operand> operands,
                            AluOp alu = AluOp::bypass) {
  isa::Instruction in;
  in.opcode = op;
  in.engine = e;
  in.operands = std::move(operands);
  in.alu0 = alu;
  return in;
}

// Tensor shapes of each op: x is the input, y the output; n elements per block.
std::pair<int64_t, int64_t> rows_of(Opcode op, int ranks) {
  switch (op) {
    case Opcode::all_gather:
      return {1, ranks};
    case Opcode::reduce_scatter:
      return {ranks, 1};
    case Opcode::all_to_all:
      return {ranks, ranks};
    default:
      return {1, 1};
  }
}

// One collective straight from HBM tensor x to HBM tensor y.
isa::Program hbm_program(const std::string& target, Opcode op, DType t, int ranks, int64_t n,
                         AluOp alu, Engine e = Engine::SP) {
  isa::KernelBuilder kb(target);
  const auto [in_rows, out_rows] = rows_of(op, ranks);
  const auto x = kb.input("x", t, {in_rows, n});
  const auto y = kb.output("y", t, {out_rows, n});
  kb.emit(collective(op, e, {{Role::dst, y}, {Role::src, x}}, alu));
  return kb.finish();
}

// ---------------------------------------------------------------- reference values

// Inputs chosen so that every partial reduction is exact in fp32, bf16 and int32, whatever
// the order: small integers for sum/max/min, +-1 and +-2 for products.
double input_value(int rank, int64_t i, AluOp alu) {
  if (alu == AluOp::multiply) {
    static const double kFactors[] = {1, -1, 2, -2, 1, 1, -1, 1};
    return kFactors[(rank * 3 + i) % 8];
  }
  return static_cast<double>((rank * 5 + i * 3) % 9) - 4.0;
}

std::vector<uint8_t> to_bytes(DType t, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  std::vector<uint8_t> out(v.size() * isa::dtype_size(t));
  isa::convert_from_float(t, f.data(), out.data(), f.size());
  return out;
}

double combine(AluOp alu, double a, double b) {
  switch (alu) {
    case AluOp::add:
      return a + b;
    case AluOp::multiply:
      return a * b;
    case AluOp::max:
      return std::max(a, b);
    case AluOp::min:
      return std::min(a, b);
    default:
      throw std::logic_error("not a reduction");
  }
}

std::vector<double> inputs_of(Opcode op, int ranks, int rank, int64_t n, AluOp alu) {
  const int64_t len = rows_of(op, ranks).first * n;
  std::vector<double> v(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = input_value(rank, i, alu);
  return v;
}

// What rank `rank` must hold in y, from the definitions in docs/isa.md.
std::vector<double> expected(Opcode op, int ranks, int rank, int64_t n, AluOp alu) {
  std::vector<double> out;
  const auto reduce_at = [&](int64_t i) {
    double acc = input_value(0, i, alu);
    for (int r = 1; r < ranks; ++r) acc = combine(alu, acc, input_value(r, i, alu));
    return acc;
  };
  switch (op) {
    case Opcode::all_reduce:
      for (int64_t i = 0; i < n; ++i) out.push_back(reduce_at(i));
      break;
    case Opcode::all_gather:
      for (int j = 0; j < ranks; ++j)
        for (int64_t i = 0; i < n; ++i) out.push_back(input_value(j, i, alu));
      break;
    case Opcode::reduce_scatter:
      for (int64_t i = 0; i < n; ++i) out.push_back(reduce_at(rank * n + i));
      break;
    case Opcode::all_to_all:
      for (int j = 0; j < ranks; ++j)
        for (int64_t i = 0; i < n; ++i) out.push_back(input_value(j, rank * n + i, alu));
      break;
    default:
      throw std::logic_error("not a group collective");
  }
  return out;
}

const InstructionRecord* record_of(const RunResult& r, uint32_t core, Opcode op) {
  for (const InstructionRecord& rec : r.instructions)
    if (rec.core == core && rec.inst->opcode == op) return &rec;
  return nullptr;
}

// ---------------------------------------------------------------- every op x dtype x rank count

struct Case {
  std::string instance;
  int ranks;
  Opcode op;
  AluOp alu;
  DType dtype;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name =
      fmt::format("{}_{}r_{}_{}_{}", c.instance, c.ranks, isa::opcode_info(c.op).name,
                  isa::alu_op_name(c.alu), isa::dtype_name(c.dtype));
  std::replace_if(
      name.begin(), name.end(),
      [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
  return name;
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  const std::pair<Opcode, AluOp> ops[] = {
      {Opcode::all_reduce, AluOp::add},     {Opcode::all_reduce, AluOp::multiply},
      {Opcode::all_reduce, AluOp::max},     {Opcode::all_reduce, AluOp::min},
      {Opcode::all_gather, AluOp::bypass},  {Opcode::reduce_scatter, AluOp::add},
      {Opcode::reduce_scatter, AluOp::max}, {Opcode::all_to_all, AluOp::bypass},
  };
  for (const char* instance : {"trn1.32xlarge", "trn2.48xlarge"})
    for (int ranks : {2, 4, 8})
      for (const auto& [op, alu] : ops)
        for (DType t : {DType::fp32, DType::bf16, DType::int32})
          out.push_back({instance, ranks, op, alu, t});
  return out;
}

class CollectiveOps : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveOps, MatchTheReference) {
  const Case& c = GetParam();
  const int64_t n = 24;
  Job job = Job::spread(c.instance, c.ranks);
  for (int r = 0; r < c.ranks; ++r) {
    job.load(r, hbm_program(job.target(), c.op, c.dtype, c.ranks, n, c.alu,
                            r % 2 ? Engine::POOL : Engine::SP));
    job.write(r, "x", to_bytes(c.dtype, inputs_of(c.op, c.ranks, r, n, c.alu)));
  }
  const RunResult result = job.run();
  for (int r = 0; r < c.ranks; ++r) {
    EXPECT_EQ(job.read(r, "y"), to_bytes(c.dtype, expected(c.op, c.ranks, r, n, c.alu)))
        << "rank " << r;
    const InstructionRecord* rec = record_of(result, job.cores[static_cast<size_t>(r)], c.op);
    ASSERT_NE(rec, nullptr) << "rank " << r;
    EXPECT_GT(rec->end_ps, rec->start_ps) << "a collective across cores takes time";
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, CollectiveOps, ::testing::ValuesIn(all_cases()), case_name);

TEST(Collectives, RanksOnOneChipGoThroughHbm) {
  // Two ranks packed on the two cores of chip 0 of a trn1.32xlarge: no NeuronLink hop.
  Job packed("trn1.32xlarge", {0, 1});
  Job apart("trn1.32xlarge", {0, 2});  // chips 0 and 1
  for (Job* job : {&packed, &apart})
    for (int r = 0; r < 2; ++r) {
      job->load(r, hbm_program("trn1", Opcode::all_reduce, DType::fp32, 2, 4096, AluOp::add));
      job->write(r, "x",
                 to_bytes(DType::fp32, inputs_of(Opcode::all_reduce, 2, r, 4096, AluOp::add)));
    }
  const RunResult a = packed.run(), b = apart.run();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(packed.read(r, "y"),
              to_bytes(DType::fp32, expected(Opcode::all_reduce, 2, r, 4096, AluOp::add)));
    EXPECT_EQ(packed.read(r, "y"), apart.read(r, "y"));
  }
  EXPECT_NE(a.total_ps, b.total_ps) << "placement changes the fabric time";
}

// ---------------------------------------------------------------- time

// Rank `late` first squares its input on ACT (a long instruction), then every rank all-reduces
// from SBUF; the KernelBuilder puts the semaphores in.
isa::Program late_program(const std::string& target, bool late, uint32_t free) {
  isa::KernelBuilder kb(target);
  const auto x = kb.input("x", DType::fp32, {128, free});
  const auto y = kb.output("y", DType::fp32, {128, free});
  const auto a = kb.sbuf_tile(DType::fp32, 128, free);
  const auto b = kb.sbuf_tile(DType::fp32, 128, free);
  kb.dma_copy(a, x);
  if (late)
    for (int i = 0; i < 8; ++i) kb.activation(a, a, isa::ActFunc::identity);
  kb.emit(collective(Opcode::all_reduce, Engine::SP, {{Role::dst, b}, {Role::src, a}}, AluOp::add));
  kb.tensor_scalar(Engine::DVE, b, b, AluOp::add, 1.0f);  // waits on the collective's signal
  kb.dma_copy(y, b);
  return kb.finish();
}

TEST(Collectives, EarlyRanksWaitForTheLastArrival) {
  const int R = 4, late = 2;
  const uint32_t free = 256;
  Job job = Job::spread("trn2.48xlarge", R);
  for (int r = 0; r < R; ++r) {
    job.load(r, late_program("trn2", r == late, free));
    std::vector<double> x(128 * free);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<double>((i + static_cast<size_t>(r)) % 7);
    job.write(r, "x", to_bytes(DType::fp32, x));
  }
  const RunResult res = job.run();
  std::vector<const InstructionRecord*> recs;
  for (int r = 0; r < R; ++r)
    recs.push_back(record_of(res, job.cores[static_cast<size_t>(r)], Opcode::all_reduce));
  for (const auto* rec : recs) ASSERT_NE(rec, nullptr);
  uint64_t last_arrival = 0;
  for (const auto* rec : recs) last_arrival = std::max(last_arrival, rec->start_ps);
  EXPECT_EQ(last_arrival, recs[late]->start_ps) << "the rank with extra work arrives last";
  std::vector<cc::Picos> arrivals;
  for (int r = 0; r < R; ++r) {
    EXPECT_GE(recs[static_cast<size_t>(r)]->end_ps, last_arrival) << "rank " << r;
    if (r != late) {
      EXPECT_LT(recs[static_cast<size_t>(r)]->start_ps, recs[late]->start_ps) << "rank " << r;
    }
    arrivals.push_back(recs[static_cast<size_t>(r)]->start_ps);
  }
  // The finish times are the fabric model's for these arrivals.
  cc::RunOptions o;
  for (uint32_t c : job.cores) o.cores.push_back({c / 8, c % 8});
  cc::CollectiveSpec spec;
  spec.op = cc::Op::all_reduce;
  spec.count = 128 * free;
  const cc::CollectiveOutcome t = cc::simulate_timing(job.inst, spec, arrivals, o);
  for (int r = 0; r < R; ++r)
    EXPECT_EQ(recs[static_cast<size_t>(r)]->end_ps, t.finish_ps[static_cast<size_t>(r)]);
  // The collective's signal releases DVE only once it finished.
  for (int r = 0; r < R; ++r) {
    const InstructionRecord* dve =
        record_of(res, job.cores[static_cast<size_t>(r)], Opcode::tensor_scalar);
    ASSERT_NE(dve, nullptr);
    EXPECT_GE(dve->start_ps, recs[static_cast<size_t>(r)]->end_ps) << "rank " << r;
  }
  // Values: the sum over ranks, plus one.
  for (int r = 0; r < R; ++r) {
    std::vector<double> want(128 * free);
    for (size_t i = 0; i < want.size(); ++i) {
      double s = 1;
      for (int q = 0; q < R; ++q) s += static_cast<double>((i + static_cast<size_t>(q)) % 7);
      want[i] = s;
    }
    EXPECT_EQ(job.read(r, "y"), to_bytes(DType::fp32, want)) << "rank " << r;
  }
}

TEST(Collectives, RunsAreDeterministicAndTimingOnlyKeepsTheTimes) {
  const auto run_once = [](Mode mode) {
    Job job = Job::spread("trn1.32xlarge", 8);
    for (int r = 0; r < 8; ++r) {
      job.load(r, late_program("trn1", r == 5, 128));
      job.write(r, "x", to_bytes(DType::fp32, std::vector<double>(128 * 128, r)));
    }
    RunResult res = job.run(mode);
    std::vector<uint8_t> y = job.read(3, "y");
    return std::pair{res, y};
  };
  const auto [a, ya] = run_once(Mode::functional_and_timing);
  const auto [b, yb] = run_once(Mode::functional_and_timing);
  const auto [t, yt] = run_once(Mode::timing_only);
  EXPECT_EQ(a.total_ps, b.total_ps);
  EXPECT_EQ(a.total_ps, t.total_ps);
  ASSERT_EQ(a.instructions.size(), b.instructions.size());
  for (size_t i = 0; i < a.instructions.size(); ++i) {
    EXPECT_EQ(a.instructions[i].start_ps, b.instructions[i].start_ps) << i;
    EXPECT_EQ(a.instructions[i].end_ps, b.instructions[i].end_ps) << i;
  }
  for (size_t c = 0; c < a.cores.size(); ++c) {
    EXPECT_EQ(a.cores[c].end_ps, b.cores[c].end_ps);
    EXPECT_EQ(a.cores[c].end_ps, t.cores[c].end_ps);
  }
  EXPECT_EQ(ya, yb);
  EXPECT_EQ(yt, std::vector<uint8_t>(ya.size(), 0)) << "timing-only leaves memory untouched";
  EXPECT_EQ(
      ya, to_bytes(DType::fp32, std::vector<double>(128 * 128, 0 + 1 + 2 + 3 + 4 + 5 + 6 + 7 + 1)));
}

TEST(Collectives, FunctionalOnlyRunsComputeTheSameValues) {
  for (Opcode op :
       {Opcode::all_reduce, Opcode::all_gather, Opcode::reduce_scatter, Opcode::all_to_all}) {
    const AluOp alu =
        op == Opcode::all_reduce || op == Opcode::reduce_scatter ? AluOp::add : AluOp::bypass;
    Job job = Job::spread("trn2.48xlarge", 4);
    for (int r = 0; r < 4; ++r) {
      job.load(r, hbm_program("trn2", op, DType::bf16, 4, 16, alu));
      job.write(r, "x", to_bytes(DType::bf16, inputs_of(op, 4, r, 16, alu)));
    }
    const RunResult res = job.run(Mode::functional_only);
    EXPECT_EQ(res.total_ps, 0u);
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(job.read(r, "y"), to_bytes(DType::bf16, expected(op, 4, r, 16, alu)))
          << isa::opcode_info(op).name << " rank " << r;
  }
}

TEST(Collectives, SeveralCollectivesInARowMatchInOrder) {
  // all_gather then all_reduce of the gathered tile, on SBUF, through one program per rank.
  Job job = Job::spread("trn2.48xlarge", 2);
  for (int r = 0; r < 2; ++r) {
    isa::KernelBuilder kb("trn2");
    const auto x = kb.input("x", DType::fp32, {4, 8});
    const auto y = kb.output("y", DType::fp32, {4, 16});
    const auto a = kb.sbuf_tile(DType::fp32, 4, 8);
    const auto g = kb.sbuf_tile(DType::fp32, 4, 16);
    const auto s = kb.sbuf_tile(DType::fp32, 4, 16);
    kb.dma_copy(a, x);
    kb.emit(collective(Opcode::all_gather, Engine::POOL, {{Role::dst, g}, {Role::src, a}}));
    kb.emit(
        collective(Opcode::all_reduce, Engine::POOL, {{Role::dst, s}, {Role::src, g}}, AluOp::max));
    kb.dma_copy(y, s);
    job.load(r, kb.finish());
    std::vector<double> v(32);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(i) * (r == 0 ? 1 : -1) + r * 100;
    job.write(r, "x", to_bytes(DType::fp32, v));
  }
  job.run();
  // Gather: partition p holds rank 0's 8 elements of partition p then... in walk order the
  // gathered 64 elements are rank 0's 32 then rank 1's 32; dst [4,16] takes them in order.
  std::vector<double> gathered;
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < 32; ++i)
      gathered.push_back(static_cast<double>(i) * (r == 0 ? 1 : -1) + r * 100);
  // Both ranks gathered the same thing, so the max over ranks is the gathered values.
  EXPECT_EQ(job.read(0, "y"), to_bytes(DType::fp32, gathered));
  EXPECT_EQ(job.read(1, "y"), to_bytes(DType::fp32, gathered));
}

// ---------------------------------------------------------------- send / recv

isa::Program p2p_program(Opcode op, int peer, uint32_t n, Engine e = Engine::SP) {
  isa::KernelBuilder kb("trn2");
  const auto x = kb.input("x", DType::int32, {1, n});
  const auto y = kb.output("y", DType::int32, {1, n});
  isa::Instruction in = collective(op, e, {});
  in.operands = {{op == Opcode::send ? Role::src : Role::dst, op == Opcode::send ? x : y}};
  in.ints[1] = peer;
  kb.emit(in);
  return kb.finish();
}

TEST(Collectives, SendMatchesTheRecvOfItsPeer) {
  Job job = Job::spread("trn2.48xlarge", 4);
  // 0 -> 3 and 2 -> 1; rank 1's recv sits on POOL.
  job.load(0, p2p_program(Opcode::send, 3, 64));
  job.load(3, p2p_program(Opcode::recv, 0, 64));
  job.load(2, p2p_program(Opcode::send, 1, 64));
  job.load(1, p2p_program(Opcode::recv, 2, 64, Engine::POOL));
  std::vector<double> v0(64), v2(64);
  for (size_t i = 0; i < 64; ++i) {
    v0[i] = static_cast<double>(i) * 3;
    v2[i] = -static_cast<double>(i);
  }
  job.write(0, "x", to_bytes(DType::int32, v0));
  job.write(2, "x", to_bytes(DType::int32, v2));
  const RunResult res = job.run();
  EXPECT_EQ(job.read(3, "y"), to_bytes(DType::int32, v0));
  EXPECT_EQ(job.read(1, "y"), to_bytes(DType::int32, v2));
  const InstructionRecord* recv = record_of(res, job.cores[3], Opcode::recv);
  ASSERT_NE(recv, nullptr);
  EXPECT_GT(recv->end_ps, recv->start_ps);
}

// ---------------------------------------------------------------- errors

std::string run_error(Job& job, Mode mode = Mode::functional_and_timing, bool bind = true) {
  RunOptions o = job.options(mode);
  if (!bind) o.collectives = {};
  try {
    job.sim->run(o);
  } catch (const ExecError& e) {
    return e.what();
  }
  return "no error";
}

ExecError::Kind run_error_kind(Job& job) {
  try {
    job.run();
  } catch (const ExecError& e) {
    return e.kind();
  }
  throw std::logic_error("no error");
}

TEST(CollectiveErrors, ACoreOutsideAJobCannotRunACollective) {
  Job job = Job::spread("trn2.48xlarge", 2);
  for (int r = 0; r < 2; ++r)
    job.load(r, hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 8, AluOp::add));
  for (Mode mode : {Mode::functional_and_timing, Mode::timing_only, Mode::functional_only}) {
    const std::string msg = run_error(job, mode, false);
    EXPECT_THAT(msg,
                HasSubstr("collective instruction but the core is not part of a collective job "
                          "(load with nrt_load_collectives)"));
    EXPECT_THAT(msg, HasSubstr("core 0 sp[0]"));
    EXPECT_THAT(msg, HasSubstr("all_reduce"));
  }
  // Binding only some of the cores: the unbound one fails.
  RunOptions o = job.options();
  o.collectives.ranks.erase(job.cores[1]);
  cc::FabricCommunicator one(job.inst, 1);
  o.collectives.communicator = &one;
  o.collectives.ranks[job.cores[0]] = 0;
  try {
    job.sim->run(o);
    FAIL() << "no error";
  } catch (const ExecError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("core {} sp[0]", job.cores[1])));
    EXPECT_THAT(e.what(), HasSubstr("not part of a collective job"));
  }
}

TEST(CollectiveErrors, OnlyGroupZeroExists) {
  Job job = Job::spread("trn1.32xlarge", 2);
  for (int r = 0; r < 2; ++r) {
    isa::Program p = hbm_program("trn1", Opcode::all_gather, DType::fp32, 2, 8, AluOp::bypass);
    p.stream(Engine::SP)[0].ints[0] = 3;
    job.load(r, std::move(p));
  }
  const std::string msg = run_error(job);
  EXPECT_THAT(msg, HasSubstr("group=3: only group 0"));
  EXPECT_THAT(msg, HasSubstr("core 0 sp[0] `sp all_gather"));
}

TEST(CollectiveErrors, AReductionNeedsAReduceOp) {
  Job job = Job::spread("trn2.48xlarge", 2);
  for (int r = 0; r < 2; ++r) {
    isa::Program p = hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 8, AluOp::add);
    p.stream(Engine::SP)[0].alu0 =
        r == 0 ? AluOp::bypass : AluOp::subtract;  // unvalidated, as a raw NEFF could be
    job.load(r, std::move(p));
  }
  const std::string msg = run_error(job);
  EXPECT_THAT(
      msg,
      HasSubstr("op=bypass is not a reduction a collective can apply (add, multiply, max, min)"));
}

TEST(CollectiveErrors, SizesMustFitTheOperation) {
  struct Bad {
    Opcode op;
    int64_t in_rows, out_rows;
    const char* says;
  };
  for (const Bad& b : {Bad{Opcode::all_gather, 1, 1, "must hold 2 ranks x src's 8"},
                       Bad{Opcode::reduce_scatter, 1, 1, "must hold 2 ranks x dst's 8"},
                       Bad{Opcode::all_to_all, 2, 1, "both must hold the same number"}}) {
    Job job = Job::spread("trn2.48xlarge", 2);
    for (int r = 0; r < 2; ++r) {
      isa::KernelBuilder kb("trn2");
      const auto x = kb.input("x", DType::fp32, {b.in_rows, 8});
      const auto y = kb.output("y", DType::fp32, {b.out_rows, 8});
      kb.emit(collective(b.op, Engine::SP, {{Role::dst, y}, {Role::src, x}},
                         b.op == Opcode::reduce_scatter ? AluOp::add : AluOp::bypass));
      job.load(r, kb.finish());
    }
    const std::string msg = run_error(job);
    EXPECT_THAT(msg, HasSubstr(b.says)) << isa::opcode_info(b.op).name;
    EXPECT_THAT(msg, HasSubstr("core 0 sp[0]")) << isa::opcode_info(b.op).name;
  }
  // dst and src of different dtypes.
  Job job = Job::spread("trn2.48xlarge", 2);
  for (int r = 0; r < 2; ++r) {
    isa::KernelBuilder kb("trn2");
    const auto x = kb.input("x", DType::fp32, {1, 8});
    const auto y = kb.output("y", DType::bf16, {1, 8});
    kb.emit(
        collective(Opcode::all_reduce, Engine::SP, {{Role::dst, y}, {Role::src, x}}, AluOp::add));
    job.load(r, kb.finish());
  }
  EXPECT_THAT(run_error(job), HasSubstr("dst is bfloat16 but src is float32: a collective moves "
                                        "elements without converting them"));
}

TEST(CollectiveErrors, RanksMustAgreeOnTheCollective) {
  Job job = Job::spread("trn2.48xlarge", 2);
  job.load(0, hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 8, AluOp::add));
  job.load(1, hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 16, AluOp::add));
  const std::string msg = run_error(job);
  EXPECT_THAT(msg, HasSubstr("every rank must run the same collective"));
  EXPECT_THAT(msg, HasSubstr("is all_reduce of 16 float32 elements (sum) here"));
  EXPECT_THAT(msg, HasSubstr("but all_reduce of 8 float32 elements (sum) on core 0 sp[0]"));
}

TEST(CollectiveErrors, ARankThatNeverArrivesIsADeadlock) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP()
      << "not meaningful under AddressSanitizer (SystemC coroutines, google/sanitizers#189)";
#endif
  Job job = Job::spread("trn2.48xlarge", 4);
  for (int r = 0; r < 4; ++r) {
    isa::Program p = hbm_program("trn2", Opcode::all_reduce, DType::fp32, 4, 8, AluOp::add);
    if (r == 3) p.stream(Engine::SP)[0].wait = {isa::WaitCond::ge, 7, 1};  // nobody signals S[7]
    job.load(r, std::move(p));
  }
  for (Mode mode : {Mode::functional_and_timing, Mode::timing_only, Mode::functional_only}) {
    try {
      job.run(mode);
      FAIL() << "no deadlock";
    } catch (const ExecError& e) {
      EXPECT_EQ(e.kind(), ExecError::Kind::deadlock);
      const std::string msg = e.what();
      for (int r = 0; r < 3; ++r)
        EXPECT_THAT(msg,
                    HasSubstr(fmt::format("core {} sp[0]", job.cores[static_cast<size_t>(r)])));
      EXPECT_THAT(msg, HasSubstr(fmt::format(
                           "waits at collective #0 of the job for rank 3 (core {}), which never "
                           "reached it",
                           job.cores[3])));
      EXPECT_THAT(msg, HasSubstr("S[7]"));
    }
  }
  // The simulator stays usable.
  job.sim->unload(job.cores[3]);
  job.load(3, hbm_program("trn2", Opcode::all_reduce, DType::fp32, 4, 8, AluOp::add));
  EXPECT_NO_THROW(job.run());
}

TEST(CollectiveErrors, SendRecvMismatches) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP()
      << "not meaningful under AddressSanitizer (SystemC coroutines, google/sanitizers#189)";
#endif
  {  // sizes differ
    Job job = Job::spread("trn2.48xlarge", 2);
    job.load(0, p2p_program(Opcode::send, 1, 64));
    job.load(1, p2p_program(Opcode::recv, 0, 32));
    EXPECT_THAT(run_error(job),
                HasSubstr("receives 32 elements of int32, but the matching send on core 0 sp[0]"));
  }
  {  // a send nobody receives
    Job job = Job::spread("trn2.48xlarge", 2);
    job.load(0, p2p_program(Opcode::send, 1, 64));
    job.load(1, hbm_program("trn2", Opcode::all_gather, DType::int32, 2, 8, AluOp::bypass));
    const std::string msg = run_error(job);
    EXPECT_THAT(msg,
                HasSubstr(fmt::format("waits at a send to rank 1 (core {}) for its matching recv",
                                      job.cores[1])));
    EXPECT_THAT(msg, HasSubstr("waits at collective #0 of the job for rank 0"));
  }
  {  // to itself, or to a rank that does not exist
    for (int peer : {0, 5}) {
      Job job = Job::spread("trn2.48xlarge", 2);
      job.load(0, p2p_program(Opcode::send, peer, 8));
      job.load(1, p2p_program(Opcode::recv, 0, 8));
      EXPECT_THAT(run_error(job),
                  HasSubstr(peer == 0 ? "peer=0 is this core's own rank"
                                      : "peer=5 is not a rank of the job (2 ranks)"));
    }
  }
}

TEST(CollectiveErrors, TheBindingMustFitTheLoadedCores) {
  Job job = Job::spread("trn2.48xlarge", 2);
  job.load(0, hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 8, AluOp::add));
  // Rank 1's core has no program.
  EXPECT_THROW(job.run(), std::invalid_argument);
  job.load(1, hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 8, AluOp::add));
  RunOptions o = job.options();
  o.collectives.communicator = nullptr;
  EXPECT_THROW(job.sim->run(o), std::invalid_argument);
  o = job.options();
  o.collectives.ranks[job.cores[1]] = 0;  // two cores for rank 0, none for rank 1
  EXPECT_THROW(job.sim->run(o), std::invalid_argument);
  o = job.options();
  o.collectives.ranks[job.cores[1]] = 9;
  EXPECT_THROW(job.sim->run(o), std::invalid_argument);
  EXPECT_NO_THROW(job.run());
}

TEST(CollectiveErrors, OutOfBoundsOperandsAreFaults) {
  Job job = Job::spread("trn2.48xlarge", 2);
  for (int r = 0; r < 2; ++r) {
    isa::Program p = hbm_program("trn2", Opcode::all_reduce, DType::fp32, 2, 8, AluOp::add);
    p.stream(Engine::SP)[0].operands[0].ap.offset = 16;  // y runs past its 32 bytes
    job.load(r, std::move(p));
  }
  EXPECT_EQ(run_error_kind(job), ExecError::Kind::out_of_bounds);
}

}  // namespace
}  // namespace neuronsim::sim
