// The offline path against the work it contains: the same JSONL through an in-process
// pipeline (read, parse each line, ONNX Runtime at batch 32, answers written to a file), through
// Ferry's own batch shape (NDJSON POST, results read back to a file) and through the OpenAI
// Batch API (/v1/files upload, /v1/batches, the output file read back to a file). Each arm
// runs once untimed first; the clients are node:http (bulk-http.ts), polling every 10 ms.
import { fork } from "node:child_process";
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InProcessSession } from "@ferry/runtime";
// the pipeline answers as Ferry does: the API's own softmax
import { classify } from "../apps/api/src/inference/classify.js";
import { samples } from "../test/helpers/samples.js";
import { Stack } from "../test/helpers/stack.js";
import { getToFile, postBody, postFile } from "./bulk-http.js";
import { median, quantile, round } from "./load.js";

/** One model's offline batch: its rows and where its ONNX file is. */
export interface OfflineCase {
  model: "digits" | "mnist";
  version: string;
  rows: number;
}

export const OFFLINE_CASES: readonly OfflineCase[] = [
  { model: "digits", version: "2", rows: 100_000 },
  { model: "mnist", version: "1", rows: 20_000 },
];

/** Rows the in-process pipeline runs at once, as the floor does. */
const PIPELINE_BATCH = 32;
/** Bytes the pipeline reads at a time, and the output it gathers before writing. */
const READ_BYTES = 1 << 20;

/** Every row a different input: a sample with one feature moved by the row's number. */
function features(c: OfflineCase, k: number): number[] {
  const base = samples[c.model].inputs;
  const row = base[k % base.length] ?? [];
  const scale = c.model === "digits" ? 16 : 1;
  return row.map((v, i) =>
    i === (k * 7) % row.length ? (v + ((k % 9973) / 9973) * scale) / 2 : v,
  );
}

/** The case's two input files: OpenAI's lines and Ferry's NDJSON, the same features each. */
export function writeInputs(c: OfflineCase, dir: string): { openai: string; ndjson: string } {
  const openai: string[] = [];
  const ndjson: string[] = [];
  for (let k = 0; k < c.rows; k++) {
    const f = features(c, k);
    const url = `/v1/models/${c.model}/predict`;
    openai.push(JSON.stringify({ custom_id: `r${k}`, method: "POST", url, body: { features: f } }));
    ndjson.push(JSON.stringify({ key: `r${k}`, features: f }));
  }
  const paths = { openai: join(dir, `${c.model}.jsonl`), ndjson: join(dir, `${c.model}.ndjson`) };
  writeFileSync(paths.openai, `${openai.join("\n")}\n`);
  writeFileSync(paths.ndjson, `${ndjson.join("\n")}\n`);
  return paths;
}

/**
 * The floor: one process reads the JSONL a MiB at a time, parses each line, runs ONNX
 * Runtime at batch 32 and writes each answer (custom_id and prediction) to a file.
 */
export async function inProcessPipeline(
  c: OfflineCase,
  input: string,
  output: string,
  session: InProcessSession,
): Promise<number> {
  const width = samples[c.model].inputs[0]?.length ?? 0;
  const started = performance.now();
  const file = await open(input);
  const out = createWriteStream(output);
  const data = new Float32Array(PIPELINE_BATCH * width);
  const ids: string[] = [];
  let text: string[] = [];
  const run = async () => {
    const n = ids.length;
    const result = await session.run({
      input: { data: data.slice(0, n * width), dims: [n, width] },
    });
    const logits = result.logits?.data as Float32Array;
    for (let r = 0; r < n; r++) {
      const answer = classify(Array.from(logits.subarray(r * 10, r * 10 + 10)));
      text.push(JSON.stringify({ custom_id: ids[r], ...answer }));
    }
    ids.length = 0;
    if (text.length >= 4_096) {
      if (!out.write(`${text.join("\n")}\n`))
        await new Promise<void>((r) => out.once("drain", () => r()));
      text = [];
    }
  };
  const buffer = Buffer.alloc(READ_BYTES);
  let rest = "";
  for (;;) {
    const { bytesRead } = await file.read(buffer, 0, READ_BYTES);
    if (bytesRead === 0) break;
    const lines = (rest + buffer.toString("utf8", 0, bytesRead)).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") continue;
      const parsed = JSON.parse(line) as { custom_id: string; body: { features: number[] } };
      data.set(parsed.body.features, ids.length * width);
      ids.push(parsed.custom_id);
      if (ids.length === PIPELINE_BATCH) await run();
    }
  }
  if (ids.length > 0) await run();
  out.end(`${text.join("\n")}\n`);
  await new Promise<void>((r) => out.once("close", () => r()));
  await file.close();
  return (performance.now() - started) / 1000;
}

/** How often an arm asks whether its batch is done: its end is timed to within this. */
const POLL_MS = 10;

/** Resolves once `check` holds, asked every POLL_MS; gives up after ten minutes. */
async function until(check: () => Promise<boolean>): Promise<void> {
  const giveUp = Date.now() + 600_000;
  while (!(await check())) {
    if (Date.now() > giveUp) throw new Error("the batch did not finish in ten minutes");
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Phase times in s, and the lines the answer file got. */
export interface Timed {
  seconds: number;
  phases: Record<string, number>;
  lines: number;
}

/** Ferry's own shape: the NDJSON file as one POST, then its results read back to a file. */
export async function ferryShape(stack: Stack, c: OfflineCase, input: string, output: string) {
  const started = performance.now();
  const res = await postBody(
    stack.url(`/v1/batches?model=${c.model}&version=${c.version}`),
    input,
    "application/x-ndjson",
  );
  if (res.status !== 202) throw new Error(`batch: ${res.status} ${res.text}`);
  const { id } = JSON.parse(res.text) as { id: string };
  const posted = performance.now();
  await until(async () => (await stack.batchStatus(id)).status === "completed");
  const done = performance.now();
  const lines = await getToFile(stack.url(`/v1/batches/${id}/results`), output);
  const end = performance.now();
  return timed(started, { post: posted, run: done, read: end }, lines);
}

/** OpenAI's Batch API: upload, create, wait, read the output file to a file. */
export async function openAiShape(stack: Stack, input: string, output: string, endpoint: string) {
  const started = performance.now();
  const up = await postFile(stack.url("/v1/files"), { purpose: "batch" }, input, "batch.jsonl");
  if (up.status !== 200) throw new Error(`upload: ${up.status} ${up.text}`);
  const file = JSON.parse(up.text) as { id: string };
  const uploaded = performance.now();
  const created = await stack.post("/v1/batches", {
    input_file_id: file.id,
    endpoint,
    completion_window: "24h",
  });
  if (!created.ok) throw new Error(`create: ${created.status} ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  let outputId = "";
  let errorId = "";
  await until(async () => {
    const batch = (await (await fetch(stack.url(`/v1/batches/${id}`))).json()) as {
      status: string;
      output_file_id?: string | null;
      error_file_id?: string | null;
    };
    if (["failed", "expired", "cancelled"].includes(batch.status))
      throw new Error(`batch ${id} ended ${batch.status}`);
    outputId = batch.output_file_id ?? "";
    errorId = batch.error_file_id ?? "";
    return batch.status === "completed";
  });
  const done = performance.now();
  const lines = await getToFile(stack.url(`/v1/files/${outputId}/content`), output);
  const end = performance.now();
  // untimed, as a user would once done with them: rounds of ~120 MB of files each had filled
  // the tenant's file storage (FILE_STORAGE_PER_KEY_BYTES) by the ninth
  for (const gone of [file.id, outputId, errorId].filter((f) => f !== "")) {
    const res = await fetch(stack.url(`/v1/files/${gone}`), { method: "DELETE" });
    if (!res.ok) throw new Error(`delete ${gone}: ${res.status} ${await res.text()}`);
  }
  return timed(started, { upload: uploaded, run: done, read: end }, lines);
}

function timed(started: number, marks: Record<string, number>, lines: number): Timed {
  const phases: Record<string, number> = {};
  let last = started;
  for (const [name, at] of Object.entries(marks)) {
    phases[name] = round((at - last) / 1000, 2);
    last = at;
  }
  return { seconds: (last - started) / 1000, phases, lines };
}

/**
 * Every case in `rounds` rounds, each round the pipeline and both Ferry shapes in turn
 * (rotating which goes first); per-round ratios against that round's pipeline, and medians.
 */
export async function offlineBatches(rounds: number): Promise<{
  rows: Array<Record<string, string | number>>;
  ratios: Array<Record<string, string | number>>;
}> {
  const dir = mkdtempSync(join(tmpdir(), "ferry-offline-"));
  const stack = await new Stack({
    env: { WORKER_MODELS: "digits,mnist", MAX_FILE_LINES: "1000000" },
  }).start();
  const rows: Array<Record<string, string | number>> = [];
  const ratios: Array<Record<string, string | number>> = [];
  try {
    for (const c of OFFLINE_CASES) {
      const inputs = writeInputs(c, dir);
      const session = await InProcessSession.load(`models/${c.model}/${c.version}/model.onnx`, {
        executionProvider: "cpu",
        intraOpThreads: 1,
      });
      const arms: Record<string, () => Promise<Timed>> = {
        "in-process": async () => {
          const seconds = await inProcessPipeline(c, inputs.openai, join(dir, "p.out"), session);
          return { seconds, phases: {}, lines: c.rows };
        },
        "ferry ndjson": () => ferryShape(stack, c, inputs.ndjson, join(dir, "f.out")),
        "openai batch": () =>
          openAiShape(stack, inputs.openai, join(dir, "o.out"), "/v1/models/{model}/predict"),
      };
      const names = Object.keys(arms);
      // every arm once, untimed, before the rounds: each round then compares warm code paths
      // (the first timed round had read a third below the rest, Ferry's and the pipeline's
      // first batches compiling what they run)
      for (const name of names) await (arms[name] as () => Promise<Timed>)();
      const perRound: Array<Record<string, number>> = [];
      for (let r = 0; r < rounds; r++) {
        const rates: Record<string, number> = {};
        for (let k = 0; k < names.length; k++) {
          const name = names[(k + r) % names.length] ?? "";
          const t = await (arms[name] as () => Promise<Timed>)();
          if (t.lines !== c.rows) throw new Error(`${name}: ${t.lines} answers of ${c.rows}`);
          rates[name] = c.rows / t.seconds;
          rows.push({
            model: c.model,
            rows: c.rows,
            round: r + 1,
            arm: name,
            rows_per_s: round(rates[name] ?? 0, 0),
            seconds: round(t.seconds, 2),
            phases: Object.entries(t.phases)
              .map(([p, s]) => `${p} ${s}`)
              .join(", "),
          });
        }
        perRound.push(rates);
      }
      await session.release();
      for (const name of names.slice(1))
        ratios.push({
          model: c.model,
          arm: name,
          "median ratio to in-process": round(
            median(perRound.map((p) => (p[name] ?? 0) / (p["in-process"] ?? 1))),
            3,
          ),
          rounds: perRound.map((p) => round((p[name] ?? 0) / (p["in-process"] ?? 1), 2)).join(" "),
        });
    }
  } finally {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return { rows, ratios };
}

/** Interactive clients beside the NDJSON post, and how long each idle sample lasts. */
const BESIDE_CLIENTS = 2;
const BESIDE_IDLE_MS = 2_000;

/**
 * What a large NDJSON post does to the same API's interactive traffic: digits predicts (a new
 * input each) from BESIDE_CLIENTS sequential clients, first alone, then while the mnist batch
 * is posted (by a process of its own: sending 46 MB from this one had slowed its own clients,
 * and more so the faster the API read it); their latency and how many were answered in each.
 */
export async function predictsBesideIngest(
  rounds: number,
): Promise<Array<Record<string, string | number>>> {
  const c = OFFLINE_CASES.find((x) => x.model === "mnist") as OfflineCase;
  const dir = mkdtempSync(join(tmpdir(), "ferry-beside-"));
  const stack = await new Stack({ env: { WORKER_MODELS: "digits,mnist" } }).start();
  const rows: Array<Record<string, string | number>> = [];
  let k = 0;
  /** A predict's latency at the client, and its Server-Timing parts (ms). */
  type Sample = { ms: number; total: number; queue: number };
  const timing = (header: string | null, part: string) =>
    Number(new RegExp(`(?:^|, )${part};dur=([\\d.]+)`).exec(header ?? "")?.[1] ?? Number.NaN);
  const client = async (until: () => boolean, out: Sample[]) => {
    while (!until()) {
      const f = features({ model: "digits", version: "2", rows: 0 }, 1_000_000 + k++);
      const t0 = performance.now();
      const res = await fetch(stack.url("/v1/models/digits/predict"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ features: f }),
      });
      // read whole: an answer left unread holds its connection, and the next request opens one
      const text = await res.text();
      if (res.status !== 200) throw new Error(`predict: ${res.status} ${text}`);
      const header = res.headers.get("server-timing");
      out.push({
        ms: performance.now() - t0,
        total: timing(header, "total"),
        queue: timing(header, "queue"),
      });
    }
  };
  const p50 = (values: number[]) =>
    round(
      quantile(
        values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b),
        0.5,
      ),
      1,
    );
  const row = (n: number, arm: string, taken: Sample[], seconds: number) => {
    const sorted = taken.map((x) => x.ms).sort((a, b) => a - b);
    return {
      round: n,
      arm,
      predicts: sorted.length,
      per_s: round(sorted.length / seconds, 0),
      p50_ms: round(quantile(sorted, 0.5), 1),
      p99_ms: round(quantile(sorted, 0.99), 1),
      // where the median predict waited: in the API (Server-Timing's total, from its arrival
      // to its answer) and, of that, to a worker's pick-up (queue)
      api_p50_ms: p50(taken.map((x) => x.total)),
      queue_p50_ms: p50(taken.map((x) => x.queue)),
    };
  };
  try {
    const ndjson = writeInputs(c, dir).ndjson;
    const batchUrl = stack.url(`/v1/batches?model=${c.model}&version=${c.version}`);
    for (let r = 1; r <= rounds; r++) {
      const idle: Sample[] = [];
      const end = performance.now() + BESIDE_IDLE_MS;
      const clients = (until: () => boolean, out: Sample[]) =>
        Promise.all(Array.from({ length: BESIDE_CLIENTS }, () => client(until, out)));
      await clients(() => performance.now() > end, idle);
      rows.push(row(r, "digits predicts alone", idle, BESIDE_IDLE_MS / 1000));
      const during: Sample[] = [];
      let posting = true;
      const poster = fork(
        "bench/peers/file-poster.ts",
        [batchUrl, ndjson, "application/x-ndjson"],
        {
          execArgv: ["--conditions=ferry-source", "--import", "tsx"],
          stdio: ["ignore", "ignore", "inherit", "ipc"],
        },
      );
      // a poster that dies before it answers fails the round rather than hanging it
      const died = new Promise<never>((_, reject) =>
        poster.once("exit", (code) => {
          if (posting) reject(new Error(`the file poster exited (${code}) before answering`));
        }),
      );
      died.catch(() => undefined);
      await Promise.race([new Promise((resolve) => poster.once("message", resolve)), died]);
      const started = performance.now();
      const answered = new Promise<void>((resolve, reject) => {
        poster.once("message", (answer) => {
          const { status, text } = answer as { status: number; text: string };
          posting = false;
          if (status === 202) resolve();
          else reject(new Error(`batch: ${status} ${text}`));
        });
        poster.send("go");
      });
      const post = Promise.race([answered, died]).finally(() => {
        posting = false;
      });
      await Promise.all([post, clients(() => !posting, during)]);
      const seconds = (performance.now() - started) / 1000;
      rows.push({
        ...row(
          r,
          `during the ${c.rows.toLocaleString("en")}-row ${c.model} NDJSON post`,
          during,
          seconds,
        ),
        post_s: round(seconds, 2),
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    }
  } finally {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
