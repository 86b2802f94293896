import { describe, expect, it } from "vitest";
import {
  BYTE_VALUES,
  byteValuesLength,
  decodeBlocks,
  encodeBlocks,
  FP32_VALUES,
  type PackedValues,
} from "./packed-values.js";

/** A BYTE_VALUES block of `values`: those not a whole 0-255 listed apart. */
function bytesBlock(values: number[]): PackedValues {
  const listed = values.flatMap((v, k) => ((v & 0xff) === v ? [] : [k]));
  const count = values.length;
  const bytes = new Uint8Array(byteValuesLength(count, listed.length));
  const padded = Math.ceil(count / 4) * 4;
  values.forEach((v, k) => {
    if ((v & 0xff) === v) bytes[k] = v;
  });
  const view = new DataView(bytes.buffer);
  view.setUint32(padded, listed.length, true);
  listed.forEach((place, k) => {
    view.setUint32(padded + 4 + 4 * k, place, true);
    view.setFloat32(padded + 4 + 4 * listed.length + 4 * k, values[place] as number, true);
  });
  return { encoding: BYTE_VALUES, count, bytes };
}

const fp32Block = (values: number[]): PackedValues => ({
  encoding: FP32_VALUES,
  count: values.length,
  bytes: new Uint8Array(Float32Array.from(values).buffer),
});

describe("packed values", () => {
  it("decode, block after block, to the FP32 values they were packed from", () => {
    const a = [0, 16, 255, 0.5, 3];
    const b = [1.25, -2, 1e-7];
    const c = [7, 8, 9.75];
    const value = encodeBlocks([bytesBlock(a), fp32Block(b), bytesBlock(c)]);
    expect([...decodeBlocks(value)]).toEqual([...a, ...b, ...c].map(Math.fround));
    // a reply's view that is not 4-byte aligned reads the same
    const shifted = new Uint8Array(value.byteLength + 1);
    shifted.set(value, 1);
    expect(decodeBlocks(shifted.subarray(1))).toEqual(decodeBlocks(value));
    expect(decodeBlocks(encodeBlocks([]))).toEqual(new Float32Array(0));
  });

  it("refuse blocks whose sizes do not add up, or whose listed places lie past them", () => {
    const value = encodeBlocks([fp32Block([1, 2, 3])]);
    value.writeUInt32LE(4, 8); // four values said, three held
    expect(() => decodeBlocks(value)).toThrow(/holds 12 bytes/);
    expect(() => decodeBlocks(encodeBlocks([fp32Block([1])]).subarray(0, 10))).toThrow();
    const bad = bytesBlock([0.5, 1]);
    new DataView(bad.bytes.buffer).setUint32(8, 9, true); // the listed value's place: 9 of 2
    expect(() => decodeBlocks(encodeBlocks([bad]))).toThrow(/past its 2/);
  });
});
