// Live updates without reloading: a submission's status, the dashboard's queue and regrade
// progress, a similarity report's progress.
"use strict";

(function () {
  function badge(status) {
    const span = document.createElement("span");
    span.className = "badge status-" + status;
    span.textContent = status;
    return span;
  }

  function pollSubmission(live) {
    const url = live.dataset.statusUrl;
    const statusText = document.getElementById("status-text");
    const hint = document.getElementById("status-hint");
    let last = null;
    async function tick() {
      let body;
      // After the first answer each request is a long poll: the server answers the moment the
      // status changes (or after 20 s, or at once when busy: then wait a second before asking).
      const asked = Date.now();
      const query = last ? "?wait=20&since=" + encodeURIComponent(last) : "";
      try {
        const response = await fetch(url + query, {headers: {"Accept": "application/json"}, credentials: "same-origin"});
        if (!response.ok) throw new Error(response.status);
        body = await response.json();
      } catch (error) {
        hint.textContent = "connection lost, retrying…";
        setTimeout(tick, 3000);
        return;
      }
      const unchanged = body.status === last;
      if (!unchanged) {
        statusText.replaceChildren(badge(body.status));
        last = body.status;
      }
      if (!body.done) {
        hint.textContent = body.waiting_for_sandbox
          ? body.message || "waiting for a grading machine (it will be graded by itself, using none of your attempts)…"
          : body.status === "queued" ? "waiting for a grader…" : "being graded…";
        setTimeout(tick, unchanged && Date.now() - asked < 1000 ? 1000 : 0);
        return;
      }
      // The result part is rendered (and escaped) by the server; swap it in.
      const fragment = await fetch(body.result_url, {credentials: "same-origin"});
      document.getElementById("result").innerHTML = await fragment.text();
      hint.textContent = "";
      live.dataset.finished = "yes";
      const bar = live.querySelector(".progress");
      if (bar) bar.remove();
      document.dispatchEvent(new CustomEvent("autograde:graded", {detail: body}));
    }
    tick();
  }

  function showRegrade(run) {
    const set = (id, text) => { const el = document.getElementById(id); if (el) el.textContent = text; };
    const box = document.getElementById("regrade-progress");
    if (!box) return;
    box.hidden = false;
    const bar = document.getElementById("regrade-bar");
    const done = run.done + run.failed;
    bar.max = Math.max(run.total, 1);
    bar.value = done;
    set("regrade-text", done + " of " + run.total + " regraded");
    if (run.finished) {
      let text = "Regrade done: " + run.up + " up, " + run.down + " down, " + run.same + " unchanged";
      if (run.failed) text += ", " + run.failed + " failed";
      text += ".";
      for (const [code, n] of Object.entries(run.codes_gained)) text += " +" + code + " ×" + n;
      for (const [code, n] of Object.entries(run.codes_lost)) text += " −" + code + " ×" + n;
      if (run.keep_scores) text += " Feedback only: " + run.kept.length + " final score(s) kept.";
      if (run.lifted && run.lifted.length) text += " " + run.lifted.length + " kept score(s) lifted.";
      set("regrade-report", text);
      box.dataset.finished = "yes";
    }
  }

  function pollQueue(card) {
    const url = card.dataset.queueUrl;
    const set = (id, text) => { const el = document.getElementById(id); if (el) el.textContent = text; };
    const seconds = (v) => (v === null || v === undefined) ? "—" : v.toFixed(1) + " s";
    async function tick() {
      try {
        const response = await fetch(url, {credentials: "same-origin"});
        if (response.ok) {
          const body = await response.json();
          for (const k of ["queued", "running", "graded", "failed"]) set("q-" + k, String(body.queue[k]));
          set("lat-median", seconds(body.latency.median));
          set("lat-p95", seconds(body.latency.p95));
          set("lat-wait", seconds(body.latency.wait_median));
          set("students-graded", String(body.graded_students));
          set("students-submitted", String(body.students));
          document.dispatchEvent(new CustomEvent("autograde:charts", {detail: body.charts}));
          if (body.regrade) showRegrade(body.regrade);
        }
      } catch (error) { /* keep polling */ }
      setTimeout(tick, 2000);
    }
    tick();
  }

  function pollSimilarity(box) {
    const bar = document.getElementById("similarity-bar");
    const text = document.getElementById("similarity-text");
    async function tick() {
      try {
        const response = await fetch(box.dataset.progressUrl, {credentials: "same-origin"});
        if (response.ok) {
          const body = await response.json();
          if (!body.pending) {  // done or stopped: the page shows the report or why
            window.location.reload();
            return;
          }
          if (body.total) {
            bar.max = body.total;
            bar.value = body.done;
            text.textContent = body.done + " of " + body.total + " pairs compared";
          }
        }
      } catch (error) { /* keep polling */ }
      setTimeout(tick, 1500);
    }
    setTimeout(tick, 1500);
  }

  const live = document.getElementById("live");
  if (live && live.dataset.finished === "no") pollSubmission(live);
  const queue = document.getElementById("queue");
  if (queue && queue.dataset.queueUrl) pollQueue(queue);
  const similarity = document.getElementById("similarity-progress");
  if (similarity) pollSimilarity(similarity);
})();
