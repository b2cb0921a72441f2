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
  if (dash) {
    draw("codes-chart", {
      type: "bar",
      data: {labels: dash.codes.map((c) => c.code),
             datasets: [{label: "students", data: dash.codes.map((c) => c.students), backgroundColor: warn}]},
      options: {indexAxis: "y", plugins: {legend: {display: false},
                tooltip: {callbacks: {afterLabel: (ctx) => Math.round(dash.codes[ctx.dataIndex].share * 100) + "% of graded students"}}},
                scales: {x: integerAxis}},
    });
    draw("histogram-chart", {
      type: "bar",
      data: {labels: dash.histogram.labels,
             datasets: [{label: "students", data: dash.histogram.counts, backgroundColor: accent}]},
      options: {plugins: {legend: {display: false}}, scales: {y: integerAxis,
                x: {title: {display: true, text: "score"}}}},
    });
    draw("checks-chart", {
      type: "bar",
      data: {labels: dash.checks.map((c) => c.number + " " + c.name),
             datasets: [{label: "pass rate", data: dash.checks.map((c) => Math.round(c.rate * 100)),
                         backgroundColor: dash.checks.map((c) => c.rate >= 0.5 ? good : warn)}]},
      options: {indexAxis: "y", plugins: {legend: {display: false}},
                scales: {x: {min: 0, max: 100, ticks: {callback: (v) => v + "%"}},
                         y: {ticks: {autoSkip: false, callback: function (v) {
                           const label = this.getLabelForValue(v);
                           return label.length > 30 ? label.slice(0, 29) + "…" : label; }}}}},
    });
    const t = dash.timeline;
    draw("timeline-chart", {
      type: "bar",
      data: {labels: t.labels.map((l) => l === t.deadline_label ? l + " | deadline" : l),
             datasets: [{label: "on time", data: t.on_time, backgroundColor: accent},
                        {label: "late", data: t.late, backgroundColor: warn}]},
      options: {scales: {x: {stacked: true}, y: Object.assign({stacked: true}, integerAxis)}},
    });
  }

  // The overview refreshes its figures while open (a regrade keeps them readable throughout).
  document.addEventListener("autograde:charts", (event) => {
    const fresh = event.detail;
    const histogram = document.getElementById("histogram-chart");
    if (fresh && histogram && histogram.chart) {
      histogram.chart.data.datasets[0].data = fresh.histogram.counts;
      histogram.chart.update();
    }
    const codes = document.getElementById("codes-chart");
    if (fresh && codes && codes.chart) {
      codes.chart.data.labels = fresh.codes.map((c) => c.code);
      codes.chart.data.datasets[0].data = fresh.codes.map((c) => c.students);
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
