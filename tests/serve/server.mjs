// Starts `deepinfer serve` on a free loopback port for a test and stops it with SIGTERM.
// DEEPINFER_CLI and DEEPINFER_MODEL (set by ctest) name the binary and the model folder.
import { spawn } from 'node:child_process';

export const cli = process.env.DEEPINFER_CLI ?? 'build/tools/deepinfer';
export const modelDir = process.env.DEEPINFER_MODEL ?? 'models/kjv-tiny-v4';

export async function startServer(extraArgs = []) {
  const child = spawn(cli, ['serve', '--model', modelDir, '--port', '0', ...extraArgs], {
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in 60 s:\n${log}`)), 60_000);
    child.stderr.on('data', (chunk) => {
      log += chunk.toString();
      const m = log.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${log}`));
    });
  });
  child.stderr.on('data', (chunk) => {
    log += chunk.toString();
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    log: () => log,
    // SIGTERM, then the exit status (graceful shutdown must exit 0).
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

// Prometheus text -> {name{labels}: value} for the samples (enough for the assertions here; the
// full exposition-format parse is tests/serve/metrics_test.py with prometheus_client).
export async function scrape(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const samples = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    samples[line.slice(0, space).replace(/\{model_name="[^"]*",?/, '{').replace('{}', '')] = Number(line.slice(space + 1));
  }
  return samples;
}

// Polls until the server holds no request state (all blocks and slots back), or fails.
export async function waitIdle(url, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  let s;
  while (Date.now() < end) {
    s = await scrape(url);
    if (s['deepinfer:num_requests_running'] === 0 && s['deepinfer:num_requests_waiting'] === 0 &&
        s['deepinfer:kv_cache_blocks_in_use'] === 0 && s['deepinfer:state_slots_in_use'] === 0)
      return s;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`server not idle after ${timeoutMs} ms: ${JSON.stringify(s)}`);
}
