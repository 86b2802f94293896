// Polls /admin/dashboard once a second; the admin cookie (set by the sign-in form) is the key.
const $ = (id) => document.getElementById(id);
/** Each model's token count at the last poll: tokens/s is the difference over the interval. */
const lastTokens = new Map();

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
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

async function refresh() {
  const res = await fetch("/admin/dashboard", { credentials: "same-origin" });
  if (!res.ok) {
    if (res.status === 401) await signedIn();
    return;
  }
  const data = await res.json();
  $("login").hidden = true;
  $("board").hidden = false;
  const rows = [];
  for (const model of data.models) {
    const before = lastTokens.get(model.name);
    const rate =
      model.kind === "generator" && before
        ? ((model.tokens - before.tokens) / ((data.at - before.at) / 1000)).toFixed(0)
        : "";
    lastTokens.set(model.name, { tokens: model.tokens, at: data.at });
    for (const v of model.versions) {
      const tr = document.createElement("tr");
      const batches = Object.entries(v.batch_sizes)
        .map(([k, n]) => `${k}: ${n}`)
        .join(", ");
      for (const text of [
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
        v.p50_ms ?? "",
        v.p95_ms ?? "",
        batches,
      ])
        tr.append(cell(String(text)));
      tr.append(cell(rate));
      rows.push(tr);
    }
  }
  $("rows").replaceChildren(...rows);
  $("updated").textContent = `updated ${new Date(data.at).toLocaleTimeString()}`;
}

if (await signedIn()) {
  await refresh();
  setInterval(refresh, 1000);
}
