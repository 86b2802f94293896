// Types of mnist-image.js, which browsers load as it is.
export declare const SIZE: number;
export declare const BOX: number;
export declare const CENTRE: number;
export declare const PEN: number;
export declare function mnistPixels(
  strokes: Array<Array<[number, number]>>,
  pen?: number,
): Float32Array;
export declare function centreOfMass(pixels: ArrayLike<number>): [number, number];
