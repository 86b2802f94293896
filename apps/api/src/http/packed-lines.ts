import {
  decodeValues,
  FerryError,
  FP32_MAX,
  packValuesRecord,
  readValuesRecord,
} from "@ferry/protocol";
import { endpointOf } from "./batch-endpoints.js";

/**
 * Predict lines of a batch input file's chunk as the upload's check already parsed them,
 * packed beside the chunk, so that a batch that runs them reads their rows instead of parsing
 * every line again (on the offline path a line's second parse cost as much as its row's run).
 * Only a chunk whose every line is a predict line with a body of `features` alone, each a
 * number FP32 holds, is packed (anything else a run parses as the route would), and only when
 * the rows take no more room than the lines they come from: a file's packed rows are at most
 * its own size again, kept and gone with it. Values that are whole numbers 0-255 (pixels: the
 * digits and MNIST files people have) take a byte each, the rest listed apart as FP32 (where
 * they are few), else every value takes FP32's four bytes (`packValues`' block).
 *
 * A chunk is kept as two values: its rows, the block as a record of its own
 * (`writeValuesRecord`), which a worker reads where the file keeps it (the API never holds
 * them on the way: they crossed Redis three times when it did); and its head, which the API
 * reads to answer the lines:
 *
 *   head: u32 lines | u32 x lines widths | JSON {customIds, urls (each once), url (each line's,
 *   as its place in urls)}
 */

/** A predict line's features, when its body is only them, each a number FP32 holds. */
export function plainFeatures(url: string, body: unknown): number[] | undefined {
  if (endpointOf(url)?.endpoint !== "/v1/models/{model}/predict") return undefined;
  if (body === null || typeof body !== "object") return undefined;
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== "features") return undefined;
  const features = (body as { features: unknown }).features;
  if (!Array.isArray(features) || features.length === 0) return undefined;
  for (let k = 0; k < features.length; k++) {
    const v: unknown = features[k];
    if (typeof v !== "number" || !(Math.abs(v) <= FP32_MAX)) return undefined;
  }
  return features as number[];
}

/** A chunk's lines packed: its rows and its head, two views of one buffer. */
export interface PackedChunk {
  rows: Uint8Array;
  head: Uint8Array;
}

/**
 * A chunk's lines packed: their ids, urls and features (`values`, rows back to back, row r
 * `widths[r]` long); undefined if the two parts together are larger than `limit`.
 */
export function packLines(
  customIds: readonly string[],
  urls: readonly string[],
  values: Float32Array,
  widths: readonly number[],
  limit: number,
): PackedChunk | undefined {
  const n = widths.length;
  // urls as a table and an index a line: a file's lines name a few at most
  const table = [...new Set(urls)];
  const place = new Map(table.map((url, k) => [url, k]));
  const meta = Buffer.from(
    JSON.stringify({ customIds, urls: table, url: urls.map((u) => place.get(u)) }),
  );
  const headLength = 4 + 4 * n + meta.byteLength;
  // the head first, then the rows' record where the u32s it starts with are aligned
  const rowsAt = Math.ceil(headLength / 4) * 4;
  const packed = packValuesRecord(values, rowsAt);
  if (packed.byteLength - rowsAt + headLength > limit) return undefined;
  const counts = new Uint32Array(packed.buffer, 0, 1 + n);
  counts[0] = n;
  counts.set(widths, 1);
  packed.set(meta, 4 + 4 * n);
  return { rows: packed.subarray(rowsAt), head: packed.subarray(0, headLength) };
}

/** A packed chunk's lines as its head says them: all but their values. */
export interface PackedChunkLines {
  customIds: string[];
  urls: string[];
  /** Each line's number of features; line r's start where the widths before it end. */
  widths: Uint32Array;
}

/** A packed chunk's head read back. */
export function readPacked(head: Uint8Array): PackedChunkLines {
  // typed arrays need 4-byte alignment: a reply that lacks it is copied out
  const own = head.byteOffset % 4 === 0 ? head : new Uint8Array(head);
  const { buffer, byteOffset: base } = own;
  const n = new Uint32Array(buffer, base, 1)[0] ?? 0;
  const widths = new Uint32Array(buffer, base + 4, n);
  const end = base + 4 + 4 * n;
  const meta = JSON.parse(
    Buffer.from(buffer, end, base + own.byteLength - end).toString("utf8"),
  ) as { customIds: string[]; urls: string[]; url: number[] };
  if (meta.customIds.length !== n)
    throw new Error(`a packed head of ${n} lines names ${meta.customIds.length}`);
  const urls = meta.url.map((k) => meta.urls[k] ?? "");
  return { customIds: meta.customIds, urls, widths };
}

/** Where packed lines' rows lie: these chunks of a batch input file, in order. */
export interface PackedSource {
  file: string;
  chunks: number[];
}

/** Packed lines of several chunks as one, in order; their rows left where they lie. */
export interface PackedLines extends PackedChunkLines {
  source: PackedSource;
  /**
   * Every line's values, back to back, read from where they lie and decoded: for the lines a
   * worker cannot be handed as they lie (several models' lines in one chunk, a row too short).
   */
  values(): Promise<Float32Array>;
}

/** Reads chunks' rows (`FileStore.packedRows`): each chunk's record, or null where it is gone. */
export type ReadPackedRows = (source: PackedSource) => Promise<Array<Uint8Array | null>>;

export function joinPacked(
  parts: readonly PackedChunkLines[],
  source: PackedSource,
  readRows: ReadPackedRows,
): PackedLines {
  let lines = 0;
  for (const part of parts) lines += part.widths.length;
  const widths = new Uint32Array(lines);
  const customIds: string[] = [];
  const urls: string[] = [];
  let line = 0;
  for (const part of parts) {
    widths.set(part.widths, line);
    line += part.widths.length;
    for (const id of part.customIds) customIds.push(id);
    for (const url of part.urls) urls.push(url);
  }
  let count = 0;
  for (const w of widths) count += w;
  return {
    customIds,
    urls,
    widths,
    source,
    async values() {
      const records = await readRows(source);
      const out = new Float32Array(count);
      let at = 0;
      for (const [k, record] of records.entries()) {
        // as a worker says it of rows it finds gone: the line's 404
        if (!record)
          throw new FerryError(
            "NOT_FOUND",
            `the batch's input file ${source.file} was deleted before this line ran (its rows in chunk ${source.chunks[k]} are gone)`,
          );
        const block = readValuesRecord(record);
        let own = 0;
        for (const w of parts[k]?.widths ?? []) own += w;
        if (block.count !== own || at + own > count)
          throw new Error(`chunk ${source.chunks[k]} holds ${block.count} values for ${own}`);
        decodeValues(block, out, at);
        at += own;
      }
      if (at !== count) throw new Error(`${at} values read for ${count}`);
      return out;
    },
  };
}
