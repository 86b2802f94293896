/**
 * FP32 arrays an offline chunk's rows are decoded into, handed back once the chunk has run
 * and given to the next: a fresh one a chunk (6.4 MB for 2,048 MNIST rows) cost the worker
 * more in its pages' first touch than decoding into it did (~17 ms a chunk on the 2-core
 * development VM, against ~2 ms into one already touched). At most `keepBytes` are kept
 * between chunks; an array past that goes to the garbage collector as before.
 */
export class RowBuffers {
  private readonly free: Float32Array[] = [];
  private kept = 0;

  constructor(private readonly keepBytes: number) {}

  /** An array of at least `count` values, its contents whatever its last user left. */
  take(count: number): Float32Array {
    let best = -1;
    for (let k = 0; k < this.free.length; k++) {
      const length = (this.free[k] as Float32Array).length;
      if (length >= count && (best < 0 || length < (this.free[best] as Float32Array).length))
        best = k;
    }
    if (best < 0) return new Float32Array(count);
    const [array] = this.free.splice(best, 1) as [Float32Array];
    this.kept -= array.byteLength;
    return array;
  }

  /** `array` (from `take`) is no longer read: the next `take` may have it. */
  give(array: Float32Array): void {
    if (this.kept + array.byteLength > this.keepBytes) return;
    this.free.push(array);
    this.kept += array.byteLength;
  }

  /** Bytes kept for the next chunks. */
  get keptBytes(): number {
    return this.kept;
  }
}
