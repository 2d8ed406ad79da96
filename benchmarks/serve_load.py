"""`spadework serve` under load: short requests behind long ones, a mixed load, hostile requests.

Prints one JSON object. Starts `spadework serve` as a child process (``OMP_NUM_THREADS=1``,
its stderr kept) from this checkout and, with ``--baseline REF``, from a git worktree of ``REF``
in the same run (same model, same machine, one after the other), and drives each with the real
``openai`` client:

1. **behind long**: ``--long`` requests of ``--long-tokens`` greedy tokens (a counting prompt the
   model continues to the limit) start; once they decode, ``--short`` requests of 4 tokens are
   sent one after another: their latency (p50, p99, max) is what a short request waits while
   long ones run.
2. **mixed**: ``--clients`` threads x ``--requests`` chat requests with logprobs, ``max_tokens``
   drawn from 4/16/64/128 (seeded): latency p50/p99, completion tokens per second, errors by
   kind.
3. **hostile**: malformed JSON, a negative temperature, a non-list ``messages``, a 5 MB body, an
   unknown model, a body shorter than its Content-Length, a client that leaves while its reply
   is generated, and ``max_tokens: 1000000000`` (its client gives up after
   ``--hostile-wait`` s); then a 4-token request, whose latency says whether the server is
   still answering. Each outcome is recorded (status code, ``timeout``, ``answered``).

``tracebacks``: lines starting a Python traceback in the server's stderr (must be 0).
Where the server cuts ``max_tokens`` the new rules apply (``--max-tokens-limit`` etc. are left
at their defaults); a baseline that predates them is started with ``--model`` and ``--port``
alone. The ratio ``short_p99_vs_baseline`` divides this checkout's short-request p99 behind long
ones by the baseline's, measured in the same run.

Usage: .venv/bin/python benchmarks/serve_load.py [--baseline bdd5254] [--model smollm2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round(q * (len(xs) - 1)))], 3)


class Server:
    """`spadework serve` from ``checkout`` on a free port, its stderr in a temporary file."""

    def __init__(self, checkout: Path, model: str, extra: list[str]) -> None:
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (open while the server runs)
            prefix="serve-load-", suffix=".log", delete=False)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(checkout)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spadework.cli", "serve", "--model", model, "--port", "0",
             *extra], cwd=checkout, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        line, end = "", time.monotonic() + 300
        while "serving on" not in line:
            line = self.proc.stdout.readline()
            if (not line and self.proc.poll() is not None) or time.monotonic() > end:
                raise SystemExit(f"the server from {checkout} did not start: "
                                 f"{Path(self.log.name).read_text()[-2000:]}")
        self.url = line.split("serving on", 1)[1].strip()
        host, port = self.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.address = (host, int(port))

    def tracebacks(self) -> int:
        return Path(self.log.name).read_text(errors="replace").count("Traceback (most recent")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.log.name)


def client(url: str, timeout: float = 600.0):
    import openai

    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=timeout)


def kind_of(e: BaseException) -> str:
    import openai

    if isinstance(e, openai.APIStatusError):
        return str(e.status_code)
    if isinstance(e, openai.APITimeoutError):
        return "timeout"
    return type(e).__name__


def behind_long(url: str, model: str, n_long: int, long_tokens: int, n_short: int) -> dict:
    longs, errors = [], Counter()

    def long_request() -> None:
        t = time.monotonic()
        try:
            client(url).completions.create(model=model, prompt=COUNTING, max_tokens=long_tokens,
                                           temperature=0)
            longs.append(time.monotonic() - t)
        except Exception as e:  # noqa: BLE001 (counted)
            errors[kind_of(e)] += 1

    threads = [threading.Thread(target=long_request) for _ in range(n_long)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the long ones are decoding
    shorts = []
    for k in range(n_short):
        t = time.monotonic()
        try:
            client(url).chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"Say {k}."}], max_tokens=4,
                temperature=0)
            shorts.append(time.monotonic() - t)
        except Exception as e:  # noqa: BLE001 (counted)
            errors[kind_of(e)] += 1
    for t in threads:
        t.join()
    return {"short_p50_s": pct(shorts, 0.5), "short_p99_s": pct(shorts, 0.99),
            "short_max_s": pct(shorts, 1.0), "long_mean_s": round(statistics.mean(longs), 2)
            if longs else None, "errors": dict(errors)}


def mixed(url: str, model: str, n_clients: int, n_requests: int, seed: int) -> dict:
    rng = random.Random(seed)
    plan = [[rng.choice([4, 16, 64, 128]) for _ in range(n_requests)] for _ in range(n_clients)]
    lat, tokens, errors = [], [0], Counter()
    lock = threading.Lock()

    def run(lengths: list[int], c: int) -> None:
        for k, n in enumerate(lengths):
            t = time.monotonic()
            try:
                r = client(url).chat.completions.create(
                    model=model, messages=[{"role": "user", "content": f"Tell me about {c}-{k}."}],
                    max_tokens=n, temperature=1.0, seed=c * 100 + k, logprobs=True)
                with lock:
                    lat.append(time.monotonic() - t)
                    tokens[0] += r.usage.completion_tokens
            except Exception as e:  # noqa: BLE001 (counted)
                with lock:
                    errors[kind_of(e)] += 1

    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(p, c)) for c, p in enumerate(plan)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    return {"requests": n_clients * n_requests, "p50_s": pct(lat, 0.5), "p99_s": pct(lat, 0.99),
            "tokens_per_s": round(tokens[0] / wall, 1), "wall_s": round(wall, 1),
            "errors": dict(errors)}


def raw(address: tuple[str, int], data: bytes, read: bool = True, timeout: float = 30.0) -> str:
    """Send ``data`` on a new connection; the status line's code (or what happened)."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(data)
        if not read:
            return "sent"
        try:
            head = sock.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
        except TimeoutError:
            return "timeout"
    return head.split(" ")[1] if head.count(" ") >= 1 else (head or "closed")


def post(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def hostile(server: Server, model: str, wait_s: float) -> dict:
    a, out = server.address, {}
    chat = "/v1/chat/completions"
    msg = [{"role": "user", "content": "hi"}]
    out["malformed_json"] = raw(a, post(chat, b"{not json"))
    out["negative_temperature"] = raw(a, post(chat, json.dumps(
        {"model": model, "messages": msg, "temperature": -1}).encode()))
    out["messages_not_a_list"] = raw(a, post(chat, json.dumps(
        {"model": model, "messages": "hi"}).encode()))
    out["body_5mb"] = raw(a, post(chat, json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "x" * (5 << 20)}],
         "max_tokens": 1}).encode()), timeout=120)
    out["unknown_model"] = raw(a, post(chat, json.dumps(
        {"model": "no-such-model", "messages": msg, "max_tokens": 1}).encode()))
    full = post("/v1/completions", b'{"prompt": "x", "max_tokens": 1}')
    out["short_body"] = raw(a, full[:-10], read=False)
    leave = post("/v1/completions", json.dumps({"model": model, "prompt": COUNTING,
                                                "max_tokens": 2000, "temperature": 0}).encode())
    with socket.create_connection(a) as sock:
        sock.sendall(leave)
        time.sleep(1.0)
    out["client_left"] = "sent"
    try:
        client(server.url, timeout=wait_s).completions.create(
            model=model, prompt=COUNTING, max_tokens=1_000_000_000, temperature=0)
        out["max_tokens_1e9"] = "answered"
    except Exception as e:  # noqa: BLE001 (recorded)
        out["max_tokens_1e9"] = kind_of(e)
    t = time.monotonic()
    try:
        client(server.url, timeout=120).chat.completions.create(
            model=model, messages=msg, max_tokens=4, temperature=0)
        out["short_after_s"] = round(time.monotonic() - t, 2)
    except Exception as e:  # noqa: BLE001 (recorded)
        out["short_after_s"] = kind_of(e)
    return out


def measure(checkout: Path, args: argparse.Namespace, extra: list[str]) -> dict:
    server = Server(checkout, args.model, extra)
    try:
        out = {"behind_long": behind_long(server.url, args.model, args.long, args.long_tokens,
                                          args.short),
               "mixed": mixed(server.url, args.model, args.clients, args.requests, args.seed),
               "hostile": hostile(server, args.model, args.hostile_wait)}
        time.sleep(1.0)
        out["tracebacks"] = server.tracebacks()
        return out
    finally:
        server.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--baseline", default=None, help="A git ref to measure too (a worktree).")
    ap.add_argument("--long", type=int, default=2)
    ap.add_argument("--long-tokens", type=int, default=300)
    ap.add_argument("--short", type=int, default=8)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--hostile-wait", type=float, default=20.0)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    result: dict = {"model": args.model, "load_average": os.getloadavg()[0]}
    if args.baseline:
        tree = Path(tempfile.mkdtemp(prefix="serve-load-base-")) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree),
                        args.baseline], check=True)
        try:
            result["baseline"] = {"ref": args.baseline, **measure(
                tree, args, ["--max-batch", str(args.max_batch)])}
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False)
    result["current"] = measure(ROOT, args, ["--max-batch", str(args.max_batch)])
    if args.baseline:
        now, before = (result[k]["behind_long"]["short_p99_s"] for k in ("current", "baseline"))
        result["short_p99_vs_baseline"] = round(now / before, 3) if now and before else None
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
