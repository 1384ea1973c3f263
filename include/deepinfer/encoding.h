#pragma once
// Public entry point for prompt encoding and output parsing.
//
//   deepinfer::encoding::ChatEncoder encoder(deepinfer::encoding::ChatFormat::kV4_1);
//   std::string prompt = encoder.render(deepinfer::encoding::chat_request_from_json(body)).text;
//
//   deepinfer::encoding::StreamingOutputParser parser({.format = ChatFormat::kV4_1, .thinking = true});
//   for (auto& piece : generated) send(parser.push(piece).to_json());   // OpenAI-style deltas
//   parser.finish();  parser.message();                                 // the assembled message
//
// Formats: kV3 (the model's Jinja chat_template), kV3_1, kV3_2, kV4, kV4_1 (DeepSeek's reference
// encoders). Errors (bad requests, unknown roles or formats) throw deepinfer::Error.
#include "encoding/chat_encoding.h"   // IWYU pragma: export
#include "encoding/output_parser.h"   // IWYU pragma: export
