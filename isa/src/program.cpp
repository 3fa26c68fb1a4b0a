#include "neuronsim/isa/program.h"

#include <algorithm>

#include <fmt/format.h>

#include "neuronsim/isa/encoding.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/npy.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/isa/validate.h"

namespace neuronsim::isa {
namespace {

constexpr std::array<std::string_view, 4> kKindNames = {"input", "output", "constant", "scratch"};
// def.json variable types for each TensorKind.
constexpr std::array<std::string_view, 4> kVarTypes = {"input", "output", "file", "virtual"};

std::string constant_file(const std::string& tensor) {
  return fmt::format("value_{}.npy", tensor);
}

neff::Subgraph make_subgraph(const Program& p) {
  neff::Subgraph sg;
  sg.name = "sg00";
  sg.variables.push_back({"SB", "state-buffer", 0, 0, ""});
  for (const TensorDecl& t : p.tensors) {
    const auto kind = static_cast<size_t>(t.kind);
    neff::Variable v{t.name, std::string(kVarTypes[kind]), t.var_id, t.size_bytes(), ""};
    neff::Tensor tensor{t.name, std::string(dtype_name(t.dtype)), t.dtype, t.shape, "", false};
    if (t.kind == TensorKind::input || t.kind == TensorKind::output) tensor.kind = kKindNames[kind];
    if (t.kind == TensorKind::constant) {
      v.file_name = constant_file(t.name);
      tensor.is_const = true;
      sg.files[v.file_name] = write_npy({npy_descr(t.dtype), t.shape, t.data});
    }
    sg.variables.push_back(v);
    sg.tensors.push_back(tensor);
  }
  for (int e = 0; e < kNumEngines; ++e) {
    const auto engine = static_cast<Engine>(e);
    const std::string name(engine_neff_name(engine));
    neff::EngineStream s{name, "sg00/" + name + ".json", "sg00/" + name + ".bin",
                         encode_stream(p.streams[e]), nlohmann::json::object()};
    sg.engines.push_back(std::move(s));
    const bool triggers_dma =
        std::any_of(p.streams[e].begin(), p.streams[e].end(),
                    [](const Instruction& in) { return in.opcode == Opcode::dma_copy; });
    if (triggers_dma)
      sg.dma_queues.push_back(
          {fmt::format("q{}Data", name), "data", std::string(engine_name(engine)), 16, {}});
  }
  return sg;
}

TensorKind kind_of_variable(const neff::Variable& v, const std::string& source) {
  for (size_t k = 0; k < kVarTypes.size(); ++k)
    if (v.type == kVarTypes[k]) return static_cast<TensorKind>(k);
  throw NeffError(
      fmt::format("{}: variable '{}' has type '{}', which neuronsim programs do not use", source,
                  v.name, v.type));
}

TensorDecl tensor_from_neff(const neff::Subgraph& sg, const neff::Variable& v,
                            const std::string& source) {
  TensorDecl t;
  t.name = v.name;
  t.kind = kind_of_variable(v, source);
  t.var_id = static_cast<uint16_t>(v.var_id);
  auto it = std::find_if(sg.tensors.begin(), sg.tensors.end(),
                         [&](const neff::Tensor& x) { return x.name == v.name; });
  if (it == sg.tensors.end() || !it->dtype)
    throw NeffError(fmt::format("{}: {}/tensor_map.json: no known dtype for variable '{}'", source,
                                sg.name, v.name));
  t.dtype = *it->dtype;
  t.shape = it->shape;
  if (t.kind == TensorKind::constant) {
    auto f = sg.files.find(v.file_name);
    if (f == sg.files.end())
      throw NeffError(fmt::format("{}: {}/{}: missing (value of constant '{}')", source, sg.name,
                                  v.file_name, v.name));
    t.data = parse_npy(f->second, fmt::format("{} {}/{}", source, sg.name, v.file_name)).data;
  }
  if (t.size_bytes() != v.size)
    throw NeffError(
        fmt::format("{}: {}/def.json: variable '{}' is {} bytes, its tensor map says {}", source,
                    sg.name, v.name, v.size, t.size_bytes()));
  return t;
}

}  // namespace

std::string_view tensor_kind_name(TensorKind k) {
  return kKindNames[static_cast<size_t>(k)];
}

uint64_t TensorDecl::num_elems() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const TensorDecl* Program::find_tensor(std::string_view name) const {
  for (const TensorDecl& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorDecl* Program::find_tensor(uint16_t var_id) const {
  // Ids are usually positions + 1 (as KernelBuilder and the assembler number them).
  if (var_id >= 1 && var_id <= tensors.size() && tensors[var_id - 1u].var_id == var_id)
    return &tensors[var_id - 1u];
  for (const TensorDecl& t : tensors)
    if (t.var_id == var_id) return &t;
  return nullptr;
}

size_t Program::num_instructions() const {
  size_t n = 0;
  for (const auto& s : streams) n += s.size();
  return n;
}

neff::Neff to_neff(const Program& program, const std::string& name) {
  validate(program);
  const Target& target = target_by_name(program.target);
  neff::Neff n;
  n.header.name = name;
  n.header.build_version = fmt::format("neuronsim {}", NEURONSIM_VERSION);
  n.target = target.neff_target;
  n.producer = fmt::format("neuronsim {}", NEURONSIM_VERSION);
  n.isa_version = kIsaVersion;
  n.header.lnc_size = program.lnc;
  n.subgraphs.push_back(make_subgraph(program));
  return n;
}

Program from_neff(const neff::Neff& neff, const std::string& source, size_t subgraph) {
  if (!neff.executable_by_neuronsim())
    throw NeffError(fmt::format(
        "{}: its instruction streams were produced by '{}' in an encoding neuronsim cannot "
        "execute (neuronsim executes streams of its own ISA version {})",
        source, neff.producer, kIsaVersion));
  if (subgraph >= neff.subgraphs.size())
    throw NeffError(fmt::format("{}: has no subgraph {}", source, subgraph));
  const neff::Subgraph& sg = neff.subgraphs[subgraph];
  Program p;
  const auto target = find_target_name(neff.target);
  if (!target)
    throw NeffError(fmt::format("{}: kelf-0.json: unknown target '{}'", source, neff.target));
  p.target = std::string(*target);
  p.lnc = neff.header.lnc_size;
  for (const neff::Variable& v : sg.variables)
    if (v.type != "state-buffer") p.tensors.push_back(tensor_from_neff(sg, v, source));
  // def.json keeps variables by name; declaration order is var_id order.
  std::sort(p.tensors.begin(), p.tensors.end(),
            [](const TensorDecl& a, const TensorDecl& b) { return a.var_id < b.var_id; });
  for (const neff::EngineStream& s : sg.engines) {
    const auto engine = parse_engine(s.name);
    if (!engine)
      throw NeffError(fmt::format("{}: {}: unknown engine '{}'", source, sg.name, s.name));
    const std::string where = fmt::format("{} {}", source, s.bin_member);
    auto& stream = p.stream(*engine);
    stream = decode_stream(s.code, where);
    for (size_t i = 0; i < stream.size(); ++i)
      if (stream[i].engine != *engine)
        throw IsaError(fmt::format("{}: instruction {} is for engine {}, found in the {} stream",
                                   where, i, engine_name(stream[i].engine), engine_name(*engine)));
  }
  try {
    validate(p);
  } catch (const IsaError& e) {
    throw IsaError(fmt::format("{} {}: {}", source, sg.name, e.what()));
  }
  return p;
}

}  // namespace neuronsim::isa
