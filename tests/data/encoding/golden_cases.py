"""Chat requests shared by the golden generators: every branch of the formats (tools, multi-turn
reasoning, tool results, mid-conversation system messages, response_format, reasoning effort,
tasks, latest_reminder, images, error cases)."""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a specific location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web — returns JSON",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "num_results": {"type": "integer", "default": 5},
        "score": {"type": "number", "minimum": 0.5}}, "required": ["query"]}}}
TOOLS = [WEATHER, SEARCH]


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {
    "type": "object", "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer"]}}}

SIMPLE = [{"role": "user", "content": "Hello!"}]
WITH_SYSTEM = [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "What is 2+2?"}]
MULTI_TURN = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": "hi"},
              {"role": "assistant", "content": "Hello! How can I help?", "reasoning_content": "Greeting."},
              {"role": "user", "content": "1+1=?"}]
MULTI_TURN_DONE = MULTI_TURN + [{"role": "assistant", "content": "2", "reasoning_content": "Simple sum."}]
TOOL_ROUND = [{"role": "system", "content": "You are a helpful assistant."},
              {"role": "user", "content": "What's the weather in Beijing and Paris?"},
              {"role": "assistant", "content": "", "reasoning_content": "Two cities, two calls.",
               "tool_calls": [call("call_1", "get_weather", '{"location": "Beijing", "unit": "celsius"}'),
                              call("call_2", "get_weather", '{"location": "Paris"}')]},
              {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 22, "condition": "sunny"}'},
              {"role": "tool", "tool_call_id": "call_2", "content": '{"temperature": 15, "condition": "rain"}'}]
TOOL_ROUND_DONE = TOOL_ROUND + [{"role": "assistant", "content": "Beijing: sunny, 22°C. Paris: rain, 15°C.",
                                 "reasoning_content": "Summarize both."}]
TOOL_ROUND_SWAPPED = TOOL_ROUND[:3] + [TOOL_ROUND[4], TOOL_ROUND[3]]
MIXED_ARGS = [{"role": "user", "content": "Search for \"llama\" news"},
              {"role": "assistant", "content": "Let me search.",
               "tool_calls": [call("c1", "search", '{"query": "llama \\"news\\"\\nlatest", "num_results": 3, '
                                                  '"score": 0.75, "strict": true, "tags": ["a", "b"], '
                                                  '"filter": {"lang": "中文"}, "none": null}')]},
              {"role": "tool", "tool_call_id": "c1", "content": "no results"},
              {"role": "user", "content": "Try again tomorrow."}]
MID_SYSTEM = [{"role": "system", "content": "First system."},
              {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": "Hello"},
              {"role": "system", "content": "Now answer briefly."}]
MID_SYSTEM_USER = MID_SYSTEM + [{"role": "user", "content": "Why is the sky blue?"}]
TWO_USERS = [{"role": "user", "content": "Part one."}, {"role": "user", "content": "Part two."}]
DEVELOPER = [{"role": "developer", "content": "Follow the house style."}]
REMINDER = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Plan my day."},
            {"role": "latest_reminder", "content": "Today is Monday."}]
REMINDER_THEN_ASSISTANT = REMINDER + [{"role": "assistant", "content": "Sure.", "reasoning_content": "ok"}]
TASK_QUERY = [{"role": "user", "content": "Find restaurants near me", "task": "query"}]
TASK_ACTION = [{"role": "user", "content": "Book a table", "task": "action"},
               {"role": "assistant", "content": "search", "reasoning_content": "ignored"}]
UNICODE = [{"role": "system", "content": "Réponds en français 🇫🇷"},
           {"role": "user", "content": "Qu'est-ce que «l'IA» ?\n\tTab\u0001ctrl"}]
EMPTY_CONTENT = [{"role": "system", "content": ""}, {"role": "user", "content": ""}]
NULL_CONTENT_ASSISTANT = [{"role": "user", "content": "call it"},
                          {"role": "assistant", "content": None,
                           "tool_calls": [call("x", "get_weather", '{"location": "Oslo"}')]},
                          {"role": "tool", "tool_call_id": "x", "content": "cold"},
                          {"role": "assistant", "content": "It is cold."}]
CONTENT_PARTS = [{"role": "user", "content": [{"type": "text", "text": "describe"}, {"type": "text", "text": "this"}]}]


def req(messages, **kw):
    out = {"messages": messages}
    out.update(kw)
    return out


# Formats V3.2 / V4 / V4.1 share the request shapes; name -> request.
DSML_COMMON = {
    "simple_chat": req(SIMPLE),
    "simple_thinking": req(SIMPLE, thinking=True),
    "system_chat": req(WITH_SYSTEM),
    "multi_turn_chat": req(MULTI_TURN),
    "multi_turn_thinking_drops_old_reasoning": req(MULTI_TURN, thinking=True),
    "multi_turn_thinking_keep_reasoning": req(MULTI_TURN, thinking=True, drop_thinking=False),
    "finished_turn_thinking": req(MULTI_TURN_DONE, thinking=True),
    "tools_chat": req(WITH_SYSTEM, tools=TOOLS),
    "tools_no_system_thinking": req(SIMPLE, tools=[WEATHER], thinking=True),
    "tool_round_chat": req(TOOL_ROUND, tools=TOOLS),
    "tool_round_thinking": req(TOOL_ROUND, tools=TOOLS, thinking=True),
    "tool_round_finished_thinking": req(TOOL_ROUND_DONE, tools=TOOLS, thinking=True),
    "tool_results_out_of_order": req(TOOL_ROUND_SWAPPED, tools=TOOLS),
    "mixed_argument_types": req(MIXED_ARGS, tools=TOOLS),
    "response_format_json_schema": req(WITH_SYSTEM, response_format=SCHEMA_FORMAT),
    "response_format_and_tools_thinking": req(WITH_SYSTEM, tools=[SEARCH], response_format={"type": "json_object"},
                                              thinking=True),
    "unicode_and_control_chars": req(UNICODE),
    "no_generation_prompt": req(WITH_SYSTEM, add_generation_prompt=False),
    "developer_message": req(DEVELOPER),
    "content_parts": req(CONTENT_PARTS),
}

V4_ONLY = {
    "mid_conversation_system": req(MID_SYSTEM),
    "mid_conversation_system_then_user_thinking": req(MID_SYSTEM_USER, thinking=True),
    "consecutive_users_merge": req(TWO_USERS),
    "latest_reminder": req(REMINDER, thinking=True),
    "latest_reminder_then_assistant": req(REMINDER_THEN_ASSISTANT, thinking=True),
    "task_query": req(TASK_QUERY),
    "task_action_thinking": req(TASK_ACTION, thinking=True),
    "effort_max_thinking": req(WITH_SYSTEM, thinking=True, reasoning_effort="max"),
    "effort_high_thinking": req(WITH_SYSTEM, thinking=True, reasoning_effort="high"),
    "effort_max_chat": req(WITH_SYSTEM, reasoning_effort="max"),
    "null_content_tool_call": req(NULL_CONTENT_ASSISTANT, tools=[WEATHER]),
}

V41_ONLY = {
    "effort_default_thinking_no_system": req(SIMPLE, thinking=True),
    "effort_low": req(WITH_SYSTEM, thinking=True, reasoning_effort="low"),
    "effort_xhigh": req(WITH_SYSTEM, thinking=True, reasoning_effort="xhigh"),
    "effort_numeric_37": req(WITH_SYSTEM, thinking=True, reasoning_effort=37),
    "effort_numeric_100_tools": req(SIMPLE, thinking=True, reasoning_effort=100, tools=[WEATHER]),
    "image_blocks": req([{"role": "user", "content": [
        {"type": "text", "text": "What is in these pictures?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "image_url", "image_url": "data:image/png;base64,AAAA"}]}]),
    "image_in_tool_result": req([
        {"role": "user", "content": "Take a screenshot"},
        {"role": "assistant", "content": "", "tool_calls": [call("s1", "screenshot", "{}")]},
        {"role": "tool", "tool_call_id": "s1", "content": [
            {"type": "text", "text": "Here it is"}, {"type": "image_url", "image_url": {"url": "file:///tmp/s.png"}}]}]),
}

ERRORS = {
    "unknown_role": req([{"role": "wizard", "content": "hi"}]),
    "developer_without_content": req([{"role": "developer", "content": ""}]),
}
V41_ERRORS = {
    "effort_out_of_range": req(SIMPLE, thinking=True, reasoning_effort=101),
    "effort_medium_invalid": req(SIMPLE, reasoning_effort="medium"),
    "placeholder_in_text": req([{"role": "user", "content": "look <｜deepseek_image｜>"}]),
    "arguments_not_json": req([{"role": "user", "content": "x"},
                               {"role": "assistant", "content": "", "tool_calls": [call("a", "f", "not json")]}]),
}
V4_LENIENT = {
    "arguments_not_json_become_one_parameter": req([{"role": "user", "content": "x"},
                                                    {"role": "assistant", "content": "",
                                                     "tool_calls": [call("a", "f", "not json")]}]),
}
V32_ONLY = {
    "tool_round_no_tools_in_request": req(TOOL_ROUND),
    "thinking_assistant_without_reasoning_errors": req(SIMPLE + [{"role": "assistant", "content": "x"}], thinking=True),
}

V31 = {
    "simple_chat": req(SIMPLE),
    "simple_thinking": req(SIMPLE, thinking=True),
    "two_systems": req([{"role": "system", "content": "A"}, {"role": "system", "content": "B"}] + SIMPLE),
    "multi_turn_strips_old_thinking": req([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "<think>greeting</think>Hello!"},
        {"role": "user", "content": "bye"}], thinking=True),
    "no_generation_prompt": req(WITH_SYSTEM, add_generation_prompt=False),
    "tool_round": req([
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Beijing and Paris?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            call("1", "get_weather", '{"location": "Beijing"}'), call("2", "get_weather", '{"location": "Paris"}')]},
        {"role": "tool", "content": "22C"}, {"role": "tool", "content": "15C"},
        {"role": "assistant", "content": "Beijing 22C, Paris 15C."},
        {"role": "user", "content": "Thanks"}]),
    "tool_results_end_without_generation_prompt": req([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call("1", "get_weather", '{"location": "Oslo"}')]},
        {"role": "tool", "content": "cold"}]),
    "prefix_assistant_thinking": req([{"role": "user", "content": "Continue"},
                                      {"role": "assistant", "content": "Partial", "prefix": True}], thinking=True),
    "unicode": req(UNICODE, thinking=True),
    "empty_tool_calls_list": req([{"role": "user", "content": "x"},
                                  {"role": "assistant", "content": "y", "tool_calls": []}]),
    "content_parts": req(CONTENT_PARTS),
    "user_after_tool_output": req([
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [call("1", "f", "{}")]},
        {"role": "tool", "content": "r"}, {"role": "user", "content": "b"}], thinking=True),
}
V31_ERRORS = {
    "unknown_role": req([{"role": "developer", "content": "hi"}]),
    "missing_content": req([{"role": "user"}]),
}
