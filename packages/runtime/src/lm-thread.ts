import { parentPort, workerData } from "node:worker_threads";
import { InProcessSession } from "./in-process-session.js";
import { KvStore } from "./kv-store.js";
import {
  cacheBuffers,
  type KeptPrompt,
  type LmReply,
  type LmRequest,
  type LmShape,
  type PromptScores,
  type StepRow,
} from "./lm-messages.js";
import { logSumExp, topIndices } from "./logits.js";
import { PrefixCache } from "./prefix-cache.js";
import type { SessionOptions, TensorMap } from "./tensor.js";

// Body of an LmRuntime: owns the session and every sequence's KV cache, so that only token
// ids go in and last-position logits come out across the thread boundary.
const port = parentPort;
if (!port) throw new Error("lm-thread must run in a worker thread");
const { path, options, shape, prefixCacheBytes, sharesPrefixes, shareEveryMs } = workerData as {
  path: string;
  options: SessionOptions;
  shape: LmShape;
  prefixCacheBytes: number;
  /** Whether another LM thread prefills too: what this one keeps goes to it. */
  sharesPrefixes: boolean;
  /** How often at most, in ms (see `LmRuntimeOptions.prefixShareMs`). */
  shareEveryMs: number;
};

const kv = new KvStore(shape);
let sharedAt = Number.NEGATIVE_INFINITY;
const prefixes = prefixCacheBytes > 0 ? new PrefixCache(shape, prefixCacheBytes) : undefined;
/** The KV tensors in KvStore's order (per layer, key then value), by their Optimum names. */
const KV_SLOTS = Array.from({ length: shape.layers }, (_, layer) =>
  (["key", "value"] as const).map((kind) => ({
    input: `past_key_values.${layer}.${kind}`,
    output: `present.${layer}.${kind}`,
  })),
).flat();
const post = (reply: LmReply, transfer: ArrayBuffer[] = []) => port.postMessage(reply, transfer);

InProcessSession.load(path, options).then(
  (session) => {
    post({ type: "ready", graph: session.graph });
    // one request at a time, in arrival order: a step's layout and its absorb must not
    // interleave with another step, nor with the release or adoption of a sequence in it
    let queue = Promise.resolve();
    port.on("message", (msg: LmRequest) => {
      queue = queue.then(() => handle(session, msg)).catch(() => undefined);
    });
  },
  (err: unknown) =>
    post({ type: "load-error", message: err instanceof Error ? err.message : String(err) }),
);

async function handle(session: InProcessSession, msg: LmRequest): Promise<void> {
  if (msg.type === "close") {
    await session.release().finally(() => port?.close());
    return;
  }
  if (msg.type === "release") for (const seq of msg.seqs) kv.release(seq);
  if (msg.type === "adopt") for (const cache of msg.caches) kv.adopt(cache);
  // handed over by the other thread: kept as they came
  if (msg.type === "keep")
    for (const kept of msg.prompts)
      prefixes?.keep(kept.tokens, kept.tensors, kept.len, { owned: true, fromPeer: true });
  if (msg.type === "retain") {
    retain(msg);
    const kept = shareDue();
    return post({ type: "retained", id: msg.id, kept }, cacheBuffers(kept));
  }
  if (msg.type !== "step" && msg.type !== "prefill") return;
  try {
    const { logits, prompts, cached } = await step(session, msg.rows);
    const kept = shareDue();
    if (msg.type === "step")
      return post({ type: "logits", id: msg.id, logits, prompts, cached, kept }, [
        logits.buffer as ArrayBuffer,
        ...cacheBuffers(kept),
      ]);
    const caches = msg.rows.map((row) => kv.export(row.seq));
    post({ type: "prefilled", id: msg.id, logits, prompts, cached, kept, caches }, [
      logits.buffer as ArrayBuffer,
      ...cacheBuffers(caches),
      ...cacheBuffers(kept),
    ]);
  } catch (err) {
    post({ type: "error", id: msg.id, message: err instanceof Error ? err.message : String(err) });
  }
}

/** Keeps a finished sequence's cache, as far as it reaches, in the prefix cache. */
function retain({ seq, tokens }: { seq: number; tokens: number[] }): void {
  // the tokens its cache holds: the last one sampled was never read
  const read = tokens.slice(0, kv.length(seq));
  if (!prefixes || read.length === 0 || prefixes.knows(read, read.length)) return;
  const cache = kv.cacheOf(seq);
  if (cache) prefixes.keep(read, cache.tensors, cache.len, { owned: cache.copied });
}

/**
 * What this thread kept lately, for the other thread, when it is time to hand it over: a
 * message (and a wake-up of that thread) per prompt cost a few percent of a short
 * completion's latency, and the other thread seldom needs a prompt within the interval.
 */
function shareDue(): KeptPrompt[] {
  if (!sharesPrefixes || !prefixes) return [];
  const now = performance.now();
  if (now - sharedAt < shareEveryMs) return [];
  sharedAt = now;
  return prefixes.takeFresh();
}

/**
 * One batched forward pass; returns the last position's logits of every requested row, in
 * request order, [rows, vocab]. Rows are left-padded twice: the past to the widest cache (`past`)
 * and the new tokens to the longest chunk (`chunk`); the attention mask hides every pad, and
 * position ids carry each row's own positions, so each row computes what it would alone.
 * Holes in the batch (seats of sequences that left) run a dummy token that attends to itself.
 */
async function step(
  session: InProcessSession,
  asked: StepRow[],
): Promise<{ logits: Float32Array; prompts: PromptScores[]; cached: number[] }> {
  const { vocab } = shape;
  // a sequence's first tokens: what the prefix cache holds of them is taken, not computed
  // (not for a row whose prompt is scored: every position's logits are asked for)
  const fresh = asked.map((row) => kv.length(row.seq) === 0);
  const cached = asked.map((row, k) => {
    const hit = fresh[k] && !row.scorePrompt ? prefixes?.take(row.tokens) : undefined;
    if (hit) kv.adopt({ seq: row.seq, ...hit });
    return hit?.len ?? 0;
  });
  const rows = asked.map((row, k) =>
    cached[k] ? { ...row, tokens: row.tokens.slice(cached[k]) } : row,
  );
  const seqs = rows.map((r) => r.seq);
  const added = rows.map((r) => r.tokens.length);
  const layout = kv.layout(seqs, added);
  const { width: past, lens, requestIndex: from } = layout;
  const b = from.length;
  const chunk = Math.max(1, ...added);
  const ids = new BigInt64Array(b * chunk);
  const positions = new BigInt64Array(b * chunk);
  const mask = new BigInt64Array(b * (past + chunk));
  from.forEach((k, i) => {
    const tokens = rows[k]?.tokens ?? [0];
    const len = lens[i] ?? 0;
    const s = tokens.length;
    mask.fill(1n, i * (past + chunk) + (past - len), i * (past + chunk) + past);
    for (let j = 0; j < s; j++) {
      const slot = chunk - s + j;
      ids[i * chunk + slot] = BigInt(tokens[j] ?? 0);
      positions[i * chunk + slot] = BigInt(len + j);
      mask[i * (past + chunk) + past + slot] = 1n;
    }
  });
  const feeds: TensorMap = {
    input_ids: { data: ids, dims: [b, chunk] },
    attention_mask: { data: mask, dims: [b, past + chunk] },
    position_ids: { data: positions, dims: [b, chunk] },
  };
  KV_SLOTS.forEach(({ input }, t) => {
    const data = layout.tensors[t] ?? new Float32Array();
    feeds[input] = { data, dims: [b, shape.kvHeads, past, shape.headDim] };
  });
  const out = await session.run(feeds);
  const present = KV_SLOTS.map(({ output }) => out[output]?.data as Float32Array);
  kv.absorb(seqs, layout, chunk, added, present);
  // after a step with first tokens in it every row's cache is its own: prompts are kept whole
  asked.forEach((row, k) => {
    const own = fresh[k] ? kv.cacheOf(row.seq) : undefined;
    if (own) prefixes?.keep(row.tokens, own.tensors, own.len);
  });
  const logits = out.logits?.data as Float32Array;
  const last = new Float32Array(rows.length * vocab);
  const prompts: PromptScores[] = [];
  from.forEach((k, i) => {
    if (k < 0) return;
    last.set(
      logits.subarray((i * chunk + chunk - 1) * vocab, (i * chunk + chunk) * vocab),
      k * vocab,
    );
    const row = rows[k];
    // the row's tokens sit right-aligned in its `chunk` slots
    const at = (j: number) => (i * chunk + chunk - (row?.tokens.length ?? 0) + j) * vocab;
    if (row?.scorePrompt)
      prompts.push(scorePrompt(row, (j) => logits.subarray(at(j), at(j) + vocab)));
  });
  return { logits: last, prompts, cached };
}

/** A row's prompt scored position by position (`position(j)`: the logits after token j). */
function scorePrompt(row: StepRow, position: (j: number) => Float32Array): PromptScores {
  const { length, top } = row.scorePrompt ?? { length: 0, top: 0 };
  const n = Math.max(0, Math.min(length, row.tokens.length) - 1);
  const scores: PromptScores = {
    seq: row.seq,
    logprobs: new Float32Array(n),
    ranks: new Int32Array(n),
    topIds: new Int32Array(n * top),
    topLogprobs: new Float32Array(n * top),
    top,
  };
  for (let j = 0; j < n; j++) {
    const logits = position(j);
    const logZ = logSumExp(logits);
    const actual = logits[row.tokens[j + 1] ?? 0] ?? 0;
    scores.logprobs[j] = actual - logZ;
    scores.ranks[j] = rankOf(logits, actual);
    topIndices(logits, top).forEach((id, r) => {
      scores.topIds[j * top + r] = id;
      scores.topLogprobs[j * top + r] = (logits[id] ?? 0) - logZ;
    });
  }
  return scores;
}

/** 1 + how many of `logits` are above `value`: a token's rank, ties sharing the better one. */
function rankOf(logits: Float32Array, value: number): number {
  let above = 0;
  for (const v of logits) if (v > value) above++;
  return above + 1;
}
