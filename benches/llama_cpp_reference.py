#!/usr/bin/env python3
"""The speed anchor for `incharacter bench local`: llama.cpp (llama-cpp-python) on the same GGUF,
the same prompt length and the same number of decoded tokens, 2 threads, CPU only.
Usage: python3 benches/llama_cpp_reference.py PATH.gguf [PROMPT_TOKENS=245] [DECODE=128] [RUNS=3]"""
import statistics, sys, time
from llama_cpp import Llama

path = sys.argv[1]
n_prompt = int(sys.argv[2]) if len(sys.argv) > 2 else 245
n_decode = int(sys.argv[3]) if len(sys.argv) > 3 else 128
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
t = time.perf_counter()
llm = Llama(model_path=path, n_ctx=2048, n_threads=2, n_batch=512, verbose=False)
print(f"loaded in {time.perf_counter() - t:.2f} s")
passage = "The Sorting Hat considered the first-year for a long moment before it spoke. " * 40
tokens = llm.tokenize(passage.encode(), add_bos=False)[:n_prompt]
prefill, decode = [], []
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
    print(f"run {run + 1}: prompt {len(tokens)} tokens, {n} decoded; prefill {prefill[-1]:.1f} tok/s, decode {decode[-1]:.1f} tok/s")
print(f"prefill: {statistics.median(prefill):.1f} tok/s (median of {runs})")
print(f"decode:  {statistics.median(decode):.1f} tok/s (median of {runs})")
