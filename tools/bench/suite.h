// The benchmark suite above the kernel level (bench/suite.json): each benchmark a name, a
// shell command and the figures it yields, run by `neuron-sim bench --suite`. A command writes
// its figures to {out} in a format imports.h reads (metrics JSON or benchmark,metric,value CSV);
// a trace written to {trace} is kept as the benchmark's artifact "trace.json".
//
// Placeholders in commands: {neuron_sim} and {make_kernels} (this build's tools), {python}
// (the project's .venv interpreter when there is one, else python3), {out}, {trace} and {tmp}
// (a scratch directory of the benchmark). Commands run with /bin/sh in the suite's root, the
// folder above the suite file's (the repository root for bench/suite.json).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "expected.h"
#include "history.h"

namespace neuronsim::bench {

// A malformed suite file (the message names the file and the entry) or a benchmark whose
// command failed (the message names it and gives its output's tail).
class SuiteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SuiteEntry {
  std::string name;  // e.g. "trn2/neff/matmul_bf16"
  std::string description;
  std::string command;              // with placeholders
  std::string benchmark;            // the benchmark of figure names without "/" (default: name)
  std::vector<std::string> labels;  // e.g. "torch", "slow"
};

struct Suite {
  std::filesystem::path file, root;
  std::vector<SuiteEntry> entries;
};

// Reads and checks a suite file. Throws SuiteError.
Suite read_suite(const std::filesystem::path& file);

// Which entries run: names containing `filter` (empty: all), none carrying a label in `skip`.
struct SuiteSelection {
  std::string filter;
  std::vector<std::string> skip_labels;
  bool selected(const SuiteEntry& e) const;
};

struct SuiteTools {
  std::filesystem::path neuron_sim, make_kernels, python;
};

struct SuiteResult {
  std::vector<Measurement> figures;
  std::vector<Artifact> artifacts;
};

// Runs the selected entries in order; `progress` is called before and after each one with a
// line to print. Throws SuiteError on the first failing benchmark.
SuiteResult run_suite(const Suite& suite, const SuiteSelection& selection, const SuiteTools& tools,
                      const std::function<void(const std::string&)>& progress);

}  // namespace neuronsim::bench
