"""Independent Python implementation of the DeepSeek prompt formats, used only to produce the
golden prompts the C++ encoders are tested against. Written from DeepSeek's reference encoders
(the DeepSeek-V3.1 chat template, encoding_dsv32.py, encoding_dsv4.py and SGLang's
encoding_dsv41.py) and from how requests map onto them (request-level tools and response_format
are attached to a system message at index 0, as the reference test harness does)."""
import copy
import json

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT, SYSTEM = "<｜User｜>", "<｜Assistant｜>", "<｜System｜>"
REMINDER, IMAGE = "<｜latest_reminder｜>", "<｜deepseek_image｜>"
THINK, END_THINK, D = "<think>", "</think>", "｜DSML｜"
TASKS = {"action": "<｜action｜>", "query": "<｜query｜>", "authority": "<｜authority｜>",
         "domain": "<｜domain｜>", "title": "<｜title｜>", "read_url": "<｜read_url｜>"}


class EncodeError(Exception):
    pass


def dumps(v):
    return json.dumps(v, ensure_ascii=False)


def pstr(v):
    return "None" if v is None else (v if isinstance(v, str) else str(v))


def schemas(tools):
    return "\n".join(dumps(t["function"]) for t in tools)


def tools_v32(tools):
    return (f'## Tools\nYou have access to a set of tools you can use to answer the user\'s question.\n'
            f'You can invoke functions by writing a "<{D}function_calls>" block like the following as part of your reply to the user:\n'
            f'<{D}function_calls>\n<{D}invoke name="$FUNCTION_NAME">\n'
            f'<{D}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{D}parameter>\n...\n'
            f'</{D}invoke>\n<{D}invoke name="$FUNCTION_NAME2">\n...\n</{D}invoke>\n</{D}function_calls>\n'
            'String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. '
            'The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).\n'
            'If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n'
            f'<{D}function_calls>\n...\n</{D}function_calls>\n<function_results>\n...\n</function_results>\n'
            f'{THINK}...thinking about results{END_THINK}\n'
            f'Here are the functions available in JSONSchema format:\n<functions>\n{schemas(tools)}\n</functions>\n')


def tools_v4(tools, block, invoke, param):
    return (f'## Tools\n\nYou have access to a set of tools to help answer the user\'s question. You can invoke tools by writing a "<{D}{block}>" block like the following:\n\n'
            f'<{D}{block}>\n<{D}{invoke} name="$TOOL_NAME">\n'
            f'<{D}{param} name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{D}{param}>\n...\n'
            f'</{D}{invoke}>\n<{D}{invoke} name="$TOOL_NAME2">\n...\n</{D}{invoke}>\n</{D}{block}>\n\n'
            'String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.\n\n'
            f'If thinking_mode is enabled (triggered by {THINK}), you MUST output your complete reasoning inside {THINK}...{END_THINK} BEFORE any tool calls or final response.\n\n'
            f'Otherwise, output directly after {END_THINK} with tool calls or final response.\n\n'
            f'### Available Tool Schemas\n\n{schemas(tools)}\n\n'
            'You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n')


def response_format(rf):
    return "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" + dumps(rf)


def dsml_args(arguments, param, lenient):
    if isinstance(arguments, str):
        try:
            args = json.loads(arguments)
        except ValueError:
            if not lenient:
                raise EncodeError("arguments are not JSON")
            args = {"arguments": arguments}
    else:
        args = {"arguments": arguments} if lenient else arguments
    if not isinstance(args, dict):
        raise EncodeError("arguments must be a JSON object")
    return "\n".join(
        f'<{D}{param} name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
        f'{v if isinstance(v, str) else dumps(v)}</{D}{param}>' for k, v in args.items())


def dsml_calls(calls, block, invoke, param, lenient):
    body = "\n".join(f'<{D}{invoke} name="{pstr(c["function"].get("name"))}">\n'
                     f'{dsml_args(c["function"].get("arguments"), param, lenient)}\n</{D}{invoke}>' for c in calls)
    return f"\n\n<{D}{block}>\n{body}\n</{D}{block}>"


# ------------------------------------------------------------------------------------------
# V3.1 (chat template semantics)
# ------------------------------------------------------------------------------------------
def need_str(v):
    if not isinstance(v, str):
        raise EncodeError("string expected")
    return v


def v31(req):
    msgs, thinking = req["messages"], req.get("thinking", False)
    out = BOS + "\n\n".join(need_str(m.get("content")) for m in msgs if m["role"] == "system")
    is_first = is_tool = last_user = False
    for m in msgs:
        role = m["role"]
        if role == "user":
            is_tool = is_first = False
            last_user = True
            out += USER + need_str(m.get("content"))
        elif role == "assistant" and m.get("tool_calls") is not None:
            if last_user:
                out += ASSISTANT + END_THINK
            last_user = is_first = is_tool = False
            for tc in m["tool_calls"]:
                one = ("<｜tool▁call▁begin｜>" + need_str(tc["function"]["name"]) + "<｜tool▁sep｜>"
                       + need_str(tc["function"]["arguments"]) + "<｜tool▁call▁end｜>")
                if not is_first:
                    content = "" if ("content" in m and m["content"] is None) else need_str(m.get("content"))
                    out += content + "<｜tool▁calls▁begin｜>" + one
                    is_first = True
                else:
                    out += one
            out += "<｜tool▁calls▁end｜>" + EOS
        elif role == "assistant":
            if last_user:
                out += ASSISTANT + (THINK if m.get("prefix") and thinking else END_THINK)
            last_user = False
            content = need_str(m.get("content"))
            if is_tool:
                is_tool = False
            elif END_THINK in content:
                content = content.split(END_THINK, 1)[1]
            out += content + EOS
        elif role == "tool":
            last_user, is_tool = False, True
            out += "<｜tool▁output▁begin｜>" + need_str(m.get("content")) + "<｜tool▁output▁end｜>"
    if req.get("add_generation_prompt", True) and last_user and not is_tool:
        out += ASSISTANT + (THINK if thinking else END_THINK)
    return out


# ------------------------------------------------------------------------------------------
# V3.2
# ------------------------------------------------------------------------------------------
def last_user(msgs, v41=False):
    for i in range(len(msgs) - 1, -1, -1):
        r = msgs[i].get("role")
        if r in ("user", "developer") or (v41 and r == "system" and i > 0):
            return i
    return -1


def v32(msgs, thinking, drop):
    n = len(msgs)
    if thinking and drop:
        lu = last_user(msgs)
        kept = []
        for i, m in enumerate(msgs):
            if m["role"] in ("user", "system", "tool") or i >= lu:
                kept.append(m)
            elif m["role"] == "assistant":
                m = dict(m)
                m.pop("reasoning_content", None)
                kept.append(m)
        msgs = kept
    if len(msgs) != n:
        raise EncodeError("dropped developer message")
    out = BOS
    lu = last_user(msgs)
    for i, m in enumerate(msgs):
        role, content = m["role"], m.get("content")
        mark = THINK if (i == lu and thinking) else END_THINK
        if role == "system":
            out += content or ""
            if m.get("tools"):
                out += "\n\n" + tools_v32(m["tools"])
            if m.get("response_format"):
                out += "\n\n" + response_format(m["response_format"])
        elif role == "developer":
            if not content:
                raise EncodeError("developer needs content")
            body = ""
            if m.get("tools"):
                body += "\n\n" + tools_v32(m["tools"])
            if m.get("response_format"):
                body += "\n\n" + response_format(m["response_format"])
            out += USER + body + "\n\n# The user's message is: " + content + ASSISTANT + mark
        elif role == "user":
            out += USER + pstr(content) + ASSISTANT + mark
        elif role == "tool":
            prev = i - 1
            while prev >= 0 and msgs[prev]["role"] == "tool":
                prev -= 1
            if prev < 0 or msgs[prev]["role"] != "assistant":
                raise EncodeError("tool without assistant")
            order, calls = i - prev, msgs[prev].get("tool_calls")
            if not (calls and len(calls) >= order):
                raise EncodeError("no tool call")
            if order == 1:
                out += "\n\n<function_results>"
            out += "\n<result>" + pstr(content) + "</result>"
            if order == len(calls):
                out += "\n</function_results>" + ("\n\n" + THINK if (i >= lu and thinking) else "\n\n" + END_THINK)
        elif role == "assistant":
            tc = m.get("tool_calls")
            calls = dsml_calls(tc, "function_calls", "invoke", "parameter", False) if tc else ""
            think = ""
            if thinking and i > lu:
                if not (m.get("reasoning_content") or tc):
                    raise EncodeError("assistant after last user needs reasoning")
                think = (m.get("reasoning_content") or "") + END_THINK
            out += think + (content or "") + calls + EOS
        else:
            raise EncodeError("role")
    return out


# ------------------------------------------------------------------------------------------
# V4 / V4.1
# ------------------------------------------------------------------------------------------
def merge_tools(msgs, v41):
    merged = []
    for m in copy.deepcopy(msgs):
        role = m.get("role")
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": m.get("content", "")}
            if merged and merged[-1].get("role") == "user" and "content_blocks" in merged[-1]:
                merged[-1]["content_blocks"].append(block)
            else:
                merged.append({"role": "user", "content_blocks": [block]})
        elif role == "user":
            blocks = m.get("content_blocks") if v41 else None
            if blocks is None:
                blocks = [{"type": "text", "text": m.get("content", "")}]
            if merged and merged[-1].get("role") == "user" and "content_blocks" in merged[-1] \
                    and merged[-1].get("task") is None:
                merged[-1]["content_blocks"].extend(blocks)
            elif v41:
                m["content_blocks"] = blocks
                merged.append(m)
            else:
                new = {"role": "user", "content": m.get("content", ""), "content_blocks": blocks}
                for k in ("task", "wo_eos", "mask"):
                    if k in m:
                        new[k] = m[k]
                merged.append(new)
        else:
            merged.append(m)
    return merged


def sort_results(msgs):
    order = {}
    for m in msgs:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            order = {}
            for i, tc in enumerate(m["tool_calls"]):
                tid = tc.get("id") or tc.get("function", {}).get("id", "")
                if tid:
                    order[tid] = i
        elif m.get("role") == "user" and m.get("content_blocks"):
            tb = [b for b in m["content_blocks"] if b.get("type") == "tool_result"]
            if len(tb) > 1 and order:
                tb = sorted(tb, key=lambda b: order.get(b.get("tool_use_id", ""), 0))
                it = iter(tb)
                m["content_blocks"] = [next(it) if b.get("type") == "tool_result" else b for b in m["content_blocks"]]
    return msgs


def effort_v41(index, thinking, effort):
    levels = {"low": 25, "high": 50, "xhigh": 75, "max": 100}
    effort = "high" if effort is None else effort
    if not ((type(effort) is int and 1 <= effort <= 100) or effort in levels):
        raise EncodeError("effort")
    budget = levels[effort] if isinstance(effort, str) else effort
    if index == 0 and thinking:
        return f"Reasoning Effort: {budget} (range 1-100, the higher the value, the more thorough the reasoning)\n\n"
    return ""


EFFORT_MAX = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n")


def render_blocks(m):
    blocks = m.get("content_blocks")
    if not blocks:
        return m.get("content") or ""
    parts = []
    for b in blocks:
        t = b.get("type")
        if t == "text":
            parts.append(pstr(b.get("text", "")))
        elif t == "tool_result":
            c = b.get("content", "")
            if isinstance(c, list):
                c = "\n\n".join(pstr(x.get("text", "")) if x.get("type") == "text" else f"[Unsupported {x.get('type')}]" for x in c)
            parts.append(f"<tool_result>{pstr(c)}</tool_result>")
        else:
            parts.append(f"[Unsupported {t}]")
    return "\n\n".join(parts)


def v4_message(i, msgs, thinking, drop, effort, v41):
    names = (" calls", " invoke", " parameter") if v41 else ("tool_calls", "invoke", "parameter")
    m = msgs[i]
    lu = last_user(msgs, v41)
    role, content = m.get("role"), m.get("content")
    out = ""
    if v41:
        e = effort_v41(i, thinking, effort)
        out += SYSTEM if i == 0 and (e or role == "system") else ""
        out += e
    elif i == 0 and thinking and effort == "max":
        out += EFFORT_MAX
    extra = ""
    if m.get("tools"):
        extra += "\n\n" + tools_v4([t for t in m["tools"]], *names)
    if m.get("response_format"):
        extra += "\n\n" + response_format(m["response_format"])
    if role == "system":
        out += (SYSTEM if v41 and i > 0 else "") + (content or "") + extra
    elif role == "developer":
        if not content:
            raise EncodeError("developer")
        out += USER + content + extra
    elif role == "user":
        out += USER + render_blocks(m)
    elif role == "latest_reminder":
        out += REMINDER + pstr(content)
    elif role == "assistant":
        tc = m.get("tool_calls")
        calls = dsml_calls(tc, *names, lenient=not v41) if tc else ""
        prev_task = i > 0 and msgs[i - 1].get("task") is not None
        think = ""
        if thinking and not prev_task and (not drop or i > lu):
            think = (m.get("reasoning_content") or "") + END_THINK
        out += think + (content or "") + calls + ("" if m.get("wo_eos") else EOS)
    else:
        raise EncodeError("role")
    if i + 1 < len(msgs) and msgs[i + 1].get("role") not in ("assistant", "latest_reminder"):
        return out
    task = m.get("task")
    if task is not None:
        if task not in TASKS:
            raise EncodeError("task")
        out += TASKS[task] if task != "action" else ASSISTANT + (THINK if thinking else END_THINK) + TASKS[task]
    elif role in ("user", "developer") or (v41 and role == "system" and i > 0):
        out += ASSISTANT + (THINK if thinking and (not drop or i >= lu) else END_THINK)
    return out


def images_v41(msgs):
    out = []
    for m in copy.deepcopy(msgs):
        for k in ("content", "reasoning_content"):
            if isinstance(m.get(k), str) and IMAGE in m[k]:
                raise EncodeError("placeholder in text")
        if isinstance(m.get("content"), list) and "content_blocks" not in m:
            m["content_blocks"] = m.pop("content")
        if m.get("content_blocks"):
            blocks = []
            for b in m["content_blocks"]:
                if isinstance(b, dict) and b.get("type") in ("image", "image_url"):
                    blocks.append({"type": "text", "text": IMAGE})
                elif isinstance(b, dict) and b.get("type") == "text" and IMAGE in (b.get("text") or ""):
                    raise EncodeError("placeholder in text block")
                else:
                    blocks.append(b)
            m["content_blocks"] = blocks
            if not isinstance(m.get("content"), str):
                m["content"] = "\n\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        out.append(m)
    return out


def v4(msgs, thinking, drop, effort, v41):
    if v41:
        msgs = images_v41(msgs)
    msgs = sort_results(merge_tools(msgs, v41))
    if any(m.get("tools") for m in msgs):
        drop = False
    if thinking and drop:
        lu = last_user(msgs, v41)
        kept = []
        for i, m in enumerate(msgs):
            if m.get("role") in ("user", "system", "tool", "latest_reminder") or i >= lu:
                kept.append(m)
            elif m.get("role") == "assistant":
                m = dict(m)
                m.pop("reasoning_content", None)
                kept.append(m)
        msgs = kept
    return BOS + "".join(v4_message(i, msgs, thinking, drop, effort, v41) for i in range(len(msgs)))


# ------------------------------------------------------------------------------------------
# Request -> prompt (mirrors deepinfer's ChatEncoder::render)
# ------------------------------------------------------------------------------------------
ROLES = {"v3.1": {"system", "user", "assistant", "tool"},
         "v3.2": {"system", "user", "assistant", "tool", "developer"},
         "v4": {"system", "user", "assistant", "tool", "developer", "latest_reminder"},
         "v4.1": {"system", "user", "assistant", "tool", "developer", "latest_reminder"}}


def render(fmt, req):
    msgs = copy.deepcopy(req["messages"])
    for m in msgs:
        if m.get("role") not in ROLES[fmt]:
            raise EncodeError("unknown role")
        if fmt != "v4.1" and isinstance(m.get("content"), list):
            if any(p.get("type") != "text" for p in m["content"]):
                raise EncodeError("non-text part")
            m["content"] = " ".join(p.get("text", "") for p in m["content"])
    if fmt == "v3.1":
        return v31(dict(req, messages=msgs))
    tools, rf = req.get("tools"), req.get("response_format")
    has_rf = bool(rf) and rf.get("type") != "text"
    if tools or has_rf:
        if not msgs or msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": ""})
        if tools:
            msgs[0]["tools"] = tools
        if has_rf:
            msgs[0]["response_format"] = rf
    thinking, drop = req.get("thinking", False), req.get("drop_thinking", True)
    effort = req.get("reasoning_effort")
    if fmt == "v3.2":
        text = v32(msgs, thinking, drop)
    else:
        if fmt == "v4":
            if effort is not None and effort not in ("low", "medium", "high", "xhigh", "max"):
                raise EncodeError("effort")
            effort = "max" if effort == "max" else None
        text = v4(msgs, thinking, drop, effort, fmt == "v4.1")
    if not req.get("add_generation_prompt", True) and msgs and msgs[-1]["role"] != "assistant":
        for header in (ASSISTANT + THINK, ASSISTANT + END_THINK):
            if text.endswith(header):
                text = text[: -len(header)]
                break
    return text
