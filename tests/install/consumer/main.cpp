// Builds a kernel with KernelBuilder, runs it on an installed neuronsim through sim::Device and
// checks the values: y = x * x + 1. Exit status 0 when they are right.
#include <cstdio>
#include <cstring>
#include <vector>

#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/sim/device.h"

int main() {
  using namespace neuronsim;
  isa::KernelBuilder kb("trn2");
  const auto x = kb.input("x", isa::DType::fp32, {128, 64});
  const auto y = kb.output("y", isa::DType::fp32, {128, 64});
  const auto t = kb.sbuf_tile(isa::DType::fp32, 128, 64);
  kb.dma_copy(t, x);
  kb.activation(t, t, isa::ActFunc::square);
  kb.tensor_scalar(isa::Engine::DVE, t, t, isa::AluOp::add, 1.0f);
  kb.dma_copy(y, t);

  auto device = sim::Device::open("trn2.3xlarge");
  const sim::ProgramRef program = device->load(0, kb.finish(), "square_plus_one");
  const sim::Bindings io = device->allocate_io(*program);
  std::vector<float> in(128 * 64, 3.0f);
  std::vector<uint8_t> bytes(in.size() * 4);
  std::memcpy(bytes.data(), in.data(), bytes.size());
  device->write_tensor(*program, io, "x", bytes);
  const sim::Completion done = device->run({program, io, "square_plus_one"});
  const std::vector<uint8_t> out = device->read_tensor(*program, io, "y");
  float first;
  std::memcpy(&first, out.data(), 4);
  std::printf("consumer: y[0] = %g after %llu ps on %s\n", first,
              static_cast<unsigned long long>(done.end_ps - done.start_ps),
              device->instance().name.c_str());
  return first == 10.0f && done.end_ps > done.start_ps ? 0 : 1;
}
