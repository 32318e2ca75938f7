// dfsql console (dfsql/server/console.py): redraws the page's parts as batches commit,
// and shows a clicked window's EXPLAIN FIRINGS rows. Without this script the page is the
// same, as of its load, and a pane's link opens the window's firings on a page of its own.
"use strict";

(function () {
  const api = document.body.dataset.api;
  // the latest batch the page shows: a poll redraws its windows only after a later one
  let since = document.body.dataset.batch === undefined ? null : document.body.dataset.batch;
  let busy = false;

  function fill(parts) {
    for (const [id, html] of Object.entries(parts || {})) {
      const el = document.getElementById(id);
      if (el !== null && el.dataset.part === id) {
        const open = el.querySelector("details[open]") !== null;
        el.innerHTML = html;
        if (open) {
          const d = el.querySelector("details");
          if (d !== null) d.open = true;
        }
      }
    }
    mark();
  }

  function poll() {
    if (!api || busy) return;
    busy = true;
    const url = since === null ? api : api + "?since=" + encodeURIComponent(since);
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null))
      .then((data) => {
        if (data === null) return;
        if (data.batch !== undefined) since = data.batch;
        fill(data.parts);
        const stamp = document.getElementById("updated");
        if (stamp !== null) stamp.textContent = "updated " + new Date().toLocaleTimeString();
      })
      .catch(() => {})
      .finally(() => { busy = false; });
  }

  let chosen = null; // the href of the window shown
  function mark() {
    for (const a of document.querySelectorAll("a.window")) {
      a.classList.toggle("chosen", a.getAttribute("href") === chosen);
    }
  }

  document.addEventListener("click", (ev) => {
    const a = ev.target.closest ? ev.target.closest("a.window") : null;
    if (a === null) return;
    ev.preventDefault();
    chosen = a.getAttribute("href");
    mark();
    const box = document.getElementById("firings");
    box.innerHTML = "<p class='none'>asking the query&hellip;</p>";
    fetch("/api" + chosen, { credentials: "same-origin", cache: "no-store" })
      .then((r) => r.json())
      .then((data) => { box.innerHTML = data.html; box.scrollIntoView({ block: "nearest" }); })
      .catch((e) => { box.textContent = "could not ask the query: " + e; });
  });

  if (api) {
    const header = document.querySelector("header");
    const stamp = document.createElement("span");
    stamp.id = "updated";
    stamp.className = "updated";
    header.appendChild(stamp);
    poll();
    setInterval(poll, 1000);
  }
})();
