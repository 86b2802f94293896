import { describe, expect, it } from "vitest";
import { BOX, CENTRE, centreOfMass, mnistPixels, SIZE } from "./mnist-image.js";

type Strokes = Array<Array<[number, number]>>;
/** A 7: a bar, then a long diagonal; in a unit box. */
const SEVEN: Strokes = [
  [
    [0.1, 0.05],
    [0.9, 0.05],
    [0.4, 0.95],
  ],
];
const moved = (strokes: Strokes, dx: number, dy: number, size: number): Strokes =>
  strokes.map((s) => s.map(([x, y]): [number, number] => [dx + x * size, dy + y * size]));

/** Rows and columns with any ink. */
function extent(pixels: Float32Array): { rows: number; cols: number } {
  const rows = new Set<number>();
  const cols = new Set<number>();
  pixels.forEach((v, i) => {
    if (v === 0) return;
    rows.add(Math.floor(i / SIZE));
    cols.add(i % SIZE);
  });
  return { rows: rows.size, cols: cols.size };
}

describe("a drawing prepared as MNIST's digits were", () => {
  it("is the same image wherever on the pad and however large it is drawn", () => {
    const small = mnistPixels(moved(SEVEN, 10, 12, 60));
    const large = mnistPixels(moved(SEVEN, 90, 70, 160));
    for (const [i, v] of small.entries()) expect(large[i]).toBeCloseTo(v, 4);
  });

  it("fills a 20x20 box along its longer side, with its centre of mass at MNIST's", () => {
    const tall = mnistPixels(moved(SEVEN, 30, 40, 100));
    expect(extent(tall).rows).toBe(BOX);
    expect(extent(tall).cols).toBeLessThan(BOX);
    const [cx, cy] = centreOfMass(tall);
    expect(cx).toBeCloseTo(CENTRE, 1);
    expect(cy).toBeCloseTo(CENTRE, 1);
    // ink 1 on 0, as the training digits
    expect(Math.max(...tall)).toBe(1);
    expect(Math.min(...tall)).toBe(0);
  });

  it("a single stroke, a dot and nothing at all", () => {
    const one = mnistPixels([
      [
        [50, 20],
        [50, 200],
      ],
    ]);
    expect(extent(one)).toEqual({ rows: BOX, cols: 3 });
    const dot = mnistPixels([[[5, 5]]]);
    expect(Math.max(...dot)).toBe(1);
    expect(mnistPixels([]).every((v) => v === 0)).toBe(true);
  });
});
