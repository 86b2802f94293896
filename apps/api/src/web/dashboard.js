// Polls /admin/dashboard once a second; the admin cookie (set by the sign-in form) is the key.
// Everything is drawn with the DOM and inline SVG (the page's policy loads nothing else), and
// every text from the server goes in as text: a request id is whatever its client sent.
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
/** A chart's drawing box; the SVG stretches it to its card's width. */
const W = 300;
const H = 80;

function el(tag, attrs = {}, text = undefined) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

/** A latency quantile: the sketch knows it to 2%, so two figures, never more. */
function quantile(ms) {
  return ms === null || ms === undefined ? "–" : String(Number(ms.toPrecision(2)));
}

/** A measured duration of one request (exact, unlike a quantile). */
function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  return ms < 10 ? ms.toFixed(1) : String(Math.round(ms));
}

function rate(n) {
  if (n === null || n === undefined) return "–";
  return n < 10 ? String(Number(n.toFixed(1))) : String(Math.round(n));
}

/**
 * A table whose cells carry their column's name: on a phone each row stacks into a card of
 * "name: value" lines (ferry.css, .stack), so nothing is wider than the screen.
 */
function table(columns, rows, testid) {
  const t = el("table", { class: "stack", "data-testid": testid });
  const head = el("tr");
  for (const c of columns) head.append(el("th", {}, c));
  const thead = el("thead");
  thead.append(head);
  t.append(thead);
  const body = el("tbody");
  for (const cells of rows) body.append(row(columns, cells));
  t.append(body);
  return t;
}

function row(columns, cells) {
  const tr = el("tr");
  cells.forEach((cell, k) => {
    const td = el("td", { "data-label": columns[k] ?? "" });
    if (cell instanceof Node) td.append(cell);
    else td.textContent = String(cell);
    tr.append(td);
  });
  return tr;
}

async function signedIn() {
  const session = await (await fetch("/dashboard/session")).json();
  if (session.signed_in) return true;
  $("board").hidden = true;
  $("login").hidden = false;
  if (!session.enabled)
    $("login-error").textContent =
      "Admin is off: this server was started without ADMIN_TOKEN. Start it with one (ADMIN_TOKEN=choose-a-secret npm start), then sign in here with that token.";
  else if (new URLSearchParams(location.search).get("signin") === "invalid")
    $("login-error").textContent = "That is not this server's ADMIN_TOKEN.";
  return false;
}

const known = (v) => v !== null && v !== undefined;

/**
 * The path of one series, broken where a step has no value (nothing sampled it); a step alone
 * between gaps is a short dash, since a lone point draws nothing.
 */
function linePath(values, top) {
  const step = values.length > 1 ? W / (values.length - 1) : 0;
  let d = "";
  values.forEach((v, i) => {
    if (!known(v)) return;
    const x = i * step;
    const y = (H - (v / top) * H).toFixed(1);
    if (known(values[i - 1])) d += `L${x.toFixed(1)} ${y}`;
    else if (known(values[i + 1])) d += `M${x.toFixed(1)} ${y}`;
    else d += `M${Math.max(0, x - 4).toFixed(1)} ${y}H${x.toFixed(1)}`;
  });
  return d;
}

/** One small chart of the last minutes: a line per series, scaled to their maximum. */
function chart(title, series, format, windowS) {
  const figure = el("figure", { class: "chart" });
  const values = series.flatMap((s) => s.values).filter(known);
  const max = values.length ? Math.max(...values) : 0;
  const top = max > 0 ? max * 1.1 : 1;
  const now = series
    .map((s) => {
      const last = s.values.findLast(known);
      return `${s.name ? `${s.name} ` : ""}${format(last)}`;
    })
    .join(" · ");
  const caption = el("figcaption");
  // the latest step's figures, then the chart's peak: the overview's p50/p99 are the whole
  // window's, which a reader otherwise takes these for
  caption.append(
    el("strong", {}, title),
    ` last step: ${now} · peak in ${windowS / 60} min: ${format(max)}`,
  );
  figure.append(caption);
  const drawing = svg("svg", {
    viewBox: `0 0 ${W} ${H}`,
    preserveAspectRatio: "none",
    role: "img",
    "aria-label": `${title}, last ${windowS / 60} minutes: ${now}`,
    "data-testid": "chart",
    "data-title": title,
    "data-max": max,
  });
  drawing.append(svg("line", { x1: 0, y1: H, x2: W, y2: H, class: "axis" }));
  series.forEach((s, k) => {
    const d = linePath(s.values, top);
    if (d) drawing.append(svg("path", { d, class: `line s${k}` }));
  });
  figure.append(drawing);
  const axis = el("div", { class: "axis-labels meta" });
  axis.append(el("span", {}, `−${windowS / 60} min`), el("span", {}, "now"));
  figure.append(axis);
  return figure;
}

/** Where a slow request's time went; what no part accounts for is the API and the way back. */
function slowestTable(kind, recent, at) {
  const generator = kind === "generator";
  const columns = ["request", "ended", "total ms", "queue", "batch", "compute", "other"];
  if (generator) columns.push("TTFT ms", "tokens");
  const rows = recent.slowest.map((r) => {
    const id = el("code", { title: r.id }, r.id);
    const cell = el("span");
    cell.append(id);
    if (r.failed) cell.append(" ", el("span", { class: "failed" }, "error"));
    const known = [r.queue_ms, r.batch_ms, r.compute_ms];
    const other = known.every((x) => x !== undefined)
      ? Math.max(0, r.total_ms - known.reduce((a, b) => a + b, 0))
      : undefined;
    const cells = [
      cell,
      `${Math.max(0, Math.round((at - r.at) / 1000))} s ago`,
      duration(r.total_ms),
      duration(r.queue_ms),
      duration(r.batch_ms),
      duration(r.compute_ms),
      duration(other),
    ];
    if (generator) cells.push(duration(r.ttft_ms), r.tokens ?? "–");
    return cells;
  });
  return table(columns, rows, "slowest");
}

/** A model version's card: its last minutes as charts, and its slowest requests. */
function versionCard(model, v, at) {
  const recent = v.recent;
  const title = `${model.name} v${v.version}`;
  const section = el("section", {
    class: "version",
    "aria-label": title,
    "data-testid": `version-${model.name}-${v.version}`,
  });
  const heading = el("h2", {}, title);
  heading.append(
    " ",
    el(
      "span",
      { class: "meta" },
      `${recent.requests} requests, ${recent.errors} errors in the last ${recent.window_s / 60} minutes`,
    ),
  );
  section.append(heading);
  const points = recent.points;
  // a version nothing used lately is one line, not empty charts
  if (recent.requests === 0 && !points.some((p) => p.depth > 0 || p.tokens_per_s > 0)) {
    heading.classList.add("idle");
    return section;
  }
  const charts = el("div", { class: "charts" });
  const series = (key) => points.map((p) => p[key]);
  charts.append(
    chart("requests/s", [{ values: series("requests_per_s") }], rate, recent.window_s),
    chart("queue depth", [{ values: series("depth") }], rate, recent.window_s),
    chart(
      "latency ms",
      [
        { name: "p50", values: series("p50_ms") },
        { name: "p99", values: series("p99_ms") },
      ],
      quantile,
      recent.window_s,
    ),
  );
  if (model.kind === "generator")
    charts.append(chart("tokens/s", [{ values: series("tokens_per_s") }], rate, recent.window_s));
  section.append(charts);
  section.append(el("h3", {}, "Slowest requests"));
  if (recent.slowest.length === 0)
    section.append(el("p", { class: "meta" }, "None in the last minutes."));
  else section.append(slowestTable(model.kind, recent, at));
  return section;
}

function overviewRow(model, v) {
  const last = v.recent.points.at(-1);
  const batches = Object.entries(v.batch_sizes)
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ");
  const columns = [...document.querySelectorAll("#board thead th")].map((th) => th.textContent);
  return row(columns, [
    model.name,
    v.version,
    `${v.traffic_percent}%`,
    v.workers,
    v.queue.waiting,
    v.queue.active,
    v.queue.completed,
    v.queue.failed,
    v.requests,
    v.errors,
    rate(last?.requests_per_s),
    quantile(v.recent.p50_ms),
    quantile(v.recent.p99_ms),
    batches,
    model.kind === "generator" ? rate(last?.tokens_per_s) : "",
  ]);
}

/** When the server stopped answering (undefined while it answers), and what it said last. */
let silentSince;
let lastAt;

/** The board stays, dimmed, and says since when it is what the server said last. */
function showStale(why) {
  silentSince ??= Date.now();
  const since = new Date(silentSince).toLocaleTimeString();
  const shown = lastAt ? new Date(lastAt).toLocaleTimeString() : "nothing yet";
  $("updated").textContent = `${why} since ${since}; showing ${shown}`;
  $("updated").classList.add("stale-note");
  document.body.classList.add("stale");
}

/** How long a poll may wait for the server's answer before the board says it is stale. */
const POLL_TIMEOUT_MS = 3_000;
/** A poll is waiting: the next tick does not pile another onto a server that hangs. */
let polling = false;

async function refresh() {
  if (polling) return;
  polling = true;
  try {
    await poll();
  } finally {
    polling = false;
  }
}

async function poll() {
  let res;
  let data;
  try {
    res = await fetch("/admin/dashboard", {
      credentials: "same-origin",
      signal: AbortSignal.timeout(POLL_TIMEOUT_MS),
    });
    // a body cut off as the server dies, or a proxy's page, is no answer either
    if (res.ok) data = await res.json();
  } catch {
    showStale("the server does not answer");
    return;
  }
  if (!res.ok) {
    if (res.status === 401) await signedIn().catch(() => showStale("the server does not answer"));
    else showStale(`the server answers ${res.status}`);
    return;
  }
  silentSince = undefined;
  lastAt = data.at;
  $("updated").classList.remove("stale-note");
  document.body.classList.remove("stale");
  $("login").hidden = true;
  $("board").hidden = false;
  const rows = [];
  const cards = [];
  for (const model of data.models)
    for (const v of model.versions) {
      rows.push(overviewRow(model, v));
      cards.push(versionCard(model, v, data.at));
    }
  $("rows").replaceChildren(...rows);
  $("versions").replaceChildren(...cards);
  $("updated").textContent = `updated ${new Date(data.at).toLocaleTimeString()}`;
}

if (await signedIn()) {
  await refresh();
  setInterval(refresh, 1000);
}
