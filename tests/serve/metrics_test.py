#!/usr/bin/env python3
"""GET /metrics parsed by prometheus_client's exposition-format parser (Debian's
python3-prometheus-client), checked against the traffic this test sends.

Usage: metrics_test.py DEEPINFER_CLI MODEL_DIR   (ctest: serve_metrics)
"""
import json
import re
import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def start(cli, model):
    proc = subprocess.Popen([cli, "serve", "--model", model, "--port", "0", "--served-model-name", "kjv"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    log = ""
    while time.time() < deadline:
        line = proc.stderr.readline()
        log += line
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, f"http://127.0.0.1:{m.group(1)}"
        if proc.poll() is not None:
            break
    raise SystemExit(f"server did not start:\n{log}")


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def scrape(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
        text = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    return families


def value(families, name, sample_name=None, **labels):
    fam = families[name]
    for s in fam.samples:
        if (sample_name is None or s.name == sample_name) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no sample {sample_name or name} {labels} in {fam.samples}")


def main():
    cli, model = sys.argv[1], sys.argv[2]
    proc, url = start(cli, model)
    failures = []

    def check(cond, what):
        print(("ok     " if cond else "FAILED ") + what)
        if not cond:
            failures.append(what)

    try:
        before = scrape(url)
        for name, kind in [("deepinfer:num_requests_running", "gauge"), ("deepinfer:num_requests_waiting", "gauge"),
                           ("deepinfer:kv_cache_usage_perc", "gauge"), ("deepinfer:prompt_tokens", "counter"),
                           ("deepinfer:generation_tokens", "counter"), ("deepinfer:prefix_cache_queries", "counter"),
                           ("deepinfer:prefix_cache_hits", "counter"), ("deepinfer:num_preemptions", "counter"),
                           ("deepinfer:request_success", "counter"),
                           ("deepinfer:time_to_first_token_seconds", "histogram"),
                           ("deepinfer:inter_token_latency_seconds", "histogram"),
                           ("deepinfer:e2e_request_latency_seconds", "histogram")]:
            check(name in before and before[name].type == kind, f"{name} is a {kind}")
        check(value(before, "deepinfer:kv_cache_usage_perc", model_name="kjv") == 0, "KV usage starts at 0")

        usage = {"prompt": 0, "completion": 0}
        prompt = "In the beginning God created the heaven and the earth. " * 12  # > one 64-token block
        for i in range(3):  # the same long prompt: the second and third hit the prefix cache
            r = post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 6 + i, "temperature": 0})
            usage["prompt"] += r["usage"]["prompt_tokens"]
            usage["completion"] += r["usage"]["completion_tokens"]
        r = post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})
        usage["prompt"] += r["usage"]["prompt_tokens"]
        usage["completion"] += r["usage"]["completion_tokens"]

        after = scrape(url)
        check(value(after, "deepinfer:prompt_tokens", "deepinfer:prompt_tokens_total") == usage["prompt"],
              f"prompt_tokens_total equals the usage sum {usage['prompt']}")
        check(value(after, "deepinfer:generation_tokens", "deepinfer:generation_tokens_total") == usage["completion"],
              f"generation_tokens_total equals the usage sum {usage['completion']}")
        check(value(after, "deepinfer:request_success", "deepinfer:request_success_total", finished_reason="length") == 4,
              "4 requests finished by length")
        check(value(after, "deepinfer:time_to_first_token_seconds", "deepinfer:time_to_first_token_seconds_count") == 4,
              "4 TTFT observations")
        check(value(after, "deepinfer:inter_token_latency_seconds", "deepinfer:inter_token_latency_seconds_count")
              == usage["completion"] - 4, "one inter-token latency per token after the first")
        inf = value(after, "deepinfer:e2e_request_latency_seconds", "deepinfer:e2e_request_latency_seconds_bucket", le="+Inf")
        check(inf == 4, "e2e histogram +Inf bucket holds every request")
        check(value(after, "deepinfer:prefix_cache_hits", "deepinfer:prefix_cache_hits_total") >= 2 * 64,
              "the repeated prompt hit the prefix cache")
        check(value(after, "deepinfer:kv_cache_usage_perc", model_name="kjv") == 0, "KV usage back to 0 when idle")
        check(value(after, "deepinfer:http_responses", "deepinfer:http_responses_total", status="200") >= 4,
              "200 responses counted")
    finally:
        proc.terminate()
        code = proc.wait(timeout=60)
    check(code == 0, f"SIGTERM exits 0 (got {code})")
    if failures:
        raise SystemExit(f"{len(failures)} metrics checks failed")


if __name__ == "__main__":
    main()
