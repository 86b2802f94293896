import { FerryError, tensorToBytes } from "@ferry/protocol";
import { bodyFingerprint } from "../http/body-fingerprint.js";
import { containersUpTo } from "../http/json-weight.js";
import { keyProblem, type RowsSpec } from "./ndjson-rows.js";

/**
 * A `{model, version, items}` batch body as the API's parse thread reads it: the items' keys,
 * and their features back to back as the doubles JSON's numbers are (`widths[k]` of item k),
 * moved back without a copy. Parsed and checked on the loop, an 8 MB body held it ~280 ms (the
 * JSON, zod's walk of every number twice, their garbage): every model's requests waited.
 */
export interface ParsedJsonBatch {
  model: string;
  version?: string;
  keys: string[];
  values: Float64Array;
  widths: Uint32Array;
  /** Why the body is no batch (the 400's message); the rest is then empty. */
  problem?: string;
  /**
   * The first bad item (1-based) and its problem (none said: its features are not a list of
   * finite numbers, which the model's width words): the items before it are read, their
   * widths the model's to check first, so that the first bad item is the one named.
   */
  bad?: { item: number; problem?: string };
  /** The request's fingerprint (`bodyFingerprint`), when the caller asked (an Idempotency-Key). */
  fingerprint?: string;
}

/**
 * Bytes past any OpenAI batch create's body: its metadata's 16 pairs of 576 characters,
 * each written as a six-byte escape, are ~55 KB, and the other fields a few hundred bytes. A
 * JSON body up to this is read on the loop to tell the two shapes apart; a larger one is
 * Ferry's, read here.
 */
export const MAX_CREATE_BYTES = 256 * 1024;

/** Whether a JSON body of `bytes` on `path` is a `{model, items}` batch, read on the parse thread. */
export function jsonBatchOffLoop(path: string, bytes: number): boolean {
  return path === "/v1/batches" && bytes > MAX_CREATE_BYTES;
}

// strict: a key whose bytes are not UTF-8 is refused, as an NDJSON batch's is
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Reads a batch body; `fingerprintHead`: its request's, to fingerprint the body by. */
export function parseJsonBatch(bytes: Uint8Array, fingerprintHead?: string): ParsedJsonBatch {
  const refused = (problem: string): ParsedJsonBatch => ({
    model: "",
    keys: [],
    values: new Float64Array(0),
    widths: new Uint32Array(0),
    problem: `batch: ${problem}`,
  });
  const most = Math.floor(bytes.byteLength / BYTES_PER_CONTAINER) + 2;
  const containers = containersUpTo(bytes, most + 1);
  if (containers > most)
    return refused(
      `the body holds more than ${most} JSON objects and lists, the most a batch of ${bytes.byteLength} bytes can hold (an item is two, in ${BYTES_PER_CONTAINER * 2} bytes or more)`,
    );
  let body: unknown;
  try {
    body = JSON.parse(decoder.decode(bytes));
  } catch {
    return refused("the body is not JSON (UTF-8)");
  }
  if (body === null || typeof body !== "object" || Array.isArray(body))
    return refused("the body is not a JSON object");
  if ("input_file_id" in body)
    return refused(`an OpenAI batch's body (input_file_id) is at most ${MAX_CREATE_BYTES} bytes`);
  const { model, version, items } = body as Record<string, unknown>;
  if (typeof model !== "string") return refused("model: expected a string");
  if (version !== undefined && typeof version !== "string")
    return refused("version: expected a string");
  if (!Array.isArray(items) || items.length === 0)
    return refused("items: expected a list of at least 1 item");
  const keys: string[] = [];
  let count = 0;
  let bad: ParsedJsonBatch["bad"];
  for (const [k, item] of items.entries()) {
    const { key, features } = (item ?? {}) as { key?: unknown; features?: unknown };
    const problem = keyProblem(key);
    if (problem !== undefined) {
      bad = { item: k + 1, problem };
      break;
    }
    if (!Array.isArray(features) || !features.every(isFiniteNumber)) {
      bad = { item: k + 1 };
      break;
    }
    keys.push(key as string);
    count += features.length;
  }
  const values = new Float64Array(count);
  const widths = new Uint32Array(keys.length);
  let at = 0;
  for (let k = 0; k < keys.length; k++) {
    const features = (items[k] as { features: number[] }).features;
    values.set(features, at);
    at += features.length;
    widths[k] = features.length;
  }
  return {
    model,
    ...(version === undefined ? {} : { version }),
    keys,
    values,
    widths,
    ...(bad === undefined ? {} : { bad }),
    ...(fingerprintHead === undefined
      ? {}
      : { fingerprint: bodyFingerprint(fingerprintHead, body) }),
  };
}

/**
 * Bytes of body a JSON object or list takes at the least in a batch: `{"key":"a","features":[1]},`
 * is 27 bytes and two of them. 8 MB of `{}` had taken the parse thread ~1 s and a 256 MB heap
 * (an Idempotency-Key's fingerprint of it ran the heap out, failing every other key's pieces
 * on the thread with it; attack): such a body is refused before it is parsed.
 */
const BYTES_PER_CONTAINER = 12;

function isFiniteNumber(x: unknown): boolean {
  return typeof x === "number" && Number.isFinite(x);
}

/**
 * Items' rows (`first` the first's place, from 0) as the model's input bytes; a value the
 * datatype cannot hold is a 400 naming its item and its place in it.
 */
export function rowsBytes(spec: RowsSpec, rows: Float64Array, first: number): Buffer {
  try {
    return tensorToBytes(spec.datatype, rows);
  } catch (err) {
    if (!(err instanceof FerryError)) throw err;
    for (let at = 0; at < rows.length; at += spec.width)
      try {
        tensorToBytes(spec.datatype, rows.subarray(at, at + spec.width));
      } catch (bad) {
        throw new FerryError(
          "INVALID_INPUT",
          `item ${first + at / spec.width + 1}: ${(bad as Error).message}`,
        );
      }
    throw err;
  }
}
