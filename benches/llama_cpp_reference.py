#!/usr/bin/env python3
"""The speed anchor for `incharacter bench local`: llama.cpp (llama-cpp-python) on the same GGUF,
the same prompt length and the same number of decoded tokens, 2 threads, CPU only.
Usage: python3 benches/llama_cpp_reference.py PATH.gguf [PROMPT_TOKENS=245] [DECODE=128] [RUNS=3] [--json]
With --json the report is one JSON object on stdout (the shape of `incharacter bench local --json`, for
`incharacter bench ratio`) and the lines along the way go to stderr."""
import json, statistics, sys, time
from llama_cpp import Llama

as_json = "--json" in sys.argv
args = [a for a in sys.argv[1:] if a != "--json"]
log = sys.stderr if as_json else sys.stdout
path = args[0]
n_prompt = int(args[1]) if len(args) > 1 else 245
n_decode = int(args[2]) if len(args) > 2 else 128
runs = int(args[3]) if len(args) > 3 else 3
t = time.perf_counter()
llm = Llama(model_path=path, n_ctx=max(2048, n_prompt + n_decode + 16), n_threads=2, n_batch=512, verbose=False)
print(f"loaded in {time.perf_counter() - t:.2f} s", file=log)
passage = "The Sorting Hat considered the first-year for a long moment before it spoke. " * (40 + n_prompt // 12)
tokens = llm.tokenize(passage.encode(), add_bos=False)[:n_prompt]
prefill, decode, decoded = [], [], []
for run in range(runs):
    llm.reset()
    t0 = time.perf_counter()
    first = None
    n = 0
    # Streaming completion: the first chunk comes after the prompt's forward pass and one sampled token.
    for _ in llm.create_completion(tokens, max_tokens=n_decode, temperature=0.8, seed=run, stream=True):
        n += 1
        if first is None:
            first = time.perf_counter()
    t2 = time.perf_counter()
    prefill.append(len(tokens) / (first - t0))
    decode.append((n - 1) / (t2 - first))
    decoded.append(n)
    print(f"run {run + 1}: prompt {len(tokens)} tokens, {n} decoded; prefill {prefill[-1]:.1f} tok/s, decode {decode[-1]:.1f} tok/s", file=log)
print(f"prefill: {statistics.median(prefill):.1f} tok/s (median of {runs})", file=log)
print(f"decode:  {statistics.median(decode):.1f} tok/s (median of {runs})", file=log)
if as_json:
    print(json.dumps({
        "engine": "llama.cpp", "model": path.rsplit("/", 1)[-1], "path": path,
        "prompt_tokens": len(tokens), "decode_tokens": n_decode,
        "decoded_tokens": int(statistics.median_high(decoded)), "runs": runs,
        "prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode),
        "prefill_runs": prefill, "decode_runs": decode,
    }, indent=2))
