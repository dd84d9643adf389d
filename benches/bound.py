#!/usr/bin/env python3
"""Recompute the ideal bound of a `bench run` from its per-request trace, independently of the Rust code.

    incharacter bench run --traces traces/        # writes traces/trace-C-32.csv, …
    python3 benches/bound.py traces/trace-C-32.csv 32 --first-byte-ms 200 --tokens-per-s 200 [--wall S]

Each trace row is one request fake-openai served: its kind (chat = interview, judge = JSON rating),
the content pieces it streamed and the SSE events it wrote. The latency model is rebuilt from the event
count (first byte, then one event every 1/tokens-per-s seconds), not taken from the `model_ms` column,
and the column is checked against it.

No schedule on C slots can finish before the total latency divided by C, before the longest reply,
or before the longest judge call has followed the shortest interview (a judge call needs answers).
"""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("concurrency", type=int)
    ap.add_argument("--first-byte-ms", type=float, default=200.0)
    ap.add_argument("--tokens-per-s", type=float, default=200.0)
    ap.add_argument("--wall", type=float, help="measured wall time in seconds, to print the ratio")
    args = ap.parse_args()

    with open(args.trace, newline="") as f:
        rows = list(csv.DictReader(f))
    latency = []
    for r in rows:
        events = int(r["events"])
        ms = args.first_byte_ms + max(events - 1, 0) * 1000.0 / args.tokens_per_s
        assert abs(ms - float(r["model_ms"])) < 0.01, (r, ms)
        latency.append((r["kind"], ms))

    total = sum(ms for _, ms in latency)
    longest = max(ms for _, ms in latency)
    chats = [ms for k, ms in latency if k == "chat"]
    judges = [ms for k, ms in latency if k == "judge"]
    chain = min(chats) + max(judges) if chats and judges else 0.0
    bound = max(total / args.concurrency, longest, chain) / 1000.0
    print(f"requests: {len(rows)} ({len(chats)} interviews, {len(judges)} judge calls)")
    print(f"total latency: {total / 1000.0:.3f} s; bound at C={args.concurrency}: {bound:.3f} s")
    if args.wall:
        print(f"wall / bound: {args.wall / bound:.3f}")


if __name__ == "__main__":
    main()
