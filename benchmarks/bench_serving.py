"""Benchmark: episodes per second of the served evaluator against one chat server, by episodes in flight.

    .venv/bin/python benchmarks/bench_serving.py [--model DIR | --shape tiny|qwen2.5-0.5b] [--device cpu|cuda]
        [--server transformers|URL] [--concurrency 1 8 32] [--episodes 32] [--max-tokens 16] [--max-turns 2]
        [--server-arg ARG]... [--log-dir DIR] [--json FILE]

Without --model a random-weight Qwen2 is built (agentrepro.serving.tiny: the tiny CPU shape, or Qwen2.5-0.5B's
shape for a GPU). One server is started (or the URL used) for all concurrency levels; each level plays the
same FrozenLake panel (seeds 10001.., greedy, concat) once for warm-up of that level's path, not timed, then
timed. Reports episodes/s, requests/s and the ratio against 1 episode in flight (as a table, and with --json
as a file rewritten after each level); the server's log goes to --log-dir. Numbers depend on the machine and
its load; record them in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from agentrepro.environments import make_env, task_panel
from agentrepro.serving import tiny
from agentrepro.serving.client import ChatClient
from agentrepro.serving.engine import Sampling, evaluate_panel
from agentrepro.serving.servers import ServerConfig, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--shape", default="tiny", choices=sorted(tiny.SHAPES))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--server", default="transformers")
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--log-dir", type=Path, help="the server's logs (default: a temporary folder, printed)")
    parser.add_argument("--json", type=Path, help="write the levels measured so far here after each level")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    model = args.model or tiny.build(work / f"model-{args.shape}", shape=args.shape)
    if args.server.startswith("http"):
        config = ServerConfig(kind="url", url=args.server)
    else:
        config = ServerConfig(kind=args.server, device=args.device, args=tuple(args.server_arg), startup_timeout_s=1800)
    panel = task_panel("frozenlake", {}, range(10001, 10001 + args.episodes))
    sampling = Sampling(temperature=0.0, max_tokens=args.max_tokens)
    started = time.perf_counter()
    log_dir = args.log_dir or work / "logs"
    print(f"model {model}; server log in {log_dir}", flush=True)
    report = {
        "model": str(model),
        "shape": None if args.model else args.shape,
        "device": args.device,
        "server_args": args.server_arg,
        "episodes": args.episodes,
        "max_tokens": args.max_tokens,
        "max_turns": args.max_turns,
        "levels": [],
    }
    with serve(config, model, log_dir=log_dir) as server:
        report.update(
            server=server.provenance.get("kind"),
            version=server.provenance.get("version"),
            ready_s=round(time.perf_counter() - started, 1),
        )
        print(
            f"server {report['server']} {report['version']} ready in {report['ready_s']} s; "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )

        async def level(concurrency: int) -> tuple[float, int, int]:
            client = ChatClient(server.url, server.model, max_connections=concurrency)
            requests = 0
            chat = client.chat

            async def counted(*a, **kw):
                nonlocal requests
                requests += 1
                return await chat(*a, **kw)

            client.chat = counted
            try:
                t = time.perf_counter()
                rows = await evaluate_panel(
                    lambda: make_env("frozenlake"),
                    panel,
                    identity={"study": "b", "method": "b", "seed": 0},
                    step=0,
                    client=client,
                    sampling=sampling,
                    mode="concat",
                    max_turns=args.max_turns,
                    concurrency=concurrency,
                    category="frozenlake",
                )
                return time.perf_counter() - t, len(rows), requests
            finally:
                await client.aclose()

        base = None
        print("| episodes in flight | episodes | requests | seconds | episodes/s | requests/s | vs 1 in flight |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for concurrency in args.concurrency:
            asyncio.run(level(concurrency))  # warm-up
            seconds, episodes, requests = asyncio.run(level(concurrency))
            rate = episodes / seconds
            base = base or rate
            print(
                f"| {concurrency} | {episodes} | {requests} | {seconds:.1f} | {rate:.2f} | {requests / seconds:.2f} | {rate / base:.2f}x |",
                flush=True,
            )
            report["levels"].append(
                {
                    "concurrency": concurrency,
                    "episodes": episodes,
                    "requests": requests,
                    "seconds": round(seconds, 2),
                    "episodes_per_s": round(rate, 3),
                    "vs_1": round(rate / base, 3),
                }
            )
            if args.json:
                args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
