// Tests of the NEFF container: header layout, write/read round trips, the real
// neuronx-cc fixture, and rejection of damaged files with messages that say where.
#include "neuronsim/isa/neff.h"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neuronsim/isa/error.h"

#ifndef NEURONSIM_FIXTURES_DEFAULT
#define NEURONSIM_FIXTURES_DEFAULT ""
#endif

namespace neuronsim::isa::neff {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes to_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

// ---------------------------------------------------------------- archive helpers

// One tar member with the attributes the tests inspect.
struct Entry {
  std::string path{};
  Bytes data{};
  int64_t uid = 0;
  int64_t gid = 0;
  std::string uname{};
  std::string gname{};
  unsigned perm = 0;
  int64_t mtime = -1;
};
using Entries = std::vector<Entry>;

la_ssize_t append(archive*, void* client, const void* buf, size_t n) {
  auto* out = static_cast<Bytes*>(client);
  const auto* p = static_cast<const uint8_t*>(buf);
  out->insert(out->end(), p, p + n);
  return static_cast<la_ssize_t>(n);
}

// Writes `entries` in order with libarchive: format "ustar" (a tar) or "raw" (the one
// entry's bytes as they are), optionally gzipped, without block padding.
Bytes archive_bytes(const Entries& entries, const char* format, bool gzip) {
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(),
                                                            archive_write_free);
  EXPECT_EQ(archive_write_set_format_by_name(a.get(), format), ARCHIVE_OK);
  if (gzip) {
    EXPECT_EQ(archive_write_add_filter_gzip(a.get()), ARCHIVE_OK);
  }
  archive_write_set_bytes_in_last_block(a.get(), 1);
  Bytes out;
  EXPECT_EQ(archive_write_open(a.get(), &out, nullptr, append, nullptr), ARCHIVE_OK);
  for (const Entry& e : entries) {
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> ae(archive_entry_new(),
                                                                     archive_entry_free);
    archive_entry_set_pathname(ae.get(), e.path.c_str());
    archive_entry_set_size(ae.get(), static_cast<la_int64_t>(e.data.size()));
    archive_entry_set_filetype(ae.get(), AE_IFREG);
    archive_entry_set_perm(ae.get(), 0644);
    EXPECT_EQ(archive_write_header(a.get(), ae.get()), ARCHIVE_OK);
    archive_write_data(a.get(), e.data.data(), e.data.size());
  }
  EXPECT_EQ(archive_write_close(a.get()), ARCHIVE_OK);
  return out;
}

Bytes tar_gz(const Entries& entries) {
  return archive_bytes(entries, "ustar", true);
}
Bytes gzip(const Bytes& data) {
  return archive_bytes({{"data", data}}, "raw", true);
}

// A NEFF around `payload` with a header whose data_size and hash are right.
Bytes with_header(const Bytes& payload) {
  Header h;
  h.data_size = payload.size();
  h.hash = payload_hash(payload);
  const auto header = serialize_header(h);
  Bytes out(header.size() + payload.size());
  std::copy(header.begin(), header.end(), out.begin());
  std::copy(payload.begin(), payload.end(),
            out.begin() + static_cast<std::ptrdiff_t>(header.size()));
  return out;
}

// The members of a NEFF's tar, in archive order, with their attributes.
Entries unpack(const Bytes& neff) {
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  EXPECT_EQ(archive_read_open_memory(a.get(), neff.data() + kHeaderSize, neff.size() - kHeaderSize),
            ARCHIVE_OK);
  Entries entries;
  archive_entry* ae = nullptr;
  while (archive_read_next_header(a.get(), &ae) == ARCHIVE_OK) {
    Entry e{archive_entry_pathname(ae), Bytes(static_cast<size_t>(archive_entry_size(ae))),
            archive_entry_uid(ae),      archive_entry_gid(ae),
            archive_entry_uname(ae),    archive_entry_gname(ae),
            archive_entry_perm(ae),     archive_entry_mtime(ae)};
    archive_read_data(a.get(), e.data.data(), e.data.size());
    entries.push_back(std::move(e));
  }
  return entries;
}

void erase_member(Entries& entries, const std::string& path) {
  auto gone = std::remove_if(entries.begin(), entries.end(),
                             [&](const Entry& e) { return e.path == path; });
  ASSERT_NE(gone, entries.end()) << path << " not in the archive";
  entries.erase(gone, entries.end());
}

void set_member(Entries& entries, const std::string& path, std::string_view text) {
  for (Entry& e : entries) {
    if (e.path == path) {
      e.data = to_bytes(text);
      return;
    }
  }
  entries.push_back({path, to_bytes(text)});
}

// ---------------------------------------------------------------- Neff builders

Tensor tensor(std::string name, std::string dtype, std::vector<int64_t> shape, std::string kind,
              bool is_const = false) {
  return Tensor{std::move(name),  dtype,           parse_dtype(dtype),
                std::move(shape), std::move(kind), is_const};
}

EngineStream engine(std::string name, size_t code_size, uint8_t seed) {
  EngineStream e;
  e.name = std::move(name);
  for (size_t i = 0; i < code_size; ++i) e.code.push_back(static_cast<uint8_t>(seed + i));
  e.meta = {{"note", "kept"}};
  return e;
}

// A one-subgraph NEFF with two engines, three tensors, a constant and an extra member.
Neff small_neff() {
  Neff n;
  n.header.name = "small.neff";
  n.header.build_version = "test";
  n.target = "trn2";
  n.producer = "neuronsim 0.1.0";
  n.isa_version = 1;
  Subgraph sg;
  sg.name = "sg00";
  sg.variables = {{"out", "output", 2, 64, ""},
                  {"w", "file", 3, 32, "value_w.npy"},
                  {"x", "input", 1, 128, ""}};
  sg.dma_queues = {{"qSync", "data", "sp", 2, {4, 5}}};
  sg.tensors = {tensor("out", "float32", {4, 4}, "output"),
                tensor("w", "float16", {4, 4}, "", true), tensor("x", "float32", {4, 8}, "input")};
  sg.engines = {engine("PE", 128, 1), engine("SP", 64, 7)};
  sg.fp8 = {7, 15, false};
  sg.files["value_w.npy"] = to_bytes("not really npy");
  n.subgraphs.push_back(sg);
  n.other_members["hlo_stats.json"] = to_bytes(R"({"HloMacCount": 128})");
  return n;
}

// ---------------------------------------------------------------- assertions

std::string read_error(const Bytes& bytes) {
  try {
    read_neff(bytes, "model.neff");
  } catch (const NeffError& e) {
    return e.what();
  }
  ADD_FAILURE() << "read_neff accepted the input";
  return {};
}

void expect_mentions(const std::string& message, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message: " << message << "\nlacks: " << part;
  }
}

void expect_same(const Variable& a, const Variable& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.var_id, b.var_id);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.file_name, b.file_name);
}

void expect_same(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype_name, b.dtype_name);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.is_const, b.is_const);
}

void expect_same(const DmaQueue& a, const DmaQueue& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.num_queues, b.num_queues);
  EXPECT_EQ(a.semaphores, b.semaphores);
}

template <typename T>
void expect_same_list(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expect_same(a[i], b[i]);
}

// ---------------------------------------------------------------- header

TEST(NeffHeader, RoundTripsEveryField) {
  Header h;
  h.pkg_version = 3;
  h.data_size = 0x123456789;
  h.neff_version_major = 1;
  h.neff_version_minor = 4;
  h.build_version = "build 7";
  h.num_tpb = 2;
  for (size_t i = 0; i < h.hash.size(); ++i) h.hash[i] = static_cast<uint8_t>(i + 1);
  for (size_t i = 0; i < h.uuid.size(); ++i) h.uuid[i] = static_cast<uint8_t>(0xa0 + i);
  h.name = "model.neff";
  h.requested_tpb_count = 5;
  h.tpb_per_node = {2, 3};
  h.feature_bits = 0x209c00;
  h.lnc_size = 2;
  const auto bytes = serialize_header(h);
  EXPECT_EQ(bytes[16], 0x89);
  EXPECT_EQ(bytes[172], 1);
  EXPECT_EQ(bytes[220], 'm');
  EXPECT_EQ(bytes[481], 3);
  EXPECT_EQ(bytes[552], 2);
  EXPECT_TRUE(std::all_of(bytes.begin() + 556, bytes.end(), [](uint8_t b) { return b == 0; }));
  const Header back = parse_header(bytes, "h");
  EXPECT_EQ(back.pkg_version, 3u);
  EXPECT_EQ(back.header_size, kHeaderSize);
  EXPECT_EQ(back.data_size, 0x123456789u);
  EXPECT_EQ(back.neff_version_major, 1u);
  EXPECT_EQ(back.neff_version_minor, 4u);
  EXPECT_EQ(back.build_version, "build 7");
  EXPECT_EQ(back.num_tpb, 2u);
  EXPECT_EQ(back.hash, h.hash);
  EXPECT_EQ(back.uuid, h.uuid);
  EXPECT_EQ(back.name, "model.neff");
  EXPECT_EQ(back.requested_tpb_count, 5u);
  EXPECT_EQ(back.tpb_per_node, h.tpb_per_node);
  EXPECT_EQ(back.feature_bits, 0x209c00u);
  EXPECT_EQ(back.lnc_size, 2u);
}

TEST(NeffHeader, RejectsShortInputAndOverlongStrings) {
  const Bytes short_file(100);
  try {
    parse_header(short_file, "tiny.neff");
    FAIL() << "parse_header accepted 100 bytes";
  } catch (const NeffError& e) {
    expect_mentions(e.what(), {"tiny.neff", "header", "100 bytes"});
  }
  Header h;
  h.name = std::string(256, 'n');
  EXPECT_THROW(serialize_header(h), NeffError);
}

// The hash field holds the MD5 digest as four little-endian words.
TEST(NeffHeader, PayloadHashIsWordSwappedMd5) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "d41d8cd98f00b204e9800998ecf8427e"},
      {"abc", "900150983cd24fb0d6963f7d28e17f72"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "8215ef0796a20bcaaae116d3876c664a"},
      {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
       "57edf4a22be3c955ac49da2e2107b67a"}};
  for (const auto& [text, md5] : cases) {
    const auto hash = payload_hash(to_bytes(text));
    std::string words;
    for (size_t w = 0; w < 16; w += 4) {
      for (size_t i = 0; i < 4; ++i) words += fmt::format("{:02x}", hash[w + 3 - i]);
    }
    EXPECT_EQ(words, md5) << "input of " << text.size() << " bytes";
    EXPECT_TRUE(std::all_of(hash.begin() + 16, hash.end(), [](uint8_t b) { return b == 0; }));
  }
}

// ---------------------------------------------------------------- write and read

TEST(NeffWrite, RoundTripsTypedFields) {
  const Neff n = small_neff();
  const Bytes bytes = write_neff(n);
  const Neff back = read_neff(bytes, "small.neff");
  EXPECT_EQ(back.header.name, "small.neff");
  EXPECT_EQ(back.header.build_version, "test");
  EXPECT_EQ(back.header.data_size, bytes.size() - kHeaderSize);
  EXPECT_EQ(back.target, "trn2");
  EXPECT_EQ(back.producer, "neuronsim 0.1.0");
  EXPECT_EQ(back.isa_version, 1);
  EXPECT_TRUE(back.executable_by_neuronsim());
  ASSERT_EQ(back.subgraphs.size(), 1u);
  const Subgraph& sg = back.subgraphs[0];
  EXPECT_EQ(sg.name, "sg00");
  expect_same_list(sg.variables, n.subgraphs[0].variables);
  expect_same_list(sg.dma_queues, n.subgraphs[0].dma_queues);
  expect_same_list(sg.tensors, n.subgraphs[0].tensors);
  EXPECT_EQ(sg.fp8.emax_e4m3, 7);
  EXPECT_EQ(sg.fp8.emax_e5m2, 15);
  EXPECT_FALSE(sg.fp8.saturate);
  EXPECT_EQ(sg.files, n.subgraphs[0].files);
  EXPECT_EQ(back.other_members, n.other_members);
}

TEST(NeffWrite, RoundTripsEngineStreams) {
  const Neff n = small_neff();
  const Neff back = read_neff(write_neff(n), "small.neff");
  const auto& engines = back.subgraphs.at(0).engines;
  ASSERT_EQ(engines.size(), 2u);
  for (size_t i = 0; i < engines.size(); ++i) {
    const EngineStream& want = n.subgraphs[0].engines[i];
    EXPECT_EQ(engines[i].name, want.name);
    EXPECT_EQ(engines[i].code, want.code);
    EXPECT_EQ(engines[i].json_member, "sg00/" + want.name + ".json");
    EXPECT_EQ(engines[i].bin_member, "sg00/" + want.name + ".bin");
    EXPECT_EQ(engines[i].meta["instr"], want.name + ".bin");
    EXPECT_EQ(engines[i].meta["note"], "kept");
    EXPECT_TRUE(engines[i].meta["dma"].is_array());
  }
  const auto& def = back.subgraphs[0].def;
  EXPECT_EQ(def["pe"], "PE.json");
  EXPECT_EQ(def["sp_instr"], "SP.bin");
  EXPECT_FALSE(def.contains("act"));
  EXPECT_EQ(def["version"], "0.6");
}

TEST(NeffWrite, GraphAndInfoLookLikeTheCompilers) {
  const Neff back = read_neff(write_neff(small_neff()), "small.neff");
  const auto& nodes = back.neff_json["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]["op"], "null");
  EXPECT_EQ(nodes[0]["name"], "x");
  EXPECT_EQ(nodes[1]["attrs"]["func_name"], "__kelf");
  EXPECT_EQ(nodes[1]["attrs"]["kelf"], "kelf-0.json");
  EXPECT_EQ(nodes[1]["output_names"], nlohmann::json::array({"out"}));
  EXPECT_EQ(back.neff_json["attrs"]["dltype"][0], "list_str");
  EXPECT_EQ(back.neff_json["node_row_ptr"], nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(back.neff_json["metadata"]["signatures"]["default"]["inputs"]["x"]["shape"],
            nlohmann::json::array({4, 8}));
  EXPECT_EQ(back.kelf["version"], "0.5");
  EXPECT_EQ(back.info["num_tpb_per_node"].size(), 64u);
  EXPECT_EQ(back.info["neuronsim_isa_version"], 1);
}

TEST(NeffWrite, InputsAndOutputsComeSortedWithSizes) {
  Neff n = small_neff();
  n.subgraphs[0].tensors.push_back(tensor("a", "bfloat16", {2, 3}, "input"));
  n.subgraphs[0].tensors.push_back(tensor("q", "mystery", {2}, "input"));
  const auto inputs = n.inputs();
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_EQ(inputs[0].name, "a");
  EXPECT_EQ(inputs[0].size_bytes(), 12u);
  EXPECT_EQ(inputs[1].name, "q");
  EXPECT_EQ(inputs[1].size_bytes(), 0u);  // unknown dtype
  EXPECT_EQ(inputs[2].size_bytes(), 128u);
  ASSERT_EQ(n.outputs().size(), 1u);
  EXPECT_EQ(n.outputs()[0].size_bytes(), 64u);
  EXPECT_TRUE(Neff{}.inputs().empty());
}

TEST(NeffWrite, IsDeterministic) {
  const Bytes first = write_neff(small_neff());
  EXPECT_EQ(first, write_neff(small_neff()));
  // gzip header: magic, method, flags, then a zero mtime.
  ASSERT_GT(first.size(), kHeaderSize + 8);
  for (size_t i = 4; i < 8; ++i) EXPECT_EQ(first[kHeaderSize + i], 0) << "gzip byte " << i;
}

TEST(NeffWrite, TarLayoutMatchesTheCompilers) {
  const Entries entries = unpack(write_neff(small_neff()));
  std::vector<std::string> paths;
  for (const Entry& e : entries) paths.push_back(e.path);
  const std::vector<std::string> want = {
      "hlo_stats.json",       "info.json",        "kelf-0.json",  "sg00/PE.bin",
      "sg00/PE.json",         "sg00/SP.bin",      "sg00/SP.json", "sg00/def.json",
      "sg00/tensor_map.json", "sg00/value_w.npy", "neff.json"};
  EXPECT_EQ(paths, want);
  for (const Entry& e : entries) {
    EXPECT_EQ(e.uid, 65534) << e.path;
    EXPECT_EQ(e.gid, 65534) << e.path;
    EXPECT_EQ(e.uname, "nobody") << e.path;
    EXPECT_EQ(e.gname, "nobody") << e.path;
    EXPECT_EQ(e.perm, 0664u) << e.path;
    EXPECT_EQ(e.mtime, 0) << e.path;
  }
}

TEST(NeffWrite, KeepsUnmodelledDefKeysButTypedFieldsWin) {
  Neff n = small_neff();
  n.subgraphs[0].def = {{"runtime_event_count", 12},
                        {"var", {{"x", {{"ops", nlohmann::json::array()}, {"var_id", 99}}}}},
                        {"act", "Stale.json"}};
  const Neff back = read_neff(write_neff(n), "small.neff");
  const auto& def = back.subgraphs[0].def;
  EXPECT_EQ(def["runtime_event_count"], 12);
  EXPECT_TRUE(def["var"]["x"]["ops"].is_array());
  EXPECT_EQ(def["var"]["x"]["var_id"], 1);
  EXPECT_FALSE(def.contains("act"));
}

TEST(NeffWrite, FilesRoundTripThroughDisk) {
  const auto path = std::filesystem::path(testing::TempDir()) / "neff_roundtrip.neff";
  write_neff_file(small_neff(), path);
  const Neff back = read_neff_file(path);
  EXPECT_EQ(back.subgraphs.at(0).engines.at(0).code.size(), 128u);
  std::filesystem::remove(path);
}

TEST(NeffWrite, RejectsInconsistentInput) {
  Neff bad_engine = small_neff();
  bad_engine.subgraphs[0].engines[0].name = "Tensor";
  try {
    write_neff(bad_engine);
    FAIL() << "unknown engine accepted";
  } catch (const NeffError& e) {
    expect_mentions(e.what(), {"sg00", "Tensor"});
  }
  Neff collision = small_neff();
  collision.subgraphs[0].files["def.json"] = to_bytes("{}");
  try {
    write_neff(collision);
    FAIL() << "colliding file accepted";
  } catch (const NeffError& e) {
    expect_mentions(e.what(), {"sg00/def.json"});
  }
  Neff twice = small_neff();
  twice.subgraphs.push_back(twice.subgraphs[0]);
  EXPECT_THROW(write_neff(twice), NeffError);
}

TEST(NeffFiles, ErrorsNameThePath) {
  const auto missing = std::filesystem::path(testing::TempDir()) / "no_such_dir" / "m.neff";
  try {
    read_neff_file(missing);
    FAIL() << "missing file read";
  } catch (const NeffError& e) {
    expect_mentions(e.what(), {missing.string()});
  }
  try {
    write_neff_file(small_neff(), missing);
    FAIL() << "wrote into a missing directory";
  } catch (const NeffError& e) {
    expect_mentions(e.what(), {missing.string()});
  }
}

// ---------------------------------------------------------------- the real fixture

std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("NEURONSIM_FIXTURES")) return env;
  return NEURONSIM_FIXTURES_DEFAULT;
}

class RealNeff : public testing::Test {
 protected:
  void SetUp() override {
    path_ = fixtures_dir() / "neff" / "matmul_small.neff";
    if (!std::filesystem::exists(path_)) GTEST_SKIP() << "fixtures not found at " << path_;
    neff_ = read_neff_file(path_);
  }
  std::filesystem::path path_;
  Neff neff_;
};

TEST_F(RealNeff, HeaderFields) {
  const Header& h = neff_.header;
  EXPECT_EQ(h.pkg_version, 2u);
  EXPECT_EQ(h.header_size, 1024u);
  EXPECT_EQ(h.data_size, 61440u);
  EXPECT_EQ(h.neff_version_major, 2u);
  EXPECT_EQ(h.lnc_size, 2u);
  EXPECT_EQ(h.feature_bits, 0x209c00u);
  EXPECT_EQ(h.name, "file.neff");
  EXPECT_EQ(h.num_tpb, 1u);
  EXPECT_EQ(h.tpb_per_node[0], 1);
  EXPECT_EQ(h.hash[0], 0xbc);
  EXPECT_EQ(h.hash[3], 0xef);
}

TEST_F(RealNeff, ModelSignature) {
  EXPECT_EQ(neff_.target, "cayman");
  EXPECT_EQ(neff_.producer, "2.23.6484.0+3b612583");
  EXPECT_FALSE(neff_.isa_version.has_value());
  EXPECT_FALSE(neff_.executable_by_neuronsim());
  ASSERT_EQ(neff_.subgraphs.size(), 2u);
  EXPECT_EQ(neff_.subgraphs[0].name, "sg00");
  EXPECT_EQ(neff_.subgraphs[1].name, "sg01");
  const auto inputs = neff_.inputs();
  ASSERT_EQ(inputs.size(), 2u);
  expect_same(inputs[0], tensor("x", "float16", {128, 256}, "input"));
  expect_same(inputs[1], tensor("y", "float16", {256, 128}, "input"));
  EXPECT_EQ(inputs[0].size_bytes(), 65536u);
  EXPECT_EQ(inputs[1].size_bytes(), 65536u);
  const auto outputs = neff_.outputs();
  ASSERT_EQ(outputs.size(), 1u);
  expect_same(outputs[0], tensor("output0", "float16", {128, 128}, "output"));
  EXPECT_EQ(outputs[0].size_bytes(), 32768u);
}

TEST_F(RealNeff, SubgraphDefinition) {
  const Subgraph& sg = neff_.subgraphs[0];
  ASSERT_EQ(sg.dma_queues.size(), 2u);
  EXPECT_EQ(sg.dma_queues[0].name, "qPoolDynamic");
  EXPECT_EQ(sg.dma_queues[1].name, "qSPDynamicHW");
  for (const DmaQueue& q : sg.dma_queues) {
    EXPECT_EQ(q.num_queues, 16);
    EXPECT_EQ(q.semaphores.size(), 16u);
    EXPECT_EQ(q.type, "dynamic");
  }
  ASSERT_EQ(sg.engines.size(), 5u);
  const std::vector<std::string> names = {"PE", "Activation", "DVE", "Pool", "SP"};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(sg.engines[i].name, names[i]);
  EXPECT_EQ(sg.engines[0].code.size(), 768u);
  EXPECT_EQ(sg.engines[0].bin_member, "sg00/PE.bin");
  EXPECT_EQ(sg.fp8.emax_e4m3, 8);
  EXPECT_EQ(sg.fp8.emax_e5m2, 15);
  EXPECT_TRUE(sg.fp8.saturate);
  ASSERT_EQ(sg.variables.size(), 6u);
  const auto identity = std::find_if(sg.variables.begin(), sg.variables.end(),
                                     [](const Variable& v) { return v.type == "file"; });
  ASSERT_NE(identity, sg.variables.end());
  EXPECT_EQ(identity->file_name, "value_sg0000_identity_82_CRSM.npy");
  EXPECT_EQ(sg.files.at(identity->file_name).size(), 32896u);
  EXPECT_TRUE(sg.files.contains("act_info.json"));
  EXPECT_FALSE(sg.files.contains("def.json"));
  EXPECT_TRUE(neff_.other_members.contains("hlo_stats.json"));
  EXPECT_TRUE(neff_.other_members.contains("debug_info/debug_info_hlo.dbg_sg000000"));
}

TEST_F(RealNeff, RewritesWithoutLosingContent) {
  const Bytes rewritten = write_neff(neff_);
  EXPECT_EQ(rewritten, write_neff(neff_));
  const Neff back = read_neff(rewritten, "rewritten.neff");
  EXPECT_EQ(back.header.feature_bits, neff_.header.feature_bits);
  EXPECT_EQ(back.producer, neff_.producer);
  EXPECT_EQ(back.target, "cayman");
  EXPECT_EQ(back.other_members, neff_.other_members);
  ASSERT_EQ(back.subgraphs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Subgraph& a = neff_.subgraphs[i];
    const Subgraph& b = back.subgraphs[i];
    expect_same_list(b.variables, a.variables);
    expect_same_list(b.dma_queues, a.dma_queues);
    expect_same_list(b.tensors, a.tensors);
    EXPECT_EQ(b.files, a.files);
    ASSERT_EQ(b.engines.size(), a.engines.size());
    for (size_t e = 0; e < a.engines.size(); ++e) {
      EXPECT_EQ(b.engines[e].code, a.engines[e].code);
      EXPECT_EQ(b.engines[e].meta, a.engines[e].meta);
    }
    EXPECT_EQ(b.def["runtime_statebuffer_reservation"], a.def["runtime_statebuffer_reservation"]);
    EXPECT_EQ(b.def["var"], a.def["var"]);
  }
}

// ---------------------------------------------------------------- damaged input

class BadNeff : public testing::Test {
 protected:
  void SetUp() override {
    good_ = write_neff(small_neff());
    members_ = unpack(good_);
  }
  Bytes repacked() const { return with_header(tar_gz(members_)); }
  Bytes good_;
  Entries members_;
};

TEST_F(BadNeff, ShorterThanHeader) {
  expect_mentions(read_error(Bytes(good_.begin(), good_.begin() + 1000)),
                  {"model.neff", "header", "1000 bytes"});
}

TEST_F(BadNeff, WrongHeaderSize) {
  good_[8] = 0x00;
  good_[9] = 0x02;  // 512
  expect_mentions(read_error(good_), {"model.neff", "header_size 512"});
}

TEST_F(BadNeff, DataSizeMismatch) {
  good_.resize(good_.size() + 10);
  expect_mentions(read_error(good_), {"model.neff", "header", "data_size", "after the header"});
}

TEST_F(BadNeff, HashMismatch) {
  good_.back() ^= 1;
  expect_mentions(read_error(good_), {"model.neff", "hash", "expected", "actual"});
}

TEST_F(BadNeff, NotGzip) {
  expect_mentions(read_error(with_header(to_bytes("plain text, no gzip here"))),
                  {"model.neff", "not gzip"});
}

TEST_F(BadNeff, TruncatedGzip) {
  Bytes payload = tar_gz(members_);
  payload.resize(payload.size() / 2);
  expect_mentions(read_error(with_header(payload)), {"model.neff"});
}

TEST_F(BadNeff, GzipButNotTar) {
  expect_mentions(read_error(with_header(gzip(to_bytes("hello, this is not a tar archive")))),
                  {"model.neff", "archive"});
}

TEST_F(BadNeff, MissingNeffJson) {
  erase_member(members_, "neff.json");
  expect_mentions(read_error(repacked()), {"model.neff", "neff.json", "missing"});
}

TEST_F(BadNeff, MalformedDefJson) {
  set_member(members_, "sg00/def.json", R"({"var": [1,,)");
  expect_mentions(read_error(repacked()), {"model.neff", "sg00/def.json", "invalid JSON at byte"});
}

TEST_F(BadNeff, DefJsonMissing) {
  erase_member(members_, "sg00/def.json");
  expect_mentions(read_error(repacked()),
                  {"model.neff", "kelf-0.json", "graphs[0].definition", "sg00/def.json"});
}

TEST_F(BadNeff, EngineBinMissing) {
  erase_member(members_, "sg00/PE.bin");
  expect_mentions(read_error(repacked()), {"model.neff", "sg00/PE.json", "instr", "sg00/PE.bin"});
}

TEST_F(BadNeff, TensorMapShapeNotAnArray) {
  set_member(members_, "sg00/tensor_map.json", R"({"x": {"dtype": "float32", "tf_shape": 5}})");
  expect_mentions(read_error(repacked()),
                  {"model.neff", "sg00/tensor_map.json", "x.tf_shape", "array"});
}

TEST_F(BadNeff, WrongFieldType) {
  set_member(members_, "sg00/def.json", R"({"var": {"x": {"type": "input", "var_id": "one"}}})");
  expect_mentions(read_error(repacked()), {"sg00/def.json", "var.x.var_id", "integer"});
}

TEST_F(BadNeff, DeeplyNestedJson) {
  set_member(members_, "sg00/def.json", std::string(100000, '['));
  expect_mentions(read_error(repacked()), {"sg00/def.json", "nested deeper"});
}

// A tar header claiming an 8 GiB member must fail before any allocation of that size.
TEST_F(BadNeff, AbsurdMemberSize) {
  Bytes tar(1024 + 512, 0);
  const std::string name = "sg00/huge.bin";
  std::copy(name.begin(), name.end(), tar.begin());
  auto put = [&](size_t at, std::string_view text) {
    std::copy(text.begin(), text.end(), tar.begin() + at);
  };
  put(100, "0000664");
  put(108, "0000000");
  put(116, "0000000");
  put(124, "77777777777");
  put(136, "00000000000");
  put(156, "0");
  put(257, "ustar");
  put(263, "00");
  put(148, "        ");
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += tar[i];
  put(148, fmt::format("{:06o}", sum));
  tar[154] = 0;
  tar[155] = ' ';
  expect_mentions(read_error(with_header(gzip(tar))), {"model.neff", "sg00/huge.bin", "exceeds"});
}

// Random damage to the uncompressed tar must give a NeffError or a Neff, never a crash.
TEST_F(BadNeff, RandomDamageNeverCrashes) {
  const Bytes tar = archive_bytes(members_, "ustar", false);
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int round = 0; round < 300; ++round) {
    Bytes damaged = tar;
    for (int k = 0; k < 4; ++k) {
      damaged[rng() % damaged.size()] = static_cast<uint8_t>(rng());
    }
    try {
      read_neff(with_header(gzip(damaged)), "fuzz.neff");
    } catch (const NeffError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace neuronsim::isa::neff
