// Ferry's playground: plain modules, no framework, no CDN. Every call goes through the same
// public API a client would use.
import { mnistPixels, SIZE } from "./mnist-image.js";

const $ = (id) => document.getElementById(id);

/** Headers of every call: JSON, and the API key when one was given. */
function headers() {
  const key = $("api-key").value.trim();
  return { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
}
$("api-key").value = sessionStorage.getItem("ferry-key") ?? "";
$("api-key").addEventListener("change", () =>
  sessionStorage.setItem("ferry-key", $("api-key").value),
);

/** Reads an SSE body, calling onEvent({event, id, data}) for each event. */
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += decoder.decode(value, { stream: true });
    let end = buffered.indexOf("\n\n");
    while (end >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const event = { event: "message", id: undefined, data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith("data: ")) event.data += line.slice(6);
        else if (line.startsWith("event: ")) event.event = line.slice(7);
        else if (line.startsWith("id: ")) event.id = line.slice(4);
      }
      if (event.data) onEvent(event);
      end = buffered.indexOf("\n\n");
    }
  }
}

async function errorText(res) {
  const body = await res.json().catch(() => ({}));
  return `${res.status}: ${body?.error?.message ?? body?.error ?? res.statusText}`;
}

// ---- digit pad: strokes kept as points, prepared for digits-cnn as MNIST's digits were made ----
const MODEL = "digits-cnn";
const canvas = $("digit-canvas");
const ctx = canvas.getContext("2d");
// the pen as the pad shows it; the model's image is drawn with its own (mnist-image.js)
Object.assign(ctx, { strokeStyle: "#fff", lineWidth: 14, lineCap: "round", lineJoin: "round" });
/** Each stroke's points in the canvas's pixels: the model's image is drawn from these. */
let strokes = [];
let drawing = false;
let timer;

function at(event) {
  const rect = canvas.getBoundingClientRect();
  return [
    ((event.clientX - rect.left) / rect.width) * canvas.width,
    ((event.clientY - rect.top) / rect.height) * canvas.height,
  ];
}

function extend(point) {
  const stroke = strokes[strokes.length - 1];
  const from = stroke[stroke.length - 1] ?? point;
  stroke.push(point);
  ctx.beginPath();
  ctx.moveTo(...from);
  ctx.lineTo(...point);
  ctx.stroke();
}

canvas.addEventListener("pointerdown", (e) => {
  drawing = true;
  canvas.setPointerCapture(e.pointerId);
  strokes.push([]);
  extend(at(e));
});
canvas.addEventListener("pointermove", (e) => {
  if (!drawing) return;
  extend(at(e));
  clearTimeout(timer);
  timer = setTimeout(predict, 150);
});
canvas.addEventListener("pointerup", () => {
  drawing = false;
  clearTimeout(timer);
  predict();
});

/** The model's input: the drawing as a 28x28 image, which is also shown beside the pad. */
function features() {
  const pixels = mnistPixels(strokes);
  showSeen(pixels);
  // three decimals are as fine as MNIST's 8-bit pixels; a float's seventeen add only bytes
  return Array.from(pixels, (v) => Math.round(v * 1000) / 1000);
}

/** Shows what the model reads, so that a surprising answer can be understood. */
function showSeen(pixels) {
  const seen = $("digit-seen").getContext("2d");
  const image = seen.createImageData(SIZE, SIZE);
  for (const [i, v] of pixels.entries()) {
    image.data.fill(Math.round(v * 255), i * 4, i * 4 + 3);
    image.data[i * 4 + 3] = 255;
  }
  seen.putImageData(image, 0, 0);
}

/** The newest prediction asked for: an older one's answer, arriving late, is not shown. */
let latest = 0;

async function predict() {
  const mine = ++latest;
  const shown = $("digit-prediction");
  shown.dataset.pending = "true";
  const res = await fetch(`/v1/models/${MODEL}/predict`, {
    method: "POST",
    headers: headers(),
    body: JSON.stringify({ features: features() }),
  });
  // answers can overtake each other: only the drawing as it is now is shown
  if (mine !== latest) return;
  shown.dataset.pending = "false";
  if (!res.ok) {
    shown.textContent = await errorText(res);
    return;
  }
  const answer = await res.json();
  $("digit-prediction").textContent =
    `${answer.prediction} (${(answer.confidence * 100).toFixed(1)}%)`;
  $("digit-meta").textContent =
    `model version ${answer.model_version} · source ${answer.source} · ${answer.latency_ms} ms`;
  const scores = answer.scores ?? [];
  $("digit-bars").replaceChildren(
    ...scores.map((p, k) => {
      const li = document.createElement("li");
      li.innerHTML = `<span>${k}</span><span class="bar" style="width:${(p * 100).toFixed(1)}%"></span><span>${(p * 100).toFixed(1)}%</span>`;
      return li;
    }),
  );
}

function clearPad() {
  latest++;
  $("digit-prediction").dataset.pending = "false";
  strokes = [];
  ctx.fillStyle = "#000";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  showSeen(mnistPixels(strokes));
  $("digit-prediction").textContent = "Draw a digit";
  $("digit-meta").textContent = "";
  $("digit-bars").replaceChildren();
}
$("digit-clear").addEventListener("click", clearPad);
clearPad();

// ---- streamed text ----
let generation;
$("generate").addEventListener("click", async () => {
  generation?.abort();
  generation = new AbortController();
  $("completion").textContent = "";
  $("ttft").textContent = "";
  $("rate").textContent = "";
  $("generate").disabled = true;
  $("stop").disabled = false;
  const seed = $("seed").value;
  const started = performance.now();
  let first = 0;
  let tokens = 0;
  try {
    const res = await fetch("/v1/completions", {
      method: "POST",
      headers: headers(),
      signal: generation.signal,
      body: JSON.stringify({
        model: "tiny-lm",
        prompt: $("prompt").value,
        temperature: Number($("temperature").value),
        max_tokens: Number($("max-tokens").value),
        ...(seed ? { seed: Number(seed) } : {}),
        ...($("ignore-eos").checked ? { ignore_eos: true } : {}),
        stream: true,
      }),
    });
    if (!res.ok) {
      $("completion").textContent = await errorText(res);
      return;
    }
    await readEvents(res, ({ data }) => {
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) {
        $("completion").textContent += `\n[${chunk.error.message}]`;
        return;
      }
      const text = chunk.choices?.[0]?.text ?? "";
      if (!text) return;
      const now = performance.now();
      if (!first) {
        first = now;
        $("ttft").textContent = `time to first token ${(now - started).toFixed(0)} ms`;
      }
      tokens++;
      $("completion").textContent += text;
      if (now > first)
        $("rate").textContent = `· ${((tokens - 1) / ((now - first) / 1000)).toFixed(0)} tokens/s`;
    });
  } catch (err) {
    if (err.name !== "AbortError") $("completion").textContent += `\n[${err.message}]`;
  } finally {
    $("generate").disabled = false;
    $("stop").disabled = true;
  }
});
// closing the stream is the cancel: the server frees the sequence's seat at its next step
$("stop").addEventListener("click", () => generation?.abort());

// ---- async job ----
let job;
$("job-submit").addEventListener("click", async () => {
  $("job-events").replaceChildren();
  const res = await fetch("/v1/jobs", {
    method: "POST",
    headers: headers(),
    body: JSON.stringify(
      $("job-kind").value === MODEL
        ? { model: MODEL, input: { features: features() } }
        : {
            model: "tiny-lm",
            input: { prompt: $("prompt").value, max_tokens: Number($("max-tokens").value) },
          },
    ),
  });
  if (!res.ok) {
    $("job-status").textContent = await errorText(res);
    return;
  }
  job = await res.json();
  $("job-status").textContent = job.status;
  $("job-cancel").disabled = false;
  const events = await fetch(job.urls.events, { headers: headers() });
  await readEvents(events, ({ event, id, data }) => {
    const li = document.createElement("li");
    li.textContent = `${id} ${event} ${data}`;
    $("job-events").append(li);
    const body = JSON.parse(data);
    if (event === "status") $("job-status").textContent = body.status;
    if (event === "result") $("job-status").textContent = "succeeded";
    if (event === "error")
      $("job-status").textContent =
        { CANCELLED: "cancelled", DEADLINE_EXCEEDED: "expired" }[body.error?.code] ?? "failed";
  });
  $("job-cancel").disabled = true;
});
$("job-cancel").addEventListener("click", async () => {
  if (!job) return;
  const res = await fetch(`/v1/jobs/${job.id}`, { method: "DELETE", headers: headers() });
  if (res.ok) $("job-status").textContent = (await res.json()).status;
});
