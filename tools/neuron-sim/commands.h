// The subcommands of the neuron-sim CLI. Each registers its options on the app
// and runs when selected; errors are thrown and reported once by main().
#pragma once

#include <CLI/CLI.hpp>

namespace neuronsim::tools {

void add_info_command(CLI::App& app);
void add_asm_command(CLI::App& app);
void add_disasm_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_cc_bench_command(CLI::App& app);

}  // namespace neuronsim::tools

namespace neuronsim::bench {
void add_bench_command(CLI::App& app);      // tools/bench/command.cpp
void add_report_command(CLI::App& app);     // tools/bench/report_command.cpp
void add_correlate_command(CLI::App& app);  // tools/bench/correlate_command.cpp
}  // namespace neuronsim::bench
