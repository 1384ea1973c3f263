#!/usr/bin/env node
// Load test for `deepinfer serve`, loopback only and bounded in count and time: N concurrent
// streaming chat requests of which a random fraction disconnect mid-stream. Checks 0 crashes,
// 0 leaked blocks or slots (from /metrics once idle), and that every completed stream is
// well-formed (a role chunk, content, one finish_reason, a usage chunk, [DONE]). Prints one JSON
// summary line: requests/s, TTFT p50/p99 (client-side), completed/aborted counts.
//
//   node tests/serve/load_test.mjs [--requests 1000] [--disconnect 0.3] [--max-tokens 24]
//        [--time-limit 600] [--seed 1] [--url http://127.0.0.1:PORT]   (default: starts its own server)
import { parseArgs } from 'node:util';
import { scrape, startServer, waitIdle } from './server.mjs';

const { values: opts } = parseArgs({
  options: {
    requests: { type: 'string', default: '1000' },
    disconnect: { type: 'string', default: '0.3' },
    'max-tokens': { type: 'string', default: '24' },
    'time-limit': { type: 'string', default: '600' },
    seed: { type: 'string', default: '1' },
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

const server = opts.url ? null : await startServer(['--max-num-seqs', '64']);
const url = opts.url ?? server.url;
const deadline = Date.now() + TIME_LIMIT_MS;
const verses = ['In the beginning', 'The LORD is my shepherd;', 'And God said,', 'Blessed are the meek:', 'Jesus wept.'];

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const connectRetries = [];

async function one(i) {
  const disconnectAfter = random() < P_DISCONNECT ? 1 + Math.floor(random() * 5) : Infinity;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), Math.max(1, deadline - Date.now()));
  const start = performance.now();
  let ttft = null;
  const body = {
    messages: [{ role: 'user', content: `${verses[i % verses.length]} (${i})` }],
    max_tokens: MAX_TOKENS, temperature: 1, seed: i, stream: true, stream_options: { include_usage: true },
  };
  try {
    // A connection that fails before any response is retried, as the openai client does (twice by
    // default); the retries are counted in the summary. A stream that breaks later is not retried.
    let res;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: controller.signal,
        });
        break;
      } catch (e) {
        if (controller.signal.aborted || attempt === 2) throw e;
        connectRetries.push(`${e.cause?.code ?? e}`);
        await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
      }
    }
    if (res.status !== 200) return { kind: 'error', why: `status ${res.status}: ${await res.text()}` };
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    const events = [];
    let chunks = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
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
    return { kind: 'error', why: `${e} (${e.cause?.code ?? e.cause ?? ''})` };
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
