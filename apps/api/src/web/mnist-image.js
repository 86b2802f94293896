// A drawing prepared as MNIST's digits were made, so that a model trained on them reads it:
// the digit's bounding box scaled into a 20x20 box (aspect kept), set in a 28x28 frame with its
// centre of mass on the frame's centre, ink 1 on a background of 0. Without it a digit drawn
// off centre or small reaches the model as a shape it never saw, and is read as another.
// Plain functions of the strokes, for the playground and for Node alike.

export const SIZE = 28;
export const BOX = 20;
/** Where MNIST's digits have their centre of mass, in pixel indices (measured: 14.0, 14.0). */
export const CENTRE = 14;
/**
 * The pen's width in pixels of the 28x28 image. Drawn at the model's scale, not the pad's, so
 * that a small digit and a large one both come out with the stroke MNIST's digits have
 * (~2 pixels), rather than a small one in a blot.
 */
export const PEN = 2.2;

/**
 * The 784 pixels (row by row, 0..1) of `strokes`: arrays of [x, y] points in any one unit
 * (the pad's pixels). An empty drawing is all zeros.
 * @param {Array<Array<[number, number]>>} strokes
 * @returns {Float32Array}
 */
export function mnistPixels(strokes, pen = PEN) {
  const points = strokes.flat();
  if (points.length === 0) return new Float32Array(SIZE * SIZE);
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const left = Math.min(...xs);
  const top = Math.min(...ys);
  const width = Math.max(...xs) - left;
  const height = Math.max(...ys) - top;
  // the ink, pen and its fading edge included, fills the box along its longer side
  const scale = (BOX - pen - 1) / Math.max(width, height, 1e-6);
  const place = (dx, dy) =>
    strokes.map((stroke) =>
      stroke.map(([x, y]) => [
        (x - left) * scale + (SIZE - width * scale) / 2 + dx,
        (y - top) * scale + (SIZE - height * scale) / 2 + dy,
      ]),
    );
  const boxed = render(place(0, 0), pen);
  const [cx, cy] = centreOfMass(boxed);
  // the strokes are moved, not the pixels: the shift need not be whole pixels
  return render(place(CENTRE - cx, CENTRE - cy), pen);
}

/** Centre of mass of an image's ink, in pixel indices; the frame's centre for a blank one. */
export function centreOfMass(pixels) {
  let mass = 0;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < pixels.length; i++) {
    const v = pixels[i] ?? 0;
    mass += v;
    sx += v * (i % SIZE);
    sy += v * Math.floor(i / SIZE);
  }
  return mass > 0 ? [sx / mass, sy / mass] : [CENTRE, CENTRE];
}

/**
 * Strokes in the frame's coordinates (pixel i covers [i, i+1)) as pixels: full ink within the
 * pen's half-width of a stroke, fading over one pixel past it, as an antialiased line is.
 */
function render(strokes, pen) {
  const segments = strokes.flatMap((stroke) =>
    stroke.length === 1 ? [[stroke[0], stroke[0]]] : stroke.slice(1).map((p, k) => [stroke[k], p]),
  );
  const out = new Float32Array(SIZE * SIZE);
  for (let row = 0; row < SIZE; row++)
    for (let col = 0; col < SIZE; col++) {
      let nearest = Number.POSITIVE_INFINITY;
      for (const [a, b] of segments)
        nearest = Math.min(nearest, distance(col + 0.5, row + 0.5, a, b));
      out[row * SIZE + col] = Math.min(1, Math.max(0, pen / 2 + 0.5 - nearest));
    }
  return out;
}

/** Distance from (x, y) to the segment a-b. */
function distance(x, y, [ax, ay], [bx, by]) {
  const dx = bx - ax;
  const dy = by - ay;
  const length2 = dx * dx + dy * dy;
  const t = length2 > 0 ? Math.min(1, Math.max(0, ((x - ax) * dx + (y - ay) * dy) / length2)) : 0;
  return Math.hypot(x - ax - t * dx, y - ay - t * dy);
}
