// The C++ example of docs/generation-api.md (built and run by ctest: docs_example_cpp).
#include <iostream>

#include "deepinfer/llm.h"

int main(int argc, char** argv) {
  const char* model = argc > 1 ? argv[1] : "models/kjv-tiny-v4";
  deepinfer::LLM llm(model, {.max_num_seqs = 16});

  deepinfer::SamplingParams params{.temperature = 0.8, .max_tokens = 24, .stop = {"\n"}};
  params.seed = 1;
  for (const auto& out : llm.generate({"In the beginning", "And God said"}, params))
    std::cout << out.outputs[0].text << " (" << out.outputs[0].finish_reason << ")\n";

  // Chat, streamed: each event carries what the step added to the parsed message.
  const deepinfer::Conversation chat = {{.role = "system", .content = "Answer briefly."},
                                        {.role = "user", .content = "Who made the light?"}};
  const auto reply = llm.chat(chat, {.temperature = 0, .max_tokens = 16}, {.thinking = true},
                              [](const deepinfer::StreamEvent& e) { std::cout << e.delta->reasoning_content; });
  std::cout << "\nreasoning: " << reply[0].outputs[0].message->reasoning_content.size() << " bytes\n";

  // Iterator-style streaming.
  auto stream = llm.generate_stream({"The LORD is my shepherd"}, {.temperature = 0, .max_tokens = 8});
  while (auto event = stream.next()) std::cout << event->text;
  std::cout << "\n";
  return reply[0].outputs[0].message->reasoning_content.empty() ? 1 : 0;
}
