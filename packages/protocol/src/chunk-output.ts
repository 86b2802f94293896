/**
 * An offline chunk's answers as the worker stores them, in one binary value beside the batch:
 * every row's first output packed back to back as FP32 (where a row's values sit depends on
 * the chunk's shape alone, so a pointer to a row stays right whoever wrote the value), then
 * what the rows need to be read back (keys, version, the rows that failed) as JSON.
 *
 *   u32 width | u32 count | count x width FP32 | JSON meta
 *
 * One GET reads a chunk's answers; one GETRANGE reads a row's.
 */

/** A row that failed by itself, and why; its values are left zero. */
export interface ChunkRowError {
  code: string;
  message: string;
}

export interface ChunkOutput {
  /** Values of one row's output. */
  width: number;
  /** Row r's output is values[r * width, (r + 1) * width). */
  values: Float32Array;
  keys: string[];
  model_version: string;
  batch: string;
  /** Failed rows by their place in the chunk. */
  errors: Record<number, ChunkRowError>;
}

const HEADER_BYTES = 8;

/** Where row `row`'s values start in a stored chunk output, in bytes. */
export function chunkRowOffset(width: number, row: number): number {
  return HEADER_BYTES + row * width * 4;
}

export function encodeChunkOutput(out: ChunkOutput): Buffer {
  const count = out.keys.length;
  if (out.values.length !== count * out.width)
    throw new Error(`${out.values.length} values for ${count} rows of ${out.width}`);
  const meta = Buffer.from(
    JSON.stringify({
      keys: out.keys,
      model_version: out.model_version,
      batch: out.batch,
      errors: out.errors,
    }),
  );
  const bytes = Buffer.alloc(HEADER_BYTES + out.values.byteLength + meta.length);
  bytes.writeUInt32LE(out.width, 0);
  bytes.writeUInt32LE(count, 4);
  Buffer.from(out.values.buffer, out.values.byteOffset, out.values.byteLength).copy(
    bytes,
    HEADER_BYTES,
  );
  meta.copy(bytes, HEADER_BYTES + out.values.byteLength);
  return bytes;
}

export function decodeChunkOutput(bytes: Buffer): ChunkOutput {
  const width = bytes.readUInt32LE(0);
  const count = bytes.readUInt32LE(4);
  const end = chunkRowOffset(width, count);
  // copied out: a Float32Array needs 4-byte alignment, which a Redis reply's buffer lacks
  const values = new Float32Array(count * width);
  Buffer.from(values.buffer).set(bytes.subarray(HEADER_BYTES, end));
  const meta = JSON.parse(bytes.toString("utf8", end)) as Omit<ChunkOutput, "width" | "values">;
  return { width, values, ...meta };
}

/** One row's values read from its place (a GETRANGE's bytes). */
export function rowValues(bytes: Buffer): number[] {
  const values: number[] = [];
  for (let at = 0; at + 4 <= bytes.length; at += 4) values.push(bytes.readFloatLE(at));
  return values;
}

/**
 * Where a key's latest batch answer lives: its chunk output and the row's place in it, and
 * the model version that answered. Written per key in the model's predictions hash.
 */
export interface RowPointer {
  batch: string;
  chunk: number;
  row: number;
  width: number;
  model_version: string;
}

export function encodeRowPointer(p: RowPointer): string {
  return `${p.batch}\t${p.chunk}\t${p.row}\t${p.width}\t${p.model_version}`;
}

export function decodeRowPointer(raw: string): RowPointer | undefined {
  const [batch, chunk, row, width, model_version] = raw.split("\t");
  if (model_version === undefined || batch === undefined) return undefined;
  return { batch, chunk: Number(chunk), row: Number(row), width: Number(width), model_version };
}
