"""Commands that use a model directly: ``spadework generate`` and ``spadework serve``."""

from __future__ import annotations

from pathlib import Path

import typer

from spadework.cli._app import _backend_option, _reported, app
from spadework.errors import SpadeworkError
from spadework.policy.serve import MAX_BATCH, MAX_QUEUE, MAX_TOKENS_LIMIT, REQUEST_TIMEOUT_S


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

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    max_batch: int = typer.Option(MAX_BATCH, "--max-batch", min=1, help="Rows decoded together: "
                                  "with transformers requests join and leave the batch step by "
                                  "step; 1 serves one request at a time."),
    served_model_name: list[str] = typer.Option(  # noqa: B008 (typer reads it; not shared)
        None, "--served-model-name", help="A name requests may give as their model (repeat for "
        "more; default: the --model value and its folder's name). Others are answered 404."),
    max_tokens_limit: int = typer.Option(MAX_TOKENS_LIMIT, "--max-tokens-limit", min=1,
                                         help="The most tokens one completion may ask for (a "
                                         "larger max_tokens is cut; usage says so)."),
    request_timeout: float = typer.Option(REQUEST_TIMEOUT_S, "--request-timeout", min=0.001,
                                          help="Seconds a request may take; then its reply ends "
                                          "where it is (finish_reason length)."),
    max_queue: int = typer.Option(MAX_QUEUE, "--max-queue", min=1, help="Requests the server "
                                  "holds at once (waiting or generating); more are answered 503."),
    backend: str = _backend_option(),
) -> None:
    """Serve a model over an OpenAI-compatible HTTP API (continuous batching with transformers)."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.policy.load import load_policy
    from spadework.policy.registry import DEFAULT_MODEL
    from spadework.policy.serve import serve as run_server

    name = model or DEFAULT_MODEL
    names = served_model_name or [name, Path(name).name]
    with _reported(SpadeworkError):
        policy = load_policy(backend, model, max_batch_size=max_batch, device=device)
        run_server(policy, names[0], host, port, max_batch=max_batch,
                   ready=lambda url: print(f"serving on {url}", flush=True),
                   served_names=names[1:], max_tokens_limit=max_tokens_limit,
                   request_timeout_s=request_timeout, max_queue=max_queue)
