#!/usr/bin/env python3
"""The table of tools/gpu/bench.sh: ours next to the floor, llama.cpp and transformers.

usage: bench_table.py WORK   (WORK/deepinfer: our JSON and logs; WORK/peer/results.json: the peers)
Speed-ups are peer time / our time: above 1 means ours is faster. Standard library only.
"""
from __future__ import annotations

import csv
import json
import os
import sys
from collections import defaultdict


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception:
        return None


def fmt_ms(s):
    return "-" if s is None else (f"{s * 1e3:.2f}" if s < 1 else f"{s * 1e3:.0f}")


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"


def main():
    work = sys.argv[1]
    d = os.path.join(work, "deepinfer")
    ours = load(os.path.join(d, "ours.json")) or {}
    peer = load(os.path.join(work, "peer", "results.json")) or {}
    L = []
    gpu = open(os.path.join(d, "gpu.txt")).read().strip().replace("\n", "; ") if os.path.exists(os.path.join(d, "gpu.txt")) else "?"
    L.append("# deepinfer bench: V4-Flash-shaped, 4 layers (CSA, HCA, CSA, HCA), random weights, one device call")
    L.append("")
    L.append(f"- GPU: {gpu}")
    if ours:
        L.append(f"- device: {ours.get('device')}")
        L.append(f"- ceilings (same run): copy {ours.get('copy_bytes_per_s', 0) / 1e12:.2f} TB/s ({ours.get('copy_how')}); "
                 f"GEMM {ours.get('gemm_flops_per_s', 0) / 1e12:.0f} TFLOP/s ({ours.get('gemm_how')})")
        ctx = ours.get("context") or {}
        if ctx:
            L.append(f"- decode context: one sequence prefilled with {ctx.get('tokens')} tokens "
                     f"({ctx.get('prefill_s', 0):.2f} s), slot + blocks copied to {ctx.get('copied_to')} others "
                     "(identical prompts give identical state); top-k ties: " + str(ours.get("ties")))
    else:
        L.append("- ours: NO RESULT (see deepinfer/ours.txt in logs.tar.gz)")
    meta = peer.get("meta") or {}
    if meta:
        L.append(f"- llama.cpp {meta.get('llama_commit', '?')}, GGUF {meta.get('gguf_gib', '?')} GiB "
                 f"({meta.get('gguf_types', '?')}); source checkpoint {meta.get('src_gib', '?')} GiB")
    hf = peer.get("hf") or {}
    if hf.get("ok"):
        L.append(f"- transformers {hf.get('transformers')} / torch {hf.get('torch')}, eager bf16, same config, "
                 f"its own random init; prefill {hf.get('prompt_tokens')} tokens then batch-1 decode (context ~2K); "
                 f"measured {meta.get('hf_when', '?')}")
    elif hf:
        L.append(f"- transformers FAILED: {str(hf.get('error'))[:300]}")
    L.append("")

    rows = {(r.get("kind"), r.get("batch") or r.get("tokens")): r for r in ours.get("rows", [])}
    bb = {}
    for r in peer.get("batched_bench") or []:
        if r.get("tg"):
            bb[(r.get("pp"), r.get("pl"))] = r.get("t_tg", 0) / r["tg"]
    lb_pp, lb_tg = {}, {}
    for r in peer.get("llama_bench") or []:
        if r.get("n_prompt") and not r.get("n_gen") and r.get("avg_ts"):
            lb_pp[r["n_prompt"]] = max(lb_pp.get(r["n_prompt"], 0), r["avg_ts"])
        elif r.get("n_gen") and r.get("avg_ts"):
            lb_tg[r.get("n_depth")] = 1.0 / r["avg_ts"]
    hf_dec = None
    for v in (hf.get("decode") or {}).values():
        if isinstance(v, dict) and "ms_per_token" in v:
            hf_dec = min(hf_dec or 1e9, v["ms_per_token"] / 1e3)

    L.append("| what | ours | floor | ours/floor | llama.cpp | transformers | speed-up vs llama.cpp | vs transformers |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for B in (1, 8, 32, 128):
        r = rows.get(("decode", B))
        t = r.get("step_s") if r else None
        f = r.get("floor_s") if r else None
        # Batch 1: llama-bench tg at depth 4096 (batched-bench sizes its context for 128 x 4K
        # sequences, which slows its single-sequence decode; that number is printed below).
        ll = lb_tg.get(4096) if B == 1 and lb_tg.get(4096) else bb.get((4096, B))
        hft = hf_dec if B == 1 else None
        L.append(f"| decode B={B}, 4K ctx, ms/step | {fmt_ms(t)} | {fmt_ms(f)} | {ratio(t, f)} | {fmt_ms(ll)} "
                 f"| {fmt_ms(hft)} | {ratio(ll, t)} | {ratio(hft, t)} |")
    for P in (2048, 8192):
        r = rows.get(("prefill", P))
        ts = r.get("tok_s") if r else None
        f = r.get("floor_s") if r else None
        fl_ts = P / f if f else None
        t = r.get("run_s") if r else None
        ll = lb_pp.get(P)
        hft = hf.get("prefill_tok_s") if hf.get("ok") and hf.get("prompt_tokens") == P else None
        tx = lambda v: "-" if not v else f"{v:,.0f}"
        L.append(f"| prefill {P}, tok/s | {tx(ts)} | {tx(fl_ts)} | {ratio(t, f)} | {tx(ll)} | {tx(hft)} "
                 f"| {ratio(ts, ll) if ts and ll else '-'} | {ratio(ts, hft) if ts and hft else '-'} |")
    L.append("")
    if lb_tg:
        L.append("llama.cpp decode: B=1 is llama-bench tg (" + ", ".join(f"depth {k}: {v * 1e3:.2f} ms/token" for k, v in sorted(lb_tg.items()))
                 + "); B=8/32/128 are llama-batched-bench (4096-token prompt per sequence, 16 steps"
                 + (f"; its B=1 gives {bb[(4096, 1)] * 1e3:.2f} ms with the context sized for 128 sequences" if (4096, 1) in bb else "")
                 + ").")
    L.append("Floor = max(bytes touched / copy bandwidth, FLOPs / bf16 GEMM rate), both measured in the same run; "
             "speed-up = peer time / our time (above 1: ours faster).")
    L.append("")
    for r in ours.get("rows", []):
        L.append(f"- {r.get('kind')} {r.get('batch') or r.get('tokens')}: weights {r.get('weight_bytes', 0) / 1e9:.2f} GB, "
                 f"state {r.get('state_bytes', 0) / 1e6:.1f} MB, {r.get('flops', 0) / 1e12:.2f} TFLOP, "
                 f"{r.get('experts_per_layer', 0):.1f} experts/layer; floor bytes {fmt_ms(r.get('floor_bytes_s'))} ms, "
                 f"flops {fmt_ms(r.get('floor_flops_s'))} ms")
    L.append("")

    # CUDA graphs: the same decode steps with and without them (ours_eager.json: --enforce-eager).
    eager = load(os.path.join(d, "ours_eager.json")) or {}
    erows = {(r.get("kind"), r.get("batch")): r for r in eager.get("rows", [])}
    if erows:
        L.append("| decode, 4K ctx | CUDA graphs, ms/step | steps replayed | eager, ms/step | eager / graphs |")
        L.append("|---|---:|---:|---:|---:|")
        for B in (1, 8, 32, 128):
            g, e = rows.get(("decode", B)) or {}, erows.get(("decode", B)) or {}
            L.append(f"| B={B} | {fmt_ms(g.get('step_s'))} | {g.get('cuda_graph_replays', '-')} "
                     f"| {fmt_ms(e.get('step_s'))} | {ratio(e.get('step_s'), g.get('step_s'))} |")
        L.append("")

    # kjv and the fixture, both devices.
    L.append("| model | what | cpu | cuda | cuda / cpu |")
    L.append("|---|---|---:|---:|---:|")
    for name, label in (("kjv", "kjv-tiny-v4"), ("tiny", "v4_tiny_a")):
        cpu, gpu_ = load(os.path.join(d, f"{name}_cpu.json")), load(os.path.join(d, f"{name}_cuda.json"))
        if not cpu and not gpu_:
            continue
        by = lambda j: {(r.get("kind"), r.get("batch") or r.get("tokens")): r for r in (j or {}).get("rows", [])}
        c, g = by(cpu), by(gpu_)
        for key in sorted(set(c) | set(g), key=lambda k: (k[0] != "decode", k[1])):
            a, b = (c.get(key) or {}).get("tok_s"), (g.get(key) or {}).get("tok_s")
            what = f"decode B={key[1]}, tok/s" if key[0] == "decode" else f"prefill {key[1]}, tok/s"
            L.append(f"| {label} | {what} | {a or 0:,.0f} | {b or 0:,.0f} | {ratio(b, a)} |")
        same = (cpu or {}).get("greedy_ids") == (gpu_ or {}).get("greedy_ids") and (cpu or {}).get("greedy_ids")
        L.append(f"| {label} | greedy ids cpu == cuda ({len((cpu or {}).get('greedy_ids') or [])} tokens) "
                 f"| | | {'yes' if same else 'NO'} |")
    L.append("")

    # ncu: kernel time per profiled decode step (launch order: the first half is batch 1, the second batch 32).
    p = os.path.join(d, "ncu.csv")
    if os.path.exists(p):
        recs = []
        with open(p, errors="replace") as f:
            lines = [ln for ln in f if ln.startswith('"')]
        for r in csv.DictReader(lines):
            if r.get("Metric Name") == "gpu__time_duration.sum":
                try:
                    v = float(r["Metric Value"].replace(",", ""))
                except ValueError:
                    continue
                unit = r.get("Metric Unit", "ns")
                v *= {"ns": 1e-9, "nsecond": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3}.get(unit, 1e-9)
                recs.append((r.get("Kernel Name", "?"), v))
        if recs:
            half = len(recs) // 2
            for label, part, B in (("batch 1", recs[:half], 1), ("batch 32", recs[half:], 32)):
                tot = defaultdict(float)
                cnt = defaultdict(int)
                for n, v in part:
                    tot[n] += v
                    cnt[n] += 1
                s = sum(tot.values())
                step = (rows.get(("decode", B)) or {}).get("step_s")
                L.append(f"ncu, one decode step at {label}: {len(part)} kernels, {s * 1e3:.2f} ms of kernel time"
                         + (f" of a {step * 1e3:.2f} ms step (the rest: launch gaps, host work, syncs)" if step else ""))
                L.append("")
                L.append("| kernel | launches | ms | share |")
                L.append("|---|---:|---:|---:|")
                for n, v in sorted(tot.items(), key=lambda kv: -kv[1])[:10]:
                    L.append(f"| {n} | {cnt[n]} | {v * 1e3:.3f} | {100 * v / s:.1f}% |")
                L.append("")
    print("\n".join(L))


if __name__ == "__main__":
    main()
