// campaignkit dashboard: the server renders every fragment; this script only
// swaps them in as server-sent events arrive (no build step, no library).
"use strict";
for (const root of document.querySelectorAll("[data-events]")) {
  const source = new EventSource(root.dataset.events);
  source.onmessage = (event) => {
    const update = JSON.parse(event.data);
    for (const [id, html] of Object.entries(update.html)) {
      const target = document.getElementById(id);
      if (target) target.innerHTML = html;
    }
    root.dataset.updates = String(Number(root.dataset.updates || 0) + 1);
  };
  source.onerror = () => { root.dataset.connection = "lost"; };
  source.onopen = () => { root.dataset.connection = "open"; };
}
