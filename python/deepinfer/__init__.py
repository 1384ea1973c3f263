"""deepinfer: offline generation for DeepSeek V4 models with vLLM's names (LLM, SamplingParams,
RequestOutput, CompletionOutput, StructuredOutputsParams), plus DeepSeek prompt encoding
(V3 .. V4.1) and streaming output parsing. Errors raise deepinfer.Error, a ValueError."""
from ._deepinfer import Error, OutputParser, Tokenizer, parse_output, render_prompt, render_prompt_ids
from .api import (LLM, CompletionOutput, GuidedDecodingParams, Logprob, RequestOutput, SamplingParams, StreamEvent,
                  StructuredOutputsParams)

__all__ = ["LLM", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams", "RequestOutput",
           "CompletionOutput", "Logprob", "StreamEvent", "Error", "Tokenizer", "OutputParser", "render_prompt",
           "render_prompt_ids", "parse_output"]
