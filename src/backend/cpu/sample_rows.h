#pragma once
// The reference token sampler (Backend::sample on the CPU, and sampling::Sampler). For a row of
// logits x after the allowed mask:
//   1. greedy (temperature 0): the largest logit, ties to the lowest id;
//   2. candidates: the tokens above -inf; top_k keeps the k most likely (ties: lower id);
//   3. weights p_i = exp((x_i - max) / T) (sample_math.h's exp, so the maximum weighs exactly 1);
//      min_p drops p_i < min_p;
//   4. top_p < 1: in the order (x descending, id ascending) keep the shortest prefix whose mass
//      reaches top_p times the candidates' mass;
//   5. one draw: target = uniform * mass, located by descending the chunked sum tree, then walking
//      the chosen chunk in id order.
// Every mass is sample_math.h's chunked sum, which the CUDA kernel computes identically.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace deepinfer::cpu {

// The largest logit (ties: lowest id). Throws on NaN / +inf or when every logit is -inf.
int32_t argmax_row(std::span<const float> logits);

// The tokens a non-greedy row draws from: ids ascending, with their weights (unnormalised).
struct SampleCandidates {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};
SampleCandidates sample_candidates(std::span<const float> logits, const backend::SampleRow& row);

// The chunked sum (sample_math.h) of the candidates' weights.
double chunked_mass(const SampleCandidates& c);

// Step 5 on the candidates.
int32_t draw_candidate(const SampleCandidates& c, double uniform);

// Steps 1-5 on one row (the allowed mask already applied, or empty in row.allowed).
int32_t sample_row(std::span<const float> logits, const backend::SampleRow& row);

// Backend::sample on host rows: logits [rows, vocab]; each row's allowed mask applied first.
void sample_rows(std::span<const float> logits, int64_t vocab, std::span<const backend::SampleRow> rows,
                 std::span<int32_t> tokens);

}  // namespace deepinfer::cpu
