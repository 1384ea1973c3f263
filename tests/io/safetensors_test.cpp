// Safetensors loading: the bundled checkpoints, hand-made files and every kind of corrupt file.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace deepinfer::io {
namespace {

using namespace deepinfer::io::testing;
using json = nlohmann::json;

const fs::path kKjv = fs::path(DEEPINFER_MODELS_DIR) / "kjv-tiny-v4";
const fs::path kFixtures = fs::path(DEEPINFER_TEST_DATA_DIR) / "fixtures";

// Reads a safetensors header with nlohmann directly, independent of the reader under test.
json header_of(const fs::path& file) {
  const std::string bytes = read_bytes(file);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  return json::parse(bytes.substr(8, n));
}

// ---- bundled data -------------------------------------------------------------------------------

TEST(SafetensorsBundled, KjvShardedCheckpointMatchesIndex) {
  const Checkpoint ck = Checkpoint::open(kKjv);
  const json index = json::parse(read_bytes(kKjv / "model.safetensors.index.json"));
  const json& weight_map = index["weight_map"];
  ASSERT_GT(weight_map.size(), 100u);
  EXPECT_EQ(ck.tensors().size(), weight_map.size());
  EXPECT_EQ(ck.total_bytes(), index["metadata"]["total_size"].get<size_t>());

  std::map<std::string, json> headers;
  for (const auto& [name, file] : weight_map.items()) {
    const std::string f = file.get<std::string>();
    if (!headers.count(f)) headers[f] = header_of(kKjv / f);
    ASSERT_TRUE(ck.contains(name)) << name;
    const TensorView& t = ck.get(name);
    const json& entry = headers[f][name];
    EXPECT_EQ(t.file, f) << name;
    EXPECT_EQ(std::string(safetensors_dtype_name(t.dtype)), entry["dtype"].get<std::string>()) << name;
    EXPECT_EQ(t.shape, entry["shape"].get<std::vector<int64_t>>()) << name;
    const auto off = entry["data_offsets"].get<std::vector<uint64_t>>();
    EXPECT_EQ(t.nbytes, off[1] - off[0]) << name;
  }
  EXPECT_EQ(headers.size(), 2u);  // both shards are used

  const TensorView& embed = ck.get("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, DType::BF16);
  EXPECT_EQ(embed.shape_string(), "[4096, 256]");
  EXPECT_EQ(embed.numel(), 4096 * 256);
  const auto values = to_float(embed);
  ASSERT_EQ(values.size(), 4096u * 256u);
  double sum_sq = 0;
  for (float v : values) sum_sq += double(v) * v;
  EXPECT_GT(sum_sq, 0.0);  // real weights, not an empty mapping

  // The routing table of a hash-MoE layer is I64.
  const TensorView& tid2eid = ck.get("model.layers.0.ffn.gate.tid2eid");
  EXPECT_EQ(tid2eid.dtype, DType::I64);
  const auto ids = to_int64(tid2eid);
  for (int64_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 8);  // kjv has 8 routed experts
  }
}

TEST(SafetensorsBundled, FixturesAndGoldenFilesOpen) {
  for (const char* name : {"v4_tiny_a", "v4_tiny_b"}) {
    const fs::path dir = kFixtures / name;
    const Checkpoint ck = Checkpoint::open(dir);
    const json header = header_of(dir / "model.safetensors");
    EXPECT_EQ(ck.tensors().size() + 1, header.size()) << name;  // + __metadata__
    for (const auto& [tensor, view] : ck.tensors()) {
      EXPECT_EQ(view.shape, header[tensor]["shape"].get<std::vector<int64_t>>()) << tensor;
    }
    const Checkpoint golden = Checkpoint::open_file(dir / "golden.safetensors");
    EXPECT_GT(golden.tensors().size(), 0u) << name;
  }
  const Checkpoint golden = Checkpoint::open_file(kKjv / "golden.safetensors");
  const auto ids = to_int64(golden.get("prompt0.input_ids"));
  EXPECT_EQ(ids.size(), 9u);
}

TEST(SafetensorsBundled, MissingTensorErrorNamesTensorAndFolder) {
  const Checkpoint ck = Checkpoint::open(kFixtures / "v4_tiny_a");
  EXPECT_FALSE(ck.contains("model.no_such.weight"));
  expect_error([&] { ck.get("model.no_such.weight"); }, {"model.no_such.weight", "v4_tiny_a"});
}

// ---- hand-made files ----------------------------------------------------------------------------

TEST(SafetensorsWriter, RoundTripKeepsNamesShapesDtypesMetadataAndBytes) {
  ScratchDir dir;
  std::vector<OwnedTensor> tensors;
  tensors.push_back(make_owned_tensor<float>("a", DType::F32, {2, 3}, {1.5f, -2.f, 3.f, 4.25f, 5.f, -6.f}));
  tensors.push_back(make_owned_tensor<int64_t>("b.ids", DType::I64, {3}, {7, -8, 9}));
  tensors.push_back(make_owned_tensor<uint8_t>("c", DType::U8, {1, 1, 1}, {200}));  // odd sizes exercise padding
  tensors.push_back(make_owned_tensor<uint16_t>("scalar", DType::BF16, {}, {0x3fc0}));  // 1.5
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}, {"note", "hand made"}});

  auto file = SafeTensorsFile::open(dir / "model.safetensors");
  EXPECT_EQ(file->metadata().at("note"), "hand made");
  ASSERT_EQ(file->tensors().size(), 4u);
  EXPECT_EQ(to_float(file->tensors().at("a")), (std::vector<float>{1.5f, -2.f, 3.f, 4.25f, 5.f, -6.f}));
  EXPECT_EQ(to_int64(file->tensors().at("b.ids")), (std::vector<int64_t>{7, -8, 9}));
  EXPECT_EQ(file->tensors().at("c").shape, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(to_int64(file->tensors().at("c")), (std::vector<int64_t>{200}));
  EXPECT_EQ(file->tensors().at("scalar").numel(), 1);
  EXPECT_EQ(to_float(file->tensors().at("scalar")), (std::vector<float>{1.5f}));

  const Checkpoint ck = Checkpoint::open(dir.path());  // model.safetensors is picked up
  EXPECT_EQ(ck.tensors().size(), 4u);
}

TEST(SafetensorsWriter, RejectsDataOfTheWrongLength) {
  std::vector<OwnedTensor> tensors{make_owned_tensor<float>("w", DType::F32, {2, 2}, {1.f, 2.f, 3.f})};
  expect_error([&] { serialize_safetensors(tensors); }, {"'w'", "12 bytes"});
}

TEST(SafetensorsHandMade, UnalignedDataIsReadCorrectly) {
  ScratchDir dir;
  // A 1-byte U8 tensor first pushes the F32 tensor to an odd address inside the mmap.
  const std::string header =
      R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  std::string data(1, '\x05');
  const float f[2] = {3.25f, -0.125f};
  data.append(reinterpret_cast<const char*>(f), sizeof f);
  // Pad so the data area starts 4-aligned in the file: the F32 tensor at offset 1 is then misaligned.
  const std::string padded = header + std::string((4 - header.size() % 4) % 4, ' ');
  write_bytes(dir / "x.safetensors", raw_safetensors(padded, data));
  const Checkpoint ck = Checkpoint::open(dir.path());  // the only *.safetensors file
  EXPECT_EQ(to_float(ck.get("f")), (std::vector<float>{3.25f, -0.125f}));
  EXPECT_EQ(to_int64(ck.get("u")), (std::vector<int64_t>{5}));
}

TEST(SafetensorsHandMade, FolderErrors) {
  ScratchDir dir;
  expect_error([&] { Checkpoint::open(dir / "absent"); }, {"absent", "does not exist"});
  expect_error([&] { Checkpoint::open(dir.path()); }, {"no safetensors weights in", dir.path().string()});
  write_safetensors(dir / "a.safetensors", {make_owned_tensor<float>("x", DType::F32, {1}, {1.f})});
  write_safetensors(dir / "b.safetensors", {make_owned_tensor<float>("y", DType::F32, {1}, {2.f})});
  expect_error([&] { Checkpoint::open(dir.path()); }, {"2 .safetensors files", "model.safetensors.index.json"});
  expect_error([&] { Checkpoint::open(dir / "a.safetensors"); }, {"a.safetensors", "is not a folder"});
  expect_error([&] { SafeTensorsFile::open(dir.path()); }, {"is not a regular file"});
  expect_error([&] { SafeTensorsFile::open(dir / "missing.safetensors"); }, {"missing.safetensors", "cannot open"});
}

// ---- corrupt single files -----------------------------------------------------------------------

class CorruptFile : public ::testing::Test {
 protected:
  // Writes the bytes as bad.safetensors and expects opening it to fail with all fragments.
  void expect_open_error(const std::string& bytes, std::initializer_list<std::string> fragments) {
    write_bytes(dir_ / "bad.safetensors", bytes);
    expect_error([&] { SafeTensorsFile::open(dir_ / "bad.safetensors"); }, fragments);
  }
  ScratchDir dir_;
};

TEST_F(CorruptFile, TooShortForTheLengthField) {
  expect_open_error("abc", {"bad.safetensors", "3 bytes", "at least 8"});
}

TEST_F(CorruptFile, HeaderLengthLargerThanTheFile) {
  expect_open_error(raw_safetensors("{}", "", 5000), {"bad.safetensors", "header length 5000", "file truncated?"});
}

TEST_F(CorruptFile, HeaderLengthOverTheLimit) {
  expect_open_error(raw_safetensors("{}", "", 200ull * 1000 * 1000), {"bad.safetensors", "100 MB"});
}

TEST_F(CorruptFile, MalformedJson) {
  expect_open_error(raw_safetensors(R"({"w":{"dtype":"F32",)", ""), {"bad.safetensors", "not valid JSON"});
}

TEST_F(CorruptFile, HeaderNotAnObject) {
  expect_open_error(raw_safetensors("[1,2]", ""), {"bad.safetensors", "must be a JSON object", "array"});
}

TEST_F(CorruptFile, TruncatedData) {
  std::string bytes = serialize_safetensors({make_owned_tensor<float>("w", DType::F32, {4, 4}, std::vector<float>(16, 0.5f))});
  bytes.resize(bytes.size() - 10);  // lose the end of the data area
  expect_open_error(bytes, {"bad.safetensors: tensor 'w' data_offsets [0, 64] exceed the data area of 54 bytes",
                            "(file truncated?)"});
}

TEST_F(CorruptFile, OffsetsPointOutsideTheFile) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[1000,1008]}})";
  expect_open_error(raw_safetensors(header, std::string(8, 'x')), {"'w'", "[1000, 1008]", "data area of 8 bytes"});
}

TEST_F(CorruptFile, BeginAfterEnd) {
  const std::string header = R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[6,2]}})";
  expect_open_error(raw_safetensors(header, std::string(8, 'x')), {"'w'", "[6, 2]", "begin after end"});
}

TEST_F(CorruptFile, OverlappingTensors) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  expect_open_error(raw_safetensors(header, std::string(12, 'x')), {"'a' [0, 8]", "'b' [4, 12]", "overlap"});
}

TEST_F(CorruptFile, ShapeDoesNotMatchByteLength) {
  const std::string header = R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,16]}})";
  expect_open_error(raw_safetensors(header, std::string(16, 'x')),
                    {"'w'", "[2, 3]", "BF16", "needs 12 bytes", "span 16 bytes"});
}

TEST_F(CorruptFile, UnknownDtypeNamesTheTensor) {
  const std::string header = R"({"layer.w":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,4]}})";
  expect_open_error(raw_safetensors(header, std::string(4, 'x')), {"'layer.w'", "unsupported dtype 'F8_E5M2'"});
}

TEST_F(CorruptFile, NegativeShapeDimension) {
  const std::string header = R"({"w":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})";
  expect_open_error(raw_safetensors(header, std::string(4, 'x')), {"'w'", "shape", "non-negative", "-4"});
}

TEST_F(CorruptFile, MissingField) {
  const std::string header = R"({"w":{"dtype":"U8","shape":[4]}})";
  expect_open_error(raw_safetensors(header, std::string(4, 'x')), {"'w'", "no 'data_offsets'"});
}

TEST_F(CorruptFile, DuplicateTensorName) {
  const std::string header = R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                             R"("w":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})";
  expect_open_error(raw_safetensors(header, std::string(4, 'x')), {"'w'", "more than once"});
}

TEST_F(CorruptFile, MetadataMustMapStringsToStrings) {
  const std::string header = R"({"__metadata__":{"format":3}})";
  expect_open_error(raw_safetensors(header, ""), {"__metadata__", "'format'", "must be a string"});
}

TEST_F(CorruptFile, ShapeOverflowIsRejected) {
  const std::string header =
      R"({"w":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})";
  expect_open_error(raw_safetensors(header, std::string(8, 'x')), {"'w'", "overflows"});
}

// ---- sharded folders ----------------------------------------------------------------------------

class ShardedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    write_safetensors(dir_ / "s1.safetensors", {make_owned_tensor<float>("a", DType::F32, {2}, {1.f, 2.f}),
                                                make_owned_tensor<float>("b", DType::F32, {1}, {3.f})});
    write_safetensors(dir_ / "s2.safetensors", {make_owned_tensor<int32_t>("c", DType::I32, {3}, {4, 5, 6})});
  }
  void write_index(const json& weight_map) {
    write_bytes(dir_ / "model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump());
  }
  json good_map() const { return {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}}; }
  ScratchDir dir_;
};

TEST_F(ShardedFolder, OpensWhenIndexAndShardsAgree) {
  write_index(good_map());
  const Checkpoint ck = Checkpoint::open(dir_.path());
  EXPECT_EQ(ck.tensors().size(), 3u);
  EXPECT_EQ(ck.get("c").file, "s2.safetensors");
  EXPECT_EQ(to_int64(ck.get("c")), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(to_float(ck.get("a")), (std::vector<float>{1.f, 2.f}));
}

TEST_F(ShardedFolder, TruncatedShard) {
  write_index(good_map());
  std::string bytes = read_bytes(dir_ / "s2.safetensors");
  write_bytes(dir_ / "s2.safetensors", bytes.substr(0, bytes.size() - 4));
  expect_error([&] { Checkpoint::open(dir_.path()); },
               {"s2.safetensors: tensor 'c' data_offsets [0, 12] exceed the data area of 8 bytes (file truncated?)"});
}

TEST_F(ShardedFolder, IndexNamesMissingShard) {
  json map = good_map();
  map["c"] = "s3.safetensors";
  write_index(map);
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"model.safetensors.index.json", "'s3.safetensors'", "does not exist"});
}

TEST_F(ShardedFolder, IndexPathWithDotDotIsRejected) {
  fs::create_directories(dir_ / "sub");
  write_index(json{{"c", "../s2.safetensors"}});  // the shard exists, but outside sub/
  fs::rename(dir_ / "model.safetensors.index.json", dir_ / "sub" / "model.safetensors.index.json");
  expect_error([&] { Checkpoint::open(dir_ / "sub"); }, {"'../s2.safetensors'", "escapes the model folder"});
}

TEST_F(ShardedFolder, AbsoluteIndexPathIsRejected) {
  json map = good_map();
  map["c"] = (dir_ / "s2.safetensors").string();
  write_index(map);
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"must be relative to the model folder"});
}

TEST_F(ShardedFolder, SymlinkEscapingTheFolderIsRejected) {
  ScratchDir outside;
  write_safetensors(outside / "evil.safetensors", {make_owned_tensor<int32_t>("c", DType::I32, {3}, {4, 5, 6})});
  fs::create_symlink(outside / "evil.safetensors", dir_ / "link.safetensors");
  json map = good_map();
  map["c"] = "link.safetensors";
  write_index(map);
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"'link.safetensors'", "outside the model folder"});
}

TEST_F(ShardedFolder, IndexedTensorMissingFromItsShard) {
  json map = good_map();
  map["d"] = "s2.safetensors";
  write_index(map);
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"tensor 'd'", "'s2.safetensors'", "no such tensor"});
}

TEST_F(ShardedFolder, ShardTensorNotInIndex) {
  json map = good_map();
  map.erase("b");
  write_index(map);
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"s1.safetensors", "tensor 'b'", "not listed"});
}

TEST_F(ShardedFolder, TensorStoredInTwoShards) {
  write_safetensors(dir_ / "s2.safetensors", {make_owned_tensor<int32_t>("c", DType::I32, {3}, {4, 5, 6}),
                                              make_owned_tensor<float>("a", DType::F32, {2}, {9.f, 9.f})});
  write_index(good_map());
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"s2.safetensors", "tensor 'a'", "assigns it to 's1.safetensors'"});
}

TEST_F(ShardedFolder, MalformedIndex) {
  write_bytes(dir_ / "model.safetensors.index.json", R"({"weight_map": )");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"model.safetensors.index.json", "not valid JSON"});
  write_bytes(dir_ / "model.safetensors.index.json", R"({"metadata": {}})");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {"model.safetensors.index.json", "weight_map"});
}

}  // namespace
}  // namespace deepinfer::io
