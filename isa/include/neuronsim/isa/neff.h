// The NEFF container: a 1,024-byte little-endian header followed by a gzip tar
// (see docs/neff.md). `read_neff` opens real neuronx-cc NEFFs and ours alike;
// `write_neff` lays ours out like the real ones, so the real tools can read
// their headers and tensors. The container knows nothing of the instruction
// encoding: engine streams are opaque bytes here (see program.h for decoding).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/isa/dtype.h"

namespace neuronsim::isa::neff {

inline constexpr size_t kHeaderSize = 1024;

// The documented header fields, at their documented offsets.
struct Header {
  uint64_t pkg_version = 2;                 // 0
  uint64_t header_size = kHeaderSize;       // 8
  uint64_t data_size = 0;                   // 16: bytes of the gzip tar that follows
  uint64_t neff_version_major = 2;          // 24
  uint64_t neff_version_minor = 0;          // 32
  std::string build_version;                // 40, 128 bytes, NUL padded
  uint32_t num_tpb = 1;                     // 168
  std::array<uint8_t, 32> hash{};           // 172: MD5 of the tar as 4 LE words, rest zero
  std::array<uint8_t, 16> uuid{};           // 204
  std::string name = "file.neff";           // 220, 256 bytes
  uint32_t requested_tpb_count = 1;         // 476
  std::array<uint8_t, 64> tpb_per_node{1};  // 480
  uint64_t feature_bits = 0;                // 544
  uint32_t lnc_size = 1;                    // 552
};

// Parses the first 1,024 bytes of `data`; `source` names the file in errors.
Header parse_header(std::span<const uint8_t> data, const std::string& source);
std::array<uint8_t, kHeaderSize> serialize_header(const Header& h);
// The hash field as the real tools store it for `tar_gz` (MD5, words byte-reversed).
std::array<uint8_t, 32> payload_hash(std::span<const uint8_t> tar_gz);

// One subgraph variable from sgNN/def.json "var".
struct Variable {
  std::string name;
  std::string type;  // input, output, state-buffer, file, virtual, tmp-buf, pointer, dge-table
  int var_id = 0;
  uint64_t size = 0;      // bytes (0 when the NEFF gives none)
  std::string file_name;  // for type "file": the member holding its value (.npy)
};

// One queue set from def.json "dma_queue".
struct DmaQueue {
  std::string name;
  std::string type;   // in, out, data, dynamic, ...
  std::string owner;  // engine that triggers it: sp, act, pool, ...
  int num_queues = 0;
  std::vector<int> semaphores;
};

// One tensor from sgNN/tensor_map.json.
struct Tensor {
  std::string name;
  std::string dtype_name;      // as written in the NEFF ("float16", ...)
  std::optional<DType> dtype;  // when we know the type
  std::vector<int64_t> shape;
  std::string kind;  // input, output, or "" for constants
  bool is_const = false;
  uint64_t size_bytes() const;
};

// Engine stream names as the NEFF spells them, in def.json key order.
inline constexpr std::array<const char*, 5> kEngineNames = {"PE", "Activation", "DVE", "Pool",
                                                            "SP"};
inline constexpr std::array<const char*, 5> kEngineDefKeys = {"pe", "act", "dve", "pool", "sp"};

struct EngineStream {
  std::string name;           // PE, Activation, DVE, Pool, SP
  std::string json_member;    // sgNN/PE.json
  std::string bin_member;     // sgNN/PE.bin
  std::vector<uint8_t> code;  // the .bin contents
  nlohmann::json meta;        // the <ENGINE>.json contents
};

struct Subgraph {
  std::string name;    // sg00
  nlohmann::json def;  // def.json as read (or as written)
  std::vector<Variable> variables;
  std::vector<DmaQueue> dma_queues;
  std::vector<Tensor> tensors;
  std::vector<EngineStream> engines;
  Fp8Config fp8;
  std::map<std::string, std::vector<uint8_t>> files;  // other members of sgNN/, by base name
};

// The whole NEFF, typed. Fields we do not model stay available in the raw JSON.
struct Neff {
  Header header;
  nlohmann::json neff_json;  // neff.json
  nlohmann::json kelf;       // kelf-0.json
  nlohmann::json info;       // info.json
  std::string target;        // kelf "target": cayman (trn2), or ours: trn1/trn2/trn3
  std::string producer;  // info.json tool_version, e.g. "2.23.6484.0+3b612583" or "neuronsim 0.1.0"
  std::optional<int> isa_version;  // set only for NEFFs whose streams use our encoding
  std::vector<Subgraph> subgraphs;
  std::map<std::string, std::vector<uint8_t>> other_members;  // top-level members we do not model

  // Inputs and outputs of the model (from sg00's tensor map, in name order).
  std::vector<Tensor> inputs() const;
  std::vector<Tensor> outputs() const;
  // True when every engine stream uses our encoding at a version we execute.
  bool executable_by_neuronsim() const;
};

// Reads a NEFF from bytes; `source` names the file in error messages. Throws NeffError.
Neff read_neff(std::span<const uint8_t> bytes, const std::string& source);
Neff read_neff_file(const std::filesystem::path& path);

// Writes `neff` as NEFF bytes: JSON members from the typed fields, the tar, the header
// with data_size and hash filled in. Throws NeffError on inconsistent input.
std::vector<uint8_t> write_neff(const Neff& neff);
void write_neff_file(const Neff& neff, const std::filesystem::path& path);

}  // namespace neuronsim::isa::neff
