import { parentPort, workerData } from "node:worker_threads";
import { InProcessSession } from "./in-process-session.js";
import type { LmReply, LmRequest, LmShape, StepRow } from "./lm-messages.js";
import type { SessionOptions, TensorMap } from "./tensor.js";

// Body of an LmRuntime: owns the session and every sequence's KV cache, so that only token
// ids go in and last-position logits come out across the thread boundary.
const port = parentPort;
if (!port) throw new Error("lm-thread must run in a worker thread");
const { path, options, shape } = workerData as {
  path: string;
  options: SessionOptions;
  shape: LmShape;
};

/** A sequence's cache: per layer, key and value as [heads, len, headDim]. */
interface Cache {
  len: number;
  keys: Float32Array[];
  values: Float32Array[];
}

const caches = new Map<number, Cache>();
const post = (reply: LmReply, transfer: ArrayBuffer[] = []) => port.postMessage(reply, transfer);

InProcessSession.load(path, options).then(
  (session) => {
    post({ type: "ready" });
    port.on("message", (msg: LmRequest) => {
      if (msg.type === "close") void session.release().finally(() => port.close());
      else if (msg.type === "release") for (const seq of msg.seqs) caches.delete(seq);
      else
        step(session, msg.rows).then(
          (logits) =>
            post(
              { type: "logits", id: msg.id, logits },
              logits.map((l) => l.buffer as ArrayBuffer),
            ),
          (err: unknown) =>
            post({
              type: "error",
              id: msg.id,
              message: err instanceof Error ? err.message : String(err),
            }),
        );
    });
  },
  (err: unknown) =>
    post({ type: "load-error", message: err instanceof Error ? err.message : String(err) }),
);

/**
 * One batched forward pass. Rows are left-padded twice: the past to the longest cache (P) and
 * the new tokens to the longest chunk (S); the attention mask hides every pad, and position
 * ids carry each row's own positions, so each row computes what it would alone.
 */
async function step(session: InProcessSession, rows: StepRow[]): Promise<Float32Array[]> {
  const { layers, heads, headDim: d, vocab } = shape;
  const b = rows.length;
  const lens = rows.map((r) => caches.get(r.seq)?.len ?? 0);
  const P = Math.max(0, ...lens);
  const S = Math.max(1, ...rows.map((r) => r.tokens.length));
  const ids = new BigInt64Array(b * S);
  const positions = new BigInt64Array(b * S);
  const mask = new BigInt64Array(b * (P + S));
  rows.forEach((row, i) => {
    const len = lens[i] ?? 0;
    const s = row.tokens.length;
    for (let j = 0; j < len; j++) mask[i * (P + S) + (P - len) + j] = 1n;
    for (let j = 0; j < s; j++) {
      const slot = S - s + j;
      ids[i * S + slot] = BigInt(row.tokens[j] ?? 0);
      positions[i * S + slot] = BigInt(len + j);
      mask[i * (P + S) + P + slot] = 1n;
    }
  });
  const feeds: TensorMap = {
    input_ids: { data: ids, dims: [b, S] },
    attention_mask: { data: mask, dims: [b, P + S] },
    position_ids: { data: positions, dims: [b, S] },
  };
  for (let layer = 0; layer < layers; layer++) {
    for (const kind of ["key", "value"] as const) {
      const past = new Float32Array(b * heads * P * d);
      rows.forEach((row, i) => {
        const cache = caches.get(row.seq);
        const len = lens[i] ?? 0;
        if (!cache || len === 0) return;
        const src = (kind === "key" ? cache.keys : cache.values)[layer] ?? new Float32Array();
        for (let h = 0; h < heads; h++) {
          past.set(
            src.subarray(h * len * d, (h + 1) * len * d),
            ((i * heads + h) * P + (P - len)) * d,
          );
        }
      });
      feeds[`past_key_values.${layer}.${kind}`] = { data: past, dims: [b, heads, P, d] };
    }
  }
  const out = await session.run(feeds);
  const logits = out.logits?.data as Float32Array;
  const T = P + S;
  rows.forEach((row, i) => {
    const len = lens[i] ?? 0;
    const s = row.tokens.length;
    const next: Cache = { len: len + s, keys: [], values: [] };
    for (let layer = 0; layer < layers; layer++) {
      for (const kind of ["key", "value"] as const) {
        const present = out[`present.${layer}.${kind}`]?.data as Float32Array;
        const dst = new Float32Array(heads * (len + s) * d);
        for (let h = 0; h < heads; h++) {
          const base = (i * heads + h) * T * d;
          dst.set(present.subarray(base + (P - len) * d, base + P * d), h * (len + s) * d);
          dst.set(
            present.subarray(base + (P + S - s) * d, base + T * d),
            (h * (len + s) + len) * d,
          );
        }
        (kind === "key" ? next.keys : next.values).push(dst);
      }
    }
    caches.set(row.seq, next);
  });
  return rows.map((_, i) => logits.slice((i * S + S - 1) * vocab, (i * S + S) * vocab));
}
