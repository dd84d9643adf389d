#!/usr/bin/env python3
"""The README's table of offline measurements: per session (one model as RPA and judge) and method,
Acc_Dim and MAE with their 95% bootstrap intervals over characters (`incharacter report --format
json`), and how much the judge's dimension scores vary (their SD over characters x dimensions, and
how many distinct values they take): a judge that gives every dimension the same score cannot tell
characters apart, whatever its Acc_Dim. A method is marked when the session scored by expected options
(`--expected-scores`) or read prompt templates of its own (`--prompts`).

    python3 benches/offline_table.py [--bin PATH] ID[=WALL_SECONDS] ...

The data dir and config are the environment's ($INCHARACTER_DATA_DIR, $INCHARACTER_CONFIG).
"""

import argparse
import json
import statistics
import subprocess


def run(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def interval(figure):
    value, ci = figure.get("value"), figure.get("ci")
    if value is None:
        return "–"
    if not ci:
        return f"{value:.3f} [–]"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def minutes(seconds):
    return f"{seconds / 60:.1f} min" if seconds else "–"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="target/release/incharacter")
    parser.add_argument("sessions", nargs="+", help="session id, optionally =wall seconds")
    args = parser.parse_args()
    print("| RPA and judge | method | Acc_Dim [95% CI] | MAE [95% CI] | score SD (distinct) | refusals | wall time |")
    print("|---|---|---|---|---|---|---|")
    for spec in args.sessions:
        session, _, wall = spec.partition("=")
        report = run(args.bin, "report", session, "--format", "json")[0]
        export = run(args.bin, "export", session, "--format", "json")
        scores = {}
        for group in export["assessments"]:
            for d in group["dimensions"].values():
                if d.get("score") is not None:
                    scores.setdefault(group["method"], []).append(d["score"])
        model = report["rpa"] if report["rpa"] == report["judge"] else f'{report["rpa"]} / {report["judge"]}'
        plan = export["session"]["plan"]
        marks = (["expected scores"] if plan.get("expected_scores") else []) + (
            ["own prompts: " + ", ".join(sorted(plan["prompts"]))] if plan.get("prompts") else []
        )
        for row in report["summary"]:
            values = scores.get(row["method"], [])
            spread = (
                f"{statistics.pstdev(values):.2f} ({len({round(v, 2) for v in values})})" if values else "–"
            )
            print(
                f'| {model} | {row["method"]}{" (" + "; ".join(marks) + ")" if marks else ""} | {interval(row["intervals"]["acc_dim"])} | '
                f'{interval(row["intervals"]["mae"])} | {spread} | {row["refusals"]} | '
                f"{minutes(float(wall) if wall else 0)} |"
            )


if __name__ == "__main__":
    main()
