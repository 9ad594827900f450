// Agent console: the queue and one conversation, kept live over /ws/console/.
// The server (PostgreSQL) is the truth: every "queue.changed" refetches the queue JSON, so a
// reload or a server restart shows exactly the same state.
(function () {
  "use strict";
  const root = document.getElementById("console");
  const tenant = root.dataset.tenant;
  const me = Number(root.dataset.user);
  const csrf = document.querySelector("[name=csrfmiddlewaretoken]").value;
  const queueEl = document.getElementById("queue");
  const countEl = document.getElementById("queue-count");
  const agentsEl = document.getElementById("agents");
  const detail = document.getElementById("detail");
  let current = Number(root.dataset.handoff) || null;
  let currentData = null;
  // Messages of the open handoff that arrived live: a detail fetched before one of them was
  // saved, and rendered after it arrived, must not take it off the transcript.
  let liveMessages = new Map();
  // The conversation whose transcript is on screen: live events of any other are not painted.
  const shownConversation = () => currentData && currentData.handoff.conversation_id;
  let ws = null;
  let retry = 0;

  const api = (path, body) =>
    fetch(`/console/api/${path}?tenant=${encodeURIComponent(tenant)}`, {
      method: body ? "POST" : "GET",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      credentials: "same-origin",
      body: body ? JSON.stringify(body) : undefined,
    }).then(async (r) => {
      const data = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error((data.error && data.error.detail) || `HTTP ${r.status}`);
      return data;
    });

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const child of children) {
      if (child == null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function waited(seconds) {
    if (seconds < 60) return `${seconds}s`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
    return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  }

  async function loadQueue() {
    const data = await api("queue");
    countEl.textContent = data.handoffs.length;
    agentsEl.textContent = data.agents_online.length
      ? `Online: ${data.agents_online.map((a) => a.name).join(", ")}`
      : "No agents online";
    queueEl.replaceChildren(
      ...data.handoffs.map((h) =>
        el("li", {
            class: "queue-item", tabindex: "0", role: "button", "data-id": h.id,
            "aria-current": String(h.id === current),
            onclick: () => select(h.id),
            onkeydown: (e) => { if (e.key === "Enter") select(h.id); },
          },
          el("strong", {}, h.customer), " ",
          el("span", { class: h.priority === 1 ? "p1" : "" }, h.priority === 1 ? "urgent" : ""),
          el("div", { class: "meta" },
            `${h.reason_label} · waiting ${waited(h.waiting_seconds)} · ${h.state}` +
            (h.assigned_to ? ` · ${h.assigned_to}` : "") +
            (h.routed_to && !h.assigned_to ? ` · for ${h.routed_to}` : "") +
            (h.escalated ? " · escalated" : "")),
          el("div", { class: "meta" }, h.last_message),
          h.viewers.length ? el("div", { class: "meta viewers" }, `Viewing: ${h.viewers.join(", ")}`) : null,
        ))
    );
    document.getElementById("active").replaceChildren(
      ...data.active.map((c) =>
        el("li", { class: "queue-item" },
          el("strong", {}, c.customer), " ",
          el("button", { class: "takeover", onclick: async () => {
              try {
                const h = await api(`conversations/${c.conversation_id}/takeover`, {});
                await loadQueue();
                select(h.id);
              } catch (e) { alert(e.message); }
            } }, "Take over")))
    );
    if (current && !data.handoffs.some((h) => h.id === current) && currentData) {
      await loadDetail();  // closed meanwhile: show its final state
    }
  }

  function renderMessage(m) {
    const who = { customer: "Customer", bot: "Bot", agent: m.author || "Agent", system: "" }[m.role];
    const node = el("div", { class: `tmsg ${m.role}`, "data-id": m.id },
      el("span", { class: "who" }, `${who}${m.kind && m.kind !== "text" ? " · " + m.kind : ""}`),
      m.text);
    if (m.citations && m.citations.length) {
      node.append(el("ol", {}, ...m.citations.map((c) =>
        el("li", {}, el("a", { href: c.url || "#", target: "_blank", rel: "noopener" },
          `${c.title}${c.heading ? " — " + c.heading : ""}`), c.quote ? ` “${c.quote}”` : ""))));
    }
    return node;
  }

  async function select(id) {
    if (id !== current) liveMessages = new Map();
    current = id;
    history.replaceState(null, "", `/console/handoffs/${id}/?tenant=${encodeURIComponent(tenant)}`);
    queueEl.querySelectorAll(".queue-item").forEach((n) =>
      n.setAttribute("aria-current", String(Number(n.dataset.id) === id)));
    send({ type: "view", handoff_id: id });
    await loadDetail();
  }

  async function act(fn) {
    try { await fn(); } catch (e) { flash(e.message); }
    await Promise.all([loadQueue(), loadDetail()]);
  }

  function flash(text) {
    const box = detail.querySelector(".status-line");
    if (box) box.textContent = text;
  }

  // Coalesce bursts of reloads (claim → queue.changed → owner change) into one fetch.
  let detailTimer = null;
  function loadDetail() {
    return new Promise((resolve) => {
      clearTimeout(detailTimer);
      detailTimer = setTimeout(() => renderDetail().then(resolve, resolve), 80);
    });
  }

  async function renderDetail() {
    if (!current) return;
    const opened = current;
    const d = await api(`handoffs/${opened}`);
    if (opened !== current) return;  // the agent opened another handoff meanwhile
    const saved = new Set(d.messages.map((m) => m.id));
    for (const [key, m] of [...liveMessages]) {
      if (saved.has(key) || m.conversation_id !== d.handoff.conversation_id) liveMessages.delete(key);
    }
    const messages = [...d.messages, ...[...liveMessages.values()].sort((a, b) => a.id - b.id)];
    // Keep what the agent is typing (and where) across re-renders.
    const drafts = {};
    for (const id of ["reply-text", "note-text"]) {
      const box = document.getElementById(id);
      if (box) drafts[id] = box.value;
    }
    const focused = document.activeElement && document.activeElement.id;
    currentData = d;
    const h = d.handoff;
    const mine = h.assigned_to_id === me;
    const open = ["requested", "queued", "assigned"].includes(h.state);
    const claimBtn = el("button", { class: "primary", id: "claim",
      onclick: () => act(() => api(`handoffs/${h.id}/claim`, { expected_version: h.version })) },
      "Claim");
    claimBtn.disabled = !open || h.state === "assigned";
    const giveBack = el("button", { id: "give-back",
      onclick: () => act(() => api(`handoffs/${h.id}/close`, { expected_version: h.version, outcome: "returned_to_bot" })) },
      "Give back to bot");
    const resolve = el("button", { id: "resolve",
      onclick: () => act(() => api(`handoffs/${h.id}/close`, { expected_version: h.version, outcome: "resolved" })) },
      "Resolve");
    giveBack.disabled = resolve.disabled = !open || (h.state === "assigned" && !mine);

    const replyBox = el("textarea", { id: "reply-text", "aria-label": "Reply to customer",
      placeholder: mine ? "Write to the customer…" : "Claim the conversation to reply" });
    replyBox.disabled = !mine;
    const sendBtn = el("button", { class: "primary", id: "reply-send",
      onclick: () => act(async () => {
        if (!replyBox.value.trim()) return;
        await api(`handoffs/${h.id}/reply`, { text: replyBox.value });
        replyBox.value = "";
      }) }, "Send");
    sendBtn.disabled = !mine;
    const canned = el("select", { "aria-label": "Canned responses",
      onchange: (e) => { if (e.target.value) replyBox.value = e.target.value; e.target.value = ""; } },
      el("option", { value: "" }, "Canned responses…"),
      ...d.canned.map((c) => el("option", { value: c.text }, c.title)));
    canned.disabled = !mine;

    const noteBox = el("textarea", { id: "note-text", "aria-label": "Internal note",
      placeholder: "Internal note (never shown to the customer)" });
    const noteBtn = el("button", { id: "note-add",
      onclick: () => act(async () => {
        if (!noteBox.value.trim()) return;
        await api(`conversations/${h.conversation_id}/notes`, { text: noteBox.value });
        noteBox.value = "";
      }) }, "Add note");

    detail.replaceChildren(
      el("h2", {}, `${h.customer}${h.verified ? " ✓" : ""}`),
      el("p", { class: "status-line", role: "status" },
        `${h.reason_label}${h.reason_detail ? " — " + h.reason_detail : ""} · ${h.state}` +
        (h.assigned_to ? ` · claimed by ${h.assigned_to}` : "") +
        (h.customer_email ? ` · contact: ${h.customer_email}` : "") +
        ` · conversation owner: ${d.owner}`),
      el("div", { class: "row" }, claimBtn, giveBack, resolve),
      el("h3", {}, "Summary"),
      el("div", { class: "summary", id: "summary" }, d.summary || "Summary is being written…"),
      d.actions.length ? el("h3", {}, "Actions") : null,
      d.actions.length ? el("ul", { id: "actions" }, ...d.actions.map((a) =>
        el("li", {}, el("a", { href: a.url }, `${a.tool} ${JSON.stringify(a.arguments)}`),
          ` — ${a.state.replace("_", " ")}`))) : null,
      el("h3", {}, "Transcript"),
      el("div", { class: "transcript", id: "transcript" }, ...messages.map(renderMessage)),
      el("div", { class: "reply" }, canned, replyBox, el("div", { class: "row" }, sendBtn)),
      el("h3", {}, "Internal notes"),
      el("div", { class: "notes", id: "notes" },
        ...d.notes.map((n) => el("p", {}, el("strong", {}, `${n.author}: `), n.text)),
        noteBox, noteBtn),
    );
    if (drafts["reply-text"] && !replyBox.disabled) replyBox.value = drafts["reply-text"];
    if (drafts["note-text"]) noteBox.value = drafts["note-text"];
    if (focused) document.getElementById(focused)?.focus();
  }

  function send(event) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(event));
  }

  // The events that carry a saved message (`message`): the same names the customer gets.
  const SAVED_MESSAGE_EVENTS = new Set(["message.created", "agent.message", "answer.completed"]);

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    ws = new WebSocket(`${scheme}://${location.host}/ws/console/?tenant=${encodeURIComponent(tenant)}`);
    ws.addEventListener("open", () => {
      retry = 0;
      if (current) send({ type: "view", handoff_id: current });
      loadQueue();
    });
    ws.addEventListener("message", (msg) => {
      const ev = JSON.parse(msg.data);
      if (ev.type === "queue.changed") {
        loadQueue();
        if (ev.handoff_id === current && ev.event !== "viewers") loadDetail();
      } else if (SAVED_MESSAGE_EVENTS.has(ev.type)) {
        // A saved message, under the customer's name for it (docs/console-events.md).
        const box = document.getElementById("transcript");
        const live = box && box.querySelector(`[data-live-id="${ev.message.id}"]`);
        if (live) live.remove();  // the streamed answer is replaced by the saved message
        const done = ev.message.state !== "streaming";
        if (done) liveMessages.set(ev.message.id, ev.message);  // a reload keeps only its own
        const shown = ev.message.conversation_id === shownConversation();
        if (box && shown && !box.querySelector(`[data-id="${ev.message.id}"]`) && done) {
          box.append(renderMessage(ev.message));
        }
      } else if (ev.type === "answer.delta" || ev.type === "answer.revised") {
        // The bot's answer as the customer sees it, while it streams.
        const box = document.getElementById("transcript");
        if (!box || ev.conversation_id !== shownConversation()) return;
        if (box.querySelector(`[data-id="${ev.message_id}"]`)) return;
        let live = box.querySelector(`[data-live-id="${ev.message_id}"]`);
        if (!live) {
          live = document.createElement("p");
          live.className = "msg bot streaming";
          live.dataset.liveId = ev.message_id;
          box.append(live);
        }
        live.textContent = ev.type === "answer.revised" ? ev.text : live.textContent + ev.text;
      } else if (ev.type === "conversation.owner") {
        loadDetail();
      }
    });
    ws.addEventListener("close", () => setTimeout(connect, Math.min(10000, 500 * 2 ** retry++)));
  }

  setInterval(() => send({ type: "presence.ping" }), 20000);
  setInterval(loadQueue, 30000);  // waiting times tick even when nothing changes
  connect();
  if (current) loadDetail();
})();
