// The NEFF container: header, gzip tar, and the JSON members we model.
// Format facts: the research notes (docs/sources/neuron-hardware.md) section 6; our reading
// and writing of them: docs/neff.md.
#include "neuronsim/isa/neff.h"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "neuronsim/isa/error.h"
#include "neuronsim/isa/instruction.h"

namespace neuronsim::isa::neff {
namespace {

using json = nlohmann::json;
using Members = std::map<std::string, std::vector<uint8_t>>;

// Header field offsets (packed, little-endian; research section 6.1).
constexpr size_t kOffPkgVersion = 0;
constexpr size_t kOffHeaderSize = 8;
constexpr size_t kOffDataSize = 16;
constexpr size_t kOffVersionMajor = 24;
constexpr size_t kOffVersionMinor = 32;
constexpr size_t kOffBuildVersion = 40;
constexpr size_t kBuildVersionLen = 128;
constexpr size_t kOffNumTpb = 168;
constexpr size_t kOffHash = 172;
constexpr size_t kOffUuid = 204;
constexpr size_t kOffName = 220;
constexpr size_t kNameLen = 256;
constexpr size_t kOffRequestedTpb = 476;
constexpr size_t kOffTpbPerNode = 480;
constexpr size_t kOffFeatureBits = 544;
constexpr size_t kOffLncSize = 552;

// Bounds on what a NEFF may unpack to, so corrupt or hostile input fails with an
// error instead of exhausting memory.
constexpr uint64_t kMaxUnpackedBytes = uint64_t{4} << 30;
constexpr size_t kMaxMembers = 100000;
// nlohmann parses iteratively but dumps recursively; bounding depth keeps a
// read-then-write round trip off the stack limit.
constexpr int kMaxJsonDepth = 256;

constexpr const char* kNeffJson = "neff.json";
constexpr const char* kKelfJson = "kelf-0.json";
constexpr const char* kInfoJson = "info.json";
constexpr const char* kIsaVersionKey = "neuronsim_isa_version";

uint64_t load_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// MD5 through OpenSSL's libcrypto: the header hash the Neuron tools write.
std::array<uint8_t, 16> md5(std::span<const uint8_t> data) {
  std::array<uint8_t, 16> digest{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &len, EVP_md5(), nullptr) != 1 ||
      len != digest.size())
    throw NeffError("MD5 of the NEFF payload failed (OpenSSL)");
  return digest;
}

std::string hex(std::span<const uint8_t> bytes, std::string_view separator = "") {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{}{:02x}", s.empty() ? "" : separator, b);
  return s;
}

// The hash field as hex, without the zero tail that MD5 leaves unused.
std::string hash_text(const std::array<uint8_t, 32>& hash) {
  const bool tail_zero =
      std::all_of(hash.begin() + 16, hash.end(), [](uint8_t b) { return b == 0; });
  return hex(std::span(hash).first(tail_zero ? 16 : 32));
}

// ---------------------------------------------------------------- header fields

std::string load_cstr(const uint8_t* p, size_t n) {
  const auto* end = std::find(p, p + n, uint8_t{0});
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(end - p));
}

// Fixed-size string fields keep a terminating NUL, as C readers of the struct expect.
void store_cstr(uint8_t* p, size_t n, const std::string& s, const char* field) {
  if (s.size() >= n) {
    throw NeffError(
        fmt::format("header: {} is {} bytes; the field holds at most {}", field, s.size(), n - 1));
  }
  std::memcpy(p, s.data(), s.size());
}

// ---------------------------------------------------------------- error locations

// Where a value sits, for error messages: the file, the archive member and the
// JSON field path within it.
class Loc {
 public:
  Loc(const std::string& source, std::string member, std::string field = {})
      : source_(source), member_(std::move(member)), field_(std::move(field)) {}

  Loc key(std::string_view k) const {
    return Loc(source_, member_, field_.empty() ? std::string(k) : fmt::format("{}.{}", field_, k));
  }
  Loc index(size_t i) const { return Loc(source_, member_, fmt::format("{}[{}]", field_, i)); }
  const std::string& source() const { return source_; }

  [[noreturn]] void fail(std::string_view what) const {
    if (field_.empty()) throw NeffError(fmt::format("{}: member {}: {}", source_, member_, what));
    throw NeffError(fmt::format("{}: member {}: field \"{}\": {}", source_, member_, field_, what));
  }

 private:
  const std::string& source_;
  std::string member_;
  std::string field_;
};

// ---------------------------------------------------------------- checked JSON access

const json* find_key(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

const json& require_key(const json& obj, std::string_view key, const Loc& at) {
  const json* v = find_key(obj, key);
  if (v == nullptr) at.key(key).fail("is missing");
  return *v;
}

void expect_object(const json& v, const Loc& at) {
  if (!v.is_object()) at.fail(fmt::format("expected an object, got {}", v.type_name()));
}

void expect_array(const json& v, const Loc& at) {
  if (!v.is_array()) at.fail(fmt::format("expected an array, got {}", v.type_name()));
}

std::string as_string(const json& v, const Loc& at) {
  if (!v.is_string()) at.fail(fmt::format("expected a string, got {}", v.type_name()));
  return v.get<std::string>();
}

bool as_bool(const json& v, const Loc& at) {
  if (!v.is_boolean()) at.fail(fmt::format("expected true or false, got {}", v.type_name()));
  return v.get<bool>();
}

int64_t as_int(const json& v, const Loc& at, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
  if (!v.is_number_integer()) at.fail(fmt::format("expected an integer, got {}", v.type_name()));
  const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX};
  const int64_t x = too_big ? INT64_MAX : v.get<int64_t>();
  if (too_big || x < lo || x > hi) {
    at.fail(fmt::format("{} is outside [{}, {}]", v.dump(), lo, hi));
  }
  return x;
}

int as_int32(const json& v, const Loc& at, int lo = 0, int hi = INT_MAX) {
  return static_cast<int>(as_int(v, at, lo, hi));
}

uint64_t as_uint(const json& v, const Loc& at) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  return static_cast<uint64_t>(as_int(v, at, 0));
}

std::string string_at(const json& obj, std::string_view key, const Loc& at) {
  return as_string(require_key(obj, key, at), at.key(key));
}

json parse_json(std::span<const uint8_t> bytes, const Loc& at) {
  auto limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) at.fail(fmt::format("JSON nested deeper than {}", kMaxJsonDepth));
    return true;
  };
  try {
    return json::parse(bytes.begin(), bytes.end(), limit_depth);
  } catch (const json::parse_error& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; the rest is the useful part.
    std::string_view what = e.what();
    if (auto tag_end = what.find("] "); tag_end != std::string_view::npos) {
      what.remove_prefix(tag_end + 2);
    }
    at.fail(fmt::format("invalid JSON at byte {}: {}", e.byte, what));
  }
}

// ---------------------------------------------------------------- reading the tar

struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct ArchiveWriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
using ReadArchive = std::unique_ptr<archive, ArchiveReadFree>;
using WriteArchive = std::unique_ptr<archive, ArchiveWriteFree>;

std::string archive_message(archive* a) {
  const char* msg = archive_error_string(a);
  return msg != nullptr ? msg : "unknown libarchive error";
}

// Tar tools often write "./name"; the NEFF's own paths carry no prefix.
std::string normalize_path(std::string path) {
  while (path.starts_with("./")) path.erase(0, 2);
  return path;
}

std::vector<uint8_t> read_entry_data(archive* a, const std::string& source, const std::string& path,
                                     uint64_t& total) {
  std::vector<uint8_t> data;
  std::array<uint8_t, 65536> chunk{};
  for (;;) {
    const la_ssize_t n = archive_read_data(a, chunk.data(), chunk.size());
    if (n == 0) return data;
    if (n < 0) {
      throw NeffError(fmt::format("{}: member {}: {}", source, path, archive_message(a)));
    }
    total += static_cast<uint64_t>(n);
    if (total > kMaxUnpackedBytes) {
      throw NeffError(fmt::format("{}: member {}: archive unpacks to more than {} bytes", source,
                                  path, kMaxUnpackedBytes));
    }
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
  }
}

void check_declared_size(archive_entry* e, const std::string& source, const std::string& path,
                         uint64_t total) {
  if (!archive_entry_size_is_set(e)) return;
  const la_int64_t size = archive_entry_size(e);
  if (size < 0 || static_cast<uint64_t>(size) > kMaxUnpackedBytes - total) {
    throw NeffError(fmt::format("{}: member {}: size {} exceeds the {} byte limit on the archive",
                                source, path, size, kMaxUnpackedBytes));
  }
}

Members read_members(std::span<const uint8_t> tar_gz, const std::string& source) {
  ReadArchive a(archive_read_new());
  if (!a) throw NeffError(fmt::format("{}: archive: out of memory", source));
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), tar_gz.data(), tar_gz.size()) != ARCHIVE_OK) {
    throw NeffError(fmt::format("{}: archive: {}", source, archive_message(a.get())));
  }
  Members members;
  uint64_t total = 0;
  for (size_t count = 0;; ++count) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) return members;
    if (r < ARCHIVE_WARN) {
      throw NeffError(fmt::format("{}: archive: {}", source, archive_message(a.get())));
    }
    if (count >= kMaxMembers) {
      throw NeffError(fmt::format("{}: archive: more than {} members", source, kMaxMembers));
    }
    const char* name = archive_entry_pathname(e);
    if (name == nullptr || archive_entry_filetype(e) != AE_IFREG) continue;  // dirs, links
    std::string path = normalize_path(name);
    check_declared_size(e, source, path, total);
    auto data = read_entry_data(a.get(), source, path, total);
    if (!members.emplace(path, std::move(data)).second) {
      throw NeffError(fmt::format("{}: member {}: appears twice in the archive", source, path));
    }
  }
}

// ---------------------------------------------------------------- typed metadata

Variable parse_variable(const std::string& name, const json& v, const Loc& at) {
  expect_object(v, at);
  Variable var;
  var.name = name;
  var.type = string_at(v, "type", at);
  var.var_id = as_int32(require_key(v, "var_id", at), at.key("var_id"));
  if (const json* size = find_key(v, "size")) var.size = as_uint(*size, at.key("size"));
  if (const json* file = find_key(v, "file_name")) {
    var.file_name = as_string(*file, at.key("file_name"));
  }
  return var;
}

DmaQueue parse_dma_queue(const std::string& name, const json& v, const Loc& at) {
  expect_object(v, at);
  DmaQueue q;
  q.name = name;
  if (const json* type = find_key(v, "type")) q.type = as_string(*type, at.key("type"));
  if (const json* owner = find_key(v, "owner")) q.owner = as_string(*owner, at.key("owner"));
  if (const json* n = find_key(v, "num_queues")) {
    q.num_queues = as_int32(*n, at.key("num_queues"), 0, 1 << 16);
  }
  if (const json* sems = find_key(v, "semaphore_set")) {
    const Loc sems_at = at.key("semaphore_set");
    expect_array(*sems, sems_at);
    for (size_t i = 0; i < sems->size(); ++i) {
      q.semaphores.push_back(as_int32((*sems)[i], sems_at.index(i)));
    }
  }
  return q;
}

template <typename T, typename ParseEntry>
std::vector<T> parse_entries(const json& def, std::string_view key, const Loc& at,
                             ParseEntry parse_entry) {
  std::vector<T> out;
  const json* entries = find_key(def, key);
  if (entries == nullptr) return out;
  const Loc entries_at = at.key(key);
  expect_object(*entries, entries_at);
  for (const auto& [name, v] : entries->items()) {
    out.push_back(parse_entry(name, v, entries_at.key(name)));
  }
  return out;
}

Fp8Config parse_fp8(const json& def, const Loc& at) {
  Fp8Config cfg;
  const json* c = find_key(def, "fp8_conversion_config");
  if (c == nullptr) return cfg;
  const Loc c_at = at.key("fp8_conversion_config");
  expect_object(*c, c_at);
  // Exponents past 127 cannot describe an 8-bit format; reject them as corrupt.
  if (const json* v = find_key(*c, "emax_fp8_e4m3")) {
    cfg.emax_e4m3 = as_int32(*v, c_at.key("emax_fp8_e4m3"), 0, 127);
  }
  if (const json* v = find_key(*c, "emax_fp8_e5m2")) {
    cfg.emax_e5m2 = as_int32(*v, c_at.key("emax_fp8_e5m2"), 0, 127);
  }
  if (const json* v = find_key(*c, "ocp_sat")) cfg.saturate = as_bool(*v, c_at.key("ocp_sat"));
  return cfg;
}

std::vector<int64_t> parse_shape(const json& v, const Loc& at) {
  expect_array(v, at);
  std::vector<int64_t> shape;
  for (size_t i = 0; i < v.size(); ++i) shape.push_back(as_int(v[i], at.index(i)));
  return shape;
}

Tensor parse_tensor(const std::string& name, const json& v, const Loc& at) {
  expect_object(v, at);
  Tensor t;
  t.name = name;
  t.dtype_name = string_at(v, "dtype", at);
  t.dtype = parse_dtype(t.dtype_name);
  const char* shape_key = find_key(v, "tf_shape") != nullptr ? "tf_shape" : "sim_shape";
  t.shape = parse_shape(require_key(v, shape_key, at), at.key(shape_key));
  if (const json* kind = find_key(v, "kind")) t.kind = as_string(*kind, at.key("kind"));
  if (const json* c = find_key(v, "is_const")) t.is_const = as_bool(*c, at.key("is_const"));
  return t;
}

// Unpacks the archive's members into a Neff, tracking which ones the typed
// fields account for; the rest become Subgraph::files and Neff::other_members.
class Reader {
 public:
  Reader(Members members, const std::string& source)
      : members_(std::move(members)), source_(source) {}

  Neff read(const Header& header) {
    Neff n;
    n.header = header;
    n.neff_json = take_required_json(kNeffJson);
    expect_object(n.neff_json, Loc(source_, kNeffJson));
    n.kelf = take_required_json(kKelfJson);
    read_kelf(n);
    read_info(n);
    distribute_rest(n);
    return n;
  }

 private:
  const std::vector<uint8_t>& take(const std::string& path, const Loc& named_by) {
    auto it = members_.find(path);
    if (it == members_.end()) {
      named_by.fail(fmt::format("names {}, which is not in the archive", path));
    }
    consumed_.insert(path);
    return it->second;
  }

  json take_json(const std::string& path, const Loc& named_by) {
    return parse_json(take(path, named_by), Loc(source_, path));
  }

  json take_required_json(const std::string& path) {
    if (!members_.contains(path)) {
      throw NeffError(fmt::format("{}: member {} is missing from the archive", source_, path));
    }
    return take_json(path, Loc(source_, path));
  }

  void read_kelf(Neff& n) {
    const Loc at(source_, kKelfJson);
    expect_object(n.kelf, at);
    if (const json* target = find_key(n.kelf, "target")) {
      n.target = as_string(*target, at.key("target"));
    }
    const Loc graphs_at = at.key("graphs");
    const json& graphs = require_key(n.kelf, "graphs", at);
    expect_array(graphs, graphs_at);
    for (size_t i = 0; i < graphs.size(); ++i) {
      n.subgraphs.push_back(read_subgraph(graphs[i], graphs_at.index(i)));
    }
  }

  void read_info(Neff& n) {
    if (!members_.contains(kInfoJson)) return;  // optional: only the producer lives there
    const Loc at(source_, kInfoJson);
    n.info = take_json(kInfoJson, at);
    expect_object(n.info, at);
    if (const json* tool = find_key(n.info, "tool_version")) {
      n.producer = as_string(*tool, at.key("tool_version"));
    }
    if (const json* isa = find_key(n.info, kIsaVersionKey)) {
      n.isa_version = as_int32(*isa, at.key(kIsaVersionKey), 0, 255);
    }
  }

  Subgraph read_subgraph(const json& graph, const Loc& at) {
    expect_object(graph, at);
    Subgraph sg;
    sg.name = string_at(graph, "name", at);
    const std::string def_path = string_at(graph, "definition", at);
    const size_t slash = def_path.rfind('/');
    if (slash == std::string::npos || slash == 0) {
      at.key("definition").fail(fmt::format("{} is not inside a subgraph directory", def_path));
    }
    const std::string dir = def_path.substr(0, slash + 1);
    sg.def = take_json(def_path, at.key("definition"));
    const Loc def_at(source_, def_path);
    expect_object(sg.def, def_at);
    sg.variables = parse_entries<Variable>(sg.def, "var", def_at, parse_variable);
    sg.dma_queues = parse_entries<DmaQueue>(sg.def, "dma_queue", def_at, parse_dma_queue);
    sg.fp8 = parse_fp8(sg.def, def_at);
    sg.engines = read_engines(sg.def, dir, def_at);
    sg.tensors = read_tensor_map(dir);
    dirs_.push_back(dir);
    return sg;
  }

  std::vector<EngineStream> read_engines(const json& def, const std::string& dir, const Loc& at) {
    std::vector<EngineStream> engines;
    for (size_t i = 0; i < kEngineDefKeys.size(); ++i) {
      const json* json_name = find_key(def, kEngineDefKeys[i]);
      if (json_name == nullptr) continue;
      const Loc key_at = at.key(kEngineDefKeys[i]);
      EngineStream e;
      e.name = kEngineNames[i];
      e.json_member = dir + as_string(*json_name, key_at);
      e.meta = take_json(e.json_member, key_at);
      const Loc meta_at(source_, e.json_member);
      expect_object(e.meta, meta_at);
      e.bin_member = dir + string_at(e.meta, "instr", meta_at);
      e.code = take(e.bin_member, meta_at.key("instr"));
      engines.push_back(std::move(e));
    }
    return engines;
  }

  std::vector<Tensor> read_tensor_map(const std::string& dir) {
    const std::string path = dir + "tensor_map.json";
    if (!members_.contains(path)) return {};
    const Loc at(source_, path);
    const json map = take_json(path, at);
    expect_object(map, at);
    std::vector<Tensor> tensors;
    for (const auto& [name, v] : map.items()) {
      tensors.push_back(parse_tensor(name, v, at.key(name)));
    }
    return tensors;
  }

  void distribute_rest(Neff& n) {
    for (auto& [path, bytes] : members_) {
      if (consumed_.contains(path)) continue;
      auto dir = std::find_if(dirs_.begin(), dirs_.end(),
                              [&](const std::string& d) { return path.starts_with(d); });
      if (dir == dirs_.end()) {
        n.other_members[path] = std::move(bytes);
      } else {
        n.subgraphs[dir - dirs_.begin()].files[path.substr(dir->size())] = std::move(bytes);
      }
    }
  }

  Members members_;
  const std::string& source_;
  std::set<std::string> consumed_;
  std::vector<std::string> dirs_;  // "sg00/" per subgraph, in kelf order
};

void check_container(std::span<const uint8_t> bytes, const Header& h, const std::string& source) {
  if (h.header_size != kHeaderSize) {
    throw NeffError(
        fmt::format("{}: header: header_size {}, expected {}", source, h.header_size, kHeaderSize));
  }
  const size_t after = bytes.size() - kHeaderSize;
  if (h.data_size != after) {
    throw NeffError(fmt::format("{}: header: data_size {} but file has {} bytes after the header",
                                source, h.data_size, after));
  }
  if (after < 2 || bytes[kHeaderSize] != 0x1f || bytes[kHeaderSize + 1] != 0x8b) {
    throw NeffError(fmt::format(
        "{}: payload at byte {} is not gzip data (expected magic 1f 8b, found {})", source,
        kHeaderSize, hex(bytes.subspan(kHeaderSize, std::min<size_t>(after, 2)), " ")));
  }
}

// Only pkg_version 2 is known to use MD5 (research 6.1); others may use SHA-256.
void check_hash(std::span<const uint8_t> payload, const Header& h, const std::string& source) {
  if (h.pkg_version != 2) return;
  const auto actual = payload_hash(payload);
  if (actual != h.hash) {
    throw NeffError(
        fmt::format("{}: header: hash mismatch: expected {} (header), actual {} "
                    "(MD5 of the payload)",
                    source, hash_text(h.hash), hash_text(actual)));
  }
}

// ---------------------------------------------------------------- writing metadata

[[noreturn]] void write_fail(std::string_view what) {
  throw NeffError(fmt::format("writing NEFF: {}", what));
}

// An existing entry of `old` to merge typed fields over, so keys we do not model survive.
json old_entry(const json& old, std::string_view key) {
  const json* e = find_key(old, key);
  return e != nullptr && e->is_object() ? *e : json::object();
}

const json& child_or_null(const json& obj, std::string_view key) {
  static const json null_value;
  const json* e = find_key(obj, key);
  return e != nullptr ? *e : null_value;
}

void set_or_erase(json& obj, const char* key, const std::string& value) {
  if (value.empty()) {
    obj.erase(key);
  } else {
    obj[key] = value;
  }
}

void add_unique(json& obj, const std::string& key, json value, const Subgraph& sg,
                std::string_view what) {
  if (obj.contains(key)) {
    write_fail(fmt::format("subgraph {}: {} \"{}\" appears twice", sg.name, what, key));
  }
  obj[key] = std::move(value);
}

json variables_json(const Subgraph& sg, const json& old) {
  json out = json::object();
  for (const Variable& v : sg.variables) {
    json e = old_entry(old, v.name);
    e["type"] = v.type;
    e["var_id"] = v.var_id;
    if (v.size != 0) {
      e["size"] = v.size;
    } else {
      e.erase("size");
    }
    set_or_erase(e, "file_name", v.file_name);
    add_unique(out, v.name, std::move(e), sg, "variable");
  }
  return out;
}

json dma_queues_json(const Subgraph& sg, const json& old) {
  json out = json::object();
  for (const DmaQueue& q : sg.dma_queues) {
    json e = old_entry(old, q.name);
    set_or_erase(e, "type", q.type);
    set_or_erase(e, "owner", q.owner);
    e["num_queues"] = q.num_queues;
    if (q.semaphores.empty()) {
      e.erase("semaphore_set");
    } else {
      e["semaphore_set"] = q.semaphores;
    }
    add_unique(out, q.name, std::move(e), sg, "DMA queue set");
  }
  return out;
}

size_t engine_index(const EngineStream& e, const Subgraph& sg) {
  for (size_t i = 0; i < kEngineNames.size(); ++i) {
    if (e.name == kEngineNames[i]) return i;
  }
  write_fail(fmt::format("subgraph {}: engine \"{}\" is not one of PE, Activation, DVE, Pool, SP",
                         sg.name, e.name));
}

void set_engine_keys(json& def, const Subgraph& sg) {
  for (const char* key : kEngineDefKeys) {
    def.erase(key);
    def.erase(fmt::format("{}_instr", key));
  }
  for (const EngineStream& e : sg.engines) {
    const char* key = kEngineDefKeys[engine_index(e, sg)];
    if (def.contains(key)) {
      write_fail(fmt::format("subgraph {}: engine {} appears twice", sg.name, e.name));
    }
    def[key] = e.name + ".json";
    def[fmt::format("{}_instr", key)] = e.name + ".bin";
  }
}

json def_json(const Subgraph& sg) {
  json def = sg.def.is_object() ? sg.def : json::object();
  def["var"] = variables_json(sg, child_or_null(sg.def, "var"));
  def["dma_queue"] = dma_queues_json(sg, child_or_null(sg.def, "dma_queue"));
  set_engine_keys(def, sg);
  json fp8 = old_entry(sg.def, "fp8_conversion_config");
  fp8["emax_fp8_e4m3"] = sg.fp8.emax_e4m3;
  fp8["emax_fp8_e5m2"] = sg.fp8.emax_e5m2;
  fp8["ocp_sat"] = sg.fp8.saturate;
  def["fp8_conversion_config"] = std::move(fp8);
  def["name"] = "definition";
  def["version"] = "0.6";
  return def;
}

std::string tensor_dtype_name(const Tensor& t) {
  if (!t.dtype_name.empty() || !t.dtype) return t.dtype_name;
  return std::string(dtype_name(*t.dtype));
}

json tensor_map_json(const Subgraph& sg) {
  json out = json::object();
  for (const Tensor& t : sg.tensors) {
    json e = {{"dtype", tensor_dtype_name(t)},
              {"is_const", t.is_const},
              {"layer_name", t.name},
              {"sim_format", "NC"},
              {"sim_shape", t.shape},
              {"tf_file", fmt::format("value_{}.npy", t.name)},
              {"tf_format", "NC"},
              {"tf_shape", t.shape}};
    if (!t.kind.empty()) e["kind"] = t.kind;
    add_unique(out, t.name, std::move(e), sg, "tensor");
  }
  return out;
}

json engine_json(const EngineStream& e) {
  json meta = e.meta.is_object() ? e.meta : json::object();
  if (!meta.contains("dma")) meta["dma"] = json::array();
  meta["instr"] = e.name + ".bin";
  meta["name"] = e.name + ".json";
  return meta;
}

json kelf_json(const Neff& n) {
  json kelf = n.kelf.is_object() ? n.kelf : json::object();
  json graphs = json::array();
  for (const Subgraph& sg : n.subgraphs) {
    graphs.push_back({{"definition", sg.name + "/def.json"}, {"name", sg.name}});
  }
  kelf["graphs"] = std::move(graphs);
  kelf["version"] = "0.5";
  kelf["target"] = n.target;
  return kelf;
}

json info_json(const Neff& n) {
  json info = n.info.is_object() ? n.info : json::object();
  info["tool_version"] = n.producer;
  info["name"] = n.header.name;
  info["num_tpb"] = n.header.num_tpb;
  info["num_tpb_requested"] = n.header.requested_tpb_count;
  info["num_tpb_per_node"] = n.header.tpb_per_node;
  if (n.isa_version) {
    info[kIsaVersionKey] = *n.isa_version;
  } else {
    info.erase(kIsaVersionKey);
  }
  return info;
}

// neff.json: the TVM-style graph real NEFFs carry, one "null" node per input and
// one __kelf op producing the outputs.
json graph_json(const Neff& n) {
  const auto inputs = n.inputs();
  const auto outputs = n.outputs();
  json nodes = json::array(), op_inputs = json::array(), arg_nodes = json::array();
  json signature = json::object(), out_names = json::array(), heads = json::array();
  json shapes = json::array(), dtypes = json::array(), storage = json::array();
  json row_ptr = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    nodes.push_back({{"op", "null"},
                     {"name", t.name},
                     {"inputs", json::array()},
                     {"output_names", json::array({t.name})},
                     {"is_param", "0"}});
    op_inputs.push_back(json::array({i, 0, 0}));
    arg_nodes.push_back(i);
    row_ptr.push_back(i);
    signature[t.name] = {{"id", i}, {"dtype", tensor_dtype_name(t)}, {"shape", t.shape}};
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    out_names.push_back(outputs[j].name);
    heads.push_back(json::array({inputs.size(), j, 0}));
  }
  for (const auto* list : {&inputs, &outputs}) {
    for (const Tensor& t : *list) {
      shapes.push_back(t.shape);
      dtypes.push_back(tensor_dtype_name(t));
      storage.push_back(storage.size());
    }
  }
  row_ptr.push_back(inputs.size());
  row_ptr.push_back(inputs.size() + outputs.size());
  nodes.push_back({{"op", "tvm_op"},
                   {"name", "sg_coreV10"},
                   {"attrs",
                    {{"func_name", "__kelf"},
                     {"flatten_data", "0"},
                     {"num_inputs", std::to_string(inputs.size())},
                     {"kelf", kKelfJson},
                     {"num_outputs", std::to_string(outputs.size())}}},
                   {"inputs", op_inputs},
                   {"output_names", out_names}});
  return {{"nodes", nodes},
          {"arg_nodes", arg_nodes},
          {"heads", heads},
          {"attrs",
           {{"shape", json::array({"list_shape", shapes})},
            {"storage_id", json::array({"list_int", storage})},
            {"dltype", json::array({"list_str", dtypes})}}},
          {"node_row_ptr", row_ptr},
          {"metadata",
           {{"signatures", {{"default", {{"inputs", signature}, {"outputs", json::object()}}}}}}}};
}

std::vector<uint8_t> json_bytes(const json& j, const std::string& path, int indent) {
  try {
    const std::string s = j.dump(indent);
    return std::vector<uint8_t>(s.begin(), s.end());
  } catch (const json::exception& e) {
    write_fail(fmt::format("member {}: cannot serialize JSON: {}", path, e.what()));
  }
}

void add_member(Members& m, const std::string& path, std::vector<uint8_t> bytes) {
  if (path.empty() || path.back() == '/') {
    write_fail(fmt::format("invalid member path \"{}\"", path));
  }
  if (!m.emplace(path, std::move(bytes)).second) {
    write_fail(fmt::format("member {} is given twice (it may collide with one neuronsim generates)",
                           path));
  }
}

void add_subgraph_members(Members& m, const Subgraph& sg) {
  if (sg.name.empty() || sg.name.find('/') != std::string::npos) {
    write_fail(fmt::format("subgraph name \"{}\" is not a plain directory name", sg.name));
  }
  const std::string dir = sg.name + "/";
  add_member(m, dir + "def.json", json_bytes(def_json(sg), dir + "def.json", 4));
  const std::string map_path = dir + "tensor_map.json";
  add_member(m, map_path, json_bytes(tensor_map_json(sg), map_path, 4));
  for (const EngineStream& e : sg.engines) {
    const std::string json_path = dir + e.name + ".json";
    add_member(m, json_path, json_bytes(engine_json(e), json_path, -1));
    add_member(m, dir + e.name + ".bin", e.code);
  }
  for (const auto& [name, bytes] : sg.files) add_member(m, dir + name, bytes);
}

Members collect_members(const Neff& n) {
  Members m;
  add_member(m, kNeffJson, json_bytes(graph_json(n), kNeffJson, 4));
  add_member(m, kKelfJson, json_bytes(kelf_json(n), kKelfJson, 4));
  add_member(m, kInfoJson, json_bytes(info_json(n), kInfoJson, 2));
  std::set<std::string> names;
  for (const Subgraph& sg : n.subgraphs) {
    if (!names.insert(sg.name).second) {
      write_fail(fmt::format("subgraph {} appears twice", sg.name));
    }
    add_subgraph_members(m, sg);
  }
  for (const auto& [path, bytes] : n.other_members) add_member(m, path, bytes);
  return m;
}

// ---------------------------------------------------------------- writing the tar

la_ssize_t append_to_vector(archive*, void* client, const void* buf, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(client);
  const auto* p = static_cast<const uint8_t*>(buf);
  out->insert(out->end(), p, p + n);
  return static_cast<la_ssize_t>(n);
}

void check_write(archive* a, int r, std::string_view what) {
  if (r < ARCHIVE_WARN) write_fail(fmt::format("{}: {}", what, archive_message(a)));
}

// Ownership, mode and mtime as in the compiler's NEFFs; fixed values keep output deterministic.
void write_entry(archive* a, const std::string& path, const std::vector<uint8_t>& data) {
  std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(),
                                                                  archive_entry_free);
  if (!e) write_fail("out of memory");
  archive_entry_set_pathname(e.get(), path.c_str());
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(data.size()));
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), 0664);
  archive_entry_set_uid(e.get(), 65534);
  archive_entry_set_gid(e.get(), 65534);
  archive_entry_set_uname(e.get(), "nobody");
  archive_entry_set_gname(e.get(), "nobody");
  archive_entry_set_mtime(e.get(), 0, 0);
  const std::string what = fmt::format("member {}", path);
  check_write(a, archive_write_header(a, e.get()), what);
  for (size_t done = 0; done < data.size();) {
    const la_ssize_t n = archive_write_data(a, data.data() + done, data.size() - done);
    if (n <= 0) write_fail(fmt::format("{}: {}", what, archive_message(a)));
    done += static_cast<size_t>(n);
  }
}

// Member order: sorted paths with neff.json last, as the compiler writes them.
std::vector<const Members::value_type*> member_order(const Members& m) {
  std::vector<const Members::value_type*> order;
  for (const auto& entry : m) {
    if (entry.first != kNeffJson) order.push_back(&entry);
  }
  order.push_back(&*m.find(kNeffJson));
  return order;
}

std::vector<uint8_t> write_tar_gz(const Members& m) {
  WriteArchive a(archive_write_new());
  if (!a) write_fail("out of memory");
  check_write(a.get(), archive_write_set_format_ustar(a.get()), "tar format");
  check_write(a.get(), archive_write_add_filter_gzip(a.get()), "gzip filter");
  // No timestamp in the gzip header: identical input gives identical bytes.
  check_write(a.get(), archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr),
              "gzip timestamp option");
  std::vector<uint8_t> out;
  check_write(a.get(), archive_write_open(a.get(), &out, nullptr, append_to_vector, nullptr),
              "opening the archive");
  for (const auto* entry : member_order(m)) write_entry(a.get(), entry->first, entry->second);
  check_write(a.get(), archive_write_close(a.get()), "closing the archive");
  return out;
}

// ---------------------------------------------------------------- files

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileClose>;

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

// ---------------------------------------------------------------- public API

Header parse_header(std::span<const uint8_t> data, const std::string& source) {
  if (data.size() < kHeaderSize) {
    throw NeffError(fmt::format("{}: header: file is {} bytes, shorter than the {}-byte header",
                                source, data.size(), kHeaderSize));
  }
  const uint8_t* p = data.data();
  Header h;
  h.pkg_version = load_le(p + kOffPkgVersion, 8);
  h.header_size = load_le(p + kOffHeaderSize, 8);
  h.data_size = load_le(p + kOffDataSize, 8);
  h.neff_version_major = load_le(p + kOffVersionMajor, 8);
  h.neff_version_minor = load_le(p + kOffVersionMinor, 8);
  h.build_version = load_cstr(p + kOffBuildVersion, kBuildVersionLen);
  h.num_tpb = static_cast<uint32_t>(load_le(p + kOffNumTpb, 4));
  std::copy_n(p + kOffHash, h.hash.size(), h.hash.begin());
  std::copy_n(p + kOffUuid, h.uuid.size(), h.uuid.begin());
  h.name = load_cstr(p + kOffName, kNameLen);
  h.requested_tpb_count = static_cast<uint32_t>(load_le(p + kOffRequestedTpb, 4));
  std::copy_n(p + kOffTpbPerNode, h.tpb_per_node.size(), h.tpb_per_node.begin());
  h.feature_bits = load_le(p + kOffFeatureBits, 8);
  h.lnc_size = static_cast<uint32_t>(load_le(p + kOffLncSize, 4));
  return h;
}

std::array<uint8_t, kHeaderSize> serialize_header(const Header& h) {
  std::array<uint8_t, kHeaderSize> out{};
  uint8_t* p = out.data();
  store_le(p + kOffPkgVersion, h.pkg_version, 8);
  store_le(p + kOffHeaderSize, h.header_size, 8);
  store_le(p + kOffDataSize, h.data_size, 8);
  store_le(p + kOffVersionMajor, h.neff_version_major, 8);
  store_le(p + kOffVersionMinor, h.neff_version_minor, 8);
  store_cstr(p + kOffBuildVersion, kBuildVersionLen, h.build_version, "build_version");
  store_le(p + kOffNumTpb, h.num_tpb, 4);
  std::copy(h.hash.begin(), h.hash.end(), p + kOffHash);
  std::copy(h.uuid.begin(), h.uuid.end(), p + kOffUuid);
  store_cstr(p + kOffName, kNameLen, h.name, "name");
  store_le(p + kOffRequestedTpb, h.requested_tpb_count, 4);
  std::copy(h.tpb_per_node.begin(), h.tpb_per_node.end(), p + kOffTpbPerNode);
  store_le(p + kOffFeatureBits, h.feature_bits, 8);
  store_le(p + kOffLncSize, h.lnc_size, 4);
  return out;
}

// The tools store the digest as four little-endian words, so each 4-byte group
// of the conventional MD5 byte string appears reversed (verified on the fixture).
std::array<uint8_t, 32> payload_hash(std::span<const uint8_t> tar_gz) {
  const auto digest = md5(tar_gz);
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < digest.size(); ++i) out[i] = digest[(i / 4) * 4 + 3 - i % 4];
  return out;
}

uint64_t Tensor::size_bytes() const {
  if (!dtype) return 0;
  uint64_t n = dtype_size(*dtype);
  for (int64_t d : shape) {
    if (d < 0) return 0;
    // Saturate rather than wrap, so a corrupt shape cannot look small.
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return UINT64_MAX;
  }
  return n;
}

namespace {
std::vector<Tensor> tensors_of_kind(const Neff& n, std::string_view kind) {
  std::vector<Tensor> out;
  if (n.subgraphs.empty()) return out;
  for (const Tensor& t : n.subgraphs.front().tensors) {
    if (t.kind == kind) out.push_back(t);
  }
  std::sort(out.begin(), out.end(),
            [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  return out;
}
}  // namespace

std::vector<Tensor> Neff::inputs() const {
  return tensors_of_kind(*this, "input");
}
std::vector<Tensor> Neff::outputs() const {
  return tensors_of_kind(*this, "output");
}

bool Neff::executable_by_neuronsim() const {
  return isa_version.has_value() && *isa_version == kIsaVersion;
}

Neff read_neff(std::span<const uint8_t> bytes, const std::string& source) {
  const Header header = parse_header(bytes, source);
  check_container(bytes, header, source);
  const auto payload = bytes.subspan(kHeaderSize);
  check_hash(payload, header, source);
  try {
    return Reader(read_members(payload, source), source).read(header);
  } catch (const nlohmann::json::exception& e) {
    // The checked accessors should leave nothing for nlohmann to throw; this is the backstop.
    throw NeffError(fmt::format("{}: metadata: {}", source, e.what()));
  }
}

Neff read_neff_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw NeffError(fmt::format("{}: not a regular file{}", source,
                                ec ? fmt::format(" ({})", ec.message()) : ""));
  }
  File f(std::fopen(source.c_str(), "rb"));
  if (!f) throw NeffError(fmt::format("{}: cannot open: {}", source, errno_text()));
  std::vector<uint8_t> bytes;
  std::array<uint8_t, 65536> chunk{};
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), f.get())) {
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + static_cast<ptrdiff_t>(n));
  }
  if (std::ferror(f.get())) {
    throw NeffError(fmt::format("{}: read error: {}", source, errno_text()));
  }
  return read_neff(bytes, source);
}

std::vector<uint8_t> write_neff(const Neff& neff) {
  const auto tar_gz = write_tar_gz(collect_members(neff));
  Header h = neff.header;
  h.header_size = kHeaderSize;
  h.data_size = tar_gz.size();
  h.hash = payload_hash(tar_gz);
  const auto header = serialize_header(h);
  std::vector<uint8_t> out(kHeaderSize + tar_gz.size());
  std::copy(header.begin(), header.end(), out.begin());
  std::copy(tar_gz.begin(), tar_gz.end(), out.begin() + kHeaderSize);
  return out;
}

void write_neff_file(const Neff& neff, const std::filesystem::path& path) {
  const std::string target = path.string();
  std::vector<uint8_t> bytes;
  try {
    bytes = write_neff(neff);
  } catch (const NeffError& e) {
    throw NeffError(fmt::format("{}: {}", target, e.what()));
  }
  File f(std::fopen(target.c_str(), "wb"));
  if (!f) throw NeffError(fmt::format("{}: cannot open for writing: {}", target, errno_text()));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    throw NeffError(fmt::format("{}: write error: {}", target, errno_text()));
  }
  if (std::fclose(f.release()) != 0) {
    throw NeffError(fmt::format("{}: write error: {}", target, errno_text()));
  }
}

}  // namespace neuronsim::isa::neff
