// Loading and validating spec/configs/*.json (see config.h). Every figure of a
// generation file is {"value": <number>, "source": "<where it comes from>"};
// instances.json gives one source per instance. Errors name the file and field.
#include "neuronsim/spec/config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuronsim/isa/target.h"

namespace neuronsim::spec {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kInstancesFile = "instances.json";
constexpr const char* kRuntimeFile = "runtime-releases.json";

[[noreturn]] void fail(const fs::path& file, const std::string& field, const std::string& what) {
  if (field.empty()) throw ConfigError(fmt::format("{}: {}", file.string(), what));
  throw ConfigError(fmt::format("{}: field '{}': {}", file.string(), field, what));
}

// A config file: `name` in the directory `dir`, or among the files built into the library
// (builtin_configs) when `dir` is empty.
struct ConfigFile {
  fs::path dir;
  std::string name;

  bool builtin() const { return dir.empty(); }
  // How messages name the file.
  fs::path shown() const {
    return builtin() ? fs::path("spec/configs/" + name + " (built in)") : dir / name;
  }
  bool exists() const {
    return builtin() ? builtin_configs().count(name) > 0 : fs::is_regular_file(dir / name);
  }
};

Json read_json(const ConfigFile& f) {
  std::string text;
  if (f.builtin()) {
    const auto it = builtin_configs().find(f.name);
    if (it == builtin_configs().end())
      fail(f.shown(), "", "no such file among the built-in configs");
    text = it->second;
  } else {
    std::ifstream in(f.dir / f.name, std::ios::binary);
    if (!in) fail(f.shown(), "", "cannot open the file");
    std::ostringstream read;
    read << in.rdbuf();
    text = read.str();
  }
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    fail(f.shown(), "", fmt::format("invalid JSON: {}", e.what()));
  }
}

}  // namespace

// The generation files in `dir` (every *.json but instances.json), sorted.
std::vector<std::string> generation_names(const fs::path& dir) {
  std::vector<std::string> files;
  if (dir.empty()) {
    for (const auto& [name, unused] : builtin_configs()) files.push_back(name);
  } else {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      files.push_back(entry.path().filename().string());
  }
  std::vector<std::string> names;
  for (const std::string& f : files) {
    const fs::path p(f);
    if (p.extension() == ".json" && f != kInstancesFile && f != kRuntimeFile)
      names.push_back(p.stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// Reads the figures of one generation file, checking each {value, source} object.
class FigureReader {
 public:
  // `prefix` goes before every field name in messages (an instance's figures: "trn1.32xlarge.").
  FigureReader(const fs::path& file, const Json& root, std::string prefix = "")
      : file_(file), root_(root), prefix_(std::move(prefix)) {}

  // A sourced number at `path` ("clocks.pe" looks in root["clocks"]["pe"]).
  double number(const std::string& path) {
    const Json& node = lookup(path);
    if (!node.is_object()) {
      if (node.is_number())
        fail_at(path, "has no source (write {\"value\": ..., \"source\": \"...\"})");
      fail_at(path, "is not a {\"value\", \"source\"} object");
    }
    check_keys(path, node);
    const Json& value = node["value"];
    if (!value.is_number())
      fail_at(path, fmt::format("value is not a number (got {})", value.dump()));
    const double v = value.get<double>();
    if (!std::isfinite(v)) fail_at(path, "value is not finite");
    return v;
  }

  // A sourced string at `path`: {"value": "<text>", "source": "..."}.
  std::string text(const std::string& path) {
    const Json& node = lookup(path);
    if (!node.is_object()) fail_at(path, "is not a {\"value\", \"source\"} object");
    check_keys(path, node);
    const Json& value = node["value"];
    if (!value.is_string() || value.get<std::string>().empty())
      fail_at(path, fmt::format("value is not a non-empty string (got {})", value.dump()));
    return value.get<std::string>();
  }

  double positive(const std::string& path) {
    const double v = number(path);
    if (!(v > 0)) fail_at(path, fmt::format("must be positive (got {})", v));
    return v;
  }

  double non_negative(const std::string& path) {
    const double v = number(path);
    if (v < 0) fail_at(path, fmt::format("must not be negative (got {})", v));
    return v;
  }

  uint64_t integer(const std::string& path, uint64_t min, uint64_t max) {
    const double v = number(path);
    if (v != std::floor(v)) fail_at(path, fmt::format("must be an integer (got {})", v));
    if (v < static_cast<double>(min))
      fail_at(path, fmt::format("must be at least {} (got {})", min, v));
    if (v > static_cast<double>(max))
      fail_at(path, fmt::format("must be at most {} (got {})", max, v));
    return static_cast<uint64_t>(v);
  }

  uint32_t u32(const std::string& path, uint32_t min = 1) {
    return static_cast<uint32_t>(integer(path, min, std::numeric_limits<uint32_t>::max()));
  }

  void mark(const std::string& path) { used_.insert(path); }

  // Fields present in the file that no rule read: typos, or figures we do not know. A group
  // of figures ("clocks", "isa") is checked field by field.
  void reject_unknown() {
    for (const auto& [key, value] : root_.items()) {
      if (!used_.count(key)) fail_at(key, "unknown field");
      if (value.is_object() && !value.contains("value"))
        for (const auto& [sub, unused] : value.items())
          if (!used_.count(key + "." + sub)) fail_at(key + "." + sub, "unknown field");
    }
  }

 private:
  // A figure object has exactly a value and a non-blank source.
  void check_keys(const std::string& path, const Json& node) {
    for (const auto& [key, unused] : node.items())
      if (key != "value" && key != "source") fail_at(path, fmt::format("unknown key '{}'", key));
    if (!node.contains("value")) fail_at(path, "missing 'value'");
    if (!node.contains("source") || !node["source"].is_string() ||
        node["source"].get<std::string>().find_first_not_of(" \t\n") == std::string::npos)
      fail_at(path, "has no source");
  }

  const Json& lookup(const std::string& path) {
    used_.insert(path);
    const Json* node = &root_;
    std::string::size_type start = 0;
    while (true) {
      const auto dot = path.find('.', start);
      const std::string key =
          path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object() || !node->contains(key)) fail_at(path, "missing field");
      node = &(*node)[key];
      if (dot == std::string::npos) return *node;
      used_.insert(path.substr(0, dot));
      start = dot + 1;
    }
  }

  [[noreturn]] void fail_at(const std::string& path, const std::string& what) {
    fail(file_, prefix_ + path, what);
  }

  const fs::path& file_;
  const Json& root_;
  std::string prefix_;
  std::set<std::string> used_;
};

// nrt's instance sizes are "xlarge" or "<n>xlarge" (libnrt-api.md §6.5).
bool size_is_valid(const std::string& size) {
  const std::string::size_type x = size.find("xlarge");
  if (x == std::string::npos || x + 6 != size.size()) return false;
  if (x == 0) return true;
  return size[0] != '0' && size.find_first_not_of("0123456789") == x;
}

const std::set<std::string>& known_topologies() {
  static const std::set<std::string> t = {"none", "ring", "torus-4x4"};
  return t;
}

// The ISA limits (isa::Target) of the generation in `root`: its core version and memory figures
// and the "isa" group. A generation the ISA knows (isa::find_target_name) must agree with it
// figure by figure; any other adds its target, so that programs can be built, validated and
// written as NEFFs for it. Returns the known target, or null with `limits` (whose NEFF target
// points into `neff_target`) to add once the whole file has been checked.
const isa::Target* isa_target(const fs::path& file, const Json& root, FigureReader& r,
                              const GenerationConfig& g, isa::Target& limits,
                              std::string& neff_target) {
  if (!root.contains("isa") || !root["isa"].is_object())
    fail(file, "isa", "missing field (the ISA limits)");
  neff_target = r.text("isa.neff_target");
  limits = {};
  limits.name = g.name;
  limits.neff_target = neff_target;
  limits.core_version = g.core_version;
  limits.num_partitions = g.partitions;
  limits.sbuf_partition_bytes = g.sbuf_partition_bytes;
  limits.psum_partition_bytes = g.psum_partition_bytes;
  limits.psum_bank_bytes = g.psum_partition_bytes / g.psum_banks;
  limits.pe_stationary_fmax = r.u32("isa.pe_stationary_fmax");
  limits.pe_moving_fmax = r.u32("isa.pe_moving_fmax");
  limits.sbuf_free_max = r.u32("isa.sbuf_free_max");
  limits.psum_free_max = r.u32("isa.psum_free_max");
  limits.bn_stats_fmax = r.u32("isa.bn_stats_fmax");

  const std::optional<std::string_view> known = isa::find_target_name(g.name);
  if (!known) {
    if (limits.pe_stationary_fmax > limits.num_partitions)
      fail(file, "isa.pe_stationary_fmax",
           fmt::format("{} is more than the {} partitions", limits.pe_stationary_fmax,
                       limits.num_partitions));
    if (const auto other = isa::find_target_name(neff_target))
      fail(file, "isa.neff_target",
           fmt::format("'{}' already names the ISA target {}", neff_target, *other));
    return nullptr;
  }
  if (*known != g.name)
    fail(file, "name", fmt::format("'{}' is another name of the ISA target {}", g.name, *known));
  const isa::Target& t = isa::target_by_name(g.name);
  auto agree = [&](const char* field, auto mine, auto theirs) {
    if (mine != theirs)
      fail(file, field,
           fmt::format("{} disagrees with the ISA target {} ({})", mine, t.name, theirs));
  };
  agree("core_version", limits.core_version, t.core_version);
  agree("partitions", limits.num_partitions, t.num_partitions);
  agree("sbuf_partition_bytes", limits.sbuf_partition_bytes, t.sbuf_partition_bytes);
  agree("psum_partition_bytes", limits.psum_partition_bytes, t.psum_partition_bytes);
  if (limits.psum_bank_bytes != t.psum_bank_bytes)
    fail(file, "psum_banks",
         fmt::format("{} banks give {}-byte banks; the ISA target {} has {}-byte banks",
                     g.psum_banks, limits.psum_bank_bytes, t.name, t.psum_bank_bytes));
  agree("isa.neff_target", limits.neff_target, t.neff_target);
  agree("isa.pe_stationary_fmax", limits.pe_stationary_fmax, t.pe_stationary_fmax);
  agree("isa.pe_moving_fmax", limits.pe_moving_fmax, t.pe_moving_fmax);
  agree("isa.sbuf_free_max", limits.sbuf_free_max, t.sbuf_free_max);
  agree("isa.psum_free_max", limits.psum_free_max, t.psum_free_max);
  agree("isa.bn_stats_fmax", limits.bn_stats_fmax, t.bn_stats_fmax);
  return &t;
}

}  // namespace

double GenerationConfig::ghz(isa::Engine engine) const {
  switch (engine) {
    case isa::Engine::PE:
      return pe_ghz;
    case isa::Engine::ACT:
      return act_ghz;
    case isa::Engine::DVE:
      return dve_ghz;
    case isa::Engine::POOL:
      return pool_ghz;
    case isa::Engine::SP:
      return sp_ghz;
  }
  return sp_ghz;
}

double GenerationConfig::peak_bf16_flops() const {
  return 2.0 * 128 * 128 * pe_ghz * 1e9;
}

fs::path config_dir() {
  if (const char* env = std::getenv("NEURONSIM_CONFIG_DIR"); env && *env) return env;
  return {};  // the configs built into the library
}

GenerationConfig load_generation(const std::string& name, const fs::path& dir) {
  const ConfigFile config{dir, name + ".json"};
  const fs::path file = config.shown();
  if (name.empty() || name.find('/') != std::string::npos || !config.exists())
    throw ConfigError(fmt::format("{}: no such generation config '{}' (known: {})", file.string(),
                                  name, join(generation_names(dir))));
  const Json root = read_json(config);
  if (!root.is_object()) fail(file, "", "not a JSON object");

  FigureReader r(file, root);
  GenerationConfig g;
  r.mark("description");
  if (root.contains("description") && !root["description"].is_string())
    fail(file, "description", "must be a string");
  r.mark("name");
  if (!root.contains("name")) fail(file, "name", "missing field");
  if (!root["name"].is_string()) fail(file, "name", "must be a string");
  g.name = root["name"].get<std::string>();
  if (g.name != name)
    fail(file, "name", fmt::format("'{}' does not match the file name '{}'", g.name, name));

  g.core_version = static_cast<int>(r.integer("core_version", 1, 100));
  if (!root.contains("clocks") || !root["clocks"].is_object())
    fail(file, "clocks", "missing field");
  g.pe_ghz = r.positive("clocks.pe");
  g.act_ghz = r.positive("clocks.act");
  g.dve_ghz = r.positive("clocks.dve");
  g.pool_ghz = r.positive("clocks.pool");
  g.sp_ghz = r.positive("clocks.sp");

  g.partitions = r.u32("partitions");
  g.sbuf_partition_bytes = r.u32("sbuf_partition_bytes");
  g.psum_partition_bytes = r.u32("psum_partition_bytes");
  g.psum_banks = r.u32("psum_banks");
  if (g.psum_partition_bytes % g.psum_banks != 0)
    fail(file, "psum_banks",
         fmt::format("psum_partition_bytes {} is not divisible by {} banks", g.psum_partition_bytes,
                     g.psum_banks));
  isa::Target limits;
  std::string neff_target;
  g.target = isa_target(file, root, r, g, limits, neff_target);

  g.pe_min_interval = r.u32("pe_min_interval");
  g.pe_fp32_factor = r.u32("pe_fp32_factor");
  g.pe_fp32_transpose_factor = r.u32("pe_fp32_transpose_factor");
  g.pe_weight_load_speedup = r.u32("pe_weight_load_speedup");

  g.min_interval = r.u32("min_interval");
  g.access_overhead = r.u32("access_overhead", 0);
  g.dependent_overhead = r.u32("dependent_overhead", 0);
  g.pool_startup = r.u32("pool_startup", 0);
  g.dve_elems_per_cycle_16bit = r.u32("dve_elems_per_cycle_16bit");

  g.dma_engines = r.u32("dma_engines");
  if (g.dma_engines > g.partitions || g.partitions % g.dma_engines != 0)
    fail(file, "dma_engines",
         fmt::format("{} engines cannot split {} partitions into equal groups", g.dma_engines,
                     g.partitions));
  g.dma_queues_per_engine = r.u32("dma_queues_per_engine");
  // The ISA's queue parameter addresses queues 0-15 of every engine; 256 bounds the rest.
  if (g.dma_queues_per_engine < 16 || g.dma_queues_per_engine > 256)
    fail(file, "dma_queues_per_engine",
         fmt::format("{} is outside 16..256 (dma_copy addresses queues 0-15)",
                     g.dma_queues_per_engine));
  g.dma_engine_bytes_per_ns = r.positive("dma_engine_bytes_per_ns");
  g.dma_core_bytes_per_ns = r.positive("dma_core_bytes_per_ns");
  if (g.dma_core_bytes_per_ns > g.dma_engines * g.dma_engine_bytes_per_ns * (1 + 1e-9))
    fail(file, "dma_core_bytes_per_ns",
         fmt::format("{} is more than the core's {} engines move at {} B/ns each",
                     g.dma_core_bytes_per_ns, g.dma_engines, g.dma_engine_bytes_per_ns));
  g.dma_fixed_ns = r.non_negative("dma_fixed_ns");
  g.dma_issue_ns = r.non_negative("dma_issue_ns");
  g.dma_hwdge_ns = r.non_negative("dma_hwdge_ns");
  g.dma_descriptor_ns = r.non_negative("dma_descriptor_ns");
  g.dma_descriptor_max_bytes = r.integer("dma_descriptor_max_bytes", 1, uint64_t{1} << 32);
  for (auto [key, field] :
       {std::pair{"dma_transpose_hbm_efficiency", &g.dma_transpose_hbm_efficiency},
        std::pair{"dma_transpose_sbuf_efficiency", &g.dma_transpose_sbuf_efficiency},
        std::pair{"dma_add_efficiency", &g.dma_add_efficiency}}) {
    *field = r.positive(key);
    if (*field > 1)
      fail(file, key, fmt::format("{} is a fraction of a copy's bandwidth (at most 1)", *field));
  }
  g.launch_fixed_ns = r.non_negative("launch_fixed_ns");
  g.launch_per_tensor_ns = r.non_negative("launch_per_tensor_ns");
  g.host_op_ns = r.non_negative("host_op_ns");

  g.cores_per_chip = r.u32("cores_per_chip");
  g.hbm_stacks = r.u32("hbm_stacks");
  g.hbm_bytes_per_ns = r.positive("hbm_bytes_per_ns");
  g.hbm_bytes = r.integer("hbm_bytes", 1, uint64_t{1} << 52);

  g.neuronlink_latency_ns = r.non_negative("neuronlink_latency_ns");
  g.intra_chip_latency_ns = r.non_negative("intra_chip_latency_ns");

  g.cc_mesh_below_bytes = r.integer("cc_mesh_below_bytes", 0, uint64_t{1} << 52);
  g.cc_rdh_below_bytes = r.integer("cc_rdh_below_bytes", 0, uint64_t{1} << 52);
  if (g.cc_rdh_below_bytes < g.cc_mesh_below_bytes)
    fail(file, "cc_rdh_below_bytes",
         fmt::format("{} is below cc_mesh_below_bytes {} (mesh, then RDH, then ring as sizes grow)",
                     g.cc_rdh_below_bytes, g.cc_mesh_below_bytes));

  r.reject_unknown();
  if (!g.target) {
    try {
      g.target = &isa::add_target(limits);
    } catch (const std::exception& e) {
      fail(file, "isa", e.what());
    }
  }
  return g;
}

namespace {

// instances.json: {"description": "...", "instances": {"<name>": {...}, ...}}.
const Json& instances_of(const fs::path& file, const Json& root) {
  if (!root.is_object() || !root.contains("instances") || !root["instances"].is_object())
    fail(file, "instances", "missing field (an object of instance types)");
  return root["instances"];
}

}  // namespace

std::vector<std::string> instance_names(const fs::path& dir) {
  const ConfigFile config{dir, kInstancesFile};
  const fs::path file = config.shown();
  const Json root = read_json(config);
  std::vector<std::string> names;
  for (const auto& [name, unused] : instances_of(file, root).items()) names.push_back(name);
  return names;
}

InstanceConfig load_instance(const std::string& name, const fs::path& dir) {
  const ConfigFile config{dir, kInstancesFile};
  const fs::path file = config.shown();
  const Json root = read_json(config);
  const Json& all = instances_of(file, root);
  if (!all.contains(name)) {
    std::vector<std::string> known;
    for (const auto& [n, unused] : all.items()) known.push_back(n);
    throw ConfigError(
        fmt::format("{}: unknown instance '{}' (known: {})", file.string(), name, join(known)));
  }
  const Json& e = all[name];
  const std::string prefix = name + ".";
  if (!e.is_object()) fail(file, name, "is not an object");

  auto string_field = [&](const char* key) {
    if (!e.contains(key)) fail(file, prefix + key, "missing field");
    if (!e[key].is_string() || e[key].get<std::string>().empty())
      fail(file, prefix + key, "must be a non-empty string");
    return e[key].get<std::string>();
  };
  auto count_field = [&](const char* key) {
    if (!e.contains(key)) fail(file, prefix + key, "missing field");
    const Json& v = e[key];
    if (!v.is_number())
      fail(file, prefix + key, fmt::format("value is not a number (got {})", v.dump()));
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000000)
      fail(file, prefix + key, fmt::format("must be a positive integer (got {})", v.dump()));
    return static_cast<uint32_t>(v.get<int64_t>());
  };

  static const std::set<std::string> kFields = {"source",
                                                "generation",
                                                "chips",
                                                "cores_per_chip",
                                                "topology",
                                                "instances",
                                                "instance_link",
                                                "family",
                                                "size",
                                                "neuronlink_bytes_per_s",
                                                "instance_link_bytes_per_s",
                                                "instance_link_latency_ns",
                                                "efa_gbps",
                                                "efa_latency_ns"};
  for (const auto& [key, unused] : e.items())
    if (!kFields.count(key)) fail(file, prefix + key, "unknown field");

  InstanceConfig inst;
  inst.name = name;
  string_field("source");  // every instance says where its figures come from
  inst.generation = string_field("generation");
  inst.chips = count_field("chips");
  inst.cores_per_chip = count_field("cores_per_chip");
  inst.topology = string_field("topology");
  // Optional: several instances joined by NeuronLink (a Trn2 UltraServer); `chips` counts all of
  // them.
  if (e.contains("instances")) inst.instances = count_field("instances");
  if (e.contains("instance_link")) inst.instance_link = string_field("instance_link");

  if (!known_topologies().count(inst.topology))
    fail(file, prefix + "topology",
         fmt::format("unknown topology '{}' (known: none, ring, torus-4x4)", inst.topology));
  if (inst.chips % inst.instances != 0)
    fail(file, prefix + "instances",
         fmt::format("{} chips do not split evenly into {} instances", inst.chips, inst.instances));
  if (inst.instance_link != "none" && inst.instance_link != "ring")
    fail(file, prefix + "instance_link",
         fmt::format("unknown instance link '{}' (known: none, ring)", inst.instance_link));
  if ((inst.instances > 1) != (inst.instance_link != "none"))
    fail(file, prefix + "instance_link",
         fmt::format("instance link '{}' does not fit {} instances", inst.instance_link,
                     inst.instances));
  const uint32_t chips = inst.chips_per_instance();
  if ((inst.topology == "none") != (chips == 1) || (inst.topology == "torus-4x4" && chips != 16))
    fail(file, prefix + "topology",
         fmt::format("topology '{}' does not fit {} chips", inst.topology, chips));

  // How nrt classifies the instance (libnrt-api.md §6.4, §6.5).
  inst.family = string_field("family");
  if (inst.family.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos)
    fail(file, prefix + "family",
         fmt::format("'{}' is not lowercase letters and digits", inst.family));
  inst.size = string_field("size");
  if (!size_is_valid(inst.size))
    fail(file, prefix + "size",
         fmt::format("'{}' is not a size such as xlarge, 2xlarge, 48xlarge", inst.size));

  // Link figures, each {"value", "source"}: required where the topology has such links, refused
  // where not.
  FigureReader r(file, e, prefix);
  auto figure = [&](const char* key, bool wanted, const std::string& why) {
    if (wanted && !e.contains(key))
      fail(file, prefix + key, fmt::format("missing field ({})", why));
    if (!wanted && e.contains(key)) fail(file, prefix + key, fmt::format("not allowed ({})", why));
    return wanted;
  };
  const std::string topology_why = fmt::format("topology '{}'", inst.topology);
  if (figure("neuronlink_bytes_per_s", inst.topology != "none", topology_why))
    inst.neuronlink_bytes_per_s = r.integer("neuronlink_bytes_per_s", 1, uint64_t{1} << 52);
  const std::string link_why = fmt::format("instance_link '{}'", inst.instance_link);
  if (figure("instance_link_bytes_per_s", inst.instance_link != "none", link_why))
    inst.instance_link_bytes_per_s = r.integer("instance_link_bytes_per_s", 1, uint64_t{1} << 52);
  if (figure("instance_link_latency_ns", inst.instance_link != "none", link_why))
    inst.instance_link_latency_ns = r.non_negative("instance_link_latency_ns");
  if (e.contains("efa_gbps")) inst.efa_gbps = r.integer("efa_gbps", 1, uint64_t{1} << 32);
  if (figure("efa_latency_ns", inst.efa_gbps > 0,
             inst.efa_gbps ? "with efa_gbps" : "without efa_gbps"))
    inst.efa_latency_ns = r.non_negative("efa_latency_ns");

  if (!ConfigFile{dir, inst.generation + ".json"}.exists())
    fail(file, prefix + "generation",
         fmt::format("unknown generation '{}' (known: {})", inst.generation,
                     join(generation_names(dir))));
  const GenerationConfig gen = load_generation(inst.generation, dir);
  if (inst.cores_per_chip != gen.cores_per_chip)
    fail(file, prefix + "cores_per_chip",
         fmt::format("{} disagrees with generation {} ({} cores per chip)", inst.cores_per_chip,
                     gen.name, gen.cores_per_chip));
  inst.generation_config = gen;
  return inst;
}

bool RuntimeRelease::has_algorithm(std::string_view algorithm) const {
  return std::find(algorithms.begin(), algorithms.end(), algorithm) != algorithms.end();
}

namespace {

// runtime-releases.json: {"description": "...", "releases": {"<n.m>": {...}, ...}}; a directory
// without it falls back to the built-in file.
ConfigFile runtime_file(const fs::path& dir) {
  ConfigFile f{dir, kRuntimeFile};
  if (!f.builtin() && !f.exists()) f.dir.clear();
  return f;
}

// "2.10" -> {2, 10}; empty for a name that is not dot-separated numbers.
std::vector<uint64_t> release_version(const std::string& name) {
  std::vector<uint64_t> parts;
  std::string::size_type start = 0;
  while (true) {
    const auto dot = name.find('.', start);
    const std::string part = name.substr(start, dot == std::string::npos ? dot : dot - start);
    if (part.empty() || part.size() > 9 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      return {};
    parts.push_back(std::stoull(part));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// The releases of the file, oldest first; every name checked.
std::vector<std::string> releases_of(const fs::path& file, const Json& root) {
  if (!root.is_object() || !root.contains("releases") || !root["releases"].is_object() ||
      root["releases"].empty())
    fail(file, "releases", "missing field (an object of runtime releases)");
  for (const auto& [key, unused] : root.items())
    if (key != "description" && key != "releases") fail(file, key, "unknown field");
  std::vector<std::string> names;
  for (const auto& [name, unused] : root["releases"].items()) {
    if (release_version(name).empty())
      fail(file, "releases." + name, "a release is named by its version, such as 2.24");
    names.push_back(name);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return release_version(a) < release_version(b);
  });
  return names;
}

}  // namespace

std::vector<std::string> runtime_release_names(const fs::path& dir) {
  const ConfigFile config = runtime_file(dir);
  return releases_of(config.shown(), read_json(config));
}

RuntimeRelease load_runtime_release(const std::string& name, const fs::path& dir) {
  const ConfigFile config = runtime_file(dir);
  const fs::path file = config.shown();
  const Json root = read_json(config);
  const std::vector<std::string> names = releases_of(file, root);
  const std::string chosen = name.empty() ? names.back() : name;
  if (!root["releases"].contains(chosen))
    throw ConfigError(fmt::format("{}: unknown runtime release '{}' (known: {})", file.string(),
                                  chosen, join(names)));
  const Json& e = root["releases"][chosen];
  const std::string prefix = "releases." + chosen + ".";
  if (!e.is_object()) fail(file, "releases." + chosen, "is not an object");
  if (!e.contains("source") || !e["source"].is_string() ||
      e["source"].get<std::string>().find_first_not_of(" \t\n") == std::string::npos)
    fail(file, prefix + "source", "missing (say which release this is and where it is dated)");
  FigureReader r(file, e, prefix);
  r.mark("source");
  RuntimeRelease rel;
  rel.name = chosen;
  rel.collective_fixed_ns = r.non_negative("collective_fixed_ns");
  rel.across_hosts_fixed_ns = r.non_negative("across_hosts_fixed_ns");
  const std::string list = r.text("algorithms");
  static const std::set<std::string> kKnown = {"ring", "mesh", "rdh", "hierarchical"};
  std::string::size_type start = 0;
  while ((start = list.find_first_not_of(" ,", start)) != std::string::npos) {
    const auto end = list.find_first_of(" ,", start);
    const std::string a = list.substr(start, end == std::string::npos ? end : end - start);
    if (!kKnown.count(a))
      fail(file, prefix + "algorithms",
           fmt::format("unknown algorithm '{}' (known: hierarchical, mesh, rdh, ring)", a));
    if (rel.has_algorithm(a))
      fail(file, prefix + "algorithms", fmt::format("'{}' is listed twice", a));
    rel.algorithms.push_back(a);
    start = end;
  }
  if (!rel.has_algorithm("ring"))
    fail(file, prefix + "algorithms", "must list ring (the choice falls back to it)");
  r.reject_unknown();
  return rel;
}

}  // namespace neuronsim::spec
