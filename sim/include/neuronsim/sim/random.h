// The pseudo random numbers of the simulated engines, and the seeding that feeds
// them: one header so the simulator, the PyTorch backend and the benchmarks draw
// the same sequences on every machine and standard library.
#pragma once

#include <array>
#include <cstdint>

namespace neuronsim::sim {

// splitmix64 (Steele, Lea and Flood, 2014): advances `state` and returns the next
// 64-bit value of its stream. Nearby states give unrelated values.
constexpr uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One compute lane's generator: Marsaglia's XORWOW, the algorithm the NKI
// documentation names for the engines' generator (nki.isa.rand2, rand_set_state).
// The word order of the state (x0..x4, then the Weyl counter d) and the output
// (the new x0 plus d) follow Marsaglia's paper; that the engines keep them in this
// order is assumed.
struct Xorwow {
  std::array<uint32_t, 6> words{};

  constexpr uint32_t next() {
    uint32_t t = words[4] ^ (words[4] >> 2);
    t ^= (t << 1) ^ words[0] ^ (words[0] << 4);
    for (int k = 4; k > 0; --k) words[k] = words[k - 1];
    words[0] = t;
    words[5] += 362437u;  // Marsaglia's Weyl step
    return t + words[5];
  }

  // A state from the next six values of a splitmix64 stream (their high words).
  static constexpr Xorwow seeded(uint64_t& stream) {
    Xorwow g;
    for (uint32_t& w : g.words) w = static_cast<uint32_t>(splitmix64(stream) >> 32);
    return g;
  }
};

}  // namespace neuronsim::sim
