// neuron-sim: run, inspect, assemble and benchmark NEFFs and collectives on the simulator.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "neuron-sim: a Trainium simulator. Run, inspect, assemble and disassemble NEFF files."};
  app.set_version_flag("--version", "neuron-sim " NEURONSIM_VERSION);
  app.require_subcommand(1);
  neuronsim::tools::add_info_command(app);
  neuronsim::tools::add_asm_command(app);
  neuronsim::tools::add_disasm_command(app);
  neuronsim::tools::add_run_command(app);
  neuronsim::tools::add_cc_bench_command(app);
  neuronsim::bench::add_bench_command(app);
  neuronsim::bench::add_report_command(app);
  neuronsim::bench::add_correlate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "neuron-sim: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
