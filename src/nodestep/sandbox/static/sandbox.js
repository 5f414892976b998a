// The sandbox's one script: the live run view and an agent's reply as it comes. Each
// follows its run's event stream (EventSource, same origin, the cookie authenticates it)
// and writes what comes into the page as text (textContent: nothing from a run becomes
// markup).
"use strict";

// The message chunk of a "messages" event: a [chunk, metadata] pair, or the chunk alone.
function chunkOf(event) {
  const data = JSON.parse(event.data);
  return Array.isArray(data) ? data[0] : data;
}

// A record of the API (a run, a thread) as JSON; {} when it cannot be read.
async function readJson(url) {
  const answer = await fetch(url, { credentials: "same-origin" });
  return answer.ok ? answer.json() : {};
}

(function () {
  const live = document.getElementById("live");
  if (!live) return;
  const steps = document.getElementById("steps");
  const tokens = document.getElementById("tokens");
  const finalState = document.getElementById("final");
  const status = document.getElementById("run-status");

  function nodeShape(name) {
    for (const group of live.querySelectorAll("svg g.node")) {
      const label = group.querySelector("text");
      if (label && label.textContent === name) return group;
    }
    return null;
  }

  function mark(name, state) {
    const group = nodeShape(name);
    if (!group) return;
    group.classList.remove("running", "done", "failed", "paused");
    group.classList.add(state);
    group.setAttribute("data-status", state);
  }

  function addStep(kind, text) {
    const item = document.createElement("li");
    item.className = "step step-" + kind;
    const label = document.createElement("strong");
    label.textContent = kind;
    item.append(label, " ", text);
    steps.append(item);
  }

  function short(value) {
    const text = JSON.stringify(value);
    return text.length > 200 ? text.slice(0, 199) + "…" : text;
  }

  const source = new EventSource(live.dataset.stream);
  status.textContent = "running";
  for (const name of (live.dataset.entry || "").split(" ")) {
    if (name) mark(name, "running");
  }

  source.addEventListener("updates", (event) => {
    const data = JSON.parse(event.data);
    for (const [name, update] of Object.entries(data)) {
      if (name === "__interrupt__") {
        addStep("interrupt", short(update));
        continue;
      }
      mark(name, "done");
      addStep("task", name + " wrote " + short(update));
    }
  });
  source.addEventListener("debug", (event) => {
    const data = JSON.parse(event.data);
    const payload = data.payload || {};
    if (data.type === "routes") {
      // The nodes a step routes to are the next step's tasks: they run now.
      for (const targets of Object.values(payload.routes || {})) {
        for (const target of targets) {
          mark(typeof target === "string" ? target : target.send, "running");
        }
      }
    }
    if (data.type === "state_merge") addStep("superstep", "step " + data.step + " merged");
  });
  source.addEventListener("custom", (event) => {
    addStep("custom", short(JSON.parse(event.data)));
  });
  source.addEventListener("messages", (event) => {
    const chunk = chunkOf(event);
    if (chunk && typeof chunk.content === "string") tokens.textContent += chunk.content;
  });
  source.addEventListener("values", (event) => {
    finalState.textContent = JSON.stringify(JSON.parse(event.data), null, 2);
  });
  function markRunning(state) {
    for (const group of live.querySelectorAll("svg g.node.running")) {
      group.classList.replace("running", state);
      group.setAttribute("data-status", state);
    }
  }

  // The stream has no end event: it closes when the run ends, and the records of the
  // run and its thread then say how it ended. A run that paused ends "success" on a
  // thread that is "interrupted"; a run that ends "interrupted" was cancelled (the API's
  // word for it, as LangGraph's), and asks nothing. Only an interrupt asks a question.
  async function ended() {
    source.close();
    const run = await readJson(live.dataset.run);
    const thread = await readJson(live.dataset.thread);
    const shown = { success: "done", interrupted: "cancelled", error: "failed" };
    const paused = run.status === "success" && thread.status === "interrupted";
    status.textContent = paused ? "paused" : shown[run.status] || run.status || "unknown";
    if (run.status === "error") markRunning("failed");
    if (paused) markRunning("paused");
    if (paused && Object.keys(thread.interrupts || {}).length > 0) {
      document.getElementById("answer-link").hidden = false;
    }
    live.dataset.ended = "true";
  }

  source.addEventListener("error", (event) => {
    if (event.data) addStep("error", short(JSON.parse(event.data)));
    ended();
  });
})();

// An agent's chat: the reply of the run the page sent, token by token (a reply after a
// tool call starts a new paragraph); when the run ends, the page shows the thread as the
// run left it, or says why the agent failed.
(function () {
  const reply = document.getElementById("live-reply");
  if (!reply) return;
  const text = reply.querySelector(".content");
  const status = document.getElementById("reply-status");
  const failure = document.getElementById("reply-failure");
  const source = new EventSource(reply.dataset.stream);
  let message = null;
  let failed = null;

  source.addEventListener("messages", (event) => {
    const chunk = chunkOf(event);
    if (!chunk || typeof chunk.content !== "string" || !chunk.content) return;
    if (!String(chunk.type || "").toLowerCase().startsWith("ai")) return;  // the reply's only
    if (message !== null && chunk.id !== message) text.textContent += "\n\n";
    message = chunk.id;
    text.textContent += chunk.content;
  });

  // The stream has no end event: it closes when the run ends ("error" with no data); a
  // failed run sends its error first.
  source.addEventListener("error", async (event) => {
    if (event.data) {
      const error = JSON.parse(event.data);
      failed = "The agent failed: " + error.error + ": " + error.message;
      return;
    }
    source.close();
    if (!failed && (await readJson(reply.dataset.run)).status === "error") {
      failed = "The agent's run ended in an error.";
    }
    if (!failed) {
      window.location.replace(reply.dataset.done);
      return;
    }
    status.textContent = "failed";
    failure.textContent = failed + " ";
    const link = document.createElement("a");
    link.href = reply.dataset.done;
    link.textContent = "Show the conversation";
    failure.append(link);
    failure.hidden = false;
  });
})();
