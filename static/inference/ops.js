// Ops page: poll the JSON snapshot, refresh the tables, draw tokens/s and queue depth per worker.
(function () {
  "use strict";
  const URL_DATA = "/console/ops/data.json";
  const KEEP = 90; // samples kept per worker (3 min at 2 s)
  const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2"];
  const history = {}; // worker -> [{t, tps, queue}]

  const fmt = (v, digits = 1) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(0) + "%");
  const pair = (o, a, b) => `${fmt(o && o[a], 0)} / ${fmt(o && o[b], 0)}`;

  function cell(text, cls, title) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (title) td.title = title;
    return td;
  }

  function renderWorkers(workers) {
    const body = document.querySelector("#workers tbody");
    body.replaceChildren();
    if (!workers.length) {
      const tr = document.createElement("tr");
      const td = cell("No worker registered.");
      td.colSpan = 14;
      tr.append(td);
      body.append(tr);
      return;
    }
    for (const w of workers) {
      const tr = document.createElement("tr");
      tr.dataset.worker = w.name;
      tr.append(
        cell(w.name, null, w.base_url), cell(w.role),
        cell(w.status, "status-" + w.status, w.last_error || ""), cell(w.breaker),
        cell(fmt(w.waiting, 0)), cell(fmt(w.running, 0)), cell(pct(w.kv_cache_usage)),
        cell(pct(w.prefix_cache_hit_rate)), cell(fmt(w.tokens_per_s)),
        cell(pair(w.router, "ttft_p50_ms", "ttft_p95_ms")),
        cell(pair(w.engine, "ttft_p50_ms", "ttft_p95_ms")),
        cell(pair(w.router, "itl_p50_ms", "itl_p95_ms")),
        cell(pair(w.engine, "itl_p50_ms", "itl_p95_ms")),
        cell(w.metrics_age_s === null ? "never" : w.metrics_age_s + " s" + (w.stale ? " (stale)" : ""))
      );
      body.append(tr);
    }
  }

  function renderYields(rows) {
    const body = document.querySelector("#yields tbody");
    body.replaceChildren();
    for (const y of rows) {
      const tr = document.createElement("tr");
      tr.dataset.model = y.model;
      const paths = Object.entries(y.by_path || {}).map(([p, n]) => `${p} ${n}`).join(", ");
      tr.append(
        cell(y.model), cell(y.skipping ? "skipping (probing)" : "generating"),
        cell(fmt(y.yield_rate, 2)), cell(fmt(y.answer_yield, 2)), cell(y.samples),
        cell(pct(y.skip_rate)), cell(paths || "–"),
        cell(`${fmt(y.p50_wait_ms, 0)} / ${fmt(y.p95_wait_ms, 0)}`)
      );
      body.append(tr);
    }
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = cell("No answers measured yet.");
      td.colSpan = 8;
      tr.append(td);
      body.append(tr);
    }
  }

  function renderTenants(tenants) {
    const body = document.querySelector("#tenants tbody");
    body.replaceChildren();
    for (const t of tenants) {
      const tr = document.createElement("tr");
      tr.append(
        cell(t.tenant), cell(t.requests), cell(t.cancelled), cell(t.failed),
        cell(t.prompt_tokens), cell(t.completion_tokens)
      );
      body.append(tr);
    }
    if (!tenants.length) {
      const tr = document.createElement("tr");
      const td = cell("No requests yet.");
      td.colSpan = 6;
      tr.append(td);
      body.append(tr);
    }
  }

  function draw() {
    const canvas = document.getElementById("chart");
    const ctx = canvas.getContext("2d");
    const W = canvas.width, H = canvas.height, pad = 30;
    ctx.clearRect(0, 0, W, H);
    const names = Object.keys(history);
    let maxTps = 1, maxQ = 1;
    for (const n of names) for (const s of history[n]) {
      maxTps = Math.max(maxTps, s.tps || 0);
      maxQ = Math.max(maxQ, s.queue || 0);
    }
    ctx.strokeStyle = "#e3e6ec";
    ctx.strokeRect(pad, 5, W - pad - 5, H - pad - 5);
    ctx.fillStyle = "#667085";
    ctx.font = "11px system-ui";
    ctx.fillText(maxTps.toFixed(0) + " tok/s", 2, 14);
    ctx.fillText("queue max " + maxQ.toFixed(0), W - 110, 14);
    const x = (i) => pad + (i / (KEEP - 1)) * (W - pad - 5);
    const legend = [];
    names.forEach((n, k) => {
      const color = COLORS[k % COLORS.length];
      const pts = history[n];
      const off = KEEP - pts.length;
      ctx.strokeStyle = color;
      ctx.setLineDash([]);
      ctx.beginPath();
      pts.forEach((s, i) => {
        const y = H - pad - ((s.tps || 0) / maxTps) * (H - pad - 10);
        i ? ctx.lineTo(x(i + off), y) : ctx.moveTo(x(i + off), y);
      });
      ctx.stroke();
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      pts.forEach((s, i) => {
        const y = H - pad - ((s.queue || 0) / maxQ) * (H - pad - 10);
        i ? ctx.lineTo(x(i + off), y) : ctx.moveTo(x(i + off), y);
      });
      ctx.stroke();
      // DOM nodes and CSSOM colours, not innerHTML with style attributes (CSP: style-src).
      const swatch = document.createElement("span");
      swatch.style.color = color;
      swatch.textContent = "■";
      legend.push(swatch, ` ${n}\u00a0\u00a0 `);
    });
    document.getElementById("legend").replaceChildren(
      ...legend, "(solid: tokens/s, dashed: queue depth)");
  }

  async function tick() {
    try {
      const r = await fetch(URL_DATA, { credentials: "same-origin", cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const data = await r.json();
      renderWorkers(data.workers);
      renderYields(data.yields || []);
      renderTenants(data.tenants);
      const now = Date.now();
      for (const w of data.workers) {
        const h = (history[w.name] = history[w.name] || []);
        h.push({ t: now, tps: w.tokens_per_s, queue: (w.waiting || 0) + (w.running || 0) });
        if (h.length > KEEP) h.shift();
      }
      draw();
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (err) {
      document.getElementById("updated").textContent = "refresh failed: " + err.message;
    }
  }

  tick();
  setInterval(tick, 2000);
})();
