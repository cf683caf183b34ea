// The query page (docs/web.md): YASGUI's editor and results table around the
// SPARQL endpoint's progress stream, read with fetch: one event per quantum,
// the results as they come. Cancel aborts the request, and the gateway stops
// the query when its client leaves.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  // While a query runs the table shows its first STREAM_TABLE_ROWS results as they come, redrawn at
  // most every DRAW_EVERY_MS and spending at most a fifth of the time drawing (YASR formats and
  // sanitizes every cell again on each draw); the counters show them all, the table too at the end.
  const STREAM_TABLE_ROWS = 200;
  const DRAW_EVERY_MS = 500;
  // At the end the table holds at most TABLE_ROWS results, and says so; the endpoint gives them all.
  const TABLE_ROWS = 10000;
  // Events already received are read without leaving the microtask queue: give the page a turn
  // (input, painting) at least this often, or a fast query would freeze it.
  const YIELD_EVERY_MS = 50;
  const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

  const yasqe = new Yasgui.Yasqe($("editor"), {
    persistenceId: null, // the query comes from the URL or the examples, not from an earlier visit
    showQueryButton: false, // Run and Cancel below: they read the progress stream
    consumeShareLink: null,
    createShareableLink: null,
    autocompleters: ["prefixes", "variables"], // the bundled prefixes: nothing fetched from elsewhere
    editorHeight: "260px",
    extraKeys: { "Ctrl-Enter": () => run(), "Cmd-Enter": () => run() },
  });
  const yasr = new Yasgui.Yasr($("results"), {
    persistenceId: null,
    pluginOrder: ["table", "response"],
    defaultPlugin: "table",
    prefixes: () => yasqe.getPrefixesFromQuery(),
  });

  let datasets = [];
  let running = null; // the running query: { controller, started, timer }
  let errorMarks = [];
  let startedAt = 0; // the last query's start, for its elapsed time once it ended

  // -- datasets and their examples --

  async function loadDatasets() {
    const response = await fetch("v1/datasets");
    datasets = (await response.json()).datasets;
    for (const d of datasets) {
      $("dataset").add(new Option(d.description ? `${d.name}: ${d.description}` : d.name, d.name));
    }
    const params = new URLSearchParams(location.search);
    const wanted = datasets.find((d) => d.name === params.get("dataset"));
    $("dataset").value = (wanted || datasets[0] || {}).name || "";
    showExamples(params.get("query"));
  }

  function dataset() {
    return datasets.find((d) => d.name === $("dataset").value);
  }

  function showExamples(query) {
    const examples = (dataset() || {}).examples || [];
    $("example").replaceChildren(...examples.map((e, i) => new Option(e.name, String(i))));
    $("example").disabled = examples.length === 0;
    yasqe.setValue(query || (examples[0] ? examples[0].query : "SELECT * WHERE { ?s ?p ?o } LIMIT 10"));
    $("endpoint").href = endpoint();
    $("endpoint").textContent = new URL(endpoint(), location.href).href;
  }

  function endpoint() {
    return `sparql/${encodeURIComponent($("dataset").value)}`;
  }

  $("dataset").addEventListener("change", () => {
    history.replaceState(null, "", `?dataset=${encodeURIComponent($("dataset").value)}`);
    showExamples();
  });
  $("example").addEventListener("change", () => {
    yasqe.setValue(dataset().examples[Number($("example").value)].query);
  });
  yasqe.on("change", () => {
    const example = ((dataset() || {}).examples || [])[Number($("example").value)];
    if (example && example.query !== yasqe.getValue()) $("example").selectedIndex = -1; // edited: no example
  });

  // -- running a query --

  async function run() {
    if (running) return;
    clearProblem();
    showTruncation(0);
    const query = yasqe.getValue();
    const result = { vars: [], bindings: [], boolean: undefined, quanta: 0 };
    const controller = new AbortController();
    running = { controller, started: performance.now(), timer: setInterval(showElapsed, 100), eta: null };
    showRunning(true, "running");
    showFigures(0, 0, "–");
    showEstimate(null, null);
    const table = { shown: 0, busy: false, last: 0, cost: 0 };
    let lastYield = performance.now();
    let ended = false;
    try {
      const response = await fetch(endpoint(), {
        method: "POST",
        headers: { Accept: "text/event-stream", "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ query }),
        signal: controller.signal,
      });
      if (!response.ok) {
        showProblem(await problemOf(response));
        return;
      }
      for await (const [name, data] of events(response.body)) {
        if (name === "head") {
          result.vars = data.vars;
        } else if (name === "quantum") {
          result.quanta = data.quanta;
          showFigures(data.quanta, result.bindings.length, data.worker || "–");
          showEstimate(data.progress, data.eta_ms);
        } else if (name === "results") {
          result.bindings.push(...data);
          showFigures(result.quanta, result.bindings.length);
          drawSoFar(result, table);
        } else if (name === "boolean") {
          result.boolean = data;
        } else if (name === "error") {
          showProblem(data);
          ended = true;
        } else if (name === "end") {
          result.quanta = data.quanta;
          ended = true;
          if ($("problem").hidden) showEstimate(1, 0);
        }
        if (performance.now() - lastYield > YIELD_EVERY_MS) {
          await nextTask();
          lastYield = performance.now();
        }
      }
      if (!ended) showProblem({ title: "The response was cut short", detail: "the connection closed before the end" });
      $("state").textContent = ended && $("problem").hidden ? "done" : "failed";
    } catch (error) {
      if (error.name !== "AbortError") showProblem({ title: "The request failed", detail: String(error) });
      $("state").textContent = error.name === "AbortError" ? "cancelled" : "failed";
    } finally {
      clearInterval(running.timer);
      showElapsed();
      running = null;
      if (!$("done").hasAttribute("value")) $("done").value = 0; // stopped before any estimate: no more motion
      showRunning(false);
      showFigures(result.quanta, result.bindings.length);
      draw(result, Math.min(result.bindings.length, TABLE_ROWS));
      showTruncation(result.bindings.length, query);
    }
  }

  function cancel() {
    if (running) running.controller.abort();
  }

  // Server-Sent Events from a fetch body: [name, JSON data] for each event.
  async function* events(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const blocks = (buffer + value).split("\n\n"); // one split a read: a read may hold thousands
      buffer = blocks.pop();
      for (const block of blocks) {
        let name = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) name = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        yield [name, JSON.parse(data)];
      }
    }
  }

  async function problemOf(response) {
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      return { title: `${response.status} ${response.statusText}`, detail: text.slice(0, 500) };
    }
  }

  function drawSoFar(result, table) {
    const shown = Math.min(result.bindings.length, STREAM_TABLE_ROWS);
    const wait = Math.max(DRAW_EVERY_MS, 4 * table.cost);
    if (table.busy || shown === table.shown || performance.now() - table.last < wait) return;
    const started = performance.now();
    table.busy = true;
    table.shown = shown;
    yasr.once("drawn", () => {
      table.last = performance.now();
      table.cost = table.last - started;
      table.busy = false;
    });
    draw(result, shown);
  }

  function draw(result, rows = result.bindings.length) {
    const data =
      result.boolean === undefined
        ? { head: { vars: result.vars }, results: { bindings: result.bindings.slice(0, rows) } }
        : { head: {}, boolean: result.boolean };
    if (result.boolean === undefined && result.vars.length === 0) return; // nothing began
    const ms = Math.round(performance.now() - (running ? running.started : startedAt));
    yasr.setResponse({ data, contentType: "application/sparql-results+json", status: 200, executionTime: ms });
  }

  // -- what the page shows --

  function showRunning(isRunning, state) {
    $("run").disabled = isRunning;
    $("cancel").disabled = !isRunning;
    document.body.classList.toggle("running", isRunning);
    if (isRunning) {
      startedAt = running.started;
      $("state").textContent = state;
    }
  }

  function showFigures(quanta, rows, worker) {
    $("quanta").textContent = quanta.toLocaleString("en");
    $("rows").textContent = rows.toLocaleString("en");
    if (worker !== undefined) $("worker").textContent = worker;
  }

  function showElapsed() {
    const since = running ? running.started : startedAt;
    $("elapsed").textContent = `${((performance.now() - since) / 1000).toFixed(1)} s`;
    if (running && running.eta) {
      const { ms, at } = running.eta; // counts down between two quanta
      $("left").textContent = duration(Math.max(0, ms - (performance.now() - at)));
    }
  }

  // The fraction done and the time left the last quantum reported (progress stream: `progress`,
  // `eta_ms`, null when not known): a bar, a percentage, and a time that counts down meanwhile.
  function showEstimate(fraction, etaMs) {
    const known = typeof fraction === "number";
    if (known) $("done").value = fraction;
    else if (running) $("done").removeAttribute("value"); // indeterminate while nothing is known
    $("percent").textContent = known ? `${percent(fraction)}%` : "–";
    const hasEta = typeof etaMs === "number";
    if (running) running.eta = hasEta ? { ms: etaMs, at: performance.now() } : null;
    $("left").textContent = hasEta ? duration(etaMs) : "–";
  }

  // Rounded down, so that 100% means done: "2.3", "45", "100".
  function percent(fraction) {
    if (fraction >= 1) return "100";
    return fraction < 0.1 ? (Math.floor(fraction * 1000) / 10).toFixed(1) : String(Math.floor(fraction * 100));
  }

  function duration(ms) {
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(1)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  }

  function showTruncation(rows, query) {
    $("truncated").hidden = rows <= TABLE_ROWS;
    if (rows <= TABLE_ROWS) return;
    $("truncated-count").textContent = rows.toLocaleString("en");
    $("everything").href = `${endpoint()}?${new URLSearchParams({ query })}`;
  }

  function showProblem(problem) {
    $("problem-title").textContent = problem.title || "Error";
    $("problem-detail").textContent = problem.detail || "";
    $("problem").hidden = false;
    $("state").textContent = "failed";
    if (problem.line) markError(problem.line, problem.column || 1);
  }

  // A syntax error's place (1-based line and column), marked in the editor.
  function markError(line, column) {
    const at = Math.min(line, yasqe.lineCount()) - 1;
    const text = yasqe.getLine(at) || "";
    const from = Math.max(0, Math.min(column - 1, text.length - 1));
    errorMarks.push(yasqe.addLineClass(at, "background", "query-error-line"));
    errorMarks.push(yasqe.markText({ line: at, ch: from }, { line: at, ch: from + 1 }, { className: "query-error" }));
    yasqe.setCursor({ line: at, ch: from });
  }

  function clearProblem() {
    $("problem").hidden = true;
    for (const mark of errorMarks) {
      if (typeof mark.clear === "function") mark.clear();
      else yasqe.removeLineClass(mark, "background", "query-error-line");
    }
    errorMarks = [];
  }

  $("run").addEventListener("click", () => run());
  $("cancel").addEventListener("click", cancel);
  loadDatasets().catch((error) => showProblem({ title: "The datasets could not be listed", detail: String(error) }));
})();
