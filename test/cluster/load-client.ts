// The cluster test's client host: runs inside its own network namespace, so every request
// crosses the virtual network to the API host. Takes commands as JSON lines on stdin
// ({cmd: "wait", url}, {cmd: "start"}, {cmd: "metric", url, name}, {cmd: "stop"}) and writes
// one JSON line per finished request, then a report, on stdout.
import { createInterface } from "node:readline";
import OpenAI from "openai";
import { scrapeMetric } from "../helpers/metrics.js";
import { referenceGreedy } from "../helpers/reference-lm.js";
import { argmax, referenceLogits, samples } from "../helpers/samples.js";

const API = process.env.API_URL ?? "http://127.0.0.1:8000";
const JOB_CLIENTS = Number(process.env.JOB_CLIENTS ?? 4);
const STREAM_CLIENTS = Number(process.env.STREAM_CLIENTS ?? 4);
/** How long an accepted request may take, from acceptance, before it counts as lost. */
const GIVE_UP_MS = Number(process.env.GIVE_UP_MS ?? 120_000);
const MAX_TOKENS = 64;
const PROMPTS = ["The meaning of life is", "Once upon a time", "Never trust a", "Love is"];

export type Outcome = "completed" | "rejected" | "lost" | "duplicated" | "wrong";
export interface Done {
  ev: "done";
  kind: "job" | "stream";
  sent: number;
  accepted: number | null;
  t: number;
  outcome: Outcome;
  detail?: string;
}

const out = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let stopping = false;
const loops: Promise<void>[] = [];
const rows = samples.digits.inputs.slice(0, 16);
let digitsRef: Record<string, number[]> = {};
let lmRef: string[] = [];
const openai = new OpenAI({ baseURL: `${API}/v1`, apiKey: "unused", maxRetries: 0 });

/** Submits one async digits job and polls it to its end. */
async function oneJob(k: number): Promise<Done> {
  const sent = Date.now();
  const done = (outcome: Outcome, accepted: number | null, detail?: string): Done => ({
    ev: "done",
    kind: "job",
    sent,
    accepted,
    t: Date.now(),
    outcome,
    ...(detail ? { detail } : {}),
  });
  let id: string;
  try {
    const res = await fetch(`${API}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "digits", input: { features: rows[k % rows.length] } }),
    });
    if (res.status !== 202) return done("rejected", null, `HTTP ${res.status}`);
    id = ((await res.json()) as { id: string }).id;
  } catch (err) {
    return done("rejected", null, String(err));
  }
  const accepted = Date.now();
  while (Date.now() - accepted < GIVE_UP_MS) {
    await sleep(100);
    let view: { status: string; result: Record<string, unknown> | null; error: unknown };
    try {
      const res = await fetch(`${API}/v1/jobs/${id}`);
      if (res.status !== 200) continue;
      view = (await res.json()) as typeof view;
    } catch {
      continue;
    }
    if (view.status === "queued" || view.status === "running") continue;
    if (view.status !== "succeeded") return done("lost", accepted, JSON.stringify(view.error));
    const r = view.result ?? {};
    const expected = digitsRef[String(r.model_version)]?.[k % rows.length];
    if (r.source !== "model" || r.prediction !== expected)
      return done("wrong", accepted, JSON.stringify(r));
    return done("completed", accepted);
  }
  return done("lost", accepted, `no answer within ${GIVE_UP_MS} ms`);
}

/** Streams one greedy completion and checks its text against unbatched in-process decoding. */
async function oneStream(k: number): Promise<Done> {
  const sent = Date.now();
  let accepted: number | null = null;
  const done = (outcome: Outcome, detail?: string): Done => ({
    ev: "done",
    kind: "stream",
    sent,
    accepted,
    t: Date.now(),
    outcome,
    ...(detail ? { detail } : {}),
  });
  const prompt = PROMPTS[k % PROMPTS.length] ?? "";
  let text = "";
  let finishes = 0;
  try {
    const stream = await openai.completions.create(
      { model: "tiny-lm", prompt, max_tokens: MAX_TOKENS, temperature: 0, stream: true },
      { timeout: GIVE_UP_MS },
    );
    accepted = Date.now();
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      if (chunk.choices[0]?.finish_reason) finishes++;
    }
  } catch (err) {
    if (accepted === null) return done("rejected", String(err));
    return done("lost", `${String(err)} after ${JSON.stringify(text)}`);
  }
  const expected = lmRef[k % PROMPTS.length] ?? "";
  if (text === expected && finishes === 1) return done("completed");
  // more text than the reference, or two endings: something was sent twice
  if (finishes > 1 || text.length > expected.length)
    return done("duplicated", JSON.stringify({ text, expected, finishes }));
  return done(finishes === 0 ? "lost" : "wrong", JSON.stringify({ text, expected, finishes }));
}

async function loop(run: (k: number) => Promise<Done>, offset: number): Promise<void> {
  for (let k = offset; !stopping; k++) {
    const result = await run(k);
    out(result);
    if (result.outcome === "rejected") await sleep(200);
  }
}

async function waitReady(url: string): Promise<void> {
  const until = Date.now() + 90_000;
  while (Date.now() < until) {
    try {
      if ((await fetch(url)).status === 200) {
        out({ ev: "ready", url });
        return;
      }
    } catch {
      // not up yet
    }
    await sleep(200);
  }
  out({ ev: "not-ready", url });
}

/** A worker's metric, summed over its label sets (0 when absent). */
async function metric(url: string, name: string): Promise<void> {
  const value = await scrapeMetric(url, name).catch(() => Number.NaN);
  out({ ev: "metric", url, name, value });
}

async function start(): Promise<void> {
  const [v1, v2] = await Promise.all([
    referenceLogits("digits", "1", rows),
    referenceLogits("digits", "2", rows),
  ]);
  digitsRef = { "1": v1.map(argmax), "2": v2.map(argmax) };
  lmRef = [];
  for (const prompt of PROMPTS) lmRef.push(await referenceGreedy(prompt, MAX_TOKENS));
  for (let i = 0; i < JOB_CLIENTS; i++) loops.push(loop(oneJob, i * 5));
  for (let i = 0; i < STREAM_CLIENTS; i++) loops.push(loop(oneStream, i));
  out({ ev: "started" });
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const msg = JSON.parse(line) as { cmd: string; url?: string; name?: string };
  if (msg.cmd === "wait") void waitReady(msg.url ?? "");
  else if (msg.cmd === "metric") void metric(msg.url ?? "", msg.name ?? "");
  else if (msg.cmd === "start") void start();
  else if (msg.cmd === "stop") {
    stopping = true;
    void Promise.all(loops).then(() => {
      out({ ev: "stopped" });
      process.exit(0);
    });
  }
});
