/** A point as a fraction of a box's width and height (x right, y down). */
export type Point = [number, number];
export type Stroke = Point[];

/** Points along `f` from t=0 to t=1. */
function trace(f: (t: number) => Point, n = 24): Stroke {
  return Array.from({ length: n + 1 }, (_, k) => f(k / n));
}

/** Along the ellipse at (cx, cy), radii (rx, ry), from angle a0 to a1: radians, 0 up, clockwise. */
function arc(cx: number, cy: number, rx: number, ry: number, a0: number, a1: number, n = 24) {
  return trace((t) => {
    const a = a0 + (a1 - a0) * t;
    return [cx + rx * Math.sin(a), cy - ry * Math.cos(a)];
  }, n);
}

/** Straight from a to b. */
function line(a: Point, b: Point, n = 8): Stroke {
  return trace((t) => [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t], n);
}

/** Pieces drawn one after another without lifting the pen. */
function joined(...pieces: Stroke[]): Stroke {
  return pieces.flatMap((piece, k) => (k === 0 ? piece : piece.slice(1)));
}

const PI = Math.PI;

/**
 * Digits 0-9 as a person writes them, stroke by stroke in the order a pen goes, within a unit
 * box: the shapes of ordinary handwriting (an open-topped 4, a 7 without a bar, a 1 as a single
 * stroke leaning a little), not glyphs of a font.
 */
export const DIGITS: Stroke[][] = [
  // 0: one oval, begun at the top and closed past where it started
  [arc(0.5, 0.5, 0.34, 0.48, -0.15, 2 * PI + 0.25, 40)],
  // 1: one stroke, leaning right
  [line([0.58, 0.02], [0.44, 0.98], 16)],
  // 2: a hook, a diagonal to the bottom left, a base
  [
    joined(
      arc(0.5, 0.3, 0.36, 0.28, -1.4, 1.9, 20),
      line([0.62, 0.62], [0.12, 0.97]),
      line([0.12, 0.97], [0.9, 0.95]),
    ),
  ],
  // 3: two bowls, open to the left
  [joined(arc(0.46, 0.26, 0.34, 0.24, -1.3, 2.9, 20), arc(0.46, 0.73, 0.38, 0.25, 0.1, 4.5, 20))],
  // 4: down and across, then the stem
  [
    joined(line([0.48, 0.02], [0.1, 0.62], 10), line([0.1, 0.62], [0.92, 0.6], 10)),
    line([0.7, 0.28], [0.68, 0.99], 12),
  ],
  // 5: down, a bowl, then the bar on top
  [
    joined(line([0.3, 0.04], [0.24, 0.44]), arc(0.48, 0.67, 0.36, 0.3, -1.1, 3.9, 24)),
    line([0.28, 0.04], [0.86, 0.02]),
  ],
  // 6: down from the top right into a loop at the bottom
  [
    joined(
      arc(0.78, 0.5, 0.58, 0.48, -0.5, -1.75, 16),
      arc(0.5, 0.72, 0.3, 0.26, 3.9, 3.9 + 2 * PI, 28),
    ),
  ],
  // 7: the top, then a long diagonal
  [joined(line([0.1, 0.04], [0.9, 0.04], 10), line([0.9, 0.04], [0.38, 0.98], 14))],
  // 8: one stroke from the top, down through the middle, round the bottom and back up
  [
    trace((t) => {
      const a = (t * 2 + 0.04) * PI;
      const half = Math.cos(a) > 0 ? 0.25 : 0.32; // the top loop smaller than the bottom
      return [0.5 - half * Math.sin(2 * a), 0.5 - 0.48 * Math.cos(a)];
    }, 48),
  ],
  // 9: a loop, then the stem from its right side
  [joined(arc(0.5, 0.3, 0.32, 0.27, 1.6, -2 * PI + 1.6, 28), line([0.82, 0.32], [0.74, 0.98], 12))],
];

/** Where on the pad each digit is drawn: its box's left, top and size, as fractions of the pad. */
export const PLACES: Array<{ left: number; top: number; size: number }> = [
  { left: 0.06, top: 0.05, size: 0.4 }, // small, top left
  { left: 0.22, top: 0.2, size: 0.6 }, // large, about the centre
  { left: 0.6, top: 0.52, size: 0.34 }, // smaller, bottom right
];

/** A digit's strokes placed in a box on the pad, narrower than tall as handwriting is. */
export function placed(strokes: Stroke[], place: { left: number; top: number; size: number }) {
  return strokes.map((stroke) =>
    stroke.map(([x, y]): Point => [place.left + x * place.size * 0.7, place.top + y * place.size]),
  );
}
