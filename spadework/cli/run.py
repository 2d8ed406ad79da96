"""Commands of a run: ``spadework run`` (self-play), ``spadework design`` (designs alone) and
``spadework report`` (a run's HTML report)."""

from __future__ import annotations

from pathlib import Path

import typer

from spadework.cli._app import _backend_option, _factory, _Preset, _reported, app
from spadework.errors import SpadeworkError


@app.command("run")
def run_cmd(
    preset: _Preset = typer.Option(None, "--preset", help="The run preset (default: the config "
                                   "file's preset, else cpu)."),
    config: Path = typer.Option(None, "--config", help="A TOML file over the preset: top-level "
                                "settings and tables play, reward, design, curriculum, learner, eval, "
                                "log (TensorBoard, W&B). "
                                "Flags beat the file, which beats the preset."),
    run_dir: Path = typer.Option(None, help="Archive, metrics.jsonl and checkpoints go here "
                                 "(default: runs/PRESET-UTCTIME, a new one each run)."),
    iterations: int = typer.Option(None, min=1, help="Total iterations of the run (default: the preset's)."),
    no_train: bool = typer.Option(False, "--no-train", help="Play and score with fixed weights."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir where it stopped."),
    model: str = typer.Option(None, help="Registry name, local HF folder or hub id (default: the preset's)."),
    backend: str = _backend_option(None),
    designer_model: str = typer.Option(None, "--designer-model", help="The designer's own model: "
                                       "a registry name, a folder, or an OpenAI-compatible endpoint "
                                       "http://HOST:PORT/v1#MODEL (then frozen). Default: --model, "
                                       "one model for both roles."),
    agent_model: str = typer.Option(None, "--agent-model", help="The agent's own model (default: "
                                    "--model)."),
    freeze: list[str] = typer.Option(None, "--freeze", help="A role whose weights never change "
                                     "(designer or agent; repeat for both). With one shared model a "
                                     "frozen role samples with the adapter off."),
    seed: int = typer.Option(None, help="Run seed: every random choice derives from it."),
    policy: str = typer.Option(None, "--policy", hidden=True,
                               help="MODULE:FACTORY returning a Policy (tests only)."),
    ray_address: str = typer.Option(None, "--ray", metavar="[ADDRESS]",
                                    help="Run on Ray: a local cluster with --ray alone (or --ray "
                                    "local), or join ADDRESS (auto, HOST:PORT, ray://HOST:PORT). "
                                    "Needs spadework[cluster]; settings in [ray]."),
    rollout_workers: int = typer.Option(None, "--rollout-workers", min=1,
                                        help="Ray actors that play the episodes (default: [ray]'s)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the Ray placement plan (which "
                                 "process on which node and GPU) and start nothing."),
) -> None:
    """Self-play: design, validate, hint, play both arms, score, train, store; resumable."""
    import json
    import time

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.commands import run_command
    from spadework.config import load_config, override
    from spadework.errors import ConfigError
    from spadework.progress import StageDisplay

    with _reported(SpadeworkError):
        cfg = load_config(config, preset_name=preset.value if preset else None)
        top = {k: v for k, v in (("iterations", iterations), ("model", model), ("run_seed", seed),
                                 ("backend", backend),
                                 ("designer_model", designer_model), ("agent_model", agent_model),
                                 ("frozen", tuple(freeze) if freeze else None)) if v is not None}
        if no_train:
            top["train"] = False
        ray_top = {k: v for k, v in (("rollout_workers", rollout_workers),) if v is not None}
        if ray_address is not None:
            ray_top.update(enabled=True, address=None if ray_address == "local" else ray_address)
        if ray_top:
            top["ray"] = ray_top
        cfg = override(cfg, top)
        if dry_run:
            # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
            from spadework.distributed.run import plan_text

            typer.echo(plan_text(cfg))
            return
        if run_dir is None:
            if resume:
                raise ConfigError("--resume needs --run-dir: the folder of the run to continue")
            run_dir = Path("runs") / f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        factory = _factory(policy)
        roles = ("" if cfg.shared else f", designer {cfg.role_model('designer') or 'default model'}, "
                 f"agent {cfg.role_model('agent') or 'default model'}") + (f", frozen: {', '.join(cfg.frozen)}" if cfg.frozen else "")
        on_ray = (f", on Ray ({cfg.ray.address or 'local cluster'}, {cfg.ray.rollout_workers} rollout "
                  f"workers)" if cfg.ray.enabled else "")
        typer.echo(f"spadework run: preset {cfg.preset}, {cfg.iterations} iterations, "
                   f"{'training' if cfg.train else 'no training'}{roles}{on_ray}, run dir {run_dir}")
        with StageDisplay() as display:
            out = run_command(cfg, run_dir, resume=resume, policy_factory=factory, progress=display)
    for m in out:
        d = m.to_dict()
        typer.echo(json.dumps({k: d.get(k) for k in ("iteration", "losses", "rewards",
                                                     "agent_format_share", "validity_funnel",
                                                     "statuses", "band_share", "mean_regret")}))
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.report.terminal import run_summary

    typer.echo("\n".join(run_summary(out, str(run_dir))))
    typer.echo(f"done: {run_dir}/metrics.jsonl, {run_dir}/archive.sqlite")


@app.command("design")
def design_cmd(
    n: int = typer.Option(..., "--n", min=0, help="Design slots to fill."),
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    setting: str = typer.Option("games", "--setting", help="games or tool-use."),
    run_dir: Path = typer.Option(Path("runs/design"), "--run-dir", help="Archive goes to D/archive.sqlite."),
    attempts: int = typer.Option(3, "--attempts", min=1, help="Fresh attempts per slot."),
    repair_turns: int = typer.Option(0, "--repair-turns", min=0, help="Inference-only repair turns."),
    max_tokens: int = typer.Option(1024, "--max-tokens", min=1, help="Most tokens per design reply."),
    max_turns: int = typer.Option(None, "--max-turns", min=1, help="The turn limit the designs "
                                  "will be played with, and so are checked with (default: the "
                                  "cpu preset's [play] max_turns)."),
    seed: int = typer.Option(0, "--seed", help="Run seed: documents and sampling derive from it."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda[:N] where torch has CUDA."),
    backend: str = _backend_option(),
) -> None:
    """Design N environments with the model into the run's archive; print a closing table."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.commands import design_into_run_dir
    from spadework.config import preset
    from spadework.designer import DesignConfig

    with _reported(SpadeworkError):
        max_turns = max_turns or preset("cpu").play.max_turns
        cfg = DesignConfig(setting=setting, attempts_per_slot=attempts, repair_turns=repair_turns,
                           max_tokens=max_tokens)
        with Progress(console=Console(stderr=True)) as bar:
            task = bar.add_task("designing", total=n * attempts * (1 + repair_turns))
            s = design_into_run_dir(run_dir, n=n, cfg=cfg, max_turns=max_turns, model=model,
                                    seed=seed, device=device, backend=backend,
                                    progress=lambda done, total: bar.update(task, completed=done,
                                                                            total=total))
    table = Table(title=f"design, iteration {s.iteration} ({run_dir / 'archive.sqlite'})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [("slots", s.slots), ("attempts", s.attempts), ("accepted", s.accepted)]
    rows += [(f"rejected at {stage}", k) for stage, k in s.rejected_by_stage.items()]
    rows += [("output tokens", s.output_tokens), ("seconds", f"{s.seconds:.1f}"),
             ("tokens per accepted env", "-" if s.tokens_per_env is None else f"{s.tokens_per_env:.0f}"),
             ("seconds per accepted env", "-" if s.seconds_per_env is None else f"{s.seconds_per_env:.1f}")]
    for k, v in rows:
        table.add_row(k, str(v))
    Console().print(table)


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="The run's folder (archive.sqlite, metrics.jsonl)."),
    out: Path = typer.Option(None, "--out", help="The HTML file to write (default RUN_DIR/report.html)."),
    episodes: int = typer.Option(None, "--episodes", min=0, help="Episodes embedded per environment "
                                 "(default 2: one seed, both arms); --serve shows all."),
    serve: bool = typer.Option(False, "--serve", help="Serve the pages on 127.0.0.1 instead, "
                               "refreshed as iterations land (Ctrl-C stops)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="The port --serve listens on."),
) -> None:
    """One self-contained HTML file: curves per iteration, win rates, design funnel, and the
    archive browser with each environment's page (nothing is fetched when it opens)."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.errors import ArchiveError, ConfigError
    from spadework.report import DEFAULT_EPISODES, build_report

    if serve:
        # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
        from spadework.report.serve import ReportServer

        with _reported(ArchiveError):
            try:
                server = ReportServer(run_dir, port)
            except OSError as e:
                raise ConfigError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}; "
                                  "choose another --port") from e
        typer.echo(f"serving {run_dir} at {server.url} (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return
    with _reported(ArchiveError, ConfigError):
        s = build_report(run_dir, out, k=DEFAULT_EPISODES if episodes is None else episodes)
    typer.echo(f"wrote {s.path} ({s.bytes / 1e6:.2f} MB: {s.iterations} iterations, {s.envs} "
               f"environments, {s.episodes_embedded} of {s.episodes_total} episodes) in {s.seconds:.1f} s")
