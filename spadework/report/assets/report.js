// spadework report: the archive table (sort, filter, pages) and the environment pages.
// Plain browser JavaScript, no library. Data: #meta, #rows (JSON) and #chunk-N (gzip+base64
// JSON arrays of environment pages, CHUNK per chunk, in #rows order). A served report (meta.live)
// fetches each environment page from the server and reloads when a new iteration lands.
"use strict";
(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const meta = JSON.parse($("#meta").textContent);
  const rows = JSON.parse($("#rows").textContent);
  const index = new Map(rows.map((r, i) => [r.id, i]));
  const chunks = new Map();
  const PAGE = 100;
  const state = { sort: "it", dir: 1, page: 0, f: {} };

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  const num = (v, d) => (v == null ? "-" : Number(v).toFixed(d == null ? 2 : d));
  const short = id => esc(id.slice(0, 12));
  const envLink = (id, text) => `<a href="#env/${esc(id)}">${text == null ? short(id) : esc(text)}</a>`;

  // -- environment page data ---------------------------------------------------------------
  async function inflate(b64) {
    const bin = atob(b64.trim());
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  async function detail(id) {
    if (meta.live) {
      const r = await fetch("api/env/" + encodeURIComponent(id));
      if (!r.ok) throw new Error("the server answered " + r.status);
      return r.json();
    }
    const i = index.get(id);
    const c = Math.floor(i / meta.chunk);
    if (!chunks.has(c)) chunks.set(c, inflate($("#chunk-" + c).textContent));
    return (await chunks.get(c))[i % meta.chunk];
  }

  // -- Python highlighting (enough to read generated environments) --------------------------
  const KW = new Set("False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case".split(" "));
  const BI = new Set("self len range int str float list dict set tuple min max sum abs any all enumerate zip sorted isinstance print super round map filter reversed bool divmod ValueError TypeError KeyError IndexError Exception".split(" "));
  const TOKEN = /("""[\s\S]*?"""|'''[\s\S]*?'''|[rbfuRBFU]{0,2}"(?:\\.|[^"\\\n])*"|[rbfuRBFU]{0,2}'(?:\\.|[^'\\\n])*'|#[^\n]*|@[A-Za-z_][\w.]*|\b\d[\d_]*\.?\d*(?:[eE][+-]?\d+)?\b|\b[A-Za-z_]\w*\b)/g;
  function highlight(code) {
    let out = "", last = 0, prev = "";
    code.replace(TOKEN, (tok, _g, at) => {
      out += esc(code.slice(last, at));
      last = at + tok.length;
      let cls = "";
      const c0 = tok[0];
      if (c0 === "#") cls = "c";
      else if (c0 === "@") cls = "d";
      else if (/^[rbfuRBFU]{0,2}["']/.test(tok)) cls = "s";
      else if (/^\d/.test(tok)) cls = "n";
      else if (KW.has(tok)) cls = "k";
      else if (prev === "def" || prev === "class") cls = "f";
      else if (BI.has(tok)) cls = "b";
      out += cls ? `<span class="${cls}">${esc(tok)}</span>` : esc(tok);
      if (/^\w+$/.test(tok)) prev = tok;
      return tok;
    });
    return out + esc(code.slice(last));
  }

  // -- the archive table --------------------------------------------------------------------
  const COLS = [
    ["id", "id"], ["cls", "class"], ["skill", "skill"], ["status", "status"], ["stage", "rejected at"],
    ["origin", "origin"], ["it", "iteration", 1], ["plays", "plays", 1], ["win", "win rate", 1],
    ["regret", "regret", 1], ["last", "last played", 1], ["episodes", "episodes", 1],
  ];
  const distinct = key => [...new Set(rows.map(r => r[key]))].filter(v => v !== "").sort();
  function filterControls() {
    const sel = (key, label) => `<label>${label}<select data-f="${key}"><option value="">all</option>` +
      distinct(key).map(v => `<option>${esc(v)}</option>`).join("") + "</select></label>";
    const range = (key, label, step) => `<label>${label} from<input type="number" step="${step}" data-f="${key}_min"></label>` +
      `<label>to<input type="number" step="${step}" data-f="${key}_max"></label>`;
    $("#filters").innerHTML = `<label>search<input type="search" data-f="q" placeholder="id, class, name, stage"></label>` +
      sel("skill", "skill") + sel("status", "status") + sel("origin", "origin") + sel("setting", "setting") +
      range("it", "iteration", 1) + range("win", "win rate", 0.05) + range("regret", "regret", 0.05) +
      `<label>plays at least<input type="number" step="1" data-f="plays_min"></label>`;
    $("#filters").addEventListener("input", e => {
      const k = e.target.dataset.f;
      if (!k) return;
      state.f[k] = e.target.value;
      state.page = 0;
      renderTable();
    });
  }
  function passes(r) {
    const f = state.f;
    for (const k of ["skill", "status", "origin", "setting"]) if (f[k] && r[k] !== f[k]) return false;
    for (const k of ["it", "win", "regret", "plays"]) {
      const lo = f[k + "_min"], hi = f[k + "_max"];
      if ((lo !== undefined && lo !== "") || (hi !== undefined && hi !== "")) {
        if (r[k] == null) return false;
        if (lo !== undefined && lo !== "" && r[k] < Number(lo)) return false;
        if (hi !== undefined && hi !== "" && r[k] > Number(hi)) return false;
      }
    }
    if (f.q) {
      const q = f.q.toLowerCase();
      if (![r.id, r.cls, r.name, r.stage, r.skill].some(v => String(v).toLowerCase().includes(q))) return false;
    }
    return true;
  }
  function compare(a, b) {
    const x = a[state.sort], y = b[state.sort];
    if (x == null && y == null) return 0;
    if (x == null) return 1;  // missing values last, either direction
    if (y == null) return -1;
    return (x < y ? -1 : x > y ? 1 : 0) * state.dir;
  }
  function renderTable() {
    const shown = rows.filter(passes).sort(compare);
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const slice = shown.slice(state.page * PAGE, (state.page + 1) * PAGE);
    const head = COLS.map(([k, label, n]) => `<th data-k="${k}" class="${n ? "num " : ""}${state.sort === k ? (state.dir > 0 ? "sorted-asc" : "sorted-desc") : ""}">${label}</th>`).join("");
    const body = slice.map(r => `<tr data-id="${esc(r.id)}"><td>${envLink(r.id)}</td><td>${esc(r.cls)}${r.name ? ` <span class="muted">(${esc(r.name)})</span>` : ""}</td>` +
      `<td>${esc(r.skill)}</td><td><span class="tag ${esc(r.status)}">${esc(r.status)}</span></td><td>${esc(r.stage)}</td><td>${esc(r.origin)}</td>` +
      `<td class="num">${r.it}</td><td class="num">${r.plays}</td><td class="num">${num(r.win)}</td><td class="num">${num(r.regret)}</td>` +
      `<td class="num">${r.last == null ? "-" : r.last}</td><td class="num">${r.episodes}</td></tr>`).join("");
    $("#table").innerHTML = `<div class="pager"><span id="count">${shown.length} of ${rows.length} environments</span>` +
      `<button data-p="-1" ${state.page ? "" : "disabled"}>previous</button><span>page ${state.page + 1} of ${pages}</span>` +
      `<button data-p="1" ${state.page + 1 < pages ? "" : "disabled"}>next</button></div>` +
      `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
  }
  function tableEvents() {
    $("#table").addEventListener("click", e => {
      const th = e.target.closest("th");
      if (th) {
        const k = th.dataset.k;
        state.dir = state.sort === k ? -state.dir : 1;
        state.sort = k;
        renderTable();
      }
      const b = e.target.closest("button[data-p]");
      if (b) { state.page += Number(b.dataset.p); renderTable(); }
    });
  }

  // -- an environment page ------------------------------------------------------------------
  function checkReport(rep, reason) {
    if (!rep) return `<p class="muted">No check report stored.${reason ? " " + esc(reason) : ""}</p>`;
    let failed = false;
    const trs = rep.results.map(r => {
      const cls = r.passed ? "pass" : "fail";
      if (!r.passed) failed = true;
      return `<tr><td>${esc(r.stage)}</td><td class="${cls}">${r.passed ? "passed" : "FAILED"}</td><td>${esc(r.reason)}</td><td>${num(r.seconds, 3)} s</td></tr>`;
    }).join("");
    const limit = rep.max_turns == null ? "" : ` Checked under max_turns = ${rep.max_turns}.`;
    return `<p class="muted">${failed ? "Stages after the failing one did not run." : "Every stage passed."}${limit}</p>` +
      `<table><thead><tr><th>stage</th><th>result</th><th>reason</th><th>time</th></tr></thead><tbody>${trs}</tbody></table>`;
  }
  function turnCell(ep, i) {
    if (!ep) return `<div class="turn muted">(not played)</div>`;
    const t = ep.turns[i];
    if (!t) return `<div class="turn muted">${i === ep.turns.length ? "(ended: " + esc(ep.status) + ")" : ""}</div>`;
    return `<div class="turn"><div class="meta">turn ${i + 1} · reward ${num(t.reward, 3)} · ${t.parsed ? "action parsed" : "no well-formed action"} · ${esc(t.finish)}</div>` +
      `<pre>${esc(t.text)}</pre><div class="meta">action sent: <code>${esc(t.action)}</code></div><pre>${esc(t.obs)}</pre></div>`;
  }
  function pairView(p) {
    const arms = ["hint", "no_hint"];
    const head = arms.map(a => {
      const ep = p[a];
      const what = ep ? `return ${num(ep.return)} · ${esc(ep.status)}${ep.error ? " · " + esc(ep.error) : ""} · ${ep.turns.length} turns` : "not embedded";
      return `<div class="arm-${a}"><div class="head">${a === "hint" ? "with hint" : "without hint"} · ${what}</div>` +
        (ep && ep.opening ? `<pre>${esc(ep.opening)}</pre>` : `<p class="muted">${ep ? "(opening message not stored)" : ""}</p>`) + "</div>";
    }).join("");
    const n = Math.max(...arms.map(a => (p[a] ? p[a].turns.length + 1 : 1)));
    let cells = "";
    for (let i = 0; i < n; i++) cells += arms.map(a => `<div class="arm-${a}">${turnCell(p[a], i)}</div>`).join("");
    return `<h3>iteration ${p.iteration}, play ${p.play_index}, seed ${p.seed}</h3><div class="pair" data-seed="${p.seed}">${head}${cells}</div>`;
  }
  function table(head, trs) {
    return `<table><thead><tr>${head.map(h => `<th>${h}</th>`).join("")}</tr></thead><tbody>${trs.join("")}</tbody></table>`;
  }
  function envPage(d) {
    const r = rows[index.get(d.id)];
    const src = { env: "the environment's own hint(), asked per instance (each hinted play's opening shows it)",
      policy: "written by the policy from the code, leak-checked, stored in the archive", none: "none stored" }[d.hint_source];
    const doc = d.doc ? `<p><b>${esc(d.doc.title || d.doc.id)}</b>${d.doc.stored ? "" : " <span class='muted'>(only an excerpt was kept by the archive that wrote this run)</span>"}</p><pre>${esc(d.doc.text)}</pre>`
      : `<p class="muted">${r.origin === "designed" && d.parent ? "A mutation of its parent: no document." : "No grounding document (" + esc(r.origin) + ")."}</p>`;
    const kids = d.children.length ? d.children.map(c => `${envLink(c.id)} ${esc(c.cls)} <span class="tag ${esc(c.status)}">${esc(c.status)}</span>`).join("<br>") : "<span class='muted'>none</span>";
    const hist = d.history.length ? table(["iteration", "plays", "wins", "win rate", "regret"], d.history.map(h => `<tr><td>${h.iteration}</td><td>${h.plays}</td><td>${h.wins}</td><td>${num(h.win_rate)}</td><td>${num(h.regret)}</td></tr>`)) : "<p class='muted'>Never played.</p>";
    const atts = d.attempts.length ? table(["iteration", "slot", "attempt", "outcome", "designer reward", "trained in"], d.attempts.map(a => `<tr><td>${a.iteration}</td><td>${a.slot}</td><td>${a.attempt}</td><td>${esc(a.outcome)}${a.reason ? ": " + esc(a.reason) : ""}</td><td>${num(a.reward, 3)}</td><td>${a.trained_iteration == null ? "-" : a.trained_iteration}</td></tr>`)) : "<p class='muted'>No designer attempt wrote this code (a starter or an import).</p>";
    const shown = d.episodes.reduce((n, p) => n + (p.hint ? 1 : 0) + (p.no_hint ? 1 : 0), 0);
    const more = d.episodes_total > shown ? ` The file embeds ${shown} of ${d.episodes_total} episodes; \`spadework report RUN_DIR --serve\` shows all.` : "";
    $("#env").innerHTML = `<div class="env"><p><a href="#archive">&larr; archive</a></p>` +
      `<h2>${esc(r.cls)}${r.name ? " (" + esc(r.name) + ")" : ""} <span class="tag ${esc(r.status)}">${esc(r.status)}${r.stage ? ": " + esc(r.stage) : ""}</span></h2>` +
      `<dl class="facts"><dt>id</dt><dd><code>${esc(d.id)}</code></dd><dt>skill</dt><dd>${esc(r.skill || "-")} (${esc(r.setting)})</dd>` +
      `<dt>origin</dt><dd>${esc(r.origin)}, iteration ${r.it}</dd><dt>plays</dt><dd>${r.plays} (${r.wins} won), latest win rate ${num(r.win)}, regret ${num(r.regret)}</dd>` +
      `<dt>parent</dt><dd>${d.parent ? (index.has(d.parent) ? envLink(d.parent) : short(d.parent) + " (not in the archive)") : "<span class='muted'>none</span>"}</dd><dt>mutated children</dt><dd>${kids}</dd>` +
      (r.bench ? `<dt>benchmarks</dt><dd>matches held-out tasks: ${esc(r.bench)}</dd>` : "") + `</dl>` +
      `<h3>Hint</h3><p class="muted">Source: ${src}.</p>${d.hint ? `<pre>${esc(d.hint)}</pre>` : ""}` +
      `<h3>Check report</h3>${checkReport(d.report, d.reason)}<h3>Grounding document</h3>${doc}` +
      `<h3>Plays per iteration</h3>${hist}<h3>Designer attempts</h3>${atts}` +
      `<h3>Episodes: with and without the hint, same seed</h3><p class="muted">${d.episodes.length ? "" : "No episodes."}${more}</p>` +
      d.episodes.map(pairView).join("") + `<h3>Code</h3><pre class="code">${highlight(d.code)}</pre></div>`;
  }

  // -- routing ------------------------------------------------------------------------------
  async function route() {
    const h = decodeURIComponent(location.hash.slice(1)) || "overview";
    const [page, id] = h.split("/");
    const target = page === "env" ? "env" : page === "archive" ? "archive" : "overview";
    for (const s of document.querySelectorAll("section.page")) s.hidden = s.id !== target;
    if (target === "env") {
      $("#env").innerHTML = "<p class='muted'>loading…</p>";
      if (!index.has(id)) { $("#env").innerHTML = `<p>No environment ${esc(id)} in this report.</p>`; return; }
      try { envPage(await detail(id)); } catch (e) { $("#env").innerHTML = `<p class="fail">Cannot show ${short(id)}: ${esc(e.message)}</p>`; }
      window.scrollTo(0, 0);
    }
    document.body.dataset.page = target;
  }

  async function poll(version) {
    try {
      const r = await fetch("api/version", { cache: "no-store" });
      const v = (await r.json()).version;
      if (version != null && v !== version) { location.reload(); return; }
      version = v;
      $("#status").textContent = "live: refreshes when an iteration lands";
    } catch (e) {
      $("#status").textContent = "live: the server does not answer";
    }
    setTimeout(() => poll(version), 3000);
  }

  filterControls();
  tableEvents();
  renderTable();
  window.addEventListener("hashchange", route);
  route().then(() => {
    document.body.dataset.readyMs = String(Math.round(performance.now()));
    document.body.dataset.ready = "1";
  });
  $("#status").textContent = `generated ${meta.generated}` + (meta.live ? "" : ` · ${meta.k} episode(s) per environment embedded`);
  if (meta.live) poll(null);
})();
