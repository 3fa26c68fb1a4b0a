// sim::Device: memory, programs by name, queues with sequence numbers, the monotonic
// device clock, copies, trace sessions across executions, and clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cblas.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <map>

#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/sim/device.h"

#include "neuronsim/isa/assembler.h"  // out_of_bounds()

namespace neuronsim::sim {
namespace {

using ::testing::HasSubstr;

// y = x * x + 1 over [128, 512] fp32.
isa::Program square_plus_one() {
  isa::KernelBuilder kb("trn2");
  const auto x = kb.input("x", isa::DType::fp32, {128, 512});
  const auto y = kb.output("y", isa::DType::fp32, {128, 512});
  const auto t0 = kb.sbuf_tile(isa::DType::fp32, 128, 512);
  const auto t1 = kb.sbuf_tile(isa::DType::fp32, 128, 512);
  kb.dma_copy(t0, x);
  kb.activation(t1, t0, isa::ActFunc::square);
  kb.tensor_scalar(isa::Engine::DVE, t1, t1, isa::AluOp::add, 1.0f);
  kb.dma_copy(y, t1);
  return kb.finish();
}

std::vector<uint8_t> floats(size_t n, float first, float step) {
  std::vector<uint8_t> out(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = first + step * static_cast<float>(i % 64);
    std::memcpy(out.data() + i * 4, &v, 4);
  }
  return out;
}

float at(const std::vector<uint8_t>& bytes, size_t i) {
  float v;
  std::memcpy(&v, bytes.data() + i * 4, 4);
  return v;
}

constexpr size_t kElems = 128 * 512;

TEST(Device, RunsAProgramByTensorNames) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  dev->write_tensor(*p, io, "x", floats(kElems, -2.0f, 0.0625f));
  const Completion c = dev->run({p, io, "square"});
  const auto y = dev->read_tensor(*p, io, "y");
  for (size_t i = 0; i < kElems; i += 37) {
    const float x = -2.0f + 0.0625f * static_cast<float>(i % 64);
    EXPECT_FLOAT_EQ(at(y, i), x * x + 1.0f) << i;
  }
  EXPECT_EQ(c.start_ps, 0u);
  EXPECT_GT(c.end_ps, 0u);
  ASSERT_NE(c.run, nullptr);
  EXPECT_EQ(c.run->start_ps, 0u);
  EXPECT_EQ(dev->now_ps(), c.end_ps);
}

TEST(Device, RunsAProgramFromItsInputsToItsOutputsInOneCall) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRun r =
      dev->run_program(0, square_plus_one(), "square", {{"x", floats(kElems, 3.0f, 0.0f)}}, true);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_FLOAT_EQ(at(r.outputs.at("y"), 11), 10.0f);
  EXPECT_EQ(r.program->name(), "square");
  EXPECT_GT(r.completion.end_ps, 0u);
  ASSERT_TRUE(r.trace.has_value());  // recorded: the run's instructions are in its session
  EXPECT_FALSE(r.trace->result.cores.empty());

  // Timing only: the time, no values to read back; no trace unless asked.
  DeviceOptions timing;
  timing.mode = Mode::timing_only;
  auto timed = Device::open("trn2.3xlarge", timing);
  const ProgramRun t = timed->run_program(0, square_plus_one(), "square", {});
  EXPECT_TRUE(t.outputs.empty());
  EXPECT_FALSE(t.trace.has_value());
  EXPECT_EQ(t.completion.end_ps, r.completion.end_ps);
}

TEST(Device, LoadsANeffAsWellAsAProgram) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, isa::to_neff(square_plus_one(), "square.neff"), "square.neff");
  EXPECT_EQ(p->name(), "square.neff");
  EXPECT_EQ(p->program(), square_plus_one());
  const Bindings io = dev->allocate_io(*p);
  dev->write_tensor(*p, io, "x", floats(kElems, 2.0f, 0.0f));
  dev->run({p, io, "square"});
  EXPECT_FLOAT_EQ(at(dev->read_tensor(*p, io, "y"), 7), 5.0f);
}

TEST(Device, TheClockCarriesAcrossExecutionsOfAQueue) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const Completion first = dev->run({p, io, "a"});
  const Completion second = dev->run({p, io, "b"});
  EXPECT_EQ(second.start_ps, first.end_ps);
  // The same work takes the same simulated time wherever it starts.
  EXPECT_EQ(second.end_ps - second.start_ps, first.end_ps - first.start_ps);
  EXPECT_EQ(second.run->start_ps, first.end_ps);
}

// The runtime's launch (docs/cost-model.md §6): the generation's fixed cost plus one per input
// and output, before the first instruction; in the completion, the window's core figures and
// the trace session; none when the options leave it out or nothing is timed.
TEST(Device, EveryExecutionPaysTheRuntimesLaunchFirst) {
  const spec::GenerationConfig& g = spec::load_generation("trn2");
  const auto expected = static_cast<uint64_t>(
      std::llround((g.launch_fixed_ns + 2 * g.launch_per_tensor_ns) * 1000));  // x and y
  ASSERT_GE(g.launch_fixed_ns, 1000.0);
  auto run = [](DeviceOptions options) {
    auto dev = Device::open("trn2.3xlarge", options);
    const ProgramRef p = dev->load(0, square_plus_one(), "square");
    const Bindings io = dev->allocate_io(*p);
    const uint64_t session = dev->start_trace();
    const Completion c = dev->run({p, io, "square"});
    const TraceSession trace = dev->stop_trace(session);
    EXPECT_EQ(trace.result.executions.size(), 1u);
    if (!trace.result.executions.empty())
      EXPECT_EQ(trace.result.executions[0].launch_ps, c.launch_ps);
    for (const InstructionRecord& r : trace.result.instructions)
      EXPECT_GE(r.start_ps, c.start_ps + c.launch_ps);  // the body starts after the launch
    return c;
  };
  const Completion with = run({});
  EXPECT_EQ(with.launch_ps, expected);
  EXPECT_EQ(with.run->cores.at(0).launch_ps, expected);
  DeviceOptions off;
  off.launch = false;
  const Completion without = run(off);
  EXPECT_EQ(without.launch_ps, 0u);
  EXPECT_EQ(with.end_ps - with.start_ps, without.end_ps - without.start_ps + expected);
  EXPECT_EQ(with.run->total_ps, without.run->total_ps + expected);
  DeviceOptions functional;
  functional.mode = Mode::functional_only;
  EXPECT_EQ(run(functional).launch_ps, 0u);
}

// Whatever the launch, a kernel body takes the same time: two DMAs issued at once by SP and ACT
// onto one DMA engine keep their order (ties are not broken differently after a wait).
TEST(Device, TheLaunchDoesNotChangeTheKernelBody) {
  isa::KernelBuilder kb("trn2");
  const auto small = kb.input("small", isa::DType::fp32, {8, 64});
  const auto big = kb.input("big", isa::DType::fp32, {8, 8192});
  const auto y = kb.output("y", isa::DType::fp32, {8, 64});
  const auto s = kb.sbuf_tile(isa::DType::fp32, 8, 64);
  const auto b = kb.sbuf_tile(isa::DType::fp32, 8, 8192);
  kb.dma_copy(s, small, isa::Engine::SP);
  kb.dma_copy(b, big, isa::Engine::ACT);
  for (int i = 0; i < 8; ++i) kb.tensor_scalar(isa::Engine::DVE, s, s, isa::AluOp::add, 1.0f);
  kb.dma_copy(y, s);
  const isa::Program program = kb.finish();
  auto body = [&](bool launch) {
    DeviceOptions options;
    options.launch = launch;
    options.mode = Mode::timing_only;
    auto dev = Device::open("trn2.3xlarge", options);
    const ProgramRef p = dev->load(0, program, "tie");
    const Completion c = dev->run({p, dev->allocate_io(*p), "tie"});
    return c.end_ps - c.start_ps - c.launch_ps;
  };
  EXPECT_EQ(body(true), body(false));
}

// The host that enqueues the work has a clock of its own (docs/cost-model.md §6.1): its work
// moves it on, work enqueued after starts no earlier, and the device's wait for it is told.
TEST(Device, WorkStartsNoEarlierThanTheHostSubmitsIt) {
  DeviceOptions options;
  options.launch = false;  // the body alone, so that the host's share is plain
  auto dev = Device::open("trn2.3xlarge", options);
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const uint64_t session = dev->start_trace();
  const Completion first = dev->complete({p, io, "first"}, Host::runs_ahead);
  EXPECT_EQ(first.host_bound_ps, 0u);
  EXPECT_EQ(dev->host_ps(), 0u);  // it ran ahead: the host did not wait for the first
  const uint64_t later = first.end_ps + 5'000'000;
  dev->host_work(later, "dispatch");  // the host is busy past the first's end
  EXPECT_EQ(dev->host_ps(), later);
  const Completion second = dev->complete({p, io, "second"}, Host::runs_ahead);
  EXPECT_EQ(second.start_ps, later);
  EXPECT_EQ(second.host_bound_ps, later - first.end_ps);  // the core sat ready for 5 us
  EXPECT_EQ(dev->host_ps(), later);
  // A host that waits moves on to the end of what it waited for.
  const Completion third = dev->complete({p, io, "third"}, Host::waits);
  EXPECT_EQ(third.start_ps, second.end_ps);
  EXPECT_EQ(third.host_bound_ps, 0u);
  EXPECT_EQ(dev->host_ps(), third.end_ps);
  const TraceSession trace = dev->stop_trace(session);
  ASSERT_EQ(trace.result.host.size(), 1u);
  EXPECT_EQ(trace.result.host[0].name, "dispatch");
  EXPECT_EQ(trace.result.host[0].start_ps, 0u);
  EXPECT_EQ(trace.result.host[0].end_ps, later);
  ASSERT_EQ(trace.result.executions.size(), 3u);
  EXPECT_EQ(trace.result.executions[1].host_bound_ps, second.host_bound_ps);
}

// Functional-only mode has no clocks: the host's work takes no time and is not recorded.
TEST(Device, TheHostTakesNoTimeWhenNothingIsTimed) {
  DeviceOptions options;
  options.mode = Mode::functional_only;
  auto dev = Device::open("trn2.3xlarge", options);
  const uint64_t session = dev->start_trace();
  dev->host_work(1'000'000, "dispatch");
  EXPECT_EQ(dev->host_ps(), 0u);
  EXPECT_TRUE(dev->stop_trace(session).result.host.empty());
}

// synchronize is the host's wait for everything queued, unless the caller says it is not.
TEST(Device, SynchronizeBringsTheHostToTheDevicesEnd) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const Completion c = dev->complete({p, io, "square"}, Host::runs_ahead);
  EXPECT_LT(dev->host_ps(), c.end_ps);
  dev->synchronize(Host::runs_ahead);  // the caller's wait, not the simulated host's
  EXPECT_LT(dev->host_ps(), c.end_ps);
  dev->synchronize();
  EXPECT_EQ(dev->host_ps(), c.end_ps);
}

TEST(Device, AHoldKeepsItsCoreUntilItsTimeAndTheNextWorkStartsAfter) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const Completion first = dev->run({p, io, "a"});
  const uint64_t until = first.end_ps + 5'000'000;
  const Completion hold = dev->wait(dev->enqueue(0, Hold{until, "all_reduce"}));
  EXPECT_EQ(hold.name, "all_reduce");
  EXPECT_EQ(hold.start_ps, first.end_ps);
  EXPECT_EQ(hold.end_ps, until);
  EXPECT_EQ(dev->run({p, io, "b"}).start_ps, until);
  // A hold whose time has passed takes none.
  const Completion late = dev->wait(dev->enqueue(0, Hold{1, "barrier"}));
  EXPECT_EQ(late.end_ps, late.start_ps);
}

// A hold that says what it touches runs on the core's side queue (a collective's DMA rings):
// kernels that touch other bytes run beside it; one that reads its bytes waits for its end.
TEST(Device, AHoldThatTouchesTensorsRunsBesideTheKernels) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const Bindings other = dev->allocate_io(*p);
  const Completion first = dev->run({p, io, "a"});
  const TensorBinding x = io.at(p->tensor("x").var_id);
  EXPECT_EQ(dev->side_ready_ps(0, {x}), first.end_ps);  // the host waited for the kernel
  const uint64_t until = first.end_ps + 50'000'000;
  dev->enqueue(0, Hold{until, "all_gather", {x}});
  const Completion beside = dev->run({p, other, "b"});  // other bytes: no wait
  EXPECT_EQ(beside.start_ps, first.end_ps);
  EXPECT_LT(beside.end_ps, until);
  EXPECT_GE(dev->side_ready_ps(0, {}), until);      // the side queue is busy until then
  const Completion after = dev->run({p, io, "c"});  // reads x: after the hold
  EXPECT_EQ(after.start_ps, until);
}

TEST(Device, AHoldIsASliceOfItsOwnInATraceBesideTheExecutions) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const uint64_t session = dev->start_trace();
  const Completion first = dev->run({p, io, "a"});
  dev->wait(dev->enqueue(0, Hold{first.end_ps + 1'000'000, "all_reduce"}));
  const TraceSession t = dev->stop_trace(session);
  ASSERT_EQ(t.result.executions.size(), 2u);
  const ExecutionRecord& hold = t.result.executions[1];
  EXPECT_EQ(hold.name, "all_reduce");
  EXPECT_EQ(hold.program, nullptr);
  EXPECT_EQ(hold.start_ps, first.end_ps);
  EXPECT_EQ(hold.end_ps, first.end_ps + 1'000'000);
}

TEST(Device, AHoldTakesNoTimeInFunctionalOnlyMode) {
  DeviceOptions options;
  options.mode = Mode::functional_only;
  auto dev = Device::open("trn2.3xlarge", options);
  const Completion hold = dev->wait(dev->enqueue(0, Hold{7'000'000, "all_gather"}));
  EXPECT_EQ(hold.end_ps, hold.start_ps);
  EXPECT_THROW(dev->enqueue(99, Hold{1, "x"}), std::out_of_range);
}

TEST(Device, AnExecutionWaitsForItsInputsFromAnotherCore) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p0 = dev->load(0, square_plus_one(), "producer");
  const ProgramRef p1 = dev->load(1, square_plus_one(), "consumer");
  const Bindings io0 = dev->allocate_io(*p0);
  Bindings io1 = dev->allocate_io(*p1);
  io1[p1->tensor("x").var_id] = io0.at(p0->tensor("y").var_id);  // core 1 reads core 0's output
  dev->write_tensor(*p0, io0, "x", floats(kElems, 1.0f, 0.0f));
  const uint64_t s0 = dev->enqueue({p0, io0, "producer"});
  const uint64_t s1 = dev->enqueue({p1, io1, "consumer"});
  EXPECT_LT(s0, s1);
  const Completion c0 = dev->wait(s0);
  const Completion c1 = dev->wait(s1);
  EXPECT_GE(c1.start_ps, c0.end_ps);
  EXPECT_FLOAT_EQ(at(dev->read_tensor(*p1, io1, "y"), 5), 5.0f);  // (1*1+1)^2 + 1
}

TEST(Device, AWriterWaitsForAnEarlierReaderOnAnotherCore) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef reader = dev->load(0, square_plus_one(), "reader");
  const ProgramRef writer = dev->load(1, square_plus_one(), "writer");
  const Bindings r = dev->allocate_io(*reader);
  Bindings w = dev->allocate_io(*writer);
  w[writer->tensor("y").var_id] = r.at(reader->tensor("x").var_id);  // overwrites what core 0 reads
  const uint64_t s0 = dev->enqueue({reader, r, "reader"});
  const uint64_t s1 = dev->enqueue({writer, w, "writer"});
  const Completion c0 = dev->wait(s0);
  EXPECT_GE(dev->wait(s1).start_ps, c0.end_ps);
}

TEST(Device, WorkQueuedAfterTheHostWaitedStartsAfterWhatItSaw) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p0 = dev->load(0, square_plus_one(), "first");
  const ProgramRef p1 = dev->load(1, square_plus_one(), "second");
  const Completion first = dev->run({p0, dev->allocate_io(*p0), "first"});
  const Completion second = dev->run({p1, dev->allocate_io(*p1), "second"});
  EXPECT_GE(second.start_ps, first.end_ps);
}

TEST(Device, HostBytesMappedTwiceAreOneBufferToTheQueues) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p0 = dev->load(0, square_plus_one(), "producer");
  const ProgramRef p1 = dev->load(1, square_plus_one(), "consumer");
  Bindings io0 = dev->allocate_io(*p0);
  Bindings io1 = dev->allocate_io(*p1);
  // The same host bytes at two HBM addresses, as the runtime maps a host tensor per request.
  std::vector<uint8_t> shared(kElems * 4);
  const auto y_at = dev->allocate(0, shared.size(), shared.data());
  const auto x_at = dev->allocate(0, shared.size(), shared.data());
  ASSERT_TRUE(y_at && x_at);
  io0[p0->tensor("y").var_id] = TensorBinding{*y_at, shared.size()};
  io1[p1->tensor("x").var_id] = TensorBinding{*x_at, shared.size()};
  dev->write_tensor(*p0, io0, "x", floats(kElems, 1.0f, 0.0f));
  const uint64_t s0 = dev->enqueue({p0, io0, "producer"});
  const uint64_t s1 = dev->enqueue({p1, io1, "consumer"});
  const Completion c0 = dev->wait(s0);
  EXPECT_GE(dev->wait(s1).start_ps, c0.end_ps);
  EXPECT_FLOAT_EQ(at(dev->read_tensor(*p1, io1, "y"), 3), 5.0f);
}

TEST(Device, ExecutionsOfOneWindowContendForHbm) {
  auto alone = Device::open("trn2.3xlarge");
  const ProgramRef a = alone->load(0, square_plus_one(), "k");
  const Completion one = alone->run({a, alone->allocate_io(*a), "k"});

  auto dev = Device::open("trn2.3xlarge");
  std::vector<Execution> group;
  std::vector<ProgramRef> programs;
  for (uint32_t core = 0; core < 8; ++core) {
    programs.push_back(dev->load(core, square_plus_one(), "k"));
    group.push_back({programs.back(), dev->allocate_io(*programs.back()), "k"});
  }
  const auto seqs = dev->enqueue_group(std::move(group), {});
  ASSERT_EQ(seqs.size(), 8u);
  uint64_t slowest = 0;
  std::shared_ptr<const RunResult> window;
  for (uint64_t s : seqs) {
    const Completion c = dev->wait(s);
    EXPECT_EQ(c.start_ps, 0u);
    slowest = std::max(slowest, c.end_ps);
    if (window) {
      EXPECT_EQ(c.run, window) << "one window for the group";
    }
    window = c.run;
  }
  EXPECT_GE(slowest, one.end_ps);
  EXPECT_EQ(window->cores.size(), 8u);
}

TEST(Device, PollingAndWaitingOnSequenceNumbers) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const uint64_t s = dev->enqueue({p, io, "square"});
  dev->synchronize();
  EXPECT_TRUE(dev->done(s));
  EXPECT_FALSE(dev->done(s + 1));
  EXPECT_EQ(dev->wait(s).seq, s);
  EXPECT_THAT([&] { dev->wait(s); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("already taken")));
  EXPECT_THAT([&] { dev->wait(s + 5); }, ::testing::ThrowsMessage<std::invalid_argument>(
                                             HasSubstr("no work with sequence number")));
}

TEST(Device, CopiesMoveBytesInQueueOrderAndTakeTime) {
  auto dev = Device::open("trn2.3xlarge");
  const auto a = dev->allocate(0, 1 << 20);
  const auto b = dev->allocate(0, 1 << 20);
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  dev->write(0, *a, bytes);
  const uint64_t s1 = dev->enqueue(0, Copy{0, 0, *a, *b, bytes.size(), "copy"});
  const uint64_t s2 = dev->enqueue(0, Copy{0, 0, *b, *a + 512, 512, "copy2"});
  const Completion c1 = dev->wait(s1);
  const Completion c2 = dev->wait(s2);
  EXPECT_GT(c1.end_ps, c1.start_ps);
  EXPECT_EQ(c2.start_ps, c1.end_ps);
  std::vector<uint8_t> out(bytes.size());
  dev->read(0, *b, out);
  EXPECT_EQ(out, bytes);
}

TEST(Device, HostMappedAllocationsShareTheirBytes) {
  auto dev = Device::open("trn2.3xlarge");
  std::vector<uint8_t> host(4096, 0);
  const auto addr = dev->allocate(0, host.size(), host.data());
  ASSERT_TRUE(addr);
  EXPECT_NE(*addr, 0u);
  const uint8_t five[] = {5, 5, 5};
  dev->write(0, *addr + 10, five);
  EXPECT_EQ(host[11], 5);
  EXPECT_EQ(dev->memory(0).used, 4096u);
  dev->free(0, *addr);
  EXPECT_EQ(dev->memory(0).used, 0u);
  EXPECT_EQ(dev->memory(0).peak, 4096u);
}

TEST(Device, ATraceSessionSpansManyExecutionsOnOneTimeAxis) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  const uint64_t session = dev->start_trace();
  for (int i = 0; i < 100; ++i) dev->enqueue({p, io, "op" + std::to_string(i)});
  const TraceSession t = dev->stop_trace(session);
  ASSERT_EQ(t.result.executions.size(), 100u);
  for (size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(t.result.executions[i].name, "op" + std::to_string(i));
    if (i) {
      EXPECT_EQ(t.result.executions[i].start_ps, t.result.executions[i - 1].end_ps);
    }
  }
  EXPECT_EQ(t.result.instructions.size(), 100 * p->program().num_instructions());
  EXPECT_EQ(std::max(t.result.instructions.back().end_ps, t.result.dmas.back().end_ps),
            t.result.executions.back().end_ps);
  EXPECT_EQ(t.result.total_ps, t.result.executions.back().end_ps);
  EXPECT_EQ(t.dropped_events, 0u);
  // The session's totals are the windows' summed.
  ASSERT_EQ(t.result.cores.size(), 1u);
  uint64_t instructions = 0;
  for (const EngineStats& e : t.result.cores[0].engines) instructions += e.instructions;
  EXPECT_EQ(instructions, 100 * p->program().num_instructions());
  EXPECT_EQ(t.result.cores[0].hbm_read_bytes, 100 * p->tensor("x").size_bytes());
}

TEST(Device, ATraceSessionKeepsToItsLimits) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  TraceLimits limits;
  limits.max_events = 10;
  const uint64_t session = dev->start_trace(limits);
  for (int i = 0; i < 5; ++i) dev->enqueue({p, io, "op"});
  const TraceSession t = dev->stop_trace(session);
  EXPECT_EQ(t.result.instructions.size() + t.result.dmas.size() + t.result.flows.size(), 10u);
  EXPECT_GT(t.dropped_events, 0u);
  EXPECT_EQ(t.result.executions.size(), 5u);
}

TEST(Device, ATraceSessionCapsTheEventsOfEachCore) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p0 = dev->load(0, square_plus_one(), "square");
  const ProgramRef p1 = dev->load(1, square_plus_one(), "square");
  const Bindings io0 = dev->allocate_io(*p0), io1 = dev->allocate_io(*p1);
  TraceLimits limits;
  limits.max_events_per_core = 10;
  const uint64_t session = dev->start_trace(limits);
  for (int i = 0; i < 5; ++i) {
    dev->enqueue({p0, io0, "op"});
    dev->enqueue({p1, io1, "op"});
  }
  const TraceSession t = dev->stop_trace(session);
  std::map<uint32_t, uint64_t> events;
  for (const InstructionRecord& r : t.result.instructions) ++events[r.core];
  for (const DmaRecord& r : t.result.dmas) ++events[r.core];
  for (const FlowRecord& r : t.result.flows) ++events[r.core];
  EXPECT_EQ(events, (std::map<uint32_t, uint64_t>{{0, 10}, {1, 10}}));
  EXPECT_GT(t.dropped_events, 0u);
  EXPECT_EQ(t.result.executions.size(), 10u);
}

TEST(Device, FunctionalOnlyComputesValuesWithoutTime) {
  DeviceOptions o;
  o.mode = Mode::functional_only;
  auto dev = Device::open("trn2.3xlarge", o);
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  const Bindings io = dev->allocate_io(*p);
  dev->write_tensor(*p, io, "x", floats(kElems, 3.0f, 0.0f));
  const Completion c = dev->run({p, io, "square"});
  EXPECT_EQ(c.end_ps, c.start_ps);
  EXPECT_FLOAT_EQ(at(dev->read_tensor(*p, io, "y"), 0), 10.0f);
}

TEST(Device, RunAfterQueuedWorkKeepsQueueOrderInFunctionalOnlyMode) {
  // An idle device runs a functional-only execution on the caller's thread; a busy one must
  // not let it overtake what is queued ahead of it.
  DeviceOptions o;
  o.mode = Mode::functional_only;
  auto dev = Device::open("trn2.3xlarge", o);
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  Bindings io = dev->allocate_io(*p);
  io[p->tensor("y").var_id] = io.at(p->tensor("x").var_id);  // in place: x <- x * x + 1
  dev->write_tensor(*p, io, "x", floats(kElems, 0.0f, 0.0f));
  std::vector<uint64_t> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(dev->enqueue({p, io, "queued"}));
  const Completion last = dev->run({p, io, "last"});
  for (uint64_t s : queued) EXPECT_LT(s, last.seq);
  EXPECT_FLOAT_EQ(at(dev->read_tensor(*p, io, "x"), 0), 26.0f);  // 0 -> 1 -> 2 -> 5 -> 26
}

TEST(Device, KeepsTheHostProgramsBlasThreads) {
  // A matmul runs on one BLAS thread for determinism, without changing the host's setting.
  openblas_set_num_threads(2);
  isa::KernelBuilder kb("trn2");
  const auto a = kb.input("a", isa::DType::bf16, {128, 128});
  const auto b = kb.input("b", isa::DType::bf16, {128, 128});
  const auto c = kb.output("c", isa::DType::fp32, {128, 128});
  const auto ta = kb.sbuf_tile(isa::DType::bf16, 128, 128);
  const auto tb = kb.sbuf_tile(isa::DType::bf16, 128, 128);
  const auto acc = kb.psum_tile(isa::DType::fp32, 128, 128);
  const auto out = kb.sbuf_tile(isa::DType::fp32, 128, 128);
  kb.dma_copy(ta, a);
  kb.dma_copy(tb, b);
  kb.matmul(acc, ta, tb);
  kb.tensor_copy(isa::Engine::ACT, out, acc);
  kb.dma_copy(c, out);
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef p = dev->load(0, kb.finish(), "mm");
  dev->run({p, dev->allocate_io(*p), "mm"});
  EXPECT_EQ(openblas_get_num_threads(), 2);
  openblas_set_num_threads(1);
}

TEST(Device, ErrorsNameWhatWasWrong) {
  auto dev = Device::open("trn2.3xlarge");
  EXPECT_THAT([&] { dev->load(99, square_plus_one(), "k"); },
              ::testing::ThrowsMessage<std::out_of_range>(HasSubstr("no core 99")));
  isa::Program trn1 = square_plus_one();
  trn1.target = "trn1";
  EXPECT_THAT([&] { dev->load(0, trn1, "old"); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("built for trn1")));
  const ProgramRef p = dev->load(0, square_plus_one(), "square");
  EXPECT_THAT([&] { p->tensor("z"); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("tensors: x, y")));
  Bindings only_x = dev->allocate_io(*p);
  only_x.erase(p->tensor("y").var_id);
  EXPECT_THAT(
      [&] {
        dev->run({p, only_x, "partial"});
      },
      ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("output 'y'")));
  EXPECT_FALSE(dev->allocate(0, uint64_t{1} << 50));
}

// A dma_copy whose index picks row 9 of an 8-row tensor: it faults wherever it runs.
isa::Program out_of_bounds() {
  return isa::assemble(
      ".target trn2\n"
      ".tensor x float32 [8,4] input\n"
      "pool memset dst=sbuf.i32[0:4]+0[[1,1]] value=9\n"
      "pool dma_copy dst=sbuf.fp32[0:4]+64[[1,4]] src=hbm.fp32(x)+0[[4,8],[1,4]] "
      "index=sbuf.i32[0:4]+0[[1,1]]\n");
}

TEST(Device, AFaultInASharedWindowIsAttributedByRunningEachAlone) {
  auto dev = Device::open("trn2.3xlarge");
  const ProgramRef bad = dev->load(0, out_of_bounds(), "bad");
  const ProgramRef good = dev->load(1, square_plus_one(), "good");
  const ProgramRef slow = dev->load(2, square_plus_one(), "slow");
  const Bindings io_bad = dev->allocate_io(*bad), io_good = dev->allocate_io(*good),
                 io_slow = dev->allocate_io(*slow);
  bool shared = false;
  for (int attempt = 0; attempt < 20 && !shared; ++attempt) {
    dev->enqueue({slow, io_slow, "slow"});  // keeps the worker busy while the next two queue up
    const uint64_t sb = dev->enqueue({bad, io_bad, "bad"});
    const uint64_t sg = dev->enqueue({good, io_good, "good"});
    const Completion cb = dev->wait(sb), cg = dev->wait(sg);
    ASSERT_TRUE(cb.error);
    EXPECT_FALSE(cg.error) << "only the faulting execution fails";
    try {
      std::rethrow_exception(cb.error);
    } catch (const ExecError& e) {
      EXPECT_EQ(e.kind(), ExecError::Kind::out_of_bounds);
    }
    if (!cg.batch_fault) continue;  // they did not share a window this time
    shared = true;
    EXPECT_GE(cg.batch_size, 2u);
    EXPECT_EQ(cb.batch_fault, cg.batch_fault) << "one fault for the window";
    ASSERT_NE(cg.run, nullptr);
    EXPECT_EQ(cg.run->cores.size(), 1u) << "the good one ran again alone";
  }
  EXPECT_TRUE(shared);
  dev->synchronize();
}

// y = x squared 16 times: keeps a core busy much longer than square_plus_one.
isa::Program long_square() {
  isa::KernelBuilder kb("trn2");
  const auto x = kb.input("x", isa::DType::fp32, {128, 512});
  const auto y = kb.output("y", isa::DType::fp32, {128, 512});
  const auto t = kb.sbuf_tile(isa::DType::fp32, 128, 512);
  kb.dma_copy(t, x);
  for (int i = 0; i < 16; ++i) kb.activation(t, t, isa::ActFunc::square);
  kb.dma_copy(y, t);
  return kb.finish();
}

TEST(Device, AFaultedSharedWindowAppliesAnInPlaceExecutionOnce) {
  // The worker is held in its first window (a long execution on core 1) until two executions
  // are queued that then share one window: core 0's in place (x <- x * x + 1) from time 0, and
  // core 1's faulting one after the long one, so the in-place one has written x by the fault.
  std::promise<void> entered, open;
  std::future<void> in_first_window = entered.get_future();
  const std::shared_future<void> gate = open.get_future().share();
  std::atomic<bool> first{true};
  DeviceOptions o;
  o.progress = [&](uint64_t, uint64_t) {
    if (first.exchange(false)) entered.set_value();
    gate.wait();
  };
  auto dev = Device::open("trn2.3xlarge", o);
  const ProgramRef hold = dev->load(1, long_square(), "hold");
  const ProgramRef bad = dev->load(1, out_of_bounds(), "bad");
  const ProgramRef in_place = dev->load(0, square_plus_one(), "in_place");
  Bindings io = dev->allocate_io(*in_place);
  io[in_place->tensor("y").var_id] = io.at(in_place->tensor("x").var_id);
  dev->write_tensor(*in_place, io, "x", floats(kElems, 2.0f, 0.0f));
  const uint64_t sh = dev->enqueue({hold, dev->allocate_io(*hold), "hold"});
  if (in_first_window.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    open.set_value();
    FAIL() << "the first window reported no progress";
  }
  const uint64_t si = dev->enqueue({in_place, io, "in place"});
  const uint64_t sb = dev->enqueue({bad, dev->allocate_io(*bad), "bad"});
  open.set_value();
  EXPECT_FALSE(dev->wait(sh).error);
  const Completion ci = dev->wait(si), cb = dev->wait(sb);
  ASSERT_TRUE(ci.batch_fault) << "the two shared a window, and it faulted";
  EXPECT_EQ(ci.batch_size, 2u);
  EXPECT_EQ(cb.batch_fault, ci.batch_fault);
  EXPECT_FALSE(ci.error) << "the in-place execution did not fault";
  ASSERT_TRUE(cb.error);
  EXPECT_THAT([&] { std::rethrow_exception(cb.error); },
              ::testing::Throws<ExecError>(::testing::Property(
                  &ExecError::kind, ::testing::Eq(ExecError::Kind::out_of_bounds))));
  const auto x = dev->read_tensor(*in_place, io, "x");
  for (size_t i = 0; i < kElems; i += 97)
    ASSERT_FLOAT_EQ(at(x, i), 5.0f) << "2 * 2 + 1 once (26 when applied twice), element " << i;
}

}  // namespace
}  // namespace neuronsim::sim
