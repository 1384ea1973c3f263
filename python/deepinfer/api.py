"""vLLM-shaped generation API over the C++ engine (include/deepinfer/llm.h). The model runs with
the GIL released; streaming is a generator (LLM.generate_stream / chat_stream) or a callback."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from . import _deepinfer


@dataclass
class StructuredOutputsParams:
    """Guided decoding (vLLM's StructuredOutputsParams): set exactly one of json (a JSON Schema,
    dict or text), regex, choice, grammar (GBNF) or json_object."""
    json: Optional[Union[str, dict]] = None
    regex: Optional[str] = None
    choice: Optional[list] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    disable_any_whitespace: bool = False

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


GuidedDecodingParams = StructuredOutputsParams  # vLLM's earlier name

_SAMPLING_DEFAULTS = dict(
    n=1, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, presence_penalty=0.0, frequency_penalty=0.0,
    repetition_penalty=1.0, logit_bias=None, seed=None, max_tokens=16, min_tokens=0, stop=None,
    stop_token_ids=None, include_stop_str_in_output=False, ignore_eos=False, logprobs=None, prompt_logprobs=None,
    structured_outputs=None, skip_special_tokens=True)


class SamplingParams:
    """vLLM's SamplingParams keyword arguments (see _SAMPLING_DEFAULTS for the fields). Checked on
    construction and again when used: an unknown field or a bad value raises ValueError naming it."""

    def __init__(self, **kwargs: Any):
        if "guided_decoding" in kwargs:  # vLLM's earlier name
            kwargs["structured_outputs"] = kwargs.pop("guided_decoding")
        for name in kwargs:
            if name not in _SAMPLING_DEFAULTS:
                raise ValueError(f"SamplingParams: unknown field {name!r}")
        for name, default in _SAMPLING_DEFAULTS.items():
            setattr(self, name, kwargs.get(name, default))
        _deepinfer._sampling_params(self._fields())

    def _fields(self) -> dict:
        fields = {name: getattr(self, name) for name in _SAMPLING_DEFAULTS}
        so = fields["structured_outputs"]
        if isinstance(so, StructuredOutputsParams):
            fields["structured_outputs"] = so.to_dict()
        return fields

    def clone(self) -> "SamplingParams":
        return SamplingParams(**{name: getattr(self, name) for name in _SAMPLING_DEFAULTS})

    def __repr__(self) -> str:
        changed = {k: v for k, v in self._fields().items() if v != _SAMPLING_DEFAULTS[k]}
        return "SamplingParams(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


@dataclass
class Logprob:
    logprob: float
    rank: int
    decoded_token: str


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    cumulative_logprob: Optional[float]
    logprobs: Optional[list]      # per token: {token_id: Logprob} (the chosen token and the top N)
    finish_reason: Optional[str]  # "stop" or "length"
    stop_reason: Union[str, int, None]  # the stop string or stop token id that ended it
    seed: int
    # chat(): {"role": "assistant", "content", "reasoning_content", "tool_calls": [...]} (+ "error")
    message: Optional[dict] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list
    prompt_logprobs: Optional[list]  # per prompt token: None (the first) or {token_id: Logprob}
    outputs: list
    finished: bool
    num_cached_tokens: int
    metrics: dict = field(default_factory=dict)  # time_to_first_token, total_time (seconds)


@dataclass
class StreamEvent:
    """One step's output of one completion (what the callback / stream yields)."""
    index: int          # which prompt / conversation
    output_index: int   # which of its n completions
    new_token_ids: list
    text: str
    logprobs: Optional[list]
    prompt_logprobs: Optional[list]
    finished: bool
    finish_reason: Optional[str]
    request_finished: bool
    num_cached_tokens: int
    delta: Optional[dict] = None  # chat: {"reasoning_content"?, "content"?, "tool_calls"?} added this step


def _logprobs(positions):
    if positions is None:
        return None
    return [None if p is None else {tid: Logprob(*v) for tid, v in p.items()} for p in positions]


def _request_output(d: dict) -> RequestOutput:
    outputs = []
    for c in d["outputs"]:
        c = dict(c)
        c["logprobs"] = _logprobs(c["logprobs"])
        outputs.append(CompletionOutput(**c))
    return RequestOutput(request_id=str(d["index"]), prompt=d["prompt"], prompt_token_ids=d["prompt_token_ids"],
                         prompt_logprobs=_logprobs(d["prompt_logprobs"]), outputs=outputs, finished=d["finished"],
                         num_cached_tokens=d["num_cached_tokens"],
                         metrics={"time_to_first_token": d["time_to_first_token"], "total_time": d["total_time"]})


def _event(d: dict) -> StreamEvent:
    d = dict(d)
    d["logprobs"] = _logprobs(d["logprobs"])
    d["prompt_logprobs"] = _logprobs(d["prompt_logprobs"])
    return StreamEvent(**d)


def _prompts(prompts) -> list:
    """vLLM's prompt forms: a str, a list of token ids, {"prompt": str}, {"prompt_token_ids": [...]},
    or a sequence of these."""
    def one(p):
        if isinstance(p, dict):
            if "prompt_token_ids" in p:
                return list(p["prompt_token_ids"])
            if "prompt" in p:
                return p["prompt"]
            raise ValueError(f"a prompt dict needs 'prompt' or 'prompt_token_ids', got keys {sorted(p)}")
        if isinstance(p, (str, list, tuple)):
            return list(p) if not isinstance(p, str) else p
        raise ValueError(f"a prompt must be a str, a list of token ids or a dict, got {type(p).__name__}")

    if isinstance(prompts, (str, dict)) or (isinstance(prompts, (list, tuple)) and prompts
                                            and all(isinstance(t, int) for t in prompts)):
        return [one(prompts)]
    return [one(p) for p in prompts]


def _params(sampling_params, count: int) -> list:
    if sampling_params is None:
        sampling_params = SamplingParams()
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params._fields()]
    params = list(sampling_params)
    if len(params) != count:
        raise ValueError(f"sampling_params: {len(params)} given for {count} prompts (give one, or one per prompt)")
    for i, p in enumerate(params):
        if not isinstance(p, SamplingParams):
            raise ValueError(f"sampling_params[{i}] is a {type(p).__name__}, not a SamplingParams")
    return [p._fields() for p in params]


class _Stream:
    """Iterator of StreamEvents; .outputs holds the RequestOutputs (complete once exhausted)."""

    def __init__(self, stream):
        self._stream = stream

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        event = self._stream.next()
        if event is None:
            raise StopIteration
        return _event(event)

    @property
    def outputs(self) -> list:
        return [_request_output(d) for d in self._stream.outputs()]


class LLM:
    """LLM(model, **options): loads a model folder (config.json, *.safetensors, tokenizer.json).
    Options (EngineConfig): kv_memory_bytes, max_num_seqs, max_num_batched_tokens, max_prefill_chunk,
    threads, batch_invariant, seed, device ("cpu" / "cuda"), enable_prefix_caching, swa_replay_keep,
    data_parallel_size, enable_eplb, eplb_window_size, eplb_step_interval, num_redundant_experts,
    enforce_eager, cuda_graph_sizes (an int N or a list of batch sizes, as vLLM)."""

    def __init__(self, model: str, **options: Any):
        self._llm = _deepinfer._LLM(str(model), options)

    # ---- generate ----------------------------------------------------------------------------
    def generate_stream(self, prompts, sampling_params=None) -> _Stream:
        p = _prompts(prompts)
        return _Stream(self._llm.generate_stream(p, _params(sampling_params, len(p))))

    def generate(self, prompts, sampling_params=None, *, callback: Optional[Callable[[StreamEvent], None]] = None,
                 use_tqdm: bool = False) -> list:
        """RequestOutputs in input order. `callback` (optional) gets every StreamEvent as it is made."""
        return _drain(self.generate_stream(prompts, sampling_params), callback)

    # ---- chat --------------------------------------------------------------------------------
    def chat_stream(self, messages, sampling_params=None, **kwargs: Any) -> _Stream:
        conversations = _conversations(messages)
        options = _chat_options(**kwargs)
        return _Stream(self._llm.chat_stream(conversations, _params(sampling_params, len(conversations)), options))

    def chat(self, messages, sampling_params=None, *, callback: Optional[Callable[[StreamEvent], None]] = None,
             use_tqdm: bool = False, **kwargs: Any) -> list:
        """vLLM's LLM.chat: `messages` is one conversation (a list of OpenAI message dicts) or a list of
        them. Keyword options: tools, chat_template_kwargs ({"thinking": True, "reasoning_effort": ...}),
        thinking, reasoning_effort, add_generation_prompt, response_format, drop_thinking, chat_format.
        Each CompletionOutput.message holds the parsed assistant message."""
        return _drain(self.chat_stream(messages, sampling_params, **kwargs), callback)

    def render_chat(self, messages, **kwargs: Any) -> str:
        """The prompt chat() generates from (one conversation)."""
        return self._llm.render_chat(_conversations(messages)[0], _chat_options(**kwargs))

    def chat_prompt_ids(self, messages, **kwargs: Any) -> list:
        return self._llm.chat_prompt_ids(_conversations(messages)[0], _chat_options(**kwargs))

    def chat_format(self, **kwargs: Any) -> str:
        return self._llm.chat_format(_chat_options(**kwargs))

    # ---- tokenizer and engine ----------------------------------------------------------------
    def encode(self, text: str) -> list:
        return self._llm.encode(text)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._llm.decode(list(ids), skip_special_tokens)

    @property
    def vocab_size(self) -> int:
        return self._llm.vocab_size

    def stats(self) -> dict:
        return self._llm.stats()


def _drain(stream: _Stream, callback) -> list:
    for event in stream:
        if callback is not None:
            callback(event)
    return stream.outputs


def _conversations(messages) -> list:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError("messages must be a non-empty list of message dicts (or a list of such lists)")
    batch = messages if isinstance(messages[0], (list, tuple)) else [messages]
    # JSON text keeps each dict's key order, the order the encoders render tool arguments in.
    return [json.dumps(list(c), ensure_ascii=False) for c in batch]


_CHAT_OPTIONS = ("tools", "chat_template_kwargs", "thinking", "reasoning_effort", "add_generation_prompt",
                 "response_format", "drop_thinking", "chat_format")


def _chat_options(**kwargs: Any) -> dict:
    for name in kwargs:
        if name not in _CHAT_OPTIONS:
            raise ValueError(f"chat: unknown option {name!r} (accepted: {', '.join(_CHAT_OPTIONS)})")
    options = {}
    template_kwargs = kwargs.get("chat_template_kwargs") or {}
    if not isinstance(template_kwargs, dict):
        raise ValueError("chat: chat_template_kwargs must be a dict")
    for key in ("thinking", "enable_thinking"):
        if key in template_kwargs:
            options["thinking"] = template_kwargs[key]
    if "reasoning_effort" in template_kwargs:
        options["reasoning_effort"] = template_kwargs["reasoning_effort"]
    for key in ("thinking", "reasoning_effort", "add_generation_prompt", "drop_thinking", "chat_format"):
        if kwargs.get(key) is not None:
            options[key] = kwargs[key]
    if kwargs.get("tools") is not None:
        options["tools_json"] = json.dumps(kwargs["tools"], ensure_ascii=False)
    if kwargs.get("response_format") is not None:
        options["response_format_json"] = json.dumps(kwargs["response_format"], ensure_ascii=False)
    return options
