// `deepinfer serve` driven by the official openai npm client (and plain fetch for the cases a
// client refuses to send): chat and completions, streaming and not, tools, structured outputs,
// usage, auth, malformed requests, disconnects, graceful shutdown. Run by ctest (serve_openai_client).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { cli, modelDir, scrape, startServer, waitIdle } from './server.mjs';

const KEY = 'sk-deepinfer-test';
let server;
let client;
let tmp;

before(async () => {
  server = await startServer(['--api-key', KEY, '--served-model-name', 'kjv', '--max-request-bytes', '1000000']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  tmp = mkdtempSync(path.join(tmpdir(), `deepinfer-serve-${process.pid}-`));
});

after(async () => {
  const { code, signal } = await server.stop();
  rmSync(tmp, { recursive: true, force: true });
  assert.equal(signal, null, `server died by ${signal}:\n${server.log()}`);
  assert.equal(code, 0, `graceful shutdown must exit 0:\n${server.log()}`);
});

const messages = [{ role: 'user', content: 'Who is my shepherd?' }];

async function post(pathname, body, { key = KEY, raw = false } = {}) {
  const res = await fetch(`${server.url}${pathname}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
    body: raw ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function collectChat(stream) {
  const out = { content: '', reasoning: '', toolCalls: [], finish: null, usage: null, roleChunks: 0, chunks: 0 };
  for await (const chunk of stream) {
    out.chunks += 1;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      const d = choice.delta;
      if (d.role) out.roleChunks += 1;
      if (d.content) out.content += d.content;
      if (d.reasoning_content) out.reasoning += d.reasoning_content;
      for (const call of d.tool_calls ?? []) out.toolCalls[call.index] = call;
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

describe('chat completions', () => {
  test('non-streaming: a message, usage equal to the token counts', async () => {
    const r = await client.chat.completions.create({
      model: 'kjv', messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 2,
    });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.equal(r.choices[0].finish_reason, 'length');
    const tokenized = await post('/tokenize', { messages });
    assert.equal(r.usage.prompt_tokens, tokenized.body.count);
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.usage.completion_tokens, r.choices[0].logprobs.content.length);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    for (const t of r.choices[0].logprobs.content) {
      assert.ok(t.logprob <= 0);
      assert.equal(t.top_logprobs.length, 2);
    }
  });

  test('streaming gives the same text as non-streaming, then usage', async () => {
    const params = { model: 'kjv', messages, max_tokens: 16, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    const s = await collectChat(stream);
    assert.equal(s.content, whole.choices[0].message.content);
    assert.equal(s.roleChunks, 1);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.deepEqual(s.usage.completion_tokens, whole.usage.completion_tokens);
    assert.deepEqual(s.usage.prompt_tokens, whole.usage.prompt_tokens);
  });

  test('n > 1 and seed: distinct choices, reproducible', async () => {
    const params = { model: 'kjv', messages, max_tokens: 8, temperature: 1, n: 3, seed: 7 };
    const a = await client.chat.completions.create(params);
    const b = await client.chat.completions.create(params);
    assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
    assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
    assert.equal(a.usage.completion_tokens, 24);
  });

  test('tools and earlier tool results render exactly as `deepinfer encode`', async () => {
    const request = {
      messages: [
        { role: 'system', content: 'You answer questions.' },
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_0', content: '{"temp": 3}' },
      ],
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }],
    };
    const file = path.join(tmp, 'request.json');
    writeFileSync(file, JSON.stringify(request));
    const expected = execFileSync(cli, ['encode', '--model', modelDir, '--ids', file]).toString().trim().split(' ').map(Number);
    const tokenized = await post('/tokenize', request);
    assert.equal(tokenized.status, 200, JSON.stringify(tokenized.body));
    assert.deepEqual(tokenized.body.tokens, expected);
    const r = await client.chat.completions.create({ model: 'kjv', ...request, max_tokens: 4, temperature: 0 });
    assert.equal(r.usage.prompt_tokens, expected.length);
  });

  // Guided decoding forces the model to write a DSML tool call; the server parses it.
  const toolText = '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n' +
    '<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>';
  const toolRequest = {
    model: 'kjv',
    messages: [{ role: 'user', content: 'Weather in Oslo?' }],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    max_tokens: 400,
    temperature: 0,
    structured_outputs: { regex: toolText.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') },
  };

  test('a DSML tool call in the output comes back as tool_calls', async () => {
    const r = await client.chat.completions.create(toolRequest);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].type, 'function');
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { city: 'Oslo' });
  });

  test('the same tool call streamed as a tool_calls delta', async () => {
    const s = await collectChat(await client.chat.completions.create({ ...toolRequest, stream: true }));
    assert.equal(s.finish, 'tool_calls');
    assert.equal(s.toolCalls.length, 1);
    assert.equal(s.toolCalls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(s.toolCalls[0].function.arguments), { city: 'Oslo' });
    assert.equal(s.content.trim(), '');
  });

  const noArgs = (name) => ({ type: 'function', function: { name, parameters: { type: 'object', properties: {} } } });

  test('tool_choice naming a function makes the reply a call of it', async () => {
    for (const stream of [false, true]) {
      const params = {
        model: 'kjv', messages: [{ role: 'user', content: 'What time is it?' }], max_tokens: 200, temperature: 0,
        tools: [noArgs('get_date'), noArgs('get_time')], tool_choice: { type: 'function', function: { name: 'get_time' } },
      };
      const calls = stream
        ? (await collectChat(await client.chat.completions.create({ ...params, stream: true }))).toolCalls
        : (await client.chat.completions.create(params)).choices[0].message.tool_calls;
      assert.equal(calls.length, 1);
      assert.equal(calls[0].function.name, 'get_time');
      assert.deepEqual(JSON.parse(calls[0].function.arguments), {});
    }
  });

  test('tool_choice required: the reply calls declared functions only', async () => {
    const r = await client.chat.completions.create({
      model: 'kjv', messages: [{ role: 'user', content: 'Date or time?' }], max_tokens: 300, temperature: 0,
      tools: [noArgs('get_date'), noArgs('get_time')], tool_choice: 'required',
    });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.ok(r.choices[0].message.tool_calls.length >= 1);
    for (const call of r.choices[0].message.tool_calls) assert.ok(['get_date', 'get_time'].includes(call.function.name));
  });

  test('response_format json_schema output validates', async () => {
    const schema = {
      type: 'object',
      properties: { book: { type: 'string', enum: ['Genesis', 'Exodus', 'Psalms'] }, chapter: { type: 'integer', minimum: 1, maximum: 150 } },
      required: ['book', 'chapter'],
      additionalProperties: false,
    };
    for (const stream of [false, true]) {
      const params = {
        model: 'kjv', messages: [{ role: 'user', content: 'Name a chapter.' }], max_tokens: 60, temperature: 0.8, seed: 3,
        response_format: { type: 'json_schema', json_schema: { name: 'chapter', schema, strict: true } },
        structured_outputs: { disable_any_whitespace: true },  // vLLM's option: a tiny model pads with blanks
      };
      const text = stream
        ? (await collectChat(await client.chat.completions.create({ ...params, stream: true }))).content
        : (await client.chat.completions.create(params)).choices[0].message.content;
      const value = JSON.parse(text);
      assert.deepEqual(Object.keys(value).sort(), ['book', 'chapter']);
      assert.ok(['Genesis', 'Exodus', 'Psalms'].includes(value.book));
      assert.ok(Number.isInteger(value.chapter) && value.chapter >= 1 && value.chapter <= 150);
    }
  });
});

describe('completions', () => {
  test('text, token ids and a list of prompts; usage', async () => {
    const r = await client.completions.create({ model: 'kjv', prompt: 'In the beginning', max_tokens: 10, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 10);
    const ids = (await post('/tokenize', { prompt: 'In the beginning' })).body.tokens;
    assert.equal(r.usage.prompt_tokens, ids.length);
    const byIds = await client.completions.create({ model: 'kjv', prompt: ids, max_tokens: 10, temperature: 0 });
    assert.equal(byIds.choices[0].text, r.choices[0].text);
    const many = await client.completions.create({ model: 'kjv', prompt: ['In the beginning', 'The LORD is'], max_tokens: 5, temperature: 0, n: 2 });
    assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2, 3]);
    assert.equal(many.choices[0].text, many.choices[1].text);  // greedy: both completions alike
    assert.equal(many.usage.completion_tokens, 20);
  });

  test('streaming, echo and logprobs', async () => {
    const params = { model: 'kjv', prompt: 'The LORD is my shepherd;', max_tokens: 8, temperature: 0 };
    const whole = await client.completions.create({ ...params, logprobs: 3 });
    assert.equal(whole.choices[0].logprobs.tokens.length, 8);
    assert.equal(whole.choices[0].logprobs.top_logprobs[0] && Object.keys(whole.choices[0].logprobs.top_logprobs[0]).length <= 3, true);
    let text = '';
    let finish = null;
    for await (const chunk of await client.completions.create({ ...params, stream: true })) {
      text += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'length');
    const echoed = await client.completions.create({ ...params, echo: true });
    assert.equal(echoed.choices[0].text, params.prompt + whole.choices[0].text);
  });
});

describe('other endpoints', () => {
  test('models, health, tokenize round trip', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['kjv']);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    const ids = (await post('/tokenize', { prompt: 'and the earth' })).body.tokens;
    const back = await post('/detokenize', { tokens: ids });
    assert.match(back.body.prompt, /and the earth$/);
  });
});

describe('errors in OpenAI shape', () => {
  const ok = { model: 'kjv', messages, max_tokens: 4 };
  const cases = [
    ['malformed JSON', '{"messages": [', 400, null, true],
    ['a wrong type', { ...ok, temperature: 'hot' }, 400, 'temperature'],
    ['out of range', { ...ok, temperature: 5 }, 400, 'temperature'],
    ['unknown parameter', { ...ok, temprature: 1 }, 400, 'temprature'],
    ['no messages', { model: 'kjv', max_tokens: 4 }, 400, 'messages'],
    ['a bad role', { ...ok, messages: [{ role: 'robot', content: 'x' }] }, 400, 'messages[0].role'],
    ['n out of range', { ...ok, n: 0 }, 400, 'n'],
    ['top_logprobs without logprobs', { ...ok, top_logprobs: 2 }, 400, 'top_logprobs'],
    ['tool_choice naming no declared tool',
      { ...ok, tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } },
      400, 'tool_choice'],
    ['a bad function name', { ...ok, tools: [{ type: 'function', function: { name: 'a b' } }] }, 400, 'tools[0].function.name'],
    ['a prompt over the context', { ...ok, max_tokens: 100000 }, 400, 'messages', false, 'context_length_exceeded'],
    ['an unknown model', { ...ok, model: 'gpt-9' }, 404, 'model', false, 'model_not_found'],
    ['an unsupported schema keyword',
      { ...ok, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { if: { type: 'string' }, then: { minLength: 1 } } } } },
      400, 'response_format.json_schema.schema', false, /^unsupported_schema_keyword:if$/],
    ['a number past double range (found by fuzz_serve_request)', '{"messages": [], "temperature": 9e999999}', 400, null, true],
    ['nesting too deep', `{"messages": ${'['.repeat(200)}${']'.repeat(200)}}`, 400, null, true],
  ];
  for (const [name, body, status, param, raw = false, code] of cases) {
    test(name, async () => {
      const r = await post('/v1/chat/completions', body, { raw });
      assert.equal(r.status, status, JSON.stringify(r.body));
      assert.equal(typeof r.body.error.message, 'string');
      assert.equal(typeof r.body.error.type, 'string');
      assert.ok('param' in r.body.error && 'code' in r.body.error);
      if (param) assert.equal(r.body.error.param, param);
      if (code instanceof RegExp) assert.match(r.body.error.code, code);
      else if (code) assert.equal(r.body.error.code, code);
    });
  }

  test('401 without the key or with a wrong one (the client raises AuthenticationError)', async () => {
    assert.equal((await post('/v1/chat/completions', ok, { key: null })).status, 401);
    const wrong = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(wrong.chat.completions.create(ok), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  });

  test('a body over --max-request-bytes gets 413', async () => {
    const r = await post('/v1/completions', { model: 'kjv', prompt: 'x'.repeat(1_200_000) });
    assert.equal(r.status, 413);
    assert.equal(typeof r.body.error.message, 'string');
  });

  test('an unknown route gets 404 in the same shape', async () => {
    const r = await post('/v1/embeddings', { input: 'x' });
    assert.equal(r.status, 404);
    assert.equal(typeof r.body.error.message, 'string');
  });
});

describe('disconnects', () => {
  test('a client that goes away mid-stream frees its state at once', async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'kjv', messages, max_tokens: 3000, temperature: 1, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const _ of stream) {
        if (++chunks === 3) controller.abort();
      }
    } catch (e) {
      assert.equal(e.name, 'APIUserAbortError');
    }
    // openai 6 ends the iteration quietly on abort, after the chunks it had already read (more of
    // them on a reused keep-alive connection); the stream must not have run to its end.
    assert.ok(chunks >= 3 && chunks < 100, `${chunks} chunks after abort()`);
    const s = await waitIdle(server.url, 5000);
    assert.ok(s['deepinfer:request_success_total{finished_reason="abort"}'] >= 1);
  });

  test('non-streaming requests abandoned before they finish are aborted too', async () => {
    const pending = [];
    for (let i = 0; i < 4; i++) {
      const c = new AbortController();
      pending.push(client.completions.create({ model: 'kjv', prompt: 'And God said', max_tokens: 3000, ignore_eos: true }, { signal: c.signal }).catch(() => 'aborted'));
      setTimeout(() => c.abort(), 200);
    }
    assert.deepEqual(await Promise.all(pending), ['aborted', 'aborted', 'aborted', 'aborted']);
    await waitIdle(server.url, 5000);
    const s = await scrape(server.url);
    assert.equal(s['deepinfer:kv_cache_blocks_in_use'], 0);
  });
});
