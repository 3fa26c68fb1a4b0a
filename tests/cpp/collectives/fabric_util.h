// Helpers of the fabric tests: instance configs by name, routes by link name, timed sends.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/cc/fabric.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::cc::testing {

inline const spec::InstanceConfig& inst(const std::string& name) {
  static std::map<std::string, spec::InstanceConfig> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, spec::load_instance(name)).first;
  return it->second;
}

inline std::vector<std::string> link_names(const Fabric& f, int src, int dst) {
  std::vector<std::string> out;
  for (int li : f.route(src, dst)) out.push_back(f.links()[static_cast<size_t>(li)].name);
  return out;
}

inline const Fabric::Link& link(const Fabric& f, const std::string& name) {
  for (const auto& l : f.links())
    if (l.name == name) return l;
  throw std::out_of_range(name);
}

// Runs sends posted at time 0 (size only) and returns each one's delivery time.
inline std::vector<Picos> deliver(Fabric& f, const std::vector<std::pair<int, int>>& pairs,
                                  uint64_t bytes) {
  std::vector<Picos> at(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    f.recv(pairs[i].second, pairs[i].first, nullptr, bytes, i, nullptr);
    f.send(pairs[i].first, pairs[i].second, nullptr, bytes, i, [&f, &at, i] { at[i] = f.now(); });
  }
  f.run();
  return at;
}

}  // namespace neuronsim::cc::testing
