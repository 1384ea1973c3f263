"""The example of docs/generation-api.md: generate, chat, guided decoding, logprobs and streaming.
Run: PYTHONPATH=build/python python3 docs/examples/quickstart.py models/kjv-tiny-v4"""
import json
import sys

from deepinfer import LLM, SamplingParams, StructuredOutputsParams

model = sys.argv[1] if len(sys.argv) > 1 else "models/kjv-tiny-v4"
llm = LLM(model, max_num_seqs=16, enable_prefix_caching=True)

# Batched generation: results come back in input order.
params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=24, seed=1, stop=["\n"], logprobs=2)
for out in llm.generate(["In the beginning", "And God said"], params):
    c = out.outputs[0]
    print(repr(c.text), c.finish_reason, f"cumulative logprob {c.cumulative_logprob:.2f}")

# Guided decoding: every output is an instance of the schema.
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}}, "required": ["name"],
          "additionalProperties": False}
guided = SamplingParams(temperature=0.7, seed=2, max_tokens=64,
                        structured_outputs=StructuredOutputsParams(json=schema, disable_any_whitespace=True))
print(json.loads(llm.generate("The first man was", guided)[0].outputs[0].text))

# Chat: rendered with the model folder's encoder, the output parsed into reasoning and content.
messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Who made the light?"}]
reply = llm.chat(messages, SamplingParams(temperature=0, max_tokens=24), chat_template_kwargs={"thinking": True})
print(reply[0].outputs[0].message["reasoning_content"][:60])

# Streaming: a generator of per-step events (a `callback=` argument works as well).
for event in llm.chat_stream(messages, SamplingParams(temperature=0, max_tokens=16)):
    print(event.delta.get("content", ""), end="", flush=True)
print()
print(llm.stats()["generated_tokens"], "tokens generated")
