// datalyst's local web app: Ask (streamed answers), Runs (reports, trajectories, comparisons), Data (files).
// Everything a model or a file wrote is put on the page as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1));
const show = (node, visible) => node.classList.toggle("hidden", !visible);

// ---- navigation ---------------------------------------------------------------------------------------------

function route() {
  const [page, ...rest] = (location.hash.replace(/^#\//, "") || "ask").split("/");
  for (const name of ["ask", "runs", "data"]) {
    show($(`page-${name}`), name === page);
    document.querySelector(`nav a[data-page=${name}]`).classList.toggle("active", name === page);
  }
  const query = new URLSearchParams(location.hash.split("?")[1] || "");
  if (page === "runs") openRuns(rest.join("/").split("?")[0], query);
  if (page === "data") openData();
}

// ---- Ask ----------------------------------------------------------------------------------------------------

const ask = { info: null, conversation: null, stream: null, check: null, cells: 0 };

async function loadInfo() {
  ask.info = await api("/api/info");
  for (const { spec, dialect } of ask.info.models) $("model").append(el("option", { value: spec, "data-dialect": dialect }, spec));
  for (const name of ask.info.dialects) $("dialect").append(el("option", { value: name }, name));
  $("dialect").value = ask.info.models[0].dialect;
  $("model").addEventListener("change", () => { $("dialect").value = $("model").selectedOptions[0].dataset.dialect; });
  for (const name of ask.info.files) {
    $("folder-files").append(el("label", { class: "check" }, el("input", { type: "checkbox", value: name }), name));
  }
  show($("folder-files"), ask.info.files.length > 0);
}

function chosenFiles() {
  const form = new FormData();
  for (const file of $("upload").files) form.append("upload", file);
  for (const box of $("folder-files").querySelectorAll("input:checked")) form.append("file", box.value);
  return form;
}

const plural = (n, word) => `${n ?? "?"} ${word}${n === 1 ? "" : "s"}`;

function describeFiles(files) {
  $("files-info").textContent = files
    .map((f) => `${f.name} (${f.kind}${f.tables.length ? ", " + f.tables.map((t) => `${plural(t.rows, "row")} × ${plural(t.columns, "column")}`).join("; ") : ""})`)
    .join(" · ");
}

// Files are checked as they are chosen: one the agent could not read is refused now, not after Ask.
// A new choice, Esc or Ask stops a check still running, and the server stops reading.
async function checkFiles() {
  stopCheck();
  show($("ask-error"), false);
  $("files-info").textContent = "";
  if (!$("upload").files.length && !$("folder-files").querySelector("input:checked")) return;
  $("files-info").textContent = "checking the files… (Esc stops)";
  const check = (ask.check = new AbortController());
  try {
    describeFiles((await api("/api/files/check", { method: "POST", body: chosenFiles(), signal: check.signal })).files);
  } catch (error) {
    if (check.signal.aborted) return;
    $("files-info").textContent = "";
    $("ask-error").textContent = error.message;
    show($("ask-error"), true);
  } finally {
    if (ask.check === check) ask.check = null;
  }
}

function stopCheck() {
  if (ask.check) ask.check.abort();
  ask.check = null;
}

async function openConversation() {
  stopCheck();
  const opened = await api("/api/conversations", { method: "POST", body: chosenFiles() });
  ask.conversation = opened.id;
  describeFiles(opened.files);
  for (const input of $("setup").querySelectorAll("input, select")) input.disabled = true;
  show($("new-conversation"), true);
  show($("welcome"), false);
  return opened.id;
}

async function closeConversation() {
  if (ask.stream) ask.stream.abort();
  if (ask.conversation) await api(`/api/conversations/${ask.conversation}`, { method: "DELETE" }).catch(() => {});
  ask.conversation = null;
  ask.cells = 0;
  $("transcript").replaceChildren();
  $("files-info").textContent = "";
  for (const link of [$("download-notebook"), $("download-html")]) show(link, false);
  for (const input of $("setup").querySelectorAll("input, select")) input.disabled = false;
  show($("new-conversation"), false);
  show($("welcome"), true);
}

// What the agent is doing, with the time since Ask, until the answer comes.
const working = { timer: null, started: 0, what: "" };

function setWorking(what) {
  working.what = what;
  if (!working.timer) {
    working.started = performance.now();
    working.timer = setInterval(showWorking, 100);
  }
  showWorking();
}

function showWorking() {
  $("working").textContent = `${working.what}… ${((performance.now() - working.started) / 1000).toFixed(1)} s`;
  show($("working"), true);
}

function stopWorking() {
  clearInterval(working.timer);
  working.timer = null;
  show($("working"), false);
}

// New steps scroll into view, unless the reader has scrolled up to read.
const nearBottom = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;

async function submitQuestion(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  show($("ask-error"), false);
  $("ask").disabled = true;
  setWorking(ask.conversation ? "The model is writing" : "Reading the files");
  try {
    const id = ask.conversation || (await openConversation());
    $("question").value = "";
    setWorking("The model is writing");
    await streamAnswer(id, question);
  } catch (error) {
    if (error.name !== "AbortError") {  // a stream we closed ourselves (a new conversation) is no error
      $("ask-error").textContent = error.message;
      show($("ask-error"), true);
    }
  } finally {
    stopWorking();
    $("ask").disabled = false;
    $("stop").disabled = true;
  }
}

async function streamAnswer(id, question) {
  ask.stream = new AbortController();
  $("stop").disabled = false;
  const response = await fetch(`/api/conversations/${id}/ask`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ question, model: $("model").value, dialect: $("dialect").value }),
    signal: ask.stream.signal,
  });
  if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error || response.statusText);
  const block = el("div", { class: "exchange" });
  $("transcript").append(block);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const message = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const name = /^event: (.*)$/m.exec(message)?.[1];
      const data = /^data: (.*)$/m.exec(message)?.[1];
      if (!name || !data) continue;
      const following = nearBottom();
      render(block, name, JSON.parse(data));
      if (following) window.scrollTo(0, document.documentElement.scrollHeight);
    }
  }
  ask.stream = null;
}

function render(block, name, data) {
  if (name === "question") {
    block.append(el("h3", { class: "question" }, data.question, data.follow_up ? el("span", { class: "tag" }, "follow-up") : null));
  } else if (name === "text") {
    const draft = block.querySelector(".draft") || block.appendChild(el("pre", { class: "draft" }));
    draft.append(data.text);
    return;
  }
  block.querySelector(".draft")?.remove();  // the step it was writing has come whole
  if (name === "step") {
    const turn = el("div", { class: `turn ${data.kind} pending` });
    if (data.thought) turn.append(el("p", { class: "thought" }, data.thought));
    if (data.kind === "code") turn.append(el("div", { class: "label" }, `cell ${++ask.cells}`), el("pre", { class: "code" }, data.code), el("pre", { class: "output running" }, "running…"));
    block.append(turn);
    setWorking(data.kind === "code" ? `Running cell ${ask.cells}` : "The model is writing");
  } else if (name === "turn") {
    const turn = block.querySelector(".turn.pending");
    if (!turn) return;
    turn.classList.remove("pending");
    turn.dataset.index = data.index;
    const output = turn.querySelector(".output");
    if (output) {
      output.textContent = data.observation ?? "";
      output.className = `output ${data.ok === false ? "error" : ""}`;
      for (const png of data.figures) turn.append(el("img", { class: "figure", alt: "figure", src: `data:image/png;base64,${png}` }));
    }
    if (data.kind === "void") turn.append(el("p", { class: "muted" }, "(no code and no answer in this turn)"));
    setWorking("The model is writing");
  } else if (name === "answer") {
    const errors = block.querySelectorAll(".output.error");
    const last = data.termination === "execution_errors" && errors.length ? errors[errors.length - 1].textContent.trim().split("\n").pop() : "";
    const text = data.answer ?? `No answer: ${data.ending}${last ? `; the last error was ${last}` : ""}.`;
    const card = el("div", { class: data.answer ? "final" : "final none" }, text);
    const cell = data.evidence && block.querySelector(`.turn[data-index="${data.evidence.turn}"]`);
    if (data.answer && cell) {
      const label = cell.querySelector(".label").textContent;
      card.append(el("div", { class: "evidence" }, el("code", {}, data.evidence.line), " — from ",
        el("a", { href: "#", onclick: (e) => { e.preventDefault(); cell.scrollIntoView({ behavior: "smooth" }); } }, label)));
    }
    block.append(card, el("p", { class: "muted" }, `${data.turns} turns · ${data.seconds} s`));
    for (const [link, kind] of [[$("download-notebook"), "notebook"], [$("download-html"), "html"]]) {
      link.href = `/api/conversations/${ask.conversation}/${kind}`;
      show(link, true);
    }
  } else if (name === "stopped" || name === "error") {
    block.querySelector(".turn.pending")?.classList.remove("pending");
    block.append(el("div", { class: "final none" }, name === "stopped" ? "Stopped. The next question starts afresh with the same files." : `Error: ${data.message}`));
  }
}

async function stopAnswer() {
  if (ask.conversation) await api(`/api/conversations/${ask.conversation}/stop`, { method: "POST" }).catch(() => {});
}

// ---- Runs ---------------------------------------------------------------------------------------------------

async function openRuns(runId, query) {
  show($("runs-list"), !runId && !query.get("a"));
  show($("run-view"), Boolean(runId));
  show($("compare-view"), Boolean(query.get("a")));
  if (query.get("a")) return openComparison(query.get("a"), query.get("b"));
  if (runId) return openRun(decodeURIComponent(runId));
  const runs = await api("/api/runs");
  const info = ask.info || (await api("/api/info"));
  if (!runs.length) {
    $("runs-note").textContent = info.runs
      ? "No evaluation runs in the server's runs folder yet. Make one with `datalyst eval run --out RUNS/NAME ...`, then reload."
      : "This server shows no runs folder. Start it with `datalyst serve --runs DIR`, DIR holding `datalyst eval run` outputs.";
  }
  show($("runs-table"), runs.length > 0);
  show($("compare"), runs.length > 0);
  const body = $("runs-table").tBodies[0];
  body.replaceChildren(...runs.map((run) => el("tr", {},
    el("td", {}, el("input", { type: "checkbox", value: run.id, onchange: pickForComparison })),
    el("td", {}, el("a", { href: `#/runs/${encodeURIComponent(run.id)}` }, run.id)),
    el("td", {}, run.bench), el("td", {}, run.model), el("td", {}, run.strategy), el("td", {}, run.n_tasks),
    el("td", {}, Object.entries(run.dialects).map(([d, v]) => `${d} ${pct(v)}`).join(", ")),
    el("td", {}, run.created_at.slice(0, 16).replace("T", " ")))));
}

function pickForComparison() {
  const picked = [...$("runs-table").querySelectorAll("input:checked")].map((box) => box.value).reverse();  // older first: A
  $("compare").disabled = picked.length !== 2;
  $("compare").onclick = () => { location.hash = `#/runs/?a=${encodeURIComponent(picked[0])}&b=${encodeURIComponent(picked[1])}`; };
}

function bars(title, groups) {
  const rows = Object.entries(groups).map(([name, rates]) => el("div", { class: "bar-row" },
    el("span", { class: "bar-name" }, name),
    (() => { const bar = el("span", { class: "bar" }); bar.style.width = `${100 * rates.pass_at_1.value}%`; return el("span", { class: "bar-track" }, bar); })(),
    el("span", { class: "bar-value" }, `${pct(rates.pass_at_1.value)} (${rates.n_tasks})`)));
  return el("div", { class: "chart" }, el("h4", {}, title), rows);
}

async function openRun(runId) {
  const report = await api(`/api/runs/report?run=${encodeURIComponent(runId)}`);
  $("run-title").textContent = runId;
  const config = report.config;
  $("run-summary").replaceChildren(
    el("p", { class: "muted" }, `${config.bench} · ${config.model} · strategy ${config.strategy} · ${report.n_tasks} tasks × ${config.trials} trials`),
    el("table", { class: "summary" }, el("thead", {}, el("tr", {}, ["dialect", "pass@1 [95%]", "pass@k", "answered", "void turns", "cell errors", "tokens / answer", "cells / answer", "s / answer"].map((h) => el("th", {}, h)))),
      el("tbody", {}, report.dialects.map((d) => el("tr", {},
        el("td", {}, d.dialect),
        el("td", {}, `${pct(d.rates.pass_at_1.value)} [${pct(d.rates.pass_at_1.low)}, ${pct(d.rates.pass_at_1.high)}]`),
        el("td", {}, `${pct(d.rates.pass_at_k.value)} (k=${d.rates.k})`),
        el("td", {}, pct(d.behaviour.answered_rate)), el("td", {}, pct(d.behaviour.void_turn_rate)),
        el("td", {}, pct(d.behaviour.execution_error_rate)), el("td", {}, Math.round(d.behaviour.mean_tokens)),
        el("td", {}, d.behaviour.mean_cells.toFixed(1)), el("td", {}, d.behaviour.mean_wall_s.toFixed(1)))))));
  $("run-charts").replaceChildren(...report.dialects.flatMap((d) => [bars(`${d.dialect}: pass@1 by level`, d.by_level), bars(`${d.dialect}: pass@1 by category`, d.by_category)]));
  await loadRunRows(runId, {});
}

async function loadRunRows(runId, filters) {
  const query = new URLSearchParams({ run: runId, ...filters });
  const result = await api(`/api/runs/rows?${query}`);
  $("run-filters").replaceChildren(...Object.entries(result.facets).map(([facet, values]) => el("label", {}, facet,
    el("select", { "data-facet": facet, onchange: () => loadRunRows(runId, chosen($("run-filters"))) },
      el("option", { value: "" }, "all"), values.map((v) => el("option", { value: v, ...(filters[facet] === v ? { selected: "" } : {}) }, v))))));
  $("run-count").textContent = `${result.matching} of ${result.total} trajectories`;
  $("run-rows").tBodies[0].replaceChildren(...result.rows.map((row) => el("tr", { class: row.verdict },
    el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); viewTrajectory($("run-trajectory"), `/api/runs/page?${new URLSearchParams({ run: runId, dialect: row.dialect, id: row.id })}`); } }, row.id)),
    el("td", {}, row.verdict), el("td", {}, row.level ?? ""), el("td", {}, row.category ?? ""),
    el("td", {}, row.question ?? ""), el("td", {}, row.answer ?? ""), el("td", {}, row.gold ?? ""))));
}

function chosen(container) {
  return Object.fromEntries([...container.querySelectorAll("select")].filter((s) => s.value).map((s) => [s.dataset.facet, s.value]));
}

function viewTrajectory(frame, src) {
  frame.src = src;
  show(frame, true);
  frame.scrollIntoView({ behavior: "smooth" });
}

async function openComparison(a, b) {
  const result = await api(`/api/runs/compare?${new URLSearchParams({ a, b })}`);
  $("compare-table").tBodies[0].replaceChildren(...result.dialects.flatMap((d) => ["pass_at_1", "pass_at_k"].map((metric) => {
    const diff = d[metric];
    return el("tr", {}, el("td", {}, d.dialect_a === d.dialect_b ? d.dialect_a : `${d.dialect_a} → ${d.dialect_b}`),
      el("td", {}, d.n_tasks), el("td", {}, metric.replace("_at_", "@")), el("td", {}, pct(diff.a)), el("td", {}, pct(diff.b)),
      el("td", {}, `${pct(diff.delta.value)} [${pct(diff.delta.low)}, ${pct(diff.delta.high)}]`),
      el("td", {}, diff.p_value.toFixed(3)), el("td", {}, diff.significant ? "significant" : "not significant"));
  })));
  $("compare-runs").textContent = `A = ${result.run_a}, B = ${result.run_b}: B - A on the tasks both ran`;
  $("compare-text").textContent = result.text;
}

// ---- Data ---------------------------------------------------------------------------------------------------

let dataFiles = null;

async function openData() {
  if (dataFiles === null) {
    dataFiles = await api("/api/data");
    const info = ask.info || (await api("/api/info"));
    $("data-note").textContent = dataFiles.length ? "" : info.data
      ? "No tasks or trajectories files (JSONL) in the server's data folders yet."
      : "This server shows no data folder. Start it with `datalyst serve --data DIR` (or --runs DIR) to browse tasks and trajectories.";
    show($("data-note"), !dataFiles.length);
    show($("data-picker"), dataFiles.length > 0);
    $("data-file").replaceChildren(el("option", { value: "" }, "choose a file"),
      ...dataFiles.map((f, i) => el("option", { value: i }, `${f.name} (${f.kind})`)));
    $("data-file").addEventListener("change", () => loadDataRows({}));
  }
}

async function loadDataRows(filters) {
  const file = dataFiles[$("data-file").value];
  if (!file) return;
  const query = new URLSearchParams({ root: file.root, name: file.name, ...filters });
  const result = await api(`/api/data/rows?${query}`);
  $("data-filters").replaceChildren(...Object.entries(result.facets).map(([facet, values]) => el("label", {}, facet,
    el("select", { "data-facet": facet, onchange: () => loadDataRows(chosen($("data-filters"))) },
      el("option", { value: "" }, "all"), values.map((v) => el("option", { value: v, ...(filters[facet] === v ? { selected: "" } : {}) }, v))))));
  $("data-count").textContent = `${result.matching} of ${result.total} ${file.kind === "tasks" ? "tasks" : "trajectories"}`;
  const columns = file.kind === "tasks" ? ["task_id", "level", "category", "question", "answer"] : ["id", "level", "category", "stratum", "reason", "termination", "question", "answer"];
  $("data-rows").tHead.replaceChildren(el("tr", {}, columns.map((c) => el("th", {}, c))));
  $("data-rows").tBodies[0].replaceChildren(...result.rows.map((row) => el("tr", {}, columns.map((c) => el("td", {},
    c === "id" ? el("a", { href: "#", onclick: (e) => { e.preventDefault(); viewTrajectory($("data-trajectory"), `/api/data/page?${new URLSearchParams({ root: file.root, name: file.name, id: row.id })}`); } }, row.id) : row[c] ?? "")))));
}

// ---- start --------------------------------------------------------------------------------------------------

window.addEventListener("hashchange", route);
window.addEventListener("pagehide", () => {
  if (ask.conversation) navigator.sendBeacon(`/api/conversations/${ask.conversation}/close`);
});
document.addEventListener("DOMContentLoaded", async () => {
  $("ask-form").addEventListener("submit", submitQuestion);
  $("stop").addEventListener("click", stopAnswer);
  $("new-conversation").addEventListener("click", closeConversation);
  $("upload").addEventListener("change", checkFiles);
  $("folder-files").addEventListener("change", checkFiles);
  for (const example of document.querySelectorAll("#welcome .example")) {
    example.addEventListener("click", () => { $("question").value = example.textContent; $("question").focus(); });
  }
  $("question").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask-form").requestSubmit(); } });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    if (ask.check) { stopCheck(); $("files-info").textContent = "checking stopped"; }
    else if (!$("stop").disabled) stopAnswer();
  });
  route();
  await loadInfo().catch((error) => { $("ask-error").textContent = error.message; show($("ask-error"), true); });
});
