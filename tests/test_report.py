"""`spadework report`: the HTML file's plots against the metrics they came from, what it embeds,
that it is self-contained, the pages in a real headless Chromium (offline), `--serve` refreshing
as an iteration lands, and the CLI's errors. The run is a real one: the loop with a scripted
policy and the real learner on a tiny model (about 15 s)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from scripted_policy import half_solving_script, trainable_policy_factory

from spadework.archive import Archive, archive_path
from spadework.report import build_report
from spadework.report.charts import CURVES, metric
from spadework.report.headless import Browser, find_chromium

ROOT = Path(__file__).resolve().parent.parent
CHILD = (ROOT / "tests" / "fixtures" / "envs" / "good" / "combination_lock.py").read_text()
#: Screenshots of the report's pages, kept after the run (`.gitignore`d).
ARTIFACTS = Path(os.environ.get("SPADEWORK_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "report"


def _script(conv, turn):
    """Designs the arithmetic chain, answers a mutation request with another module (so the
    archive holds a child with a parent), plays half of the instances right."""
    if "Here is an existing environment" in conv.messages[-1]["content"]:
        return "```python\n" + CHILD + "\n```"
    return half_solving_script(conv, turn)


def make_run(run_dir: Path, iterations: int, *, resume: bool = False) -> None:
    from spadework import loop
    from spadework.config import load_config, override
    from spadework.policy.load import learner_policy
    from spadework.train import Learner, weight_sync_for

    cfg = override(load_config(ROOT / "tests" / "fixtures" / "smoke_train.toml"), {
        "iterations": iterations, "design": {"mutation_ratio": 0.5, "example_share": 10.0},  # starter parents
        "curriculum": {"designs_per_regen": 2},
        "eval": {"every": 3, "suites": ["library-heldout"], "preset": "smoke", "max_items": 2}})
    policy = trainable_policy_factory()
    policy.script = _script
    learner = Learner(learner_policy(policy), cfg.learner)
    loop.run(cfg, run_dir, loop.Models(policy, learner, weight_sync_for(policy, learner)),
             resume=resume)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("report") / "run"
    make_run(d, 3)
    return d


@pytest.fixture(scope="module")
def report(run_dir) -> Path:
    s = build_report(run_dir, run_dir / "report.html", k=2)
    assert s.iterations == 3 and s.path.stat().st_size == s.bytes
    return s.path


class _Elements(HTMLParser):
    """Every start tag as (tag, attributes), and the text of each script element by id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "script":
            self._script = a.get("id", "")
            self.scripts[self._script] = ""

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self.scripts[self._script] += data


def parse(path: Path) -> _Elements:
    p = _Elements()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def series(page: _Elements) -> list[dict[str, str]]:
    return [a for t, a in page.tags if t == "g" and "data-series" in a]


def pages(page: _Elements) -> list[dict]:
    """The embedded environment pages, decoded as the browser does (base64, gzip, JSON)."""
    out = []
    for key in sorted((k for k in page.scripts if k.startswith("chunk-")), key=lambda k: int(k[6:])):
        out += json.loads(gzip.decompress(base64.b64decode(page.scripts[key])))
    return out


def test_every_curve_holds_exactly_the_metrics_line_values(report, run_dir):
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    page = parse(report)
    by_metric = {a["data-metric"]: a for a in series(page) if "data-metric" in a}
    expected = {p for _, _, paths in CURVES for p in paths.values()}
    expected |= {"band_share", "eval.suites.library-heldout.score", "seconds.play", "seconds.train"}
    assert expected <= set(by_metric)
    checked = 0
    for path, a in by_metric.items():
        want = [metric(m, path) for m in lines]
        ys, xs = json.loads(a["data-y"]), json.loads(a["data-x"])
        if all(v is None for v in want):
            assert ys in ([], want), path
            continue
        assert xs == [m["iteration"] for m in lines] and ys == want, path
        checked += 1
    assert checked >= 15
    # the values are real: returns move, the learner stepped, the eval ran once (iteration 2)
    assert by_metric["train.importance_ratio.agent.mean"]["data-y"] != "[null, null, null]"
    heldout = json.loads(by_metric["eval.suites.library-heldout.score"]["data-y"])
    assert heldout[:2] == [None, None] and 0.0 <= heldout[2] <= 1.0


def _series_xs_ys(html: str, path: str) -> tuple[list, list, str]:
    m = re.search(rf'<g class="series" ([^>]*data-metric="{re.escape(path)}"[^>]*)>(.*?)</g>', html, re.S)
    attr = dict(re.findall(r'(data-[xy])="([^"]*)"', m.group(1)))
    return json.loads(unescape(attr["data-x"])), json.loads(unescape(attr["data-y"])), m.group(2)


def test_a_curve_draws_its_points_where_its_values_say(report):
    _, ys, marks = _series_xs_ys(report.read_text(), "agent_return.no_hint")
    cys = [float(c) for c in re.findall(r'cy="([\d.]+)"', marks)]
    values = [y for y in ys if y is not None]
    assert len(cys) == len(values) and len(set(values)) > 1
    pairs = sorted(zip(values, cys))
    assert all(c1 >= c2 for (_, c1), (_, c2) in zip(pairs, pairs[1:]))  # higher value, higher on screen


def test_win_rates_funnel_and_table_come_from_the_archive(report, run_dir):
    page = parse(report)
    with Archive.open_read_only(archive_path(run_dir)) as a:
        plays = a.query("SELECT iteration, env_id, win_rate FROM env_plays ORDER BY iteration, env_id")
        attempts = a.query("SELECT iteration, outcome FROM attempts")
        n_envs = a.query("SELECT count(*) FROM envs")[0][0]
    strip = next(s for s in series(page) if s["data-series"] == "win_rate")
    assert json.loads(strip["data-x"]) == [r[0] for r in plays]
    assert json.loads(strip["data-y"]) == [r[2] for r in plays]
    lines = {m["iteration"]: m for m in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}
    for r in plays:  # the archive's rates are the ones the metrics line reports per environment
        assert lines[r[0]]["per_env"][r[1][:12]]["win_rate"] == r[2]
    funnel = {a["data-series"]: json.loads(a["data-y"]) for t, a in page.tags
              if t == "g" and "data-series" in a and a["data-x"] in ("[0, 2]",)}
    for i, it in enumerate((0, 2)):
        want = {o: sum(1 for x in attempts if x[0] == it and x[1] == o) for o in {x[1] for x in attempts}}
        assert {o: v[i] for o, v in funnel.items()} == want
        assert {k: v for k, v in lines[it]["validity_funnel"].items() if k != "total"} == \
               {k: v for k, v in want.items() if v}
    rows = json.loads(page.scripts["rows"])
    assert len(rows) == n_envs and {r["status"] for r in rows} == {"accepted", "rejected"}


def test_the_file_embeds_every_page_with_at_most_k_episodes_in_seed_pairs(report, run_dir):
    envs = pages(parse(report))
    with Archive.open_read_only(archive_path(run_dir)) as a:
        assert [e["id"] for e in envs] == [r["id"] for r in json.loads(parse(report).scripts["rows"])]
        for e in envs:
            rec = a.get_env(e["id"])
            assert e["code"] == rec.code and e["episodes_total"] == len(a.episodes(env_id=e["id"]))
            shown = [p[arm] for p in e["episodes"] for arm in ("hint", "no_hint") if p[arm]]
            assert len(shown) <= 2 and (len(shown) == 2 or e["episodes_total"] < 2)
            for p in e["episodes"]:  # both arms of one (iteration, play index): one seed
                (stored,) = {x.seed for x in a.episodes(iteration=p["iteration"], env_id=e["id"])
                             if x.play_index == p["play_index"]}
                assert p["seed"] == stored
                assert [t["text"] for t in p["no_hint"]["turns"]] == [
                    t.text for x in a.episodes(iteration=p["iteration"], env_id=e["id"], arm="no_hint")
                    if x.play_index == p["play_index"] for t in x.turns]
                assert p["hint"]["opening"] != p["no_hint"]["opening"]  # the hint is in one only
            if rec.doc_id:  # the document as the designer read it, from the archive's new table
                assert e["doc"]["stored"] and e["doc"]["text"] == a.document(rec.doc_id).text
                prompt = next(x for x in a.attempts() if x.env_id == e["id"]).messages[-1]["content"]
                assert f"<document>\n{e['doc']['text']}\n</document>" in prompt
    played = [e for e in envs if e["episodes"]]
    assert played and any(e["doc"] for e in envs) and any(e["parent"] for e in envs)
    assert any(e["children"] for e in envs)  # the mutated child is listed on its parent's page


def test_episodes_k_bounds_what_is_embedded(run_dir, tmp_path):
    none = build_report(run_dir, tmp_path / "none.html", k=0)
    more = build_report(run_dir, tmp_path / "more.html", k=6)
    assert none.episodes_embedded == 0 and all(not e["episodes"] for e in pages(parse(none.path)))
    counts = [sum(bool(p[a]) for p in e["episodes"] for a in ("hint", "no_hint")) for e in pages(parse(more.path))]
    assert max(counts) == 6 and more.episodes_embedded == sum(counts) > 0
    assert none.bytes < more.bytes


def test_the_file_refers_to_nothing_outside_itself(report):
    html = report.read_text()
    page = parse(report)
    for tag, a in page.tags:
        assert "src" not in a, (tag, a)
        assert not a.get("href", "#").split("#")[0], (tag, a)  # only in-page links
    assert not re.search(r"<link|@import|url\(|https?://", html, re.I)
    assert all(t != "script" or a.get("type") in (None, "application/json", "application/octet-stream")
               for t, a in page.tags)


needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="no Chromium on PATH (Debian's "
                                    "`chromium` package; `.ci/run` installs it)")


@needs_chromium
def test_pages_in_headless_chromium_offline(report, run_dir):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = report.resolve().as_uri()
    with Browser(offline=True) as b:
        b.open(url)
        charts = b.evaluate("[...document.querySelectorAll('svg.chart')].map(s => [s.dataset.chart, "
                            "s.getBoundingClientRect().width, s.querySelectorAll('circle, rect[fill], "
                            "path[d]:not([d=\"\"])').length])")
        assert len(charts) >= len(CURVES) + 4
        assert all(w > 100 and marks > 0 for _, w, marks in charts), charts
        shots = [b.screenshot(ARTIFACTS / "overview.png")]
        b.evaluate("location.hash = '#archive'")
        b.wait_for("document.body.dataset.page === 'archive'")
        total = b.evaluate("document.querySelectorAll('#table tbody tr').length")
        b.evaluate("document.querySelector('#table th[data-k=\"win\"]').click()")
        b.evaluate("document.querySelector('#table th[data-k=\"win\"]').click()")  # descending
        wins = b.evaluate("[...document.querySelectorAll('#table tbody tr')].map(r => r.children[8].textContent)")
        numbers = [float(w) for w in wins if w != "-"]
        assert numbers == sorted(numbers, reverse=True) and wins[len(numbers):] == ["-"] * (len(wins) - len(numbers))
        skill = "mathematical reasoning"
        b.evaluate(f"(s => {{ s.value = {json.dumps(skill)}; s.dispatchEvent(new Event('input', {{bubbles: true}})); }})"
                   "(document.querySelector('select[data-f=skill]'))")
        skills = b.evaluate("[...document.querySelectorAll('#table tbody tr')].map(r => r.children[2].textContent)")
        assert skills and set(skills) == {skill} and len(skills) < total
        assert b.evaluate("document.querySelector('#count').textContent").startswith(f"{len(skills)} of ")
        shots.append(b.screenshot(ARTIFACTS / "archive.png"))
        env_id = next(e["id"] for e in pages(parse(report)) if e["episodes"] and e["doc"])
        for key, value in (("skill", ""), ("q", env_id[:12])):  # find it with the search box, open it
            b.evaluate(f"(s => {{ s.value = {json.dumps(value)}; s.dispatchEvent(new Event('input', {{bubbles: true}})); }})"
                       f"(document.querySelector('[data-f={key}]'))")
        assert b.evaluate("document.querySelectorAll('#table tbody tr').length") == 1
        b.evaluate(f"document.querySelector('#table a[href=\"#env/{env_id}\"]').click()")
        b.wait_for("!!document.querySelector('#env .pair')")
        heads = b.evaluate("[...document.querySelector('#env .pair').querySelectorAll('.head')].map(h => h.textContent)")
        assert [h.split(" · ")[0] for h in heads] == ["with hint", "without hint"]
        assert b.evaluate("document.querySelectorAll('#env .pair .arm-hint .turn pre').length") > 0
        assert b.evaluate("document.querySelectorAll('#env .pair .arm-no_hint .turn pre').length") > 0
        assert b.evaluate("document.querySelectorAll('#env pre.code span.k').length") > 5  # highlighted
        assert "Grounding document" in b.evaluate("document.querySelector('#env').innerText")
        shots.append(b.screenshot(ARTIFACTS / "env.png"))
        assert b.errors == [] and b.requests == [url], (b.errors, b.requests)
    print("screenshots:", *shots)
    assert all(s.stat().st_size > 10_000 for s in shots)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def test_serve_answers_every_page_and_refreshes_when_an_iteration_lands(run_dir, tmp_path):
    from spadework.report.serve import ReportServer

    live = tmp_path / "run"
    shutil.copytree(run_dir, live)
    server = ReportServer(live, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = Browser(offline=False) if find_chromium() else None
    try:
        html = _get(server.url).decode()
        assert '"live":true' in html and "chunk-0" not in html
        version = json.loads(_get(server.url + "api/version"))["version"]
        with Archive.open_read_only(archive_path(live)) as a:
            env_id, n = a.query("SELECT env_id, count(*) AS n FROM episodes GROUP BY env_id ORDER BY n DESC")[0]
        page = json.loads(_get(server.url + f"api/env/{env_id}"))
        assert sum(bool(p[x]) for p in page["episodes"] for x in ("hint", "no_hint")) == n > 2
        with pytest.raises(urllib.error.HTTPError, match="404"):
            _get(server.url + "api/env/" + "0" * 64)
        if browser:
            browser.open(server.url)
            first = browser.evaluate("performance.timeOrigin")
        make_run(live, 4, resume=True)
        assert json.loads(_get(server.url + "api/version"))["version"] != version
        assert _series_xs_ys(_get(server.url).decode(), "agent_return.no_hint")[0] == [0, 1, 2, 3]
        if browser:  # the open page notices the new iteration and reloads itself
            browser.wait_for(f"performance.timeOrigin !== {first} && !!document.body && document.body.dataset.ready === '1'")
            xs = browser.evaluate("document.querySelector('g[data-metric=\"agent_return.no_hint\"]').dataset.x")
            assert json.loads(xs) == [0, 1, 2, 3]
            assert browser.errors == []
    finally:
        if browser:
            browser.close()
        server.shutdown()
        server.server_close()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spadework.cli", "report", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_cli_writes_the_file_and_says_what_is_wrong_in_one_line(run_dir, tmp_path):
    ok = _cli(str(run_dir), "--out", str(tmp_path / "r.html"), "--episodes", "4")
    assert ok.returncode == 0 and ok.stdout.startswith(f"wrote {tmp_path / 'r.html'}") and ok.stderr == ""
    (tmp_path / "notarun").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "archive.sqlite").write_text("not sqlite")
    for args, says in [((str(tmp_path / "missing"),), "no run directory"),
                       ((str(tmp_path / "notarun"),), "holds no archive.sqlite"),
                       ((str(tmp_path / "bad"),), "is it a spadework archive"),
                       ((str(run_dir), "--out", str(tmp_path)), "is a directory"),
                       ((str(run_dir), "--out", str(tmp_path / "no" / "r.html")), "does not exist")]:
        r = _cli(*args)
        assert r.returncode == 1 and r.stdout == "", (args, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and says in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = _cli(str(run_dir), "--episodes", "-1")
    assert r.returncode == 2


def test_run_summary_sparklines_follow_the_metrics(run_dir):
    from spadework.figures import IterationMetrics
    from spadework.report.terminal import BLOCKS, run_summary

    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    out = run_summary([IterationMetrics.from_dict(m) for m in lines], str(run_dir))
    row = next(x for x in out if x.strip().startswith("agent return, unhinted"))
    spark, first_last = row.split("  ")[-2:]
    ys = [m["agent_return"]["no_hint"] for m in lines]
    assert len(spark) == len(ys) and all(c in BLOCKS for c in spark)
    assert spark[ys.index(max(ys))] == BLOCKS[-1] and spark[ys.index(min(ys))] == BLOCKS[0]
    assert first_last == f"{ys[0]:.3g} -> {ys[-1]:.3g}"
    attempts = sum(v for m in lines for k, v in m["validity_funnel"].items() if k != "total")
    assert any(x.strip().startswith(f"designs: {attempts} attempts") for x in out)
    assert out[-1].endswith(f"spadework report {run_dir}")
    assert not any("warning" in x for x in out)
    # a run in which nothing was played (every environment failed to load) says so
    idle = run_summary([IterationMetrics.from_dict({**m, "episodes": 0}) for m in lines], str(run_dir))
    assert any(x.strip().startswith("warning: no episode was played") for x in idle)
