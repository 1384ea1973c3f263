#!/usr/bin/env node
// Load test for `deepinfer serve`, loopback only and bounded in count and time: N concurrent
// streaming chat requests of which a random fraction disconnect mid-stream. Checks 0 crashes,
// 0 leaked blocks or slots (from /metrics once idle), and that every completed stream is
// well-formed (a role chunk, content, one finish_reason, a usage chunk, [DONE]). Prints one JSON
// summary line: requests/s, TTFT p50/p99 (client-side), completed/aborted counts.
//
//   node tests/serve/load_test.mjs [--requests 1000] [--disconnect 0.3] [--max-tokens 24]
//        [--time-limit 600] [--seed 1] [--data-parallel-size 1]
//        [--url http://127.0.0.1:PORT]   (default: starts its own server, with that many data-parallel ranks)
import http from 'node:http';
import { parseArgs } from 'node:util';
import { scrape, startServer, waitIdle } from './server.mjs';

const { values: opts } = parseArgs({
  options: {
    requests: { type: 'string', default: '1000' },
    disconnect: { type: 'string', default: '0.3' },
    'max-tokens': { type: 'string', default: '24' },
    'time-limit': { type: 'string', default: '600' },
    seed: { type: 'string', default: '1' },
    'data-parallel-size': { type: 'string', default: '1' },
    url: { type: 'string' },
  },
});
const N = Number(opts.requests);
const P_DISCONNECT = Number(opts.disconnect);
const MAX_TOKENS = Number(opts['max-tokens']);
const TIME_LIMIT_MS = Number(opts['time-limit']) * 1000;
if (!(N >= 1 && N <= 5000)) throw new Error('--requests must be in [1, 5000]');
if (opts.url && !/^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$/.test(opts.url))
  throw new Error('--url must be a loopback address (this test never sends traffic elsewhere)');

// A small deterministic PRNG (mulberry32) so a run can be repeated with --seed.
let state = Number(opts.seed) >>> 0;
const random = () => {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

const server = opts.url ? null
  : await startServer(['--max-num-seqs', '64', '--data-parallel-size', opts['data-parallel-size']]);
const url = opts.url ?? server.url;
const deadline = Date.now() + TIME_LIMIT_MS;
const verses = ['In the beginning', 'The LORD is my shepherd;', 'And God said,', 'Blessed are the meek:', 'Jesus wept.'];

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const connectRetries = [];

// One POST over a connection of its own (as 1,000 independent clients would open), resolving with
// the response once its headers arrive. The client is node:http rather than fetch: Node 20's
// bundled undici (6.24) strands requests under this load: with a thousand connections open at once
// some connect but never send their request, the server closes them as idle after its keep-alive
// timeout, and undici then keeps those requests pending with no socket, forever (pool stats:
// pending 605, connected 0; seen in CI and here, on the quarter of seeds that hit it).
function post(path, body, signal) {
  return new Promise((resolve, reject) => {
    const request = http.request(`${url}${path}`, {
      method: 'POST', agent: false, signal,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
    }, resolve);
    request.on('error', reject);
    request.end(body);
  });
}

async function readAll(res) {
  let text = '';
  res.setEncoding('utf8');
  for await (const chunk of res) text += chunk;
  return text;
}

async function one(i) {
  const disconnectAfter = random() < P_DISCONNECT ? 1 + Math.floor(random() * 5) : Infinity;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), Math.max(1, deadline - Date.now()));
  const start = performance.now();
  let ttft = null;
  const body = JSON.stringify({
    messages: [{ role: 'user', content: `${verses[i % verses.length]} (${i})` }],
    max_tokens: MAX_TOKENS, temperature: 1, seed: i, stream: true, stream_options: { include_usage: true },
  });
  try {
    // A connection that fails before any response is retried with a growing back-off, as the
    // openai client does (it stops after 2; here 4, since a burst of a thousand connects on two
    // shared cores can see the server close a connection whose request came late, see
    // http_server.cpp); the retries are counted in the summary. A stream that breaks later is not
    // retried.
    let res;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await post('/v1/chat/completions', body, controller.signal);
        break;
      } catch (e) {
        if (controller.signal.aborted || attempt === 4) throw e;
        connectRetries.push(`${e.code ?? e}`);
        await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
      }
    }
    if (res.statusCode !== 200) return { kind: 'error', why: `status ${res.statusCode}: ${await readAll(res)}` };
    res.setEncoding('utf8');
    let buffer = '';
    const events = [];
    let chunks = 0;
    for await (const text of res) {
      buffer += text;
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (!event.startsWith('data: ')) return { kind: 'malformed', why: `not an SSE data line: ${event.slice(0, 80)}` };
        events.push(event.slice(6));
        if (ttft === null && event.includes('"content":"') && !event.includes('"content":""')) ttft = performance.now() - start;
        if (++chunks >= disconnectAfter) {
          controller.abort();
          return { kind: 'disconnected' };
        }
      }
    }
    if (!res.complete) return { kind: 'error', why: 'the stream ended before its last chunk' };
    // Well-formed: JSON chunks, one role chunk first, one finish_reason, usage, then [DONE].
    if (events.at(-1) !== '[DONE]') return { kind: 'malformed', why: 'no [DONE]' };
    const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
    if (parsed[0]?.choices[0]?.delta?.role !== 'assistant') return { kind: 'malformed', why: 'no role chunk first' };
    const finishes = parsed.flatMap((c) => c.choices).filter((c) => c.finish_reason).length;
    if (finishes !== 1) return { kind: 'malformed', why: `${finishes} finish_reason chunks` };
    const usage = parsed.at(-1).usage;
    if (!usage || parsed.at(-1).choices.length !== 0) return { kind: 'malformed', why: 'no final usage chunk' };
    if (usage.completion_tokens < 1 || usage.completion_tokens > MAX_TOKENS)
      return { kind: 'malformed', why: `completion_tokens ${usage.completion_tokens}` };
    return { kind: 'completed', ttft, tokens: usage.completion_tokens };
  } catch (e) {
    if (controller.signal.aborted && Date.now() >= deadline) return { kind: 'error', why: 'time limit' };
    if (controller.signal.aborted) return { kind: 'disconnected' };
    return { kind: 'error', why: `${e} (${e.code ?? ''})` };
  } finally {
    clearTimeout(timer);
  }
}

const t0 = performance.now();
const results = await Promise.all(Array.from({ length: N }, (_, i) => one(i)));
const seconds = (performance.now() - t0) / 1000;
const count = (k) => results.filter((r) => r.kind === k).length;
const ttfts = results.filter((r) => r.kind === 'completed' && r.ttft !== null).map((r) => r.ttft).sort((a, b) => a - b);
const problems = results.filter((r) => r.kind === 'error' || r.kind === 'malformed');

let idle;
let leakError = null;
try {
  idle = await waitIdle(url, 30_000);
} catch (e) {
  leakError = String(e);
}
const health = (await fetch(`${url}/health`).catch(() => ({ status: 0 }))).status;
const metrics = await scrape(url).catch(() => ({}));
let exit = null;
if (server) exit = await server.stop();

const summary = {
  requests: N,
  completed: count('completed'),
  disconnected: count('disconnected'),
  connect_retries: connectRetries.length,
  connect_retry_causes: [...new Set(connectRetries)].slice(0, 3),
  errors: count('error'),
  malformed: count('malformed'),
  seconds: Number(seconds.toFixed(2)),
  requests_per_s: Number((N / seconds).toFixed(1)),
  ttft_p50_ms: Number(percentile(ttfts, 50)?.toFixed(1)),
  ttft_p99_ms: Number(percentile(ttfts, 99)?.toFixed(1)),
  generated_tokens: metrics['deepinfer:generation_tokens_total'],
  aborted_by_server: metrics['deepinfer:request_success_total{finished_reason="abort"}'],
  leaked_blocks: idle ? idle['deepinfer:kv_cache_blocks_in_use'] : null,
  leaked_slots: idle ? idle['deepinfer:state_slots_in_use'] : null,
  health_after: health,
  server_exit: exit,
};
console.log(JSON.stringify(summary));
const failures = [];
if (problems.length) failures.push(`${problems.length} bad streams, e.g. ${problems[0].why}`);
if (leakError) failures.push(leakError);
if (health !== 200) failures.push(`server unhealthy after the run (${health})`);
if (exit && (exit.code !== 0 || exit.signal)) failures.push(`server exit ${JSON.stringify(exit)}`);
if (summary.completed + summary.disconnected !== N) failures.push('requests lost');
console.log(`${failures.length ? 0 : 1} passed, ${failures.length ? 1 : 0} failed`);
if (failures.length) {
  console.error(failures.join('\n'));
  process.exit(1);
}
