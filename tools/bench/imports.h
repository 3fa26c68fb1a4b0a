// Figures written by other tools, read for the history (`neuron-sim bench --import`) and the
// benchmark suite (suite.h): the metrics JSON of `neuron-sim run --metrics` and
// `neuron-sim cc-bench --metrics` ({"metrics": [{"name", "unit", "value"}, ...]}), and the CSV of
// `neuron-sim bench --csv` (benchmark,metric,value) or an expected file (…,margin).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "expected.h"

namespace neuronsim::bench {

// A file that is none of the formats above, or a figure without a number or a benchmark; the
// message names the file and the entry.
class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The figures of one file. A metrics name "a/b/metric" is benchmark "a/b", metric "metric"; a
// name without "/" belongs to `benchmark` (an error when it is empty). Units are the file's.
std::vector<Measurement> read_figures(const std::filesystem::path& file,
                                      const std::string& benchmark = {});

}  // namespace neuronsim::bench
