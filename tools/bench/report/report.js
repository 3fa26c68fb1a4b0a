// Draws the plots of a neuronsim benchmark report (tools/bench/report.h) from the JSON the page
// carries in <script id="charts">, marks each point by what it did against the run before, and
// filters the overview table. Sets <body data-rendered="N"> once its N plots are drawn.
"use strict";

const STATUS_STYLE = {
  regression: { color: "#c62828", shape: "triangle", radius: 7 },
  improvement: { color: "#2e7d32", shape: "circle", radius: 6 },
  change: { color: "#ef6c00", shape: "rectRot", radius: 6 },
  "": { color: "#1565c0", shape: "circle", radius: 3 },
};

function drawPlot(spec, root) {
  const canvas = document.getElementById(spec.id);
  const styles = spec.status.map((s) => STATUS_STYLE[s] || STATUS_STYLE[""]);
  const unit = spec.unit && spec.unit !== "count" ? " " + spec.unit : "";
  return new Chart(canvas, {
    type: "line",
    data: {
      labels: spec.labels,
      datasets: [
        {
          label: spec.metric,
          data: spec.values,
          borderColor: "#1565c0",
          borderWidth: 1.5,
          pointBackgroundColor: styles.map((s) => s.color),
          pointBorderColor: styles.map((s) => s.color),
          pointStyle: styles.map((s) => s.shape),
          pointRadius: styles.map((s) => s.radius),
          tension: 0,
        },
      ],
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      plugins: {
        legend: { display: false },
        tooltip: {
          callbacks: {
            title: (items) => {
              const i = items[0].dataIndex;
              return `run ${spec.runs[i]} · ${spec.labels[i]} · ${spec.dates[i]}`;
            },
            label: (item) => {
              const status = spec.status[item.dataIndex];
              return `${item.formattedValue}${unit}${status ? " (" + status + ")" : ""}`;
            },
          },
        },
      },
      scales: { y: { title: { display: unit !== "", text: unit.trim() } } },
      onClick: (event, elements) => {
        if (elements.length > 0) {
          window.location.href = `${root}runs/${spec.runs[elements[0].index]}.html`;
        }
      },
    },
  });
}

function filterRows(input) {
  const words = input.value.toLowerCase().split(/\s+/).filter((w) => w !== "");
  for (const row of document.querySelectorAll("table.figures tbody tr")) {
    const text = `${row.dataset.benchmark} ${row.dataset.metric}`.toLowerCase();
    row.hidden = !words.every((w) => text.includes(w));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const specs = JSON.parse(document.getElementById("charts").textContent);
  const root = document.body.dataset.root || "";
  for (const spec of specs) drawPlot(spec, root);
  const filter = document.getElementById("filter");
  if (filter) filter.addEventListener("input", () => filterRows(filter));
  document.body.dataset.rendered = String(specs.length);
});
