// Charts drawn with the vendored Chart.js from JSON the server embeds (never executed as code).
"use strict";

(function () {
  if (typeof Chart === "undefined") return;
  const css = getComputedStyle(document.documentElement);
  const accent = css.getPropertyValue("--accent").trim() || "#3557b7";
  const warn = css.getPropertyValue("--warn").trim() || "#c2410c";
  const good = css.getPropertyValue("--good").trim() || "#15803d";
  Chart.defaults.font.family = css.getPropertyValue("--font").trim() || "system-ui, sans-serif";
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  function data(id) {
    const el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }
  function draw(id, config) {
    const canvas = document.getElementById(id);
    if (canvas) canvas.chart = new Chart(canvas, config);
  }
  const integerAxis = {beginAtZero: true, ticks: {precision: 0}};

  const dash = data("dashboard-data");
  const ink = css.getPropertyValue("--ink").trim() || "#1d2433";
  const percentAxis = {min: 0, max: 100, ticks: {callback: (v) => v + "%"}};

  // Chart.js draws category labels on one line unless given an array: wrap long names.
  function wrap(text, width) {
    const lines = [];
    let line = "";
    for (const word of text.split(" ")) {
      if (line && (line + " " + word).length > width) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    }
    if (line) lines.push(line);
    return lines;
  }
  // A vertical marker at a fractional position of a category axis, with its label.
  function marker(chart, at, label, dashed, row) {
    const x = chart.scales.x, area = chart.chartArea, c = chart.ctx;
    if (at === null || at === undefined || !x) return;
    const step = x.getPixelForValue(1) - x.getPixelForValue(0);
    const px = x.getPixelForValue(0) + at * step;
    c.save();
    c.strokeStyle = ink; c.fillStyle = ink; c.lineWidth = 2;
    c.setLineDash(dashed ? [6, 4] : []);
    c.beginPath(); c.moveTo(px, area.top + 14 + 14 * (row || 0)); c.lineTo(px, area.bottom); c.stroke();
    c.font = "12px " + Chart.defaults.font.family;
    c.textAlign = px > (area.left + area.right) / 2 ? "right" : "left";
    c.fillText(label, px + (c.textAlign === "left" ? 4 : -4), area.top + 10 + 14 * (row || 0));
    c.restore();
  }
  const markers = {
    id: "markers",
    afterDatasetsDraw(chart) { (chart.config.options.markers || []).forEach((m, i) => marker(chart, m.at, m.label, m.dashed, i)); },
  };
  function histogramMarkers(h) {
    if (!h.count) return [];
    const bins = h.counts.length, at = (v) => Math.min(v / (h.max_score || 1) * bins, bins) - 0.5;
    const out = [{at: at(h.mean), label: "mean " + h.mean, dashed: false}];
    if (h.median !== h.mean) out.push({at: at(h.median), label: "median " + h.median, dashed: true});
    return out;
  }

  if (dash) {
    const codesCanvas = document.getElementById("codes-chart");
    if (codesCanvas) codesCanvas.parentElement.style.height = Math.max(160, 60 + 26 * dash.codes.length) + "px";
    draw("codes-chart", {
      type: "bar",
      data: {labels: dash.codes.map((c) => c.code),
             datasets: [{label: "share of graded students", data: dash.codes.map((c) => Math.round(c.share * 1000) / 10),
                         backgroundColor: warn}]},
      options: {indexAxis: "y", plugins: {legend: {display: false},
                tooltip: {callbacks: {label: (ctx) => dash.codes[ctx.dataIndex].students + " students, " + ctx.parsed.x + "%"}}},
                scales: {x: Object.assign({title: {display: true, text: "share of graded students"}}, percentAxis)},
                onClick: (event, elements) => {
                  if (!elements.length || !codesCanvas.dataset.submissionsUrl) return;
                  const code = dash.codes[elements[0].index].code;
                  window.location.href = codesCanvas.dataset.submissionsUrl + "?code=" + encodeURIComponent(code);
                }},
    });
    draw("histogram-chart", {
      type: "bar",
      data: {labels: dash.histogram.labels,
             datasets: [{label: "students", data: dash.histogram.counts, backgroundColor: accent}]},
      options: {plugins: {legend: {display: false}}, markers: histogramMarkers(dash.histogram),
                scales: {y: Object.assign({title: {display: true, text: "students"}}, integerAxis),
                         x: {title: {display: true, text: "score"}}}},
      plugins: [markers],
    });
    const checksCanvas = document.getElementById("checks-chart");
    if (checksCanvas) checksCanvas.parentElement.style.height = Math.max(220, 90 + 44 * dash.checks.length) + "px";
    const passing = (c) => c.rate >= 0.5;
    draw("checks-chart", {
      type: "bar",
      data: {labels: dash.checks.map((c) => wrap(c.number + " " + c.name + " (" + c.points + " pt)", 36)),
             datasets: [{label: "pass rate", data: dash.checks.map((c) => Math.round(c.rate * 100)),
                         backgroundColor: dash.checks.map((c) => passing(c) ? good : warn),
                         borderColor: ink, borderWidth: dash.checks.map((c) => passing(c) ? 0 : 1)}]},
      options: {indexAxis: "y",
                plugins: {legend: {display: true, position: "top", labels: {generateLabels: () => [
                  {text: "half or more pass", fillStyle: good, strokeStyle: good, lineWidth: 0},
                  {text: "fewer than half pass (outlined)", fillStyle: warn, strokeStyle: ink, lineWidth: 1}]},
                  onClick: () => {}}},
                scales: {x: Object.assign({title: {display: true, text: "share of counted submissions passing"}}, percentAxis),
                         y: {ticks: {autoSkip: false}}}},
    });
    const t = dash.timeline;
    const deadline = t.deadline_label ? t.labels.indexOf(t.deadline_label) : -1;
    draw("timeline-chart", {
      type: "bar",
      data: {labels: t.labels,
             datasets: [{label: "on time", data: t.on_time, backgroundColor: accent},
                        {label: "late", data: t.late, backgroundColor: warn}]},
      options: {markers: deadline >= 0 ? [{at: deadline, label: "deadline", dashed: true}] : [],
                plugins: {legend: {display: true, position: "top"}},
                scales: {x: {stacked: true}, y: Object.assign({stacked: true, title: {display: true, text: "submissions"}}, integerAxis)}},
      plugins: [markers],
    });
  }

  // The overview refreshes its figures while open (a regrade keeps them readable throughout).
  document.addEventListener("autograde:charts", (event) => {
    const fresh = event.detail;
    const histogram = document.getElementById("histogram-chart");
    if (fresh && histogram && histogram.chart) {
      histogram.chart.data.datasets[0].data = fresh.histogram.counts;
      histogram.chart.options.markers = histogramMarkers(fresh.histogram);
      histogram.chart.update();
      const set = (id, v) => { const el = document.getElementById(id); if (el && v !== null && v !== undefined) el.textContent = String(v); };
      set("score-mean", fresh.histogram.mean); set("score-median", fresh.histogram.median); set("score-zeros", fresh.histogram.zeros);
    }
    const codes = document.getElementById("codes-chart");
    if (fresh && codes && codes.chart) {
      dash.codes = fresh.codes;
      codes.chart.data.labels = fresh.codes.map((c) => c.code);
      codes.chart.data.datasets[0].data = fresh.codes.map((c) => Math.round(c.share * 1000) / 10);
      codes.chart.update();
    }
  });

  const history = data("history-data");
  if (history) {
    draw("history-chart", {
      type: "line",
      data: {labels: history.points.map((p) => "#" + p.id + " " + p.at.slice(5, 16).replace("T", " ")),
             datasets: [{label: "score", data: history.points.map((p) => p.score), borderColor: accent,
                         backgroundColor: accent, tension: 0}]},
      options: {plugins: {legend: {display: false}},
                scales: {y: {beginAtZero: true, suggestedMax: history.points.length ? history.points[0].max : 10}}},
    });
  }
})();
