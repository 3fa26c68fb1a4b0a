// `neuron-sim info`: what a NEFF holds and whether neuronsim can execute it.
// One JSON description is built; --json prints it, otherwise it is laid out as text.
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "neuronsim/isa/encoding.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"

namespace neuronsim::tools {
namespace {

using nlohmann::json;
namespace neff = isa::neff;

json tensor_json(const neff::Tensor& t) {
  return {{"name", t.name}, {"dtype", t.dtype_name}, {"shape", t.shape}, {"size", t.size_bytes()}};
}

std::string hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

// Instruction counts: decoded for our streams; 64-byte slots for streams we cannot decode.
json engines_json(const neff::Subgraph& sg, const isa::Program* program) {
  json out = json::array();
  for (const neff::EngineStream& s : sg.engines) {
    json e = {{"engine", s.name}, {"bytes", s.code.size()}};
    if (program)
      e["instructions"] = program->stream(*isa::parse_engine(s.name)).size();
    else
      e["slots_64b"] = s.code.size() / isa::kSlotBytes;
    out.push_back(e);
  }
  return out;
}

json subgraph_json(const neff::Neff& n, size_t i, const std::string& path, json& exec) {
  const neff::Subgraph& sg = n.subgraphs[i];
  std::optional<isa::Program> program;
  if (n.executable_by_neuronsim()) {
    try {
      program = isa::from_neff(n, path, i);
    } catch (const std::exception& e) {
      exec = {{"executable", false}, {"reason", e.what()}};
    }
  }
  json vars = json::array();
  for (const neff::Variable& v : sg.variables)
    vars.push_back({{"name", v.name}, {"type", v.type}, {"var_id", v.var_id}, {"size", v.size}});
  json queues = json::array();
  for (const neff::DmaQueue& q : sg.dma_queues)
    queues.push_back({{"name", q.name},
                      {"type", q.type},
                      {"owner", q.owner},
                      {"num_queues", q.num_queues},
                      {"semaphores", q.semaphores}});
  return {{"name", sg.name},
          {"variables", vars},
          {"dma_queues", queues},
          {"engines", engines_json(sg, program ? &*program : nullptr)}};
}

json describe(const neff::Neff& n, const std::string& path) {
  const neff::Header& h = n.header;
  json exec = {{"executable", n.executable_by_neuronsim()}};
  if (!n.executable_by_neuronsim())
    exec["reason"] = fmt::format(
        "instruction streams produced by '{}' use an encoding neuronsim does "
        "not execute (it executes its own ISA version {})",
        n.producer, isa::kIsaVersion);
  json out = {
      {"file", path},
      {"file_size", std::filesystem::file_size(path)},
      {"header",
       {{"pkg_version", h.pkg_version},
        {"header_size", h.header_size},
        {"data_size", h.data_size},
        {"neff_version", fmt::format("{}.{}", h.neff_version_major, h.neff_version_minor)},
        {"build_version", h.build_version},
        {"num_tpb", h.num_tpb},
        {"hash", hex(h.hash)},
        {"uuid", hex(h.uuid)},
        {"name", h.name},
        {"requested_tpb_count", h.requested_tpb_count},
        {"feature_bits", fmt::format("{:#x}", h.feature_bits)},
        {"lnc_size", h.lnc_size}}},
      {"producer", n.producer},
      {"target", n.target},
      {"generation", std::string(isa::find_target_name(n.target).value_or("unknown"))},
      {"isa_version", n.isa_version ? json(*n.isa_version) : json(nullptr)},
  };
  json inputs = json::array(), outputs = json::array(), subgraphs = json::array();
  for (const neff::Tensor& t : n.inputs()) inputs.push_back(tensor_json(t));
  for (const neff::Tensor& t : n.outputs()) outputs.push_back(tensor_json(t));
  for (size_t i = 0; i < n.subgraphs.size(); ++i)
    subgraphs.push_back(subgraph_json(n, i, path, exec));
  out["inputs"] = inputs;
  out["outputs"] = outputs;
  out["subgraphs"] = subgraphs;
  out["execution"] = exec;
  return out;
}

void print_tensors(const char* title, const json& tensors) {
  fmt::print("{}:\n", title);
  if (tensors.empty()) fmt::print("  (none)\n");
  for (const json& t : tensors)
    fmt::print("  {:<24} {:<10} [{}]  {} bytes\n", t["name"].get<std::string>(),
               t["dtype"].get<std::string>(),
               fmt::join(t["shape"].get<std::vector<int64_t>>(), ", "), t["size"].get<uint64_t>());
}

void print_text(const json& d) {
  const json& h = d["header"];
  fmt::print("NEFF {} ({} bytes)\n", d["file"].get<std::string>(), d["file_size"].get<uint64_t>());
  fmt::print(
      "  name {}, neff version {}, package version {}, lnc size {}, tpbs {}, feature bits {}\n",
      h["name"].get<std::string>(), h["neff_version"].get<std::string>(),
      h["pkg_version"].get<uint64_t>(), h["lnc_size"].get<uint32_t>(), h["num_tpb"].get<uint32_t>(),
      h["feature_bits"].get<std::string>());
  fmt::print("  producer {}, target {} ({})\n", d["producer"].get<std::string>(),
             d["target"].get<std::string>(), d["generation"].get<std::string>());
  const json& exec = d["execution"];
  fmt::print("  executable by neuronsim: {}\n",
             exec["executable"].get<bool>() ? "yes" : "no: " + exec["reason"].get<std::string>());
  print_tensors("inputs", d["inputs"]);
  print_tensors("outputs", d["outputs"]);
  for (const json& sg : d["subgraphs"]) {
    fmt::print("subgraph {}:\n", sg["name"].get<std::string>());
    for (const json& q : sg["dma_queues"])
      fmt::print("  dma queue {:<16} type {:<8} owner {:<5} {} queues\n",
                 q["name"].get<std::string>(), q["type"].get<std::string>(),
                 q["owner"].get<std::string>(), q["num_queues"].get<int>());
    for (const json& e : sg["engines"]) {
      const std::string count =
          e.contains("instructions")
              ? fmt::format("{} instructions", e["instructions"].get<size_t>())
              : fmt::format("{} 64-byte slots", e["slots_64b"].get<size_t>());
      fmt::print("  engine {:<11} {:>7} bytes  {}\n", e["engine"].get<std::string>(),
                 e["bytes"].get<size_t>(), count);
    }
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  struct Options {
    std::string path;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("info", "Describe a NEFF: header, tensors, subgraphs, engines");
  cmd->add_option("neff", opts->path, "NEFF file")->required();
  cmd->add_flag("--json", opts->json, "print JSON instead of text");
  cmd->callback([opts] {
    const json d = describe(neff::read_neff_file(opts->path), opts->path);
    if (opts->json)
      fmt::print("{}\n", d.dump(2));
    else
      print_text(d);
  });
}

}  // namespace neuronsim::tools
