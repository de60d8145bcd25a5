// The weft inbox: the threads waiting on a human, one thread's live transcript, and its
// pending action. It talks only to the JSON and SSE routes of `weft serve` (docs/http-api.md);
// the token travels in the HttpOnly cookie the server set, so this script never holds it.
//
// Thread data is untrusted (model output, tool results, user text): it only ever reaches
// the page as text nodes (`textContent`, `append(string)`), never as HTML.
"use strict";

(() => {
  const WAITING_POLL_MS = 3000; // visibility is eventually consistent: the list is polled
  const REFRESH_DELAY_MS = 120; // events come in bursts: one snapshot read per burst
  const SNAPSHOT_LIMIT = 50;

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- small helpers

  /** An element with properties set and children appended (strings become text nodes). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "data") Object.assign(node.dataset, value);
      else if (key === "role") node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  function showError(node, err) {
    node.textContent = err instanceof Error ? err.message : String(err);
    node.hidden = false;
  }

  function clearError(node) {
    node.textContent = "";
    node.hidden = true;
  }

  /** A v4 UUID; `randomUUID` exists only in secure contexts (https, localhost). */
  function newUuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  /** JSON text pretty-printed when it parses, as it is otherwise. */
  function pretty(value) {
    if (value === null || value === undefined) return "";
    if (typeof value !== "string") return JSON.stringify(value, null, 2);
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }

  const threadPath = (threadId, rest = "") => `/threads/${encodeURIComponent(threadId)}${rest}`;

  /** fetch JSON; a reply that is not 2xx throws the API's `error` message. */
  async function api(path, { method = "GET", body } = {}) {
    const headers = { Accept: "application/json" };
    const init = { method, headers, credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      // One key per click: a retried request is answered once by the server.
      headers["Idempotency-Key"] = newUuid();
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch {
      throw new Error("weft serve did not answer; is it running?");
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!response.ok) {
      if (response.status === 401) {
        throw new Error("Not signed in: open the inbox link `weft serve` printed (with ?token=).");
      }
      const message = data && typeof data.error === "string" ? data.error : `HTTP ${response.status}`;
      throw Object.assign(new Error(message), { status: response.status });
    }
    return data;
  }

  // ---------------------------------------------------------------- the waiting list

  const WAITS_FOR = {
    ask_human: "asks a question",
    tool_permission: "asks to run a tool",
    elicitation: "a tool asks for input",
  };
  let selectedId = null;

  async function pollWaiting() {
    try {
      const page = await api("/threads?awaiting=any&limit=50");
      renderWaiting(Array.isArray(page && page.threads) ? page.threads : []);
      clearError($("waiting-error"));
    } catch (err) {
      showError($("waiting-error"), err);
    } finally {
      setTimeout(pollWaiting, WAITING_POLL_MS);
    }
  }

  function renderWaiting(threads) {
    const items = threads.map((thread) => {
      const started = thread.startedAt ? new Date(thread.startedAt).toLocaleString() : "";
      const button = el(
        "button",
        { type: "button", className: "thread-link" },
        el("strong", {}, String(thread.agent || "thread")),
        " ",
        el("span", { className: "waits" }, WAITS_FOR[thread.awaitingAction] || "waits"),
        el("small", {}, String(thread.threadId)),
        started ? el("small", {}, started) : null,
      );
      button.addEventListener("click", () => openThread(thread.threadId));
      const item = el("li", { data: { threadId: thread.threadId } }, button);
      if (thread.threadId === selectedId) item.setAttribute("aria-current", "true");
      return item;
    });
    $("waiting").replaceChildren(...items);
    $("waiting-empty").hidden = items.length > 0;
  }

  function markSelected() {
    for (const item of $("waiting").children) {
      if (item.dataset.threadId === selectedId) item.setAttribute("aria-current", "true");
      else item.removeAttribute("aria-current");
    }
  }

  // ---------------------------------------------------------------- jobs
  //
  // The running and recent jobs the credential may see (`GET /jobs`, a tenant's own), each
  // a bar of its items by where they stand, read again every second. A job's failed items
  // are read from its results when its list is opened, and again when more have failed.

  const JOBS_POLL_MS = 1000;
  const JOBS_LIMIT = 20;
  const JOB_PARTS = ["completed", "failed", "running", "pending"]; // failed: failed or cancelled
  const jobRows = new Map(); // job id -> its row's parts

  async function pollJobs() {
    try {
      const jobs = await api(`/jobs?limit=${JOBS_LIMIT}`);
      renderJobs(Array.isArray(jobs) ? jobs : []);
      clearError($("jobs-error"));
    } catch (err) {
      if (err.status === 403) {
        // A key without `tasks:read` sees no jobs: no section, and no asking again.
        $("jobs-section").hidden = true;
        return;
      }
      showError($("jobs-error"), err);
    }
    setTimeout(pollJobs, JOBS_POLL_MS);
  }

  function renderJobs(jobs) {
    const seen = new Set();
    const items = jobs.map((job) => {
      seen.add(job.jobId);
      let row = jobRows.get(job.jobId);
      if (!row) jobRows.set(job.jobId, (row = jobRow(job)));
      updateJobRow(row, job);
      return row.item;
    });
    for (const id of [...jobRows.keys()]) if (!seen.has(id)) jobRows.delete(id);
    $("jobs").replaceChildren(...items);
    $("jobs-empty").hidden = items.length > 0;
  }

  function jobRow(job) {
    const segments = Object.fromEntries(JOB_PARTS.map((part) => [part, el("span", { className: `segment ${part}` })]));
    const bar = el("div", { className: "job-bar", role: "progressbar" }, ...JOB_PARTS.map((part) => segments[part]));
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    const failures = el("ol", { className: "job-failures" });
    const failed = el("details", { className: "job-failed", hidden: true }, el("summary", {}), failures);
    const row = {
      item: el("li", { data: { jobId: job.jobId } }),
      title: el("strong", {}),
      status: el("span", { className: "job-status" }),
      percent: el("span", { className: "job-percent" }),
      counts: el("small", { className: "job-counts" }),
      reason: el("small", { className: "job-reason" }),
      bar,
      segments,
      failed,
      failures,
      failuresRead: -1, // how many had failed when the list was last read
      reading: false,
    };
    failed.addEventListener("toggle", () => failed.open && readFailures(row));
    row.item.append(
      el("div", { className: "job-head" }, row.title, " ", row.status, row.percent),
      bar,
      row.counts,
      el("small", {}, String(job.jobId)),
      row.reason,
      failed,
    );
    return row;
  }

  function updateJobRow(row, job) {
    const c = job.counts || {};
    const n = (key) => (Number.isInteger(c[key]) ? c[key] : 0);
    const total = n("total");
    const ended = n("failed") + n("cancelled");
    const done = n("completed") + ended;
    const parts = { completed: n("completed"), failed: ended, running: n("running"), pending: n("pending") };
    const percent = total ? Math.floor((100 * done) / total) : 100;
    for (const part of JOB_PARTS) {
      // CSSOM, not a style attribute: the page's CSP refuses inline style.
      row.segments[part].style.width = total ? `${(100 * parts[part]) / total}%` : "0%";
    }
    row.bar.setAttribute("aria-valuenow", String(percent));
    row.bar.setAttribute("aria-label", `${job.jobId}: ${percent}% done`);
    row.title.textContent = String(job.assignee || "job");
    row.status.textContent = String(job.status || "");
    row.item.dataset.status = String(job.status || "");
    row.percent.textContent = `${percent}%`;
    row.counts.textContent =
      `${done}/${total} done · ${parts.completed} completed, ${parts.failed} failed, ` +
      `${parts.running} running, ${parts.pending} pending`;
    row.reason.textContent = job.reason ? String(job.reason) : "";
    row.reason.hidden = !job.reason;
    row.failed.hidden = ended === 0;
    row.failed.querySelector("summary").textContent = `${ended} failed item${ended === 1 ? "" : "s"}`;
    if (row.failed.open && ended !== row.failuresRead) readFailures(row);
  }

  /** The job's failed and cancelled items, from its results (JSON Lines). */
  async function readFailures(row) {
    if (row.reading) return;
    row.reading = true;
    const jobId = row.item.dataset.jobId;
    try {
      const response = await fetch(`/jobs/${encodeURIComponent(jobId)}/results`, {
        headers: { Accept: "application/x-ndjson" },
        credentials: "same-origin",
        cache: "no-store",
      });
      if (!response.ok) throw new Error(`results of ${jobId}: HTTP ${response.status}`);
      const lines = (await response.text()).split("\n").filter((line) => line.trim());
      const failures = lines.map((line) => JSON.parse(line)).filter((r) => r.status === "failed" || r.status === "cancelled");
      row.failuresRead = failures.length;
      row.failures.replaceChildren(
        ...failures.map((r) =>
          el(
            "li",
            { data: { itemId: String(r.itemId) } },
            el("code", {}, r.key !== undefined ? String(r.key) : `#${r.index}`),
            ` ${r.status}`,
            r.attempts ? ` after ${r.attempts} attempt${r.attempts === 1 ? "" : "s"}` : "",
            r.error ? el("div", { className: "job-error" }, String(r.error)) : null,
          ),
        ),
      );
    } catch (err) {
      row.failures.replaceChildren(el("li", { className: "error" }, err instanceof Error ? err.message : String(err)));
    } finally {
      row.reading = false;
    }
  }

  // ---------------------------------------------------------------- one thread
  //
  // The transcript is the session snapshot's messages (settled, with content), plus what
  // the event stream shows before the next snapshot read: the text of the step being
  // streamed, and tool calls starting and ending. Events that settle something (a model
  // reply, a tool result, drained user messages) trigger a new snapshot read, whose new
  // messages take the place of their live stand-ins.

  let view = null; // the open thread

  function newView(threadId) {
    return {
      threadId,
      source: null, // the EventSource
      lastSequence: 0, // events at or below it were seen (a reconnect may repeat some)
      messages: new Map(), // message id -> its <li>
      tools: new Map(), // tool call id -> its folded block (toolBlock)
      live: null, // the step being streamed: {stepId, attempt, item, text}
      dropped: null, // the step whose call was interrupted: its late deltas are not shown
      finished: new Map(), // message id -> the live <li> that stands in for it
      refreshTimer: null,
      refreshThreadToo: false,
      threadReads: 0, // only the latest read of the thread is shown: replies may cross
      activeTurnId: null, // the running turn, from the last read: what "Stop this turn" stops
    };
  }

  async function openThread(threadId) {
    threadId = String(threadId || "").trim();
    if (!threadId) return;
    closeView();
    const current = (view = newView(threadId));
    selectedId = threadId;
    markSelected();
    history.replaceState(null, "", `#thread=${encodeURIComponent(threadId)}`);
    $("placeholder").hidden = true;
    $("thread").hidden = false;
    $("thread-title").textContent = threadId;
    $("thread-id").textContent = threadId;
    $("thread-status").textContent = "";
    $("stream-status").textContent = "";
    $("activity").textContent = "";
    $("transcript").replaceChildren();
    $("live").replaceChildren();
    $("action").replaceChildren();
    $("action").hidden = true;
    $("interrupt-turn").hidden = true;
    $("interrupt-note").textContent = "";
    clearError($("thread-error"));
    try {
      // The snapshot, then the events after its `eventsCursor` (read before it): an event
      // may repeat what the snapshot shows (its live stand-in is dropped), but none is
      // missed, and nothing older than the snapshot's window is replayed out of order.
      const snapshot = await api(threadPath(threadId, `/session?limit=${SNAPSHOT_LIMIT}`));
      if (current !== view) return;
      applySnapshot(current, snapshot);
      follow(current, Number.isInteger(snapshot.eventsCursor) ? snapshot.eventsCursor : 0);
      await refreshThread(current);
    } catch (err) {
      if (current === view) showError($("thread-error"), err);
    }
  }

  function closeView() {
    if (!view) return;
    if (view.source) view.source.close();
    clearTimeout(view.refreshTimer);
    view = null;
  }

  function firstThread(snapshot) {
    return snapshot && Array.isArray(snapshot.threads) ? snapshot.threads[0] : null;
  }

  /** GET /threads/{id}: the status and the pending actions. */
  async function refreshThread(current) {
    const read = ++current.threadReads;
    try {
      const thread = await api(threadPath(current.threadId));
      if (current !== view || read !== current.threadReads) return;
      $("thread-title").textContent = thread.agent || current.threadId;
      $("thread-status").textContent = thread.status || "";
      current.activeTurnId = thread.activeTurnId || null;
      const stop = $("interrupt-turn");
      stop.hidden = !current.activeTurnId;
      stop.disabled = false;
      renderActions(current, Array.isArray(thread.pendingActions) ? thread.pendingActions : []);
    } catch (err) {
      if (current === view) showError($("thread-error"), err);
    }
  }

  /** Read the snapshot again soon (once per burst of events), and the thread if asked. */
  function scheduleRefresh(current, { thread = false } = {}) {
    current.refreshThreadToo = current.refreshThreadToo || thread;
    if (current.refreshTimer) return;
    current.refreshTimer = setTimeout(async () => {
      current.refreshTimer = null;
      const withThread = current.refreshThreadToo;
      current.refreshThreadToo = false;
      try {
        const snapshot = await api(threadPath(current.threadId, `/session?limit=${SNAPSHOT_LIMIT}`));
        if (current === view) applySnapshot(current, snapshot);
      } catch (err) {
        if (current === view) showError($("thread-error"), err);
      }
      if (withThread) await refreshThread(current);
    }, REFRESH_DELAY_MS);
  }

  // ---------------------------------------------------------------- the snapshot's messages

  function applySnapshot(current, snapshot) {
    const thread = firstThread(snapshot);
    const messages = (thread && thread.history && thread.history.messages) || [];
    const ordered = [...messages].sort((a, b) => (a.position ?? 0) - (b.position ?? 0));
    for (const message of ordered) {
      if (!message || !message.id || current.messages.has(message.id)) continue;
      showMessage(current, message);
    }
  }

  // Messages may come camelCase (the snapshot) or snake_case (a stored message): read both.
  const field = (message, camel, snake) => message[camel] ?? message[snake];

  /** Place a snapshot message now, in order; its content follows if the snapshot left it
   *  out (a live thread's snapshot lists messages without their content). */
  function showMessage(current, message) {
    const role = String(message.role || "");
    const withContent = "content" in message;
    if (role === "tool") {
      current.messages.set(message.id, null);
      const tool = toolBlock(current, field(message, "toolCallId", "tool_call_id"), message.name);
      place(tool, $("transcript"));
      if (withContent) fillToolResult(tool, message);
      else wholeMessage(current, message.id, (whole) => fillToolResult(tool, whole));
      return;
    }
    const text = el("div", { className: "text" });
    const item = el(
      "li",
      { className: `message ${role}`, data: { messageId: message.id } },
      el("span", { className: "role" }, role),
      text,
    );
    if (message.depth) item.classList.add("nested");
    // The streamed stand-in of this reply gives way to it, keeping its text until the
    // content arrives.
    const standIn = current.finished.get(message.id);
    if (standIn) {
      text.textContent = standIn.querySelector(".text").textContent;
      standIn.replaceWith(item);
      current.finished.delete(message.id);
    } else {
      $("transcript").append(item);
    }
    current.messages.set(message.id, item);
    if (withContent) fillMessage(current, item, message);
    else wholeMessage(current, message.id, (whole) => fillMessage(current, item, whole));
  }

  /** GET one stored message, whole; `then(message)` once it is there. */
  async function wholeMessage(current, messageId, then) {
    try {
      const message = await api(threadPath(current.threadId, `/messages/${encodeURIComponent(messageId)}`));
      if (current === view && message) then(message);
    } catch (err) {
      if (current === view) showError($("thread-error"), err);
    }
  }

  function fillMessage(current, item, message) {
    if (typeof message.content === "string") item.querySelector(".text").textContent = message.content;
    for (const call of field(message, "toolCalls", "tool_calls") || []) {
      const fn = call.function || {};
      const tool = toolBlock(current, call.id, fn.name);
      if (tool.args === null) setToolArgs(tool, fn.arguments);
      place(tool, item);
    }
  }

  function fillToolResult(tool, message) {
    const status = field(message, "toolStatus", "tool_status");
    if (status) setToolStatus(tool, status);
    if (message.content !== null && message.content !== undefined) {
      tool.result.textContent = pretty(message.content);
      tool.result.parentElement.hidden = false;
    }
  }

  // ---------------------------------------------------------------- tool calls, folded
  //
  // One folded block per tool call, made by whichever comes first: the assistant message
  // that calls it, its tool.started event, or its result. It lives in its assistant
  // message once that is shown, else in a row of its own.

  function toolBlock(current, callId, name) {
    const key = callId || newUuid();
    let tool = current.tools.get(key);
    if (tool) {
      if (name && !tool.named) setToolName(tool, name);
      return tool;
    }
    const nameText = el("span", { className: "tool-name" }, "tool");
    const status = el("span", { className: "tool-status" });
    const argsText = el("pre", { className: "tool-args" });
    const resultText = el("pre", { className: "tool-result" });
    const resultPart = el("div", {}, el("h4", {}, "result"), resultText);
    resultPart.hidden = true;
    const details = el(
      "details",
      { className: "tool", data: { toolCallId: key } },
      el("summary", {}, nameText, " ", status),
      el("div", {}, el("h4", {}, "arguments"), argsText),
      resultPart,
    );
    tool = { details, nameText, named: false, status, argsText, result: resultText, args: null };
    if (name) setToolName(tool, name);
    current.tools.set(key, tool);
    return tool;
  }

  /** Put the block in `container`: an assistant message, or (the transcript) a row of its
   *  own, unless it is already shown somewhere. A row left empty by a move goes. */
  function place(tool, container) {
    const row = tool.details.parentElement;
    if (container.id === "transcript") {
      if (!tool.details.isConnected) container.append(el("li", { className: "message tool" }, tool.details));
      return;
    }
    if (row === container) return;
    container.append(tool.details);
    if (row && row.classList.contains("tool") && !row.children.length) row.remove();
  }

  function setToolName(tool, name) {
    tool.nameText.textContent = String(name);
    tool.named = true;
  }

  function setToolArgs(tool, args) {
    tool.args = args ?? "";
    tool.argsText.textContent = pretty(tool.args);
  }

  function setToolStatus(tool, status) {
    tool.status.textContent = status;
    tool.details.dataset.status = status;
  }

  // ---------------------------------------------------------------- live events

  const FOLLOWED = [
    "model.requested",
    "model.delta",
    "model.completed",
    "model.failed",
    "tool.started",
    "tool.result",
    "tool.failed",
    "queue.changed",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "action.required",
    "action.resolved",
    "thread.updated",
    "message.injected",
    "message.updated",
    "message.deleted",
    "runtime.warning",
  ];

  function follow(current, after) {
    current.lastSequence = after;
    // EventSource sends the cookie, and on a reconnect resumes with Last-Event-ID itself.
    const source = new EventSource(threadPath(current.threadId, `/events?after=${after}`));
    current.source = source;
    source.addEventListener("open", () => setStreamStatus(current, "live"));
    source.addEventListener("error", (event) => {
      if (event.data) {
        showError($("thread-error"), errorOf(event.data)); // an error the server sent
      }
      setStreamStatus(current, source.readyState === EventSource.CLOSED ? "disconnected" : "reconnecting…");
    });
    source.addEventListener("end", () => {
      source.close();
      setStreamStatus(current, "ended");
      scheduleRefresh(current, { thread: true });
    });
    for (const type of FOLLOWED) {
      source.addEventListener(type, (event) => {
        if (current !== view) return;
        const sequence = Number(event.lastEventId);
        if (Number.isFinite(sequence) && sequence > 0) {
          if (sequence <= current.lastSequence) return; // seen before a reconnect
          current.lastSequence = sequence;
        }
        let data;
        try {
          data = JSON.parse(event.data);
        } catch {
          return;
        }
        onEvent(current, type, data);
      });
    }
  }

  function errorOf(text) {
    try {
      const data = JSON.parse(text);
      if (data && typeof data.error === "string") return data.error;
    } catch {
      // not JSON: show it as it is
    }
    return String(text);
  }

  function setStreamStatus(current, text) {
    if (current === view) $("stream-status").textContent = text;
  }

  function onEvent(current, type, event) {
    const payload = event.payload && typeof event.payload === "object" ? event.payload : {};
    // Inside a prompt tool: its own steps; the tool's call and result show its outcome.
    if (payload.parentToolCallId) return;
    switch (type) {
      case "model.requested":
        stepRequested(current, event, payload);
        break;
      case "model.delta":
        if (payload.kind === "text") streamText(current, event, payload);
        break;
      case "model.completed":
        stepCompleted(current, payload.messageId);
        scheduleRefresh(current);
        break;
      case "model.failed":
        if (payload.code === "interrupted") dropLive(current, event.stepId);
        $("activity").textContent =
          payload.code === "interrupted"
            ? "model call interrupted"
            : `model failed (attempt ${payload.attempt ?? "?"}): ${payload.error ?? ""}`;
        break;
      case "tool.started": {
        const tool = toolBlock(current, event.toolCallId, payload.name);
        if (tool.args === null) setToolArgs(tool, payload.arguments);
        place(tool, $("transcript"));
        setToolStatus(tool, "running");
        break;
      }
      case "tool.result":
      case "tool.failed": {
        const tool = toolBlock(current, event.toolCallId, payload.name);
        setToolStatus(tool, payload.status || (type === "tool.failed" ? "error" : "success"));
        scheduleRefresh(current); // the result's content comes with the tool message
        break;
      }
      case "queue.changed":
        if (payload.action === "drained") {
          scheduleRefresh(current); // queued messages joined the transcript
          $("message-note").textContent = "";
        }
        break;
      case "turn.started":
        $("activity").textContent = "working…";
        scheduleRefresh(current, { thread: true }); // a running turn can be stopped
        break;
      case "turn.completed":
        $("activity").textContent =
          payload.stopReason === "interrupted"
            ? `turn interrupted${payload.reason ? `: ${payload.reason}` : ""}`
            : `turn completed (${payload.stopReason ?? "done"})`;
        $("interrupt-note").textContent = "";
        scheduleRefresh(current, { thread: true });
        break;
      case "turn.failed":
        $("activity").textContent = `turn failed: ${payload.reason ?? ""}`;
        scheduleRefresh(current, { thread: true });
        break;
      case "runtime.warning":
        $("activity").textContent = `warning: ${payload.message ?? ""}`;
        break;
      case "message.updated":
      case "message.deleted":
        rebuildTranscript(current);
        break;
      default: // action.*, thread.updated, message.injected
        scheduleRefresh(current, { thread: true });
    }
  }

  /** A model call starts a step; with `reset` it retries one, whose partial text goes. */
  function stepRequested(current, event, payload) {
    if (current.dropped === event.stepId) current.dropped = null; // the step calls again
    const live = current.live;
    if (live && live.stepId === event.stepId) {
      if (payload.reset) {
        if (live.text) live.text.textContent = "";
        live.attempt = payload.attempt ?? live.attempt + 1;
      }
      return;
    }
    if (live) stepCompleted(current, null); // a step that never said how it ended
    current.live = { stepId: event.stepId, attempt: payload.attempt ?? 1, item: null, text: null };
  }

  function streamText(current, event, payload) {
    if (current.dropped === event.stepId) return; // written after the call was interrupted
    let live = current.live;
    if (!live || live.stepId !== event.stepId) {
      stepRequested(current, event, payload);
      live = current.live;
    }
    if ((payload.attempt ?? live.attempt) < live.attempt) return; // from a dropped attempt
    if (!live.item) {
      live.text = el("div", { className: "text" });
      live.item = el("li", { className: "message assistant streaming" }, el("span", { className: "role" }, "assistant"), live.text);
      $("live").append(live.item);
    }
    live.text.append(String(payload.text ?? ""));
    live.item.scrollIntoView({ block: "nearest" });
  }

  /** An interrupted call's streamed text is no message (nothing was stored): it goes. */
  function dropLive(current, stepId) {
    current.dropped = stepId;
    const live = current.live;
    if (!live || live.stepId !== stepId) return;
    current.live = null;
    if (live.item) live.item.remove();
  }

  /** The streamed reply is a message now: it waits in the transcript for the snapshot's. */
  function stepCompleted(current, messageId) {
    const live = current.live;
    current.live = null;
    if (!live || !live.item) return;
    live.item.classList.remove("streaming");
    if (messageId && current.messages.has(messageId)) {
      live.item.remove(); // the snapshot showed it already (a replayed event)
      return;
    }
    $("transcript").append(live.item);
    if (messageId) current.finished.set(messageId, live.item);
  }

  /** A message was edited or deleted: read the transcript anew. */
  function rebuildTranscript(current) {
    current.messages.clear();
    current.tools.clear();
    current.finished.clear();
    $("transcript").replaceChildren();
    scheduleRefresh(current);
  }

  // ---------------------------------------------------------------- the pending action

  function renderActions(current, actions) {
    const box = $("action");
    // A form still pending keeps its node, so an answer being typed survives a refresh.
    const shown = new Map([...box.children].map((form) => [form.dataset.actionId, form]));
    box.replaceChildren(...actions.map((action) => shown.get(action.actionId) || actionForm(current, action)));
    box.hidden = actions.length === 0;
    for (const action of actions) {
      const tool = current.tools.get(action.toolCallId);
      if (tool && action.kind === "tool_permission") setToolStatus(tool, "waiting for permission");
      if (tool && action.kind === "elicitation") setToolStatus(tool, "waiting for input");
    }
  }

  function actionForm(current, action) {
    const error = el("p", { className: "error", hidden: true, role: "alert" });
    const form = el("form", { className: `pending ${action.kind}`, data: { actionId: action.actionId } });
    const buttons = [];
    const send = async (body) => {
      for (const button of buttons) button.disabled = true;
      clearError(error);
      try {
        await api(threadPath(current.threadId, `/actions/${encodeURIComponent(action.actionId)}`), {
          method: "POST",
          body,
        });
        form.classList.add("answered");
        await refreshThread(current);
      } catch (err) {
        showError(error, err);
        for (const button of buttons) button.disabled = false;
      }
    };
    const button = (label, className, onClick) => {
      const node = el("button", { type: "button", className }, label);
      node.addEventListener("click", onClick);
      buttons.push(node);
      return node;
    };
    const decisions = Array.isArray(action.decisions) ? action.decisions : ["approve", "deny", "answer"];

    if (action.kind === "ask_human") {
      const answer = el("textarea", { rows: 2, required: true, placeholder: "Your answer" });
      form.append(el("h3", {}, "The agent asks"), el("p", { className: "prompt" }, String(action.prompt ?? "")), answer);
      const row = el("div", { className: "row" });
      const submit = el("button", { type: "submit", className: "primary" }, "Send answer");
      buttons.push(submit);
      row.append(submit);
      if (decisions.includes("deny")) {
        row.append(button("Decline", "", () => send({ decision: "deny", scope: "once", answer: null, reason: null })));
      }
      form.append(row);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        send({ decision: "answer", scope: "once", answer: answer.value, reason: null });
      });
    } else if (action.kind === "elicitation") {
      elicitationForm(form, action, button, buttons, send);
    } else {
      const reason = el("input", { type: "text", placeholder: "Reason, if you deny (optional)" });
      const row = el("div", { className: "row" });
      if (decisions.includes("approve")) {
        row.append(
          button("Approve", "primary", () => send({ decision: "approve", scope: "once", answer: null, reason: null })),
          // "Approve and stop asking": the tool runs unasked for the rest of the session.
          button("Approve for session", "", () =>
            send({ decision: "approve", scope: "session", answer: null, reason: null }),
          ),
        );
      }
      if (decisions.includes("deny")) {
        const deny = () => send({ decision: "deny", scope: "once", answer: null, reason: reason.value.trim() || null });
        row.append(button("Deny", "danger", deny), reason);
      }
      form.append(
        el("h3", {}, "Permission to run ", el("code", {}, String(action.toolName ?? "a tool"))),
        el("p", { className: "prompt" }, String(action.prompt ?? "")),
        el("pre", { className: "tool-args" }, pretty(action.args)),
        row,
      );
      form.addEventListener("submit", (event) => event.preventDefault());
    }
    if (action.expiresAt) {
      const expires = new Date(action.expiresAt).toLocaleTimeString();
      form.append(el("p", { className: "muted" }, `Expires at ${expires} (then: ${action.onTimeout ?? "deny"}).`));
    }
    form.append(error);
    return form;
  }

  // ---------------------------------------------------------------- MCP elicitation
  //
  // An MCP server asks a person for input mid-call: its message, and a flat object schema
  // (`args.requestedSchema`) of string, number, integer, boolean and enum fields. The
  // answer is the object typed in (numbers as numbers); the thread checks it against the
  // schema again and names the field it refuses.

  function elicitationForm(form, action, button, buttons, send) {
    const args = action.args && typeof action.args === "object" ? action.args : {};
    const schema = args.requestedSchema && typeof args.requestedSchema === "object" ? args.requestedSchema : {};
    const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
    const fields = Object.entries(properties).map(([name, spec]) =>
      elicitationField(name, spec && typeof spec === "object" ? spec : {}, required.has(name)),
    );
    const submit = el("button", { type: "submit", className: "primary" }, "Send");
    buttons.push(submit);
    const row = el("div", { className: "row" }, submit);
    if ((action.decisions || []).includes("deny")) {
      row.append(button("Decline", "", () => send({ decision: "deny", scope: "once", answer: null, reason: null })));
    }
    form.append(
      el("h3", {}, "MCP server ", el("code", {}, String(args.server ?? "?")), " asks"),
      el("p", { className: "prompt" }, String(action.prompt ?? "")),
      el("p", { className: "muted" }, "during ", el("code", {}, String(action.toolName ?? "a tool"))),
      ...fields.map((field) => field.node),
      required.size ? el("p", { className: "muted" }, "* required") : null,
      row,
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return;
      const answer = {};
      for (const field of fields) {
        const value = field.value();
        if (value !== undefined) answer[field.name] = value;
      }
      send({ decision: "answer", scope: "once", answer, reason: null });
    });
  }

  /** One requested field: {name, node, value()}; value() is undefined when left empty. */
  function elicitationField(name, spec, isRequired) {
    const title = String(spec.title || name);
    const caption = el("span", { className: "field-name" }, title, isRequired ? el("span", { className: "required" }, " *") : null);
    const hint = spec.description ? el("small", { className: "muted" }, String(spec.description)) : null;
    const data = { field: name };
    if (spec.type === "boolean") {
      const box = el("input", { type: "checkbox", name, checked: spec.default === true });
      const node = el("label", { className: "field boolean", data }, box, " ", caption, hint);
      return { name, node, value: () => box.checked };
    }
    let input;
    let value;
    if (Array.isArray(spec.enum)) {
      const labels = Array.isArray(spec.enumNames) ? spec.enumNames : [];
      const options = spec.enum.map((option, i) => el("option", { value: String(option) }, String(labels[i] ?? option)));
      // No choice until the person makes one, unless the server gave a default.
      input = el("select", { name, required: isRequired }, el("option", { value: "" }, "—"), ...options);
      if (spec.default !== undefined) input.value = String(spec.default);
      value = () => {
        const index = spec.enum.findIndex((option) => String(option) === input.value);
        return index < 0 ? undefined : spec.enum[index];
      };
    } else if (spec.type === "number" || spec.type === "integer") {
      input = el("input", { type: "number", name, required: isRequired, step: spec.type === "integer" ? "1" : "any" });
      if (typeof spec.minimum === "number") input.min = String(spec.minimum);
      if (typeof spec.maximum === "number") input.max = String(spec.maximum);
      if (typeof spec.default === "number") input.value = String(spec.default);
      value = () => (input.value.trim() === "" ? undefined : Number(input.value));
    } else {
      const types = { email: "email", uri: "url", date: "date" };
      input = el("input", { type: types[spec.format] || "text", name, required: isRequired });
      if (typeof spec.minLength === "number") input.minLength = spec.minLength;
      if (typeof spec.maxLength === "number") input.maxLength = spec.maxLength;
      if (typeof spec.default === "string") input.value = spec.default;
      value = () => (input.value === "" && !isRequired ? undefined : input.value);
    }
    const node = el("label", { className: "field", data }, caption, input, hint);
    return { name, node, value };
  }

  // ---------------------------------------------------------------- messages to the thread

  async function sendMessage(event) {
    event.preventDefault();
    const current = view;
    const text = $("message-text");
    if (!current || !text.value.trim()) return;
    const submit = $("message-form").querySelector("button");
    submit.disabled = true;
    clearError($("thread-error"));
    try {
      await api(threadPath(current.threadId, "/messages"), {
        method: "POST",
        body: { content: text.value, role: "user" },
      });
      text.value = "";
      $("message-note").textContent = "queued";
    } catch (err) {
      showError($("thread-error"), err);
    } finally {
      submit.disabled = false;
    }
  }

  /** POST /threads/{id}/interrupt: stop the running turn (the thread stays open). */
  async function interruptTurn() {
    const current = view;
    if (!current || !current.activeTurnId) return;
    const stop = $("interrupt-turn");
    stop.disabled = true;
    clearError($("thread-error"));
    try {
      const result = await api(threadPath(current.threadId, "/interrupt"), {
        method: "POST",
        body: { reason: "stopped from the inbox", turnId: current.activeTurnId },
      });
      if (current !== view) return;
      $("interrupt-note").textContent =
        result && result.status === "accepted" ? "stopping the turn…" : `nothing to stop: ${result && result.reason}`;
      await refreshThread(current);
    } catch (err) {
      if (current === view) showError($("thread-error"), err);
      stop.disabled = false;
    }
  }

  // ---------------------------------------------------------------- start

  function threadFromHash() {
    const match = /^#thread=(.+)$/.exec(location.hash);
    return match ? decodeURIComponent(match[1]) : null;
  }

  $("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    openThread($("open-id").value);
  });
  $("message-form").addEventListener("submit", sendMessage);
  $("interrupt-turn").addEventListener("click", interruptTurn);
  $("message-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("message-form").requestSubmit();
  });
  $("message-text").addEventListener("input", () => ($("message-note").textContent = ""));

  pollWaiting();
  pollJobs();
  const initial = threadFromHash();
  if (initial) openThread(initial);
})();
