// The admin page: GET /admin/migration and GET /admin/calls of this replica, and of the other replicas named
// in the address's fragment (#token=…&replicas=http://10.0.0.6:9100,…), drawn; several reports are summed
// and judged by this replica (POST /admin/migration/sum). The token comes from the fragment (never sent to
// any server) or the form, and is kept for the tab only; every replica is asked with it.
"use strict";
const PATHS = ["adapted", "relayed", "mirrored", "passthrough"];

function token() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) sessionStorage.setItem("mrtr-admin-token", fromHash);
  return sessionStorage.getItem("mrtr-admin-token");
}

async function get(path, secret, init) {
  const res = await fetch(path, { ...init, headers: { Authorization: "Bearer " + secret } });
  if (!res.ok) throw new Error(path + ": HTTP " + res.status);
  return res.json();
}

function others() {
  const list = new URLSearchParams(location.hash.slice(1)).get("replicas") || "";
  return list.split(",").map((u) => u.trim().replace(/\/+$/, "")).filter(Boolean);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

function bar(parts, total, cls) {
  const out = el("div", { class: "bar", "data-bar": cls });
  for (const [name, n] of parts) {
    if (!n) continue;
    out.append(el("div", { class: name, style: "width:" + (100 * n / total) + "%", title: name + ": " + n }));
  }
  return out;
}

function ago(t, now) {
  const s = Math.max(0, now - t);
  if (s >= 86400) return Math.floor(s / 86400) + " d ago";
  if (s >= 3600) return Math.floor(s / 3600) + " h ago";
  if (s >= 60) return Math.floor(s / 60) + " min ago";
  return Math.floor(s) + " s ago";
}

function upstreamSection(name, up, now, parked) {
  const w = up.last_7d;
  const sec = el("section", { class: "upstream", "data-upstream": name });
  sec.append(el("h2", {}, name + " ", el("small", {}, "era " + (up.era || "unknown"))));
  sec.append(el("p", { class: "verdict " + up.verdict.state, "data-field": "verdict" }, up.verdict.text));
  sec.append(el("div", { class: "label" }, "Calls in the last 7 days by path, then by client era (" +
    w.total + " calls)"));
  sec.append(bar(PATHS.map((p) => [p, w.calls[p]]), w.total || 1, "path"));
  sec.append(bar([["era-modern", w.by_client_era["2026-07-28"]], ["era-legacy", w.by_client_era.legacy]],
    w.total || 1, "era"));
  const head = el("tr", {}, el("th", {}, "calls"), ...PATHS.map((p) => el("th", {}, p)),
    el("th", {}, "2026-07-28"), el("th", {}, "legacy"), el("th", {}, "total"));
  const table = el("table", {}, head);
  for (const scope of ["last_24h", "last_7d", "life"]) {
    const f = up[scope];
    const cell = (field, v) => el("td", { "data-scope": scope, "data-field": field }, String(v));
    table.append(el("tr", {}, el("td", {}, scope.replace("_", " ")),
      ...PATHS.map((p) => cell(p, f.calls[p])),
      cell("2026-07-28", f.by_client_era["2026-07-28"]), cell("legacy", f.by_client_era.legacy),
      cell("total", f.total)));
  }
  sec.append(table);
  const inline = Object.entries(up.tools).filter(([, t]) => t.inline).map(([tool, t]) =>
    el("li", { "data-tool": tool }, tool + " (last asked " + ago(t.inline.last_seen, now) + ")"));
  sec.append(el("p", {}, "Tools asking inline: ", inline.length ? "" : "none"));
  if (inline.length) sec.append(el("ul", { "data-field": "inline" }, ...inline));
  sec.append(el("p", {}, "Parked calls: ", el("span", { "data-field": "parked" }, String(parked))));
  return sec;
}

async function draw(secret) {
  const status = document.getElementById("status");
  try {
    const bases = ["", ...others().map((u) => u + "/admin/")];  // "": this replica's own, relative
    const asked = await Promise.allSettled(bases.map((b) =>
      Promise.all([get(b + "migration", secret), get(b + "calls", secret)])));
    const failed = asked.map((a, i) => a.status === "rejected" ? (bases[i] || "this replica") + ": " +
      a.reason : null).filter(Boolean);
    const got = asked.filter((a) => a.status === "fulfilled").map((a) => a.value);
    if (!got.length) throw new Error(failed.join("; "));
    const reports = got.map(([r]) => r);
    const report = reports.length === 1 ? reports[0] : await get("migration/sum", secret,
      { method: "POST", body: JSON.stringify(reports) });
    const parked = {};
    for (const [, calls] of got) {
      for (const c of calls.calls) if (c.state === "parked") parked[c.upstream] = (parked[c.upstream] || 0) + 1;
    }
    const main = document.getElementById("upstreams");
    main.replaceChildren(...Object.entries(report.upstreams).map(([name, up]) =>
      upstreamSection(name, up, report.now, parked[name] || 0)));
    const since = new Date(report.started_at * 1000).toISOString();
    status.textContent = "Counting since " + since + " (a restart starts again at zero) · " +
      report.replicas.length + " replica(s): " + report.replicas.map((r) => r.replica).join(", ") +
      (failed.length ? " · left out: " + failed.join("; ") : "");
    document.body.dataset.replicas = String(report.replicas.length);
    document.body.dataset.ready = "1";
  } catch (err) {
    status.textContent = String(err);
    document.getElementById("login").hidden = false;
  }
}

document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("mrtr-admin-token", document.getElementById("token").value);
  draw(token());
});
const secret = token();
if (secret) draw(secret); else document.getElementById("login").hidden = false;
