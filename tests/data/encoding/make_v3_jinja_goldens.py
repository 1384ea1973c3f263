#!/usr/bin/env python3
"""Writes golden_v3.json (DeepSeek-V3 conversations rendered by Jinja2 with the chat_template of
tests/data/tokenizers/deepseek-v3/tokenizer_config.json) and jinja_features.json (small templates
of our own covering the Jinja subset), using Debian's python3-jinja2 configured the way Hugging
Face's apply_chat_template configures it. Run: python3 tests/data/encoding/make_v3_jinja_goldens.py"""
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import golden_cases as c  # noqa: E402


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def token(value):
    return value["content"] if isinstance(value, dict) else value


def v3_cases():
    tc = c.call
    return {
        "simple": c.req(c.SIMPLE),
        "simple_no_generation_prompt": c.req(c.SIMPLE, add_generation_prompt=False),
        "system": c.req(c.WITH_SYSTEM),
        "two_systems_joined": c.req([{"role": "system", "content": "A"}, {"role": "system", "content": "B"}] + c.SIMPLE),
        "system_mid_conversation_moves_to_front": c.req(c.MID_SYSTEM_USER),
        "multi_turn": c.req(c.MULTI_TURN),
        "multi_turn_finished": c.req(c.MULTI_TURN_DONE),
        "multi_turn_finished_no_prompt": c.req(c.MULTI_TURN_DONE, add_generation_prompt=False),
        "single_tool_call": c.req([{"role": "user", "content": "Weather in Oslo?"},
                                   {"role": "assistant", "content": None,
                                    "tool_calls": [tc("1", "get_weather", '{"location": "Oslo"}')]},
                                   {"role": "tool", "content": "cold"}]),
        "two_tool_calls_and_results": c.req([{"role": "user", "content": "Beijing and Paris?"},
                                             {"role": "assistant", "content": None, "tool_calls": [
                                                 tc("1", "get_weather", '{"location": "Beijing"}'),
                                                 tc("2", "get_weather", '{"location": "Paris"}')]},
                                             {"role": "tool", "content": "22C"}, {"role": "tool", "content": "15C"},
                                             {"role": "assistant", "content": "Both done."}]),
        "tool_results_then_user": c.req(c.NULL_CONTENT_ASSISTANT + [{"role": "user", "content": "And tomorrow?"}]),
        "tool_results_without_answer_prompt": c.req(c.NULL_CONTENT_ASSISTANT[:3]),
        "second_tool_call_turn": c.req(c.NULL_CONTENT_ASSISTANT + [
            {"role": "user", "content": "Bergen?"},
            {"role": "assistant", "content": None, "tool_calls": [tc("y", "get_weather", '{"location": "Bergen"}')]},
            {"role": "tool", "content": "wet"}]),
        "tools_passed_but_unused_by_template": c.req(c.WITH_SYSTEM, tools=c.TOOLS),
        "unicode": c.req(c.UNICODE),
        "empty_contents": c.req(c.EMPTY_CONTENT),
        "braces_and_jinja_like_text": c.req([{"role": "user", "content": "{{ not a tag }} {% raw %} {# x #}"}]),
        "newlines_everywhere": c.req([{"role": "system", "content": "\n\nsys\n"},
                                      {"role": "user", "content": "\nline1\nline2\n"},
                                      {"role": "assistant", "content": "\n"}, {"role": "user", "content": "  "}]),
        "assistant_first": c.req([{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "ok"}]),
        "long_conversation": c.req([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
                                    for i in range(12)]),
        "only_system": c.req([{"role": "system", "content": "Just a system prompt."}]),
        "tool_message_first": c.req([{"role": "tool", "content": "orphan result"}, {"role": "user", "content": "?"}]),
    }


FEATURE_TEMPLATES = [
    ("loop_variables", "{% for x in items %}{{ loop.index }}/{{ loop.length }}:{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}",
     {"items": ["a", "b", "c"]}),
    ("loop_else_and_filter", "{% for x in items if x > 1 %}[{{ x }}]{% else %}none{% endfor %}|{% for y in [] %}{% else %}empty{% endfor %}",
     {"items": [1, 2, 3]}),
    ("reverse_slice_and_index", "{{ items[::-1] }} {{ items[1:] }} {{ items[-1] }} {{ text[2:5] }} {{ text[-3:] }}",
     {"items": [1, 2, 3], "text": "héllo world"}),
    ("whitespace_control", "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c", {}),
    ("trim_and_lstrip_blocks", "line1\n    {% if true %}\n    inside\n    {% endif %}\nline2\n  {# comment #}\nend", {}),
    ("namespace_in_loop", "{% set ns = namespace(total=0, seen=[]) %}{% for x in items %}{% set ns.total = ns.total + x %}{% endfor %}{{ ns.total }}",
     {"items": [1, 2, 3, 4]}),
    ("set_scoping", "{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{{ a }}{% endfor %}{{ a }}", {}),
    ("tojson_filter", "{{ obj | tojson }} {{ 'é\"\\n' | tojson }} {{ [1, 2.5, none, true] | tojson }}",
     {"obj": {"b": 1, "a": [1, {"x": "ü"}], "c": None, "d": 1.0, "e": 1e-07}}),
    ("string_methods", "{{ s.startswith('ab') }} {{ s.endswith(('x', 'yz')) }} {{ s.split('-') }} {{ s.split('-', 1)[1] }} {{ ' pad '.strip() }}|{{ 'xxhixx'.strip('x') }} {{ s.upper() }} {{ s.replace('-', '+') }}",
     {"s": "ab-cd-xyz"}),
    ("filters", "{{ items | length }} {{ items | join(', ') }} {{ items | first }} {{ items | last }} {{ missing | default('dflt') }} {{ '  t  ' | trim }} {{ 'MiXeD' | lower }} {{ 3.7 | int }} {{ -4 | abs }}",
     {"items": ["x", "y", "z"]}),
    ("tests", "{{ x is defined }} {{ y is defined }} {{ n is none }} {{ x is string }} {{ 3 is number }} {{ d is mapping }} {{ 4 is even }} {{ x is not none }}",
     {"x": "s", "n": None, "d": {}}),
    ("operators", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'a' ~ 1 ~ none }} {{ 1 + 2 * 3 }} {{ 'ab' * 3 }} {{ 0.1 + 0.2 }}", {}),
    ("logic_and_membership", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }} {{ a and b }} {{ a or b }} {{ not a }} {{ 1 < 2 <= 2 }}",
     {"d": {"k": 1}, "a": 0, "b": "yes"}),
    ("conditional_expression", "{{ 'yes' if flag else 'no' }} {{ 'x' if not flag }}|{{ (1, 2) }}", {"flag": False}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.get('a') }} {{ d.get('zz', 'none') }} {{ d.keys() | list }}",
     {"d": {"b": 2, "a": 1}}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("python_str_of_values", "{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ [1, 'a', none] }} {{ {'k': 'v'} }} {{ \"it's\" }} {{ missing }}", {}),
    ("set_block", "{% set greeting %}Hello {{ name }}!{% endset %}[{{ greeting | upper }}]", {"name": "Ada"}),
    ("elif_chain", "{% for v in values %}{% if v < 0 %}neg{% elif v == 0 %}zero{% elif v < 10 %}small{% else %}big{% endif %} {% endfor %}",
     {"values": [-1, 0, 5, 50]}),
    ("attribute_and_item_access", "{{ m.role }} {{ m['content'] }} {{ m.tool_calls[0].function.name }} {{ m.missing is defined }}",
     {"m": {"role": "assistant", "content": "c", "tool_calls": [{"function": {"name": "f"}}]}}),
]


def main():
    env = environment()
    with open(os.path.join(HERE, "..", "tokenizers", "deepseek-v3", "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    template = env.from_string(config["chat_template"])
    cases = []
    for name, request in v3_cases().items():
        context = {"messages": request["messages"], "add_generation_prompt": request.get("add_generation_prompt", True),
                   "bos_token": token(config["bos_token"]), "eos_token": token(config["eos_token"]),
                   "thinking": request.get("thinking", False)}
        if request.get("tools"):
            context["tools"] = request["tools"]
        cases.append({"name": name, "request": request, "expected": template.render(**context)})
    with open(os.path.join(HERE, "golden_v3.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "v3", "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    features = [{"name": name, "template": source, "context": context, "expected": env.from_string(source).render(**context)}
                for name, source, context in FEATURE_TEMPLATES]
    with open(os.path.join(HERE, "jinja_features.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": features}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(len(cases), "v3 conversations,", len(features), "feature templates")


if __name__ == "__main__":
    main()
