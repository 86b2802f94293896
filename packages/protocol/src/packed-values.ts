/**
 * FP32 values packed smaller where they allow it: the rows of a batch input file's predict
 * lines as the upload packs them (most files hold pixels, whole numbers 0-255), and the same
 * blocks as an offline chunk's rows between the API and a worker, which decodes them into the
 * model's FP32 input (a chunk of MNIST rows was 63 MB of FP32 through Redis, 35 MB packed).
 *
 * A block, `encoding` FP32_VALUES: f32 x count. BYTE_VALUES: u8 x count, padded to 4 | u32
 * others | u32 x others places | f32 x others values (each value a byte but those listed).
 */
export const FP32_VALUES = 0;
export const BYTE_VALUES = 1;

/** One block of packed values, its bytes a view where it lies. */
export interface PackedValues {
  encoding: number;
  count: number;
  bytes: Uint8Array;
}

/** Bytes of a BYTE_VALUES block of `count` values, `others` of them listed apart. */
export function byteValuesLength(count: number, others: number): number {
  return Math.ceil(count / 4) * 4 + 4 + 8 * others;
}

/**
 * Bytes of the block of `count` values `encoding` that starts `bytes` (4-byte aligned; what
 * follows it may be there too): a BYTE_VALUES block says how many values it lists apart.
 * Throws on an encoding this version does not know, rather than read it as another.
 */
export function packedLength(encoding: number, count: number, bytes: Uint8Array): number {
  if (encoding === FP32_VALUES) return 4 * count;
  if (encoding !== BYTE_VALUES) throw new Error(`unknown packed values ${encoding}`);
  const listed = Math.ceil(count / 4) * 4;
  // too short to say: the length with none listed, which its bytes then fall short of
  if (bytes.byteLength < listed + 4) return byteValuesLength(count, 0);
  const others = new Uint32Array(bytes.buffer, bytes.byteOffset + listed, 1)[0] ?? 0;
  return byteValuesLength(count, others);
}

/**
 * `values` as one block: a byte each where every value but a few is a whole 0-255 (the others
 * listed with their places), else FP32 throughout once listing them would take more room than
 * bytes save.
 */
export function packValues(values: Float32Array): PackedValues {
  return readValuesRecord(packValuesRecord(values, 0));
}

/** Scratch of `packValuesRecord`, kept from call to call up to SCRATCH_MOST values. */
const SCRATCH_MOST = 1 << 22;
let scratchBytes = new Uint8Array(0);
let scratchPlaces = new Uint32Array(0);

/**
 * `values` packed as `packValues` packs them, written as a values record (`writeValuesRecord`)
 * from `before` (a multiple of 4) of one new buffer that long and the record's length: the
 * caller's own bytes go before it. One allocation, the scan's arrays kept for the next call:
 * memory touched for the first time costs more than the scan on some hosts (~11 us a page).
 */
export function packValuesRecord(values: Float32Array, before: number): Uint8Array {
  const count = values.length;
  const most = Math.max(0, Math.floor((3 * count - 4) / 8));
  const kept = count <= SCRATCH_MOST;
  if (!kept || scratchBytes.length < count) {
    const bytes = new Uint8Array(count);
    const places = new Uint32Array(most);
    if (kept) [scratchBytes, scratchPlaces] = [bytes, places];
    return packWith(values, before, bytes, places, most);
  }
  if (scratchPlaces.length < most) scratchPlaces = new Uint32Array(most);
  return packWith(values, before, scratchBytes, scratchPlaces, most);
}

function packWith(
  values: Float32Array,
  before: number,
  bytes: Uint8Array,
  places: Uint32Array,
  most: number,
): Uint8Array {
  const count = values.length;
  // +0, the most common value by far (the background of a picture), by its bits alone
  const bits = new Uint32Array(values.buffer, values.byteOffset, count);
  let others = 0;
  for (let at = 0; at < count; at++) {
    if (bits[at] === 0) {
      bytes[at] = 0;
      continue;
    }
    const v = values[at] as number;
    // -0 passes the byte test but would come back +0: listed apart, exact
    if ((v & 0xff) === v && v !== 0) bytes[at] = v;
    else if (others < most) places[others++] = at;
    else {
      others = -1;
      break;
    }
  }
  if (others < 0) {
    const out = new Uint8Array(before + 8 + 4 * count);
    const block = {
      encoding: FP32_VALUES,
      count,
      bytes: new Uint8Array(values.buffer, values.byteOffset, 4 * count),
    };
    writeValuesRecord(block, out, before);
    return out;
  }
  const length = byteValuesLength(count, others);
  const out = new Uint8Array(before + 8 + length);
  const head = new Uint32Array(out.buffer, before, 2);
  head[0] = BYTE_VALUES;
  head[1] = count;
  const start = before + 8;
  out.set(bytes.subarray(0, count), start);
  const listed = start + Math.ceil(count / 4) * 4;
  new Uint32Array(out.buffer, listed, 1)[0] = others;
  new Uint32Array(out.buffer, listed + 4, others).set(places.subarray(0, others));
  const exact = new Float32Array(out.buffer, listed + 4 + 4 * others, others);
  for (let k = 0; k < others; k++) exact[k] = values[places[k] as number] as number;
  return out;
}

/** Writes a block's values into `out` from `at`; its bytes must be 4-byte aligned. */
export function decodeValues(block: PackedValues, out: Float32Array, at: number): void {
  const { buffer, byteOffset } = block.bytes;
  const { count } = block;
  if (block.encoding === FP32_VALUES) {
    out.set(new Float32Array(buffer, byteOffset, count), at);
    return;
  }
  if (block.encoding !== BYTE_VALUES) throw new Error(`unknown packed values ${block.encoding}`);
  // set, not a loop: a typed array's set converts natively
  out.set(new Uint8Array(buffer, byteOffset, count), at);
  const listed = byteOffset + Math.ceil(count / 4) * 4;
  const others = new Uint32Array(buffer, listed, 1)[0] ?? 0;
  const places = new Uint32Array(buffer, listed + 4, others);
  const exact = new Float32Array(buffer, listed + 4 + 4 * others, others);
  for (let k = 0; k < others; k++) {
    const place = places[k] ?? 0;
    if (place >= count) throw new Error(`a packed value's place ${place} is past its ${count}`);
    out[at + place] = exact[k] ?? 0;
  }
}

/** Bytes of `block` as a value of its own (`writeValuesRecord`): 8, then its bytes. */
export function valuesRecordLength(block: PackedValues): number {
  return 8 + block.bytes.byteLength;
}

/**
 * `block` as a value of its own, from `at` (a multiple of 4) of `into`: u32 encoding | u32
 * count | its bytes. What an input file keeps of a chunk's rows, and a worker reads as it lies.
 */
export function writeValuesRecord(block: PackedValues, into: Uint8Array, at: number): void {
  const head = new DataView(into.buffer, into.byteOffset + at, 8);
  head.setUint32(0, block.encoding, true);
  head.setUint32(4, block.count, true);
  into.set(block.bytes, at + 8);
}

/** A `writeValuesRecord` value read back (copied out only when a reply's view lacks alignment). */
export function readValuesRecord(value: Uint8Array): PackedValues {
  const own = value.byteOffset % 4 === 0 ? value : new Uint8Array(value);
  if (own.byteLength < 8) throw new Error("a packed values record ends early");
  const head = new DataView(own.buffer, own.byteOffset, 8);
  const encoding = head.getUint32(0, true);
  const count = head.getUint32(4, true);
  const bytes = new Uint8Array(own.buffer, own.byteOffset + 8, own.byteLength - 8);
  if (bytes.byteLength !== packedLength(encoding, count, bytes))
    throw new Error(`a packed values record of ${count} values holds ${bytes.byteLength} bytes`);
  return { encoding, count, bytes };
}

/**
 * Blocks as one binary value, each as it was packed: u32 blocks | per block u32 encoding,
 * u32 count, u32 bytes, its bytes padded to 4.
 */
export function encodeBlocks(blocks: readonly PackedValues[]): Buffer {
  let size = 4;
  for (const block of blocks) size += 12 + Math.ceil(block.bytes.byteLength / 4) * 4;
  const out = Buffer.alloc(size);
  out.writeUInt32LE(blocks.length, 0);
  let at = 4;
  for (const block of blocks) {
    out.writeUInt32LE(block.encoding, at);
    out.writeUInt32LE(block.count, at + 4);
    out.writeUInt32LE(block.bytes.byteLength, at + 8);
    out.set(block.bytes, at + 12);
    at += 12 + Math.ceil(block.bytes.byteLength / 4) * 4;
  }
  return out;
}

/**
 * Every value of `encodeBlocks`' value, in order, as FP32: into the array `into` gives for
 * their count (at least that long; the values are its first ones), else a new one.
 */
export function decodeBlocks(
  value: Uint8Array,
  into?: (count: number) => Float32Array,
): Float32Array {
  // the blocks' typed views need 4-byte alignment: a reply that lacks it is copied out
  const own = value.byteOffset % 4 === 0 ? value : new Uint8Array(value);
  const view = new DataView(own.buffer, own.byteOffset, own.byteLength);
  const blocks: PackedValues[] = [];
  let total = 0;
  let at = 4;
  for (let b = view.getUint32(0, true); b > 0; b--) {
    const encoding = view.getUint32(at, true);
    const count = view.getUint32(at + 4, true);
    const length = view.getUint32(at + 8, true);
    if (at + 12 + length > own.byteLength) throw new Error("packed blocks end early");
    const bytes = new Uint8Array(own.buffer, own.byteOffset + at + 12, length);
    if (length !== packedLength(encoding, count, bytes))
      throw new Error(`a packed block of ${count} values holds ${length} bytes`);
    blocks.push({ encoding, count, bytes });
    total += count;
    at += 12 + Math.ceil(length / 4) * 4;
  }
  const out = into ? into(total).subarray(0, total) : new Float32Array(total);
  if (out.length < total) throw new Error(`${total} values given ${out.length} places`);
  let offset = 0;
  for (const block of blocks) {
    decodeValues(block, out, offset);
    offset += block.count;
  }
  return out;
}
