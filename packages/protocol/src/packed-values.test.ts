import { describe, expect, it } from "vitest";
import {
  BYTE_VALUES,
  decodeBlocks,
  decodeValues,
  encodeBlocks,
  FP32_VALUES,
  type PackedValues,
  packValues,
  packValuesRecord,
  readValuesRecord,
  valuesRecordLength,
  writeValuesRecord,
} from "./packed-values.js";

/** A BYTE_VALUES block of `values` (whole 0-255 but for a few). */
function bytesBlock(values: number[]): PackedValues {
  const block = packValues(Float32Array.from(values));
  expect(block.encoding).toBe(BYTE_VALUES);
  return block;
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
    const c = [7, 8, 9.75, 1, 2, 3, 4, 5];
    const value = encodeBlocks([bytesBlock(a), fp32Block(b), bytesBlock(c)]);
    expect([...decodeBlocks(value)]).toEqual([...a, ...b, ...c].map(Math.fround));
    // a reply's view that is not 4-byte aligned reads the same
    const shifted = new Uint8Array(value.byteLength + 1);
    shifted.set(value, 1);
    expect(decodeBlocks(shifted.subarray(1))).toEqual(decodeBlocks(value));
    expect(decodeBlocks(encodeBlocks([]))).toEqual(new Float32Array(0));
  });

  it("decode into an array given for their count, over whatever it held", () => {
    const a = [0, 16, 255, 0.5, 3];
    const b = [1.25, -2, 1e-7];
    const value = encodeBlocks([bytesBlock(a), fp32Block(b)]);
    const given = new Float32Array(20).fill(99);
    let asked = -1;
    const out = decodeBlocks(value, (count) => {
      asked = count;
      return given;
    });
    expect(asked).toBe(8);
    expect([...out]).toEqual([...a, ...b].map(Math.fround));
    expect(out.buffer).toBe(given.buffer);
    expect(() => decodeBlocks(value, () => new Float32Array(7))).toThrow("8 values given 7 places");
  });

  it("keep -0 as -0 (the byte test alone would bring it back +0)", () => {
    const values = Float32Array.from([0, -0, 3, 0, 255]);
    const block = packValues(values);
    expect(block.encoding).toBe(BYTE_VALUES);
    const back = decodeBlocks(encodeBlocks([block]));
    expect([...back].map((v) => Object.is(v, -0))).toEqual([false, true, false, false, false]);
  });

  it("pack bytes while the values apart are few, FP32 throughout past that", () => {
    const pixels = Float32Array.from({ length: 64 }, (_, k) => (k === 9 ? 7.25 : k % 17));
    const block = packValues(pixels);
    expect([block.encoding, block.bytes.byteLength]).toEqual([BYTE_VALUES, 64 + 4 + 8]);
    const fractions = Float32Array.from({ length: 64 }, (_, k) => k + 0.5);
    const fp32 = packValues(fractions);
    expect([fp32.encoding, fp32.bytes.byteLength]).toEqual([FP32_VALUES, 256]);
    expect(decodeBlocks(encodeBlocks([block, fp32]))).toEqual(
      Float32Array.from([...pixels, ...fractions]),
    );
  });

  it("refuse blocks whose sizes do not add up, or whose listed places lie past them", () => {
    const value = encodeBlocks([fp32Block([1, 2, 3])]);
    value.writeUInt32LE(4, 8); // four values said, three held
    expect(() => decodeBlocks(value)).toThrow(/holds 12 bytes/);
    expect(() => decodeBlocks(encodeBlocks([fp32Block([1])]).subarray(0, 10))).toThrow();
    const bad = bytesBlock([0.5, 1, 2, 3, 4, 5, 6, 7]);
    new DataView(bad.bytes.buffer, bad.bytes.byteOffset).setUint32(12, 9, true); // the listed value's place: 9 of 8
    expect(() => decodeBlocks(encodeBlocks([bad]))).toThrow(/past its 8/);
  });

  it("keep a block as a value of its own, read back as it lies or from an unaligned view", () => {
    const values = [0, 16, 255, 0.5, 3, -0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    const block = bytesBlock(values);
    const record = new Uint8Array(valuesRecordLength(block) + 4);
    writeValuesRecord(block, record, 4);
    const back = readValuesRecord(record.subarray(4));
    expect([back.encoding, back.count]).toEqual([BYTE_VALUES, values.length]);
    const out = new Float32Array(values.length);
    decodeValues(back, out, 0);
    expect([...out]).toEqual(values);
    expect(Object.is(out[5], -0)).toBe(true);
    // a Redis reply's view need not be 4-byte aligned
    const shifted = new Uint8Array(record.byteLength + 1);
    shifted.set(record.subarray(4), 1);
    const copied = readValuesRecord(shifted.subarray(1, 1 + valuesRecordLength(block)));
    expect(copied.bytes).toEqual(block.bytes);
    // sizes that do not add up, or a record too short to say them
    expect(() => readValuesRecord(record.subarray(4, record.byteLength - 4))).toThrow(/holds/);
    expect(() => readValuesRecord(new Uint8Array(6))).toThrow(/ends early/);
  });

  it("pack call after call into the arrays they keep, each reading its own values, after the caller's bytes", () => {
    const decode = (record: Uint8Array) => {
      const block = readValuesRecord(record);
      const out = new Float32Array(block.count);
      decodeValues(block, out, 0);
      return [...out];
    };
    const large = Array.from({ length: 4_000 }, (_, k) => (k % 5 === 0 ? k / 8 : k % 256));
    const small = [0, 3, -0, 255, 0, 0, 1.5, 9, 0, 0, 0, 7];
    for (const values of [large, small, large.slice(0, 1_000), small]) {
      const record = packValuesRecord(Float32Array.from(values), 12);
      expect(record.subarray(0, 12)).toEqual(new Uint8Array(12));
      const back = decode(record.subarray(12));
      expect(back).toEqual(values.map(Math.fround));
      expect(back.map((v) => Object.is(v, -0))).toEqual(values.map((v) => Object.is(v, -0)));
    }
    // too many apart for bytes: FP32 throughout, after the caller's bytes all the same
    const fractions = Array.from({ length: 40 }, (_, k) => k + 0.25);
    const fp32 = packValuesRecord(Float32Array.from(fractions), 4);
    expect(readValuesRecord(fp32.subarray(4)).encoding).toBe(FP32_VALUES);
    expect(decode(fp32.subarray(4))).toEqual(fractions);
  });
});
