#!/usr/bin/env python3
"""Writes output_goldens.json: model outputs for each format with the message DeepSeek's reference
parsers (parse_message_from_completion_text) extract from them, built from structured messages
(reasoning, content, tool calls) the way the models write them, plus malformed outputs with the
fallback we promise (the tool-call text becomes content and `error` is set).
Run: python3 tests/data/encoding/make_output_goldens.py"""
import json
import os

EOS, D = "<｜end▁of▁sentence｜>", "｜DSML｜"
DSML_NAMES = {"v3.2": ("function_calls", "invoke", "parameter"), "v4": ("tool_calls", "invoke", "parameter"),
              "v4.1": (" calls", " invoke", " parameter")}


def dsml_block(fmt, calls):
    block, invoke, param = DSML_NAMES[fmt]
    body = "\n".join(
        f'<{D}{invoke} name="{name}">\n' + "\n".join(
            f'<{D}{param} name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
            f'{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</{D}{param}>' for k, v in args.items())
        + f"\n</{D}{invoke}>" for name, args in calls)
    return f"\n\n<{D}{block}>\n{body}\n</{D}{block}>"


def v3_block(fmt, calls):
    parts = []
    for name, args in calls:
        a = json.dumps(args, ensure_ascii=False)
        if fmt == "v3":
            parts.append(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{a}\n```<｜tool▁call▁end｜>")
        else:
            parts.append(f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{a}<｜tool▁call▁end｜>")
    return "<｜tool▁calls▁begin｜>" + "\n".join(parts) + "<｜tool▁calls▁end｜>"


def well_formed(fmt, thinking, reasoning, content, calls, eos=True):
    text = (reasoning + "</think>" if thinking else "") + content
    if calls:
        text += dsml_block(fmt, calls) if fmt in DSML_NAMES else v3_block(fmt, calls)
    if eos:
        text += EOS
    return {"format": fmt, "thinking": thinking, "output": text, "expected": {
        "reasoning_content": reasoning if thinking else "", "content": content,
        "tool_calls": [{"name": n, "arguments": json.dumps(a, ensure_ascii=False)} for n, a in calls],
        "finish_reason": ("tool_calls" if calls else "stop") if eos else None, "error": ""}}


WEATHER = ("get_weather", {"location": "Beijing", "unit": "celsius"})
MIXED = ("search", {"query": "llama \"news\"\nlatest <b>", "num_results": 3, "score": 0.75, "strict": True,
                    "tags": ["a", "b"], "filter": {"lang": "中文"}, "none": None})
EMPTY_ARGS = ("get_time", {})


def cases():
    out = {}
    for fmt in ("v3", "v3.1", "v3.2", "v4", "v4.1"):
        thinking_ok = fmt != "v3"
        out[f"{fmt}/plain"] = well_formed(fmt, False, "", "Hello! How can I help you today? 😀", [])
        out[f"{fmt}/no_eos_truncated"] = well_formed(fmt, False, "", "Cut off mid-sent", [], eos=False)
        out[f"{fmt}/one_tool_call"] = well_formed(fmt, False, "", "Let me check.", [WEATHER])
        out[f"{fmt}/tool_calls_no_content"] = well_formed(fmt, False, "", "", [WEATHER, MIXED, EMPTY_ARGS])
        if thinking_ok:
            out[f"{fmt}/thinking"] = well_formed(fmt, True, "The user greets me.\nI reply < politely >.", "Hi there!", [])
            out[f"{fmt}/thinking_with_tools"] = well_formed(fmt, True, "Need weather data.", "", [WEATHER, MIXED])
            out[f"{fmt}/thinking_empty"] = well_formed(fmt, True, "", "Direct answer.", [])
    # Malformed tool-call text: content keeps the raw text and error is set.
    v4_bad = "Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nam=\"x\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    out["v4/malformed_invoke_header"] = {"format": "v4", "thinking": False, "output": v4_bad + EOS, "expected": {
        "reasoning_content": "", "content": v4_bad, "tool_calls": [], "finish_reason": "stop", "error": "bad invoke header"}}
    good = dsml_block("v4", [WEATHER])
    broken_tail = '\n<｜DSML｜invoke name="y">\n<｜DSML｜parameter name="a" string="maybe">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    text = good[: -len("\n</｜DSML｜tool_calls>")] + broken_tail
    out["v4/second_call_bad_parameter"] = {"format": "v4", "thinking": False, "output": text + EOS, "expected": {
        "reasoning_content": "", "content": broken_tail, "tool_calls": [{"name": WEATHER[0], "arguments": json.dumps(WEATHER[1])}],
        "finish_reason": "tool_calls", "error": "bad parameter"}}
    unterminated = "Sure\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"q\" string=\"true\">abc"
    out["v4.1/unterminated_block"] = {"format": "v4.1", "thinking": False, "output": unterminated, "expected": {
        "reasoning_content": "", "content": unterminated, "tool_calls": [], "finish_reason": None,
        "error": "unterminated tool-call block"}}
    stray = "A\n\n<｜DSML｜function_calls>\nstray text\n</｜DSML｜function_calls>"
    out["v3.2/stray_text_in_block"] = {"format": "v3.2", "thinking": False, "output": stray + EOS, "expected": {
        "reasoning_content": "", "content": stray, "tool_calls": [], "finish_reason": "stop",
        "error": "unexpected text in tool-call block"}}
    v3_bad = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{not json}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    out["v3/arguments_not_json"] = {"format": "v3", "thinking": False, "output": v3_bad + EOS, "expected": {
        "reasoning_content": "", "content": v3_bad, "tool_calls": [], "finish_reason": "stop",
        "error": "tool arguments are not valid JSON"}}
    v31_bad = "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>no separator<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    out["v3.1/missing_separator"] = {"format": "v3.1", "thinking": False, "output": v31_bad + EOS, "expected": {
        "reasoning_content": "", "content": v31_bad, "tool_calls": [], "finish_reason": "stop",
        "error": "missing <｜tool▁sep｜>"}}
    dup = '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">1</｜DSML｜parameter>\n<｜DSML｜parameter name="a" string="true">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    out["v4/duplicate_parameter"] = {"format": "v4", "thinking": False, "output": dup + EOS, "expected": {
        "reasoning_content": "", "content": dup, "tool_calls": [], "finish_reason": "stop", "error": "duplicate parameter 'a'"}}
    # Text after EOS is ignored; a stop string ends the output; reasoning opened twice is tolerated.
    out["v4/text_after_eos_ignored"] = {"format": "v4", "thinking": False, "output": "done" + EOS + "garbage", "expected": {
        "reasoning_content": "", "content": "done", "tool_calls": [], "finish_reason": "stop", "error": ""}}
    out["v4.1/stop_string"] = {"format": "v4.1", "thinking": True, "stop": ["###"], "output": "r</think>one ### two" + EOS,
                               "expected": {"reasoning_content": "r", "content": "one ", "tool_calls": [],
                                            "finish_reason": "stop", "error": ""}}
    out["v4/think_token_repeated"] = {"format": "v4", "thinking": True, "output": "<think>why</think>because" + EOS,
                                      "expected": {"reasoning_content": "why", "content": "because", "tool_calls": [],
                                                   "finish_reason": "stop", "error": ""}}
    out["v4/reasoning_truncated"] = {"format": "v4", "thinking": True, "output": "still thinking <", "expected": {
        "reasoning_content": "still thinking <", "content": "", "tool_calls": [], "finish_reason": None, "error": ""}}
    out["v4/dsml_lookalike_in_content"] = {"format": "v4", "thinking": False, "output": "a <｜DSML｜ b\n\n<x>" + EOS,
                                           "expected": {"reasoning_content": "", "content": "a <｜DSML｜ b\n\n<x>",
                                                        "tool_calls": [], "finish_reason": "stop", "error": ""}}
    blocked = well_formed("v4", False, "", "a", [WEATHER])
    out["v4/stop_string_prefix_of_tool_block"] = dict(blocked, stop=["\n\n"])
    out["v4/stop_string_blank_line"] = {"format": "v4", "thinking": False, "stop": ["\n\n"], "output": "a\n\nb" + EOS,
                                        "expected": {"reasoning_content": "", "content": "a", "tool_calls": [],
                                                     "finish_reason": "stop", "error": ""}}
    out["v4/think_token_twice"] = {"format": "v4", "thinking": True, "output": "<think><think>x</think>y" + EOS,
                                   "expected": {"reasoning_content": "<think>x", "content": "y", "tool_calls": [],
                                                "finish_reason": "stop", "error": ""}}
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    data = [{"name": k, **v} for k, v in cases().items()]
    with open(os.path.join(here, "output_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": data}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(len(data), "output cases")


if __name__ == "__main__":
    main()
