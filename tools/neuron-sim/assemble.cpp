// `neuron-sim asm` and `neuron-sim disasm`.
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "commands.h"
#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"

namespace neuronsim::tools {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open for reading", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

void add_asm_command(CLI::App& app) {
  struct Options {
    std::string input, output;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("asm", "Assemble a .s file into a NEFF");
  cmd->add_option("source", opts->input, "assembly source (.s)")->required();
  cmd->add_option("-o,--output", opts->output, "NEFF to write")->required();
  cmd->callback([opts] {
    const isa::Program program = isa::assemble(read_text(opts->input), opts->input);
    const std::string name = std::filesystem::path(opts->output).filename().string();
    isa::neff::write_neff_file(isa::to_neff(program, name), opts->output);
    fmt::print("{}: {} instructions, {} tensors\n", opts->output, program.num_instructions(),
               program.tensors.size());
  });
}

void add_disasm_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("disasm", "Print a NEFF's instruction streams as assembly");
  cmd->add_option("neff", *path, "NEFF file")->required();
  cmd->callback([path] {
    const isa::neff::Neff neff = isa::neff::read_neff_file(*path);
    for (size_t i = 0; i < neff.subgraphs.size(); ++i) {
      const std::string text = isa::disassemble(isa::from_neff(neff, *path, i));
      if (neff.subgraphs.size() > 1) fmt::print("# subgraph {}\n", neff.subgraphs[i].name);
      fmt::print("{}", text);
    }
  });
}

}  // namespace neuronsim::tools
