#!/usr/bin/env python3
"""llama.cpp's multi-sequence decoding, the anchor for `incharacter bench local --parallel`.

Each width N runs N chat prompts (the ones `bench local --parallel` builds: a system line and a numbered
question, in ChatML) through llama.cpp's low-level batch API (`llama_batch` with one `seq_id` per
sequence, as llama-server's parallel slots do): all prompts in one decode call, then one token per
sequence per call, greedy. 2 threads, CPU only; the same numbers `bench local --parallel` reports.

Usage: python3 benches/llama_cpp_batch.py PATH.gguf [--parallel 1,4,8,16] [--tokens 32] [--runs 3] [--json]
With --json the report is one JSON object on stdout (`widths` as in `bench local --parallel --json`)."""
import argparse, ctypes, json, statistics, sys, time

import llama_cpp as L
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("path")
ap.add_argument("--parallel", default="1,4,8,16")
ap.add_argument("--tokens", type=int, default=32)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--json", action="store_true")
args = ap.parse_args()
log = sys.stderr if args.json else sys.stdout
widths = [int(w) for w in args.parallel.split(",")]

L.llama_backend_init()
mparams = L.llama_model_default_params()
mparams.n_gpu_layers = 0
model = L.llama_model_load_from_file(args.path.encode(), mparams)
if not model:
    sys.exit(f"{args.path}: llama.cpp could not load it")
vocab = L.llama_model_get_vocab(model)
n_vocab = L.llama_vocab_n_tokens(vocab)


def prompt(i):
    text = (
        "<|im_start|>system\nYou are Hermione Granger. Answer in character.<|im_end|>\n"
        f"<|im_start|>user\nQuestion {i + 1}: tell me about the day you spent in the library before exam "
        f"number {i + 2}.<|im_end|>\n<|im_start|>assistant\n"
    ).encode()
    out = (L.llama_token * 512)()
    n = L.llama_tokenize(vocab, text, len(text), out, 512, True, True)
    return list(out[:n])


def context(width):
    cparams = L.llama_context_default_params()
    cparams.n_ctx = 256 * width
    cparams.n_batch = 256 * width
    cparams.n_ubatch = 512
    cparams.n_seq_max = width
    cparams.n_threads = args.threads
    cparams.n_threads_batch = args.threads
    return L.llama_init_from_model(model, cparams)


def run(ctx, prompts, steps):
    """Returns (prefill seconds, decode seconds) for one pass over `prompts` and `steps` tokens."""
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    total = sum(len(p) for p in prompts)
    batch = L.llama_batch_init(max(total, len(prompts)), 0, len(prompts))
    try:
        k = 0
        last = []
        for s, p in enumerate(prompts):
            for pos, tok in enumerate(p):
                batch.token[k], batch.pos[k], batch.n_seq_id[k] = tok, pos, 1
                batch.seq_id[k][0] = s
                batch.logits[k] = pos == len(p) - 1
                k += 1
            last.append(k - 1)
        batch.n_tokens = k
        t0 = time.perf_counter()
        if L.llama_decode(ctx, batch) != 0:
            sys.exit("llama_decode failed on the prompts")
        t1 = time.perf_counter()
        logits = lambda i: np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
        chosen = [int(np.argmax(logits(i))) for i in last]
        positions = [len(p) for p in prompts]
        t2 = time.perf_counter()
        for _ in range(1, steps):
            for s, tok in enumerate(chosen):
                batch.token[s], batch.pos[s], batch.n_seq_id[s] = tok, positions[s], 1
                batch.seq_id[s][0] = s
                batch.logits[s] = True
                positions[s] += 1
            batch.n_tokens = len(chosen)
            if L.llama_decode(ctx, batch) != 0:
                sys.exit("llama_decode failed while decoding")
            chosen = [int(np.argmax(logits(s))) for s in range(len(chosen))]
        return t1 - t0, time.perf_counter() - t2
    finally:
        L.llama_batch_free(batch)


report = []
for width in widths:
    ctx = context(width)
    prompts = [prompt(i) for i in range(width)]
    tokens = sum(len(p) for p in prompts)
    decode, latency, prefill = [], [], []
    for _ in range(args.runs):
        p_s, d_s = run(ctx, prompts, args.tokens)
        after_first = args.tokens - 1
        decode.append(width * after_first / d_s)
        latency.append(d_s * 1000 / after_first)
        prefill.append(tokens / p_s)
    w = {
        "parallel": width,
        "decode_tok_s": statistics.median(decode),
        "per_sequence_ms": statistics.median(latency),
        "prefill_tok_s": statistics.median(prefill),
    }
    print(
        f"{width} side by side: decode {w['decode_tok_s']:.1f} tok/s in all, {w['per_sequence_ms']:.0f} ms per "
        f"token each; prompts {w['prefill_tok_s']:.1f} tok/s ({tokens} prompt tokens)",
        file=log,
    )
    report.append(w)
    L.llama_free(ctx)

if args.json:
    print(json.dumps({
        "engine": "llama.cpp", "model": args.path.rsplit("/", 1)[-1], "path": args.path,
        "decode_tokens": args.tokens, "runs": args.runs, "threads": args.threads, "widths": report,
    }, indent=2))
