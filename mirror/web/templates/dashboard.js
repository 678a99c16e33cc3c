// mirror's dashboard: polls the JSON API and redraws with textContent (never innerHTML).
"use strict";
(function () {
  const body = document.body;
  const canAct = body.dataset.canAct === "true";
  let csrf = null;

  function say(text) { document.getElementById("message").textContent = text || ""; }

  async function api(method, path, data) {
    const init = { method: method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
    if (method !== "GET") {
      init.headers["Content-Type"] = "application/json";
      if (csrf) init.headers["X-CSRF-Token"] = csrf;
      init.body = JSON.stringify(data || {});
    }
    const response = await fetch(path, init);
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.error || response.status + " " + response.statusText);
    return answer;
  }

  function duration(s) {
    if (s === null || s === undefined) return "";
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  }
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }
  function cell(row, text, cls) {
    const td = row.insertCell();
    td.textContent = text === null || text === undefined ? "" : String(text);
    if (cls) td.className = cls;
    return td;
  }
  function link(td, job) {
    const a = document.createElement("a");
    a.href = "/jobs/" + job.id;
    a.textContent = job.name;
    td.appendChild(a);
  }
  function setBar(bar, percent) {
    bar.querySelector(".fill").style.width = Math.max(0, Math.min(100, percent || 0)) + "%";
  }

  async function act(method, path, data, done) {
    try { say(""); const answer = await api(method, path, data); if (done) done(answer); }
    catch (error) { say(error.message); }
  }

  function drawRunning(jobs, staleTimeout) {
    const table = document.getElementById("running");
    const tbody = table.tBodies[0];
    tbody.replaceChildren();
    for (const job of jobs) {
      const row = tbody.insertRow();
      row.className = "job";
      row.dataset.jobId = job.id;
      link(cell(row, ""), job);
      cell(row, job.phase);
      const progress = cell(row, "");
      const bar = document.createElement("div");
      bar.className = "bar";
      bar.appendChild(document.createElement("div")).className = "fill";
      progress.appendChild(bar);
      const pct = document.createElement("span");
      pct.className = "pct";
      pct.textContent = typeof job.percent === "number" ? job.percent.toFixed(1) + "%" : "";
      progress.appendChild(pct);
      setBar(bar, job.percent);
      cell(row, job.speed);
      cell(row, duration(job.eta_s));
      cell(row, (job.worker_id || "") + (job.worker_id && job.encoder ? " (" + job.encoder + ")" : ""));
      const age = job.heartbeat_age_s;
      const cls = age === null ? "" : age > 0.8 * staleTimeout ? "stale" : age > 0.5 * staleTimeout ? "late" : "";
      cell(row, duration(age) + (age === null ? "" : " ago"), cls);
      const actions = cell(row, "");
      const cancel = document.createElement("button");
      cancel.type = "button";
      cancel.className = "act cancel";
      cancel.textContent = "Cancel";
      cancel.disabled = !canAct;
      cancel.title = canAct ? "" : "log in (MIRROR_UI_PASSWORD) to act";
      cancel.addEventListener("click", () => act("POST", "/api/jobs/" + job.id + "/cancel", {}, refresh));
      actions.appendChild(cancel);
    }
    document.getElementById("running-count").textContent = jobs.length;
  }

  function drawFailures(jobs) {
    const tbody = document.getElementById("failures").tBodies[0];
    tbody.replaceChildren();
    for (const job of jobs) {
      const row = tbody.insertRow();
      link(cell(row, ""), job);
      cell(row, job.finished_at);
      cell(row, job.error, "error");
    }
  }

  // The fleet's pause (mirror pause / resume): its mode, why, and the button of the mode
  // it is in turned off.
  function drawFleet(fleet) {
    const section = document.getElementById("fleet");
    section.dataset.mode = fleet.mode;
    const badge = document.getElementById("fleet-mode");
    badge.textContent = fleet.mode;
    badge.className = "badge fleet-" + fleet.mode;
    document.getElementById("fleet-banner").textContent = fleet.banner || "";
    const current = { paused: "fleet-pause", draining: "fleet-drain", running: "fleet-resume" }[fleet.mode];
    for (const id of ["fleet-pause", "fleet-drain", "fleet-resume"]) {
      document.getElementById(id).disabled = !canAct || id === current;
    }
  }

  const ITEM_ID = /^([0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;
  const WHOLE = { Series: "Mirror series", Season: "Mirror season", Library: "Mirror library" };

  function seriesText(item) {
    if (!item.series_name) return "";
    let text = item.series_name;
    if (item.type === "Episode" && item.parent_index_number !== null && item.index_number !== null) {
      text += " S" + String(item.parent_index_number).padStart(2, "0") + "E" + String(item.index_number).padStart(2, "0");
    } else if (item.season_name) {
      text += " / " + item.season_name;
    }
    return text;
  }

  // One search answer: a row per item, with "Mirror" (one job) or "Mirror series" and the
  // like (every item under it that is neither mirrored nor queued).
  function drawJellyfin(answer) {
    const section = document.getElementById("jellyfin-results");
    const tbody = section.querySelector("tbody");
    tbody.replaceChildren();
    for (const item of answer.items) {
      const row = tbody.insertRow();
      row.className = "hit";
      row.dataset.itemId = item.id;
      cell(row, item.name); cell(row, item.type); cell(row, item.year); cell(row, seriesText(item));
      const actions = cell(row, "");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "act queue";
      button.textContent = WHOLE[item.type] || "Mirror";
      button.disabled = !canAct;
      button.title = canAct ? "" : "log in (MIRROR_UI_PASSWORD) to act";
      button.addEventListener("click", () => {
        if (WHOLE[item.type]) {
          act("POST", "/api/sweep", { parent_id: item.id }, (result) => {
            actions.textContent = result.summary; say(item.name + ": " + result.summary); refresh();
          });
        } else {
          act("POST", "/api/enqueue", { item_id: item.id }, (result) => {
            actions.replaceChildren();
            const a = document.createElement("a");
            a.href = "/jobs/" + result.job.id;
            a.className = "queued-job";
            a.textContent = result.status;
            actions.appendChild(a);
            say(item.name + ": " + result.status); refresh();
          });
        }
      });
      actions.appendChild(button);
    }
    if (!answer.items.length) cell(tbody.insertRow(), "Jellyfin has no such title");
    section.hidden = false;
  }

  async function refresh() {
    const view = await api("GET", "/api/overview");
    for (const el of document.querySelectorAll("#counts .n")) {
      el.textContent = view.jobs_by_status[el.dataset.status] || 0;
    }
    document.getElementById("due").textContent = view.due;
    document.getElementById("oldest").textContent = view.due ? duration(view.oldest_due_age_s) : "-";
    document.getElementById("hour-jobs").textContent = view.last_hour.jobs_done;
    document.getElementById("hour-bytes").textContent = bytes(view.last_hour.bytes_uploaded);
    drawFleet(view.fleet);
    drawRunning(view.running, view.stale_timeout_s);
    drawFailures(view.failures);
  }

  async function poll(fn) {
    try { await fn(); } catch (error) { say("update failed: " + error.message); }
    setTimeout(() => poll(fn), 1000);
  }

  function dashboard() {
    document.getElementById("enqueue").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = document.getElementById("enqueue-item");
      const text = input.value.trim();
      if (ITEM_ID.test(text)) {
        act("POST", "/api/enqueue", { item_id: text }, (answer) => {
          say(answer.status + ": job " + answer.job.id); input.value = ""; refresh();
        });
      } else {
        act("GET", "/api/jellyfin/search?q=" + encodeURIComponent(text), null, drawJellyfin);
      }
    });
    document.getElementById("search").addEventListener("submit", (event) => {
      event.preventDefault();
      const q = document.getElementById("search-q").value.trim();
      act("GET", "/api/search?q=" + encodeURIComponent(q), null, (answer) => {
        const section = document.getElementById("search-results");
        const tbody = section.querySelector("tbody");
        tbody.replaceChildren();
        for (const job of answer.jobs) {
          const row = tbody.insertRow();
          link(cell(row, ""), job);
          cell(row, job.status); cell(row, job.created_at); cell(row, job.error, "error");
        }
        if (!answer.jobs.length) cell(tbody.insertRow(), "no job matches");
        section.hidden = false;
      });
    });
    const fleetDone = (answer) => { say(answer.message); drawFleet(answer.fleet); refresh(); };
    document.getElementById("fleet-pause").addEventListener("click", () => act("POST", "/api/fleet/pause", { drain: false }, fleetDone));
    document.getElementById("fleet-drain").addEventListener("click", () => act("POST", "/api/fleet/pause", { drain: true }, fleetDone));
    document.getElementById("fleet-resume").addEventListener("click", () => act("POST", "/api/fleet/resume", {}, fleetDone));
    for (const button of document.querySelectorAll("button.act")) button.disabled = !canAct;
    poll(refresh);
  }

  function jobPage() {
    const header = document.getElementById("job");
    const id = header.dataset.jobId;
    const reload = () => window.location.reload();
    document.getElementById("cancel").addEventListener("click", () => act("POST", "/api/jobs/" + id + "/cancel", {}, reload));
    document.getElementById("retry").addEventListener("click", () => act("POST", "/api/jobs/" + id + "/retry", {}, reload));
    document.getElementById("remirror").addEventListener("click", () => act("POST", "/api/enqueue", { item_id: header.dataset.itemId },
      (answer) => { window.location.href = "/jobs/" + answer.job.id; }));
    for (const button of document.querySelectorAll("button.act")) button.disabled = !canAct;
    poll(async () => {
      const answer = await api("GET", "/api/jobs/" + id);
      const status = document.getElementById("job-status");
      status.textContent = answer.job.status;
      status.className = "badge status-" + answer.job.status;
      const bar = document.getElementById("job-bar");
      bar.hidden = answer.job.status !== "processing";
      setBar(bar, answer.job.percent);
    });
  }

  function librariesPage() {
    for (const button of document.querySelectorAll("button.mirror-rest")) {
      button.disabled = !canAct || button.dataset.rest === "0";
      const row = button.closest("tr");
      button.addEventListener("click", () => act("POST", "/api/libraries/" + button.dataset.libraryId + "/mirror-rest", {}, (answer) => {
        const queued = row.querySelector(".n-queued");
        queued.textContent = Number(queued.textContent) + answer.queued;
        row.querySelector(".n-not-mirrored").textContent = "0";
        row.querySelector(".n-changed").textContent = "0";
        button.textContent = "queued " + answer.queued;
        button.disabled = true;
        say(answer.name + ": " + answer.queued + " queued");
      }));
    }
  }

  function login() {
    document.getElementById("login").addEventListener("submit", (event) => {
      event.preventDefault();
      act("POST", "/api/login", { password: document.getElementById("password").value }, reloadHome);
    });
  }
  function reloadHome() { window.location.reload(); }

  async function start() {
    const logout = document.getElementById("logout");
    if (logout) logout.addEventListener("click", () => act("POST", "/api/logout", {}, reloadHome));
    if (document.getElementById("login")) return login();
    try { csrf = (await api("GET", "/api/session")).csrf_token; } catch (error) { say(error.message); }
    if (document.getElementById("running")) dashboard();
    if (document.getElementById("job")) jobPage();
    if (document.getElementById("libraries")) librariesPage();
  }
  start();
})();
