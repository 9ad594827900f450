// Customer chat: WebSocket client for /ws/chat/ (protocol in docs/chat-protocol.md).
// Messages are idempotent by client_message_id, so unsent ones are re-sent after a reconnect
// and the server returns the saved result instead of answering twice.
(function () {
  "use strict";
  const root = document.getElementById("chat");
  const tenant = root.dataset.tenant;
  const log = document.getElementById("log");
  const statusEl = document.getElementById("status");
  const typing = document.getElementById("typing");
  const notice = document.getElementById("notice");
  const form = document.getElementById("composer");
  const input = document.getElementById("input");
  const humanBtn = document.getElementById("human");
  // The identity token never travels in a URL that reaches a server log: the widget hands it
  // over by postMessage, a direct link puts it in the fragment (#identity=…), which browsers
  // never send, and it is removed from the address bar at once. It is redeemed once; reconnects
  // use the identity_session the server returns (kept for this tab only).
  let identity = null;
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("identity")) {
    identity = hash.get("identity");
    history.replaceState(null, "", location.pathname + location.search);
  }
  const tabStore = {
    get: (n) => { try { return sessionStorage.getItem(`supportbot:${tenant}:${n}`); } catch (e) { return null; } },
    set: (n, v) => { try { sessionStorage.setItem(`supportbot:${tenant}:${n}`, v); } catch (e) { /* private mode */ } },
    drop: (n) => { try { sessionStorage.removeItem(`supportbot:${tenant}:${n}`); } catch (e) { /* private mode */ } },
  };
  const key = (name) => `supportbot:${tenant}:${name}`;
  const store = {
    get: (n) => { try { return JSON.parse(localStorage.getItem(key(n))); } catch (e) { return null; } },
    set: (n, v) => { try { localStorage.setItem(key(n), JSON.stringify(v)); } catch (e) { /* private mode */ } },
  };

  let ws = null;
  let ready = false;
  let retry = 0;
  let lastId = 0;
  const rendered = new Map();   // message id -> element
  const actions = new Map();    // action id -> latest card (highest version wins)
  const pending = new Map(Object.entries(store.get("pending") || {}));  // client id -> text

  function setStatus(text) { statusEl.textContent = text; }
  let queuedNotice = false;  // the notice shown is a place in line (cleared when the answer starts)
  function showNotice(text) { notice.textContent = text; notice.hidden = !text; }
  function savePending() { store.set("pending", Object.fromEntries(pending)); }

  function bubble(role, id, clientId) {
    const el = document.createElement("article");
    el.className = `msg ${role}`;
    if (id) el.dataset.id = id;
    if (clientId) el.dataset.clientId = clientId;
    const who = document.createElement("span");
    who.className = "who";
    who.textContent = { customer: "You", bot: "Assistant", agent: "Support team", system: "" }[role] || "";
    const body = document.createElement("div");
    body.className = "body";
    el.append(who, body);
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return el;
  }

  function setBody(el, text) { el.querySelector(".body").textContent = text; }

  function renderSources(el, citations) {
    el.querySelector(".sources")?.remove();
    if (!citations || !citations.length) return;
    const list = document.createElement("ol");
    list.className = "sources";
    list.setAttribute("aria-label", "Sources");
    for (const c of citations) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = c.url || "#";
      a.target = "_blank";
      a.rel = "noopener";
      a.textContent = `[${c.index}] ${c.title}${c.heading && c.heading !== c.title ? " — " + c.heading : ""}`;
      li.append(a);
      if (c.quote) {
        const q = document.createElement("blockquote");
        q.textContent = c.quote;
        li.append(q);
      }
      list.append(li);
    }
    el.append(list);
  }

  function renderRating(el, id, current) {
    el.querySelector(".rate")?.remove();
    const box = document.createElement("div");
    box.className = "rate";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Was this helpful?");
    for (const [rating, label] of [["helpful", "Helpful"], ["not_helpful", "Not helpful"]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.dataset.rating = rating;
      b.setAttribute("aria-pressed", String(current === rating));
      b.addEventListener("click", () => send({ type: "feedback.send", message_id: Number(id), rating }));
      box.append(b);
    }
    el.append(box);
  }

  // A proposal card: what would happen, Confirm / Cancel while it awaits the customer, then
  // its state. Cards are rendered under the message that carries them (meta action_id) and
  // replaced by newer versions only, so events arriving twice or out of order change nothing.
  const STATE_LABEL = {
    awaiting_confirmation: "Waiting for your confirmation",
    awaiting_approval: "Waiting for review by our team",
    approved: "Approved — submitting",
    executing: "Submitting…",
    unknown: "Submitted — confirming with our payment system",
    succeeded: "Done — confirmed by our payment system",
    failed: "Not completed",
    rejected: "Not possible",
    denied: "Not approved",
    cancelled: "Cancelled",
    expired: "Expired",
  };

  function upsertCard(card) {
    if (!card || !card.id || card.tool !== "request_refund") return;
    const known = actions.get(card.id);
    if (known && known.version > card.version) return;
    actions.set(card.id, card);
    for (const el of log.querySelectorAll(`[data-action-id="${card.id}"]`)) drawCard(el, card);
  }

  function attachCard(el, actionId) {
    if (!actionId) return;
    el.dataset.actionId = actionId;
    const card = actions.get(actionId);
    if (card) drawCard(el, card);
  }

  function drawCard(el, card) {
    el.querySelector(".action-card")?.remove();
    const box = document.createElement("section");
    box.className = `action-card state-${card.state}`;
    box.dataset.state = card.state;
    box.setAttribute("aria-label", "Proposed action");
    const title = document.createElement("h2");
    title.textContent = card.summary;
    const state = document.createElement("p");
    state.className = "action-state";
    state.textContent = STATE_LABEL[card.state] || card.state;
    box.append(title, state);
    if (card.needs_confirmation) {
      const next = document.createElement("p");
      next.className = "action-next";
      next.textContent = card.next_step;
      const buttons = document.createElement("div");
      buttons.className = "action-buttons";
      for (const [type, label] of [["action.confirm", "Confirm"], ["action.cancel", "Cancel"]]) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = label;
        b.className = type === "action.confirm" ? "confirm" : "cancel";
        b.addEventListener("click", () => {
          buttons.querySelectorAll("button").forEach((x) => { x.disabled = true; });
          if (!send({ type, action_id: card.id, version: card.version })) {
            buttons.querySelectorAll("button").forEach((x) => { x.disabled = false; });
            showNotice("Reconnecting… please try again in a moment.");
          }
        });
        buttons.append(b);
      }
      box.append(next, buttons);
    } else if (card.provider_reference) {
      const ref = document.createElement("p");
      ref.className = "action-ref";
      ref.textContent = `Reference: ${card.provider_reference}`;
      box.append(ref);
    }
    el.append(box);
  }

  function renderMessage(m) {
    if (!m || !m.id) return;
    lastId = Math.max(lastId, m.id);
    store.set("last_message_id", lastId);
    let el = rendered.get(m.id);
    if (!el && m.client_message_id) {
      el = log.querySelector(`[data-client-id="${CSS.escape(m.client_message_id)}"]`);
    }
    if (!el) el = bubble(m.role, m.id, m.client_message_id);
    el.dataset.id = m.id;
    rendered.set(m.id, el);
    if (m.role === "agent" && m.author) el.querySelector(".who").textContent = m.author;
    setBody(el, m.text);
    if (m.role === "bot" && m.state === "delivered") {
      renderSources(el, m.citations);
      if (m.kind === "answer" || m.kind === "extractive") renderRating(el, m.id, m.feedback);
    }
    // The card lives under the message that proposed it (bot reply or agent's proposal).
    if (m.action_id && (m.role === "bot" || (m.role === "system" && actions.get(m.action_id)
        && !log.querySelector(`[data-action-id="${m.action_id}"]`)))) {
      attachCard(el, m.action_id);
    }
  }

  function send(event) {
    if (ws && ws.readyState === WebSocket.OPEN && ready) { ws.send(JSON.stringify(event)); return true; }
    return false;
  }

  function sendMessage(clientId, text) {
    send({ type: "message.send", client_message_id: clientId, text });
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    const clientId = (crypto.randomUUID && crypto.randomUUID()) || String(Date.now() + Math.random());
    pending.set(clientId, text);
    savePending();
    const el = bubble("customer", null, clientId);
    setBody(el, text);
    input.value = "";
    sendMessage(clientId, text);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  humanBtn.addEventListener("click", () => {
    if (!send({ type: "handoff.request" })) showNotice("Reconnecting… please try again in a moment.");
  });

  const handlers = {
    "session.ready": (ev) => {
      ready = true;
      retry = 0;
      if (ev.visitor_token) store.set("visitor_token", ev.visitor_token);
      identity = null;  // redeemed: never sent again
      if (ev.identity_session) tabStore.set("identity_session", ev.identity_session);
      else tabStore.drop("identity_session");
      store.set("conversation_id", ev.conversation_id);
      setStatus(ev.owner === "human" ? "Chatting with our team" : "Online");
      for (const card of ev.actions || []) upsertCard(card);
      for (const m of ev.history) renderMessage(m);
      if (ev.handoff) showHandoff(ev.handoff);
      for (const [clientId, text] of pending) sendMessage(clientId, text);
    },
    "message.accepted": (ev) => {
      pending.delete(ev.client_message_id);
      savePending();
      renderMessage(ev.message);
    },
    "answer.started": (ev) => {
      typing.hidden = false;
      if (queuedNotice) { queuedNotice = false; showNotice(""); }
      if (!rendered.get(ev.message_id)) {
        const el = bubble("bot", ev.message_id);
        rendered.set(ev.message_id, el);
      }
    },
    "answer.delta": (ev) => {
      const el = rendered.get(ev.message_id) || bubble("bot", ev.message_id);
      rendered.set(ev.message_id, el);
      const body = el.querySelector(".body");
      body.textContent = (body.textContent + ev.text);
      log.scrollTop = log.scrollHeight;
    },
    "answer.revised": (ev) => {
      const el = rendered.get(ev.message_id);
      if (el) { setBody(el, ev.text); renderSources(el, ev.citations); }
    },
    "answer.completed": (ev) => { typing.hidden = true; renderMessage(ev.message); },
    "answer.pending": () => { typing.hidden = false; },
    "answer.queued": (ev) => {
      typing.hidden = false;
      const ahead = ev.position > 1 ? `${ev.position - 1} ahead of you` : "you're next";
      showNotice(`Lots of questions right now: ${ahead}, about ${ev.wait_seconds} s.`);
      queuedNotice = true;
    },
    "message.created": (ev) => {
      if (ev.message.state === "streaming") return;
      if (ev.message.role === "bot") typing.hidden = true;  // e.g. finished while reconnecting
      renderMessage(ev.message);
    },
    "agent.message": (ev) => { typing.hidden = true; renderMessage(ev.message); },
    "handoff.started": (ev) => showHandoff(ev),
    "action.proposed": (ev) => {
      upsertCard(ev.action);
      const el = log.querySelector(`[data-action-id="${ev.action.id}"]`)
        || [...rendered.values()].reverse().find((x) => x.classList.contains("bot"));
      if (el && !el.dataset.actionId) attachCard(el, ev.action.id);
    },
    "action.updated": (ev) => {
      upsertCard(ev.action);
      if (!log.querySelector(`[data-action-id="${ev.action.id}"]`)) return;
      if (["awaiting_confirmation", "executing"].includes(ev.action.state)) return;
      showNotice("");
    },
    "conversation.owner": (ev) => {
      setStatus(ev.owner === "human" ? "Chatting with our team" : "Online");
      if (ev.owner === "human") {
        // The bot stops where it was: a reply with no words yet was withdrawn.
        typing.hidden = true;
        for (const [id, el] of rendered) {
          if (el.classList.contains("bot") && !el.querySelector(".body").textContent.trim()) {
            el.remove();
            rendered.delete(id);
          }
        }
        showNotice("A person from our team has joined the conversation.");
      }
      else showNotice("");
    },
    "feedback.saved": (ev) => {
      const el = rendered.get(ev.message_id);
      el?.querySelectorAll(".rate button").forEach((b) =>
        b.setAttribute("aria-pressed", String(b.dataset.rating === ev.rating)));
    },
    "error": (ev) => {
      typing.hidden = true;
      showNotice(ev.detail || "Something went wrong.");
      // A refused Confirm/Cancel (expired, answered in another tab): show the card as it is.
      if (ev.action_id && actions.get(ev.action_id)) {
        const card = actions.get(ev.action_id);
        if (ev.state) upsertCard({ ...card, state: ev.state, needs_confirmation: false,
                                   version: ev.current_version || card.version + 1 });
      }
    },
    "handoff.contact_saved": (ev) => showNotice(`Thanks, we'll write to ${ev.email}. ` +
                                                  "You can also keep the chat open."),
    "rate_limited": (ev) => {
      typing.hidden = true;
      const wait = Math.max(1, ev.retry_after || 1);
      showNotice(`${ev.detail || "Too many requests."} Try again in ${wait} s.`);
      // A refused message stays pending and is sent again once the wait is over.
      if (ev.client_message_id && pending.has(ev.client_message_id)) {
        const clientId = ev.client_message_id;
        setTimeout(() => { sendMessage(clientId, pending.get(clientId)); showNotice(""); }, wait * 1000);
      }
    },
    "identity.expired": (ev) => {
      ready = false;
      tabStore.drop("identity_session");
      showNotice(ev.detail || "Your sign-in expired.");
      // The embedding site may hand over a fresh token (postMessage); else continue as a visitor.
      if (window.parent !== window) window.parent.postMessage({ type: "supportbot.identity_expired" }, "*");
      else restart();
    },
    "pong": () => {},
  };

  function restart() {
    if (ws && ws.readyState === WebSocket.OPEN) ws.close();  // the close handler reconnects
  }

  // The widget (widget-loader.js) posts the identity token from the embedding page.
  window.addEventListener("message", (e) => {
    if (e.source !== window.parent || !e.data || e.data.type !== "supportbot.identity") return;
    if (typeof e.data.token !== "string" || !e.data.token) return;
    identity = e.data.token;
    tabStore.drop("identity_session");
    if (ws) restart(); else connect();
  });

  function showHandoff(h) {
    const wait = Math.max(1, Math.round(h.estimated_wait_minutes || 1));
    if (!h.ask_for_email) {
      showNotice(`A person from our team will join shortly. You're number ${h.position} in the ` +
                 `queue (about ${wait} min). You can keep writing here.`);
      return;
    }
    showNotice("A person from our team will pick this up, but everyone is busy or offline right " +
               "now. Your conversation stays in the queue; leave your email and we'll follow up.");
    const form = document.createElement("form");
    form.className = "contact";
    const label = document.createElement("label");
    label.textContent = "Email ";
    const email = document.createElement("input");
    email.type = "email";
    email.required = true;
    email.autocomplete = "email";
    label.append(email);
    const button = document.createElement("button");
    button.type = "submit";
    button.textContent = "Leave email";
    form.append(label, button);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      send({ type: "handoff.contact", email: email.value });
    });
    notice.append(form);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    ws = new WebSocket(`${scheme}://${location.host}/ws/chat/`);
    ready = false;
    setStatus(retry ? "Reconnecting…" : "Connecting…");
    ws.addEventListener("open", () => {
      ws.send(JSON.stringify({
        type: "session.start",
        tenant,
        channel: document.body.classList.contains("embedded") ? "widget" : "web",
        visitor_token: store.get("visitor_token"),
        identity_token: identity,
        identity_session: identity ? null : tabStore.get("identity_session"),
        conversation_id: store.get("conversation_id"),
        last_message_id: lastId || null,
      }));
    });
    ws.addEventListener("message", (msg) => {
      let ev;
      try { ev = JSON.parse(msg.data); } catch (e) { return; }
      (handlers[ev.type] || (() => {}))(ev);
    });
    ws.addEventListener("close", () => {
      ready = false;
      setStatus("Offline — reconnecting…");
      const delay = Math.min(15000, 500 * 2 ** retry++);
      setTimeout(connect, delay);
    });
  }

  if (document.body.classList.contains("embedded") && window.parent !== window) {
    // Ask the embedding page for an identity token first (it answers at once if it has one).
    window.parent.postMessage({ type: "supportbot.ready" }, "*");
    setTimeout(() => { if (!ws) connect(); }, 800);
  } else {
    connect();
  }
})();
