"""Commands that use a model directly: ``spadework generate`` and ``spadework serve``."""

from __future__ import annotations

import typer

from spadework.cli._app import _backend_option, _reported, app
from spadework.errors import SpadeworkError


@app.command()
def generate(
    prompt: str = typer.Argument(..., help="The user message."),
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    backend: str = _backend_option(),
    n: int = typer.Option(1, "--n", min=1, help="Parallel completions, generated as one batch."),
    max_tokens: int = typer.Option(128, "--max-tokens", min=1, help="Most tokens to generate."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="0 = greedy."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed (same seed, same completion)."),
    device: str = typer.Option("cpu", "--device", help="hf only (cpu, or cuda[:N] where torch has "
                               "CUDA); llamacpp runs on the CPU."),
    threads: int = typer.Option(None, "--threads", min=1, help="llamacpp threads (default: all cores)."),
) -> None:
    """Chat completions from the model, printed with the aggregate speed in tokens/s."""
    import time

    from spadework.policy import SamplingParams, load_policy

    with _reported(SpadeworkError):
        policy = load_policy(backend, model, max_batch_size=n, device=device, threads=threads)
        params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed, n=n)
        start = time.perf_counter()
        done = policy.chat([prompt], params)
    secs = time.perf_counter() - start
    for k, c in enumerate(done):
        if n > 1:
            typer.echo(f"--- completion {k + 1} of {n} (finish={c.finish_reason})")
        typer.echo(c.text)
    tokens = sum(len(c.output_ids) for c in done)
    typer.echo(f"[{backend}: {n} completion(s), {tokens} tokens in {secs:.2f} s, "
               f"{tokens / secs:.1f} tokens/s aggregate, finish={done[-1].finish_reason}]", err=True)


@app.command()
def serve(
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="0 picks a free port (printed)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda[:N] where torch has CUDA."),
    max_batch: int = typer.Option(1, "--max-batch", min=1, help="Requests that arrive together "
                                  "(same sampling settings) generated as one batch (1: one at a time)."),
    backend: str = _backend_option(),
) -> None:
    """Serve a model over an OpenAI-compatible HTTP API (one request at a time, or batched)."""
    from spadework.policy.load import load_policy
    from spadework.policy.registry import DEFAULT_MODEL
    from spadework.policy.serve import serve as run_server

    with _reported(SpadeworkError):
        policy = load_policy(backend, model, max_batch_size=max_batch, device=device)
    run_server(policy, model or DEFAULT_MODEL, host, port, max_batch=max_batch,
               ready=lambda url: print(f"serving on {url}", flush=True))
