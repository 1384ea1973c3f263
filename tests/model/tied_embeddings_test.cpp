// tie_word_embeddings: a checkpoint without an output head, configured as tied, computes with the
// embedding as its head; the same checkpoint untied and headless is an error naming the head.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/model.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
const std::string kFixture = std::string(DEEPINFER_TEST_DATA_DIR) + "/fixtures/v4_tiny_a";

// The fixture's tensors, with head.weight dropped (head_from_embed = false) or replaced by a copy
// of the embedding, under a config with the given tie_word_embeddings.
fs::path write_variant(const std::string& tag, bool keep_head_as_embed_copy, bool tied) {
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_tied_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(kFixture + "/config.json");
  auto config = nlohmann::json::parse(in);
  config["tie_word_embeddings"] = tied;
  std::ofstream(dir / "config.json") << config.dump(2);
  auto ckpt = io::Checkpoint::open_file(kFixture + "/model.safetensors");
  std::vector<io::OwnedTensor> tensors;
  const io::TensorView* embed = nullptr;
  for (const auto& [name, t] : ckpt.tensors()) {
    if (name == "embed.weight" || name == "model.embed_tokens.weight") embed = &t;
    if (name == "head.weight") continue;
    io::OwnedTensor o{name, t.dtype, t.shape, {}};
    o.data.assign(t.data, t.data + t.nbytes);
    tensors.push_back(std::move(o));
  }
  EXPECT_NE(embed, nullptr) << "fixture has no embed.weight";
  if (keep_head_as_embed_copy && embed) {
    io::OwnedTensor head{"head.weight", embed->dtype, embed->shape, {}};
    head.data.assign(embed->data, embed->data + embed->nbytes);
    tensors.push_back(std::move(head));
  }
  io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

std::vector<float> logits_of(const fs::path& dir) {
  auto m = model::load_model(dir);
  auto state = m->new_sequence();
  std::vector<float> logits;
  const std::vector<int32_t> prompt = {0, 17, 5, 99, 3, 41, 7};
  m->forward(*state, prompt, logits, true);
  return logits;
}

TEST(TiedEmbeddings, HeadlessTiedCheckpointUsesTheEmbeddingAsHead) {
  const fs::path tied = write_variant("tied", false, true);
  const fs::path copied = write_variant("copied", true, false);
  const auto a = logits_of(tied), b = logits_of(copied);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  fs::remove_all(tied);
  fs::remove_all(copied);
}

TEST(TiedEmbeddings, HeadlessUntiedCheckpointNamesTheMissingHead) {
  const fs::path dir = write_variant("untied", false, false);
  try {
    model::load_model(dir);
    ADD_FAILURE() << "loading a headless untied checkpoint succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer
