/**
 * A chunk of an OpenAI batch's input answered whole (predict lines), as Redis keeps it: its
 * output file's lines and its error file's, each in the input's order, as two blocks of bytes
 * behind a header of their counts, so that the finalizer appends each block to its file as it
 * is rather than a line at a time. Bytes, not text, all the way: a 100,000-line batch's
 * answers are ~50 MB, and as strings they were encoded, measured, decoded and encoded again
 * on the API's loop between here and the output file (`npm run bench -- serving`).
 *
 * @example
 * const answers = new ChunkAnswers();
 * answers.add(true, '{"id":"a",...}');
 * decodeChunkAnswers(answers.encode()).ok; // { bytes: <'{"id":"a",...}'>, lines: 1 }
 */
export class ChunkAnswers {
  private readonly ok = new ByteLines();
  private readonly failed = new ByteLines();

  /** Adds a line to the output block (`ok`) or the error block. */
  add(ok: boolean, line: string): void {
    (ok ? this.ok : this.failed).add(line);
  }

  get okLines(): number {
    return this.ok.lines;
  }

  get failedLines(): number {
    return this.failed.lines;
  }

  /**
   * The value Redis keeps: `<ok lines> <failed lines> <ok units> <ok bytes>\n`, then both
   * blocks. The ok block's size in UTF-16 units is what the version before read (it ignores
   * the fourth field), so a replica not yet upgraded still finalizes a batch this one kept.
   */
  encode(): Buffer {
    const ok = this.ok.bytes();
    const header = Buffer.from(
      `${this.ok.lines} ${this.failed.lines} ${this.ok.units} ${ok.byteLength}\n`,
    );
    return Buffer.concat([header, ok, this.failed.bytes()]);
  }
}

/** `ChunkAnswers`' value for lines already rendered. */
export function encodeChunkAnswers(ok: readonly string[], failed: readonly string[]): Buffer {
  const answers = new ChunkAnswers();
  for (const line of ok) answers.add(true, line);
  for (const line of failed) answers.add(false, line);
  return answers.encode();
}

/** A block of whole lines (no newline after the last) and how many there are. */
export interface LineBlock {
  bytes: Buffer;
  lines: number;
}

/**
 * Both blocks of a kept value, as views of it (nothing is copied). A value kept by the version
 * before (no bytes field: its ok block sized in UTF-16 units only) is read as it was written.
 */
export function decodeChunkAnswers(value: Buffer): { ok: LineBlock; failed: LineBlock } {
  const end = value.indexOf(0x0a);
  const [ok, failed, okUnits, okBytes] = value
    .toString("latin1", 0, Math.max(0, end))
    .split(" ")
    .map(Number);
  if (end < 0 || ok === undefined || failed === undefined || okUnits === undefined)
    throw new Error("a chunk's kept answers have no header");
  const body = end + 1;
  if (okBytes === undefined) {
    const text = value.toString("utf8", body);
    return {
      ok: { bytes: Buffer.from(text.slice(0, okUnits)), lines: ok },
      failed: { bytes: Buffer.from(text.slice(okUnits)), lines: failed },
    };
  }
  return {
    ok: { bytes: value.subarray(body, body + okBytes), lines: ok },
    failed: { bytes: value.subarray(body + okBytes), lines: failed },
  };
}

/** Lines written into one growing buffer, newline between them, as they come. */
class ByteLines {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private used = 0;
  lines = 0;
  /** Its size in UTF-16 units, newlines included: what a string of it would measure. */
  units = 0;

  add(line: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit
    const room = line.length * 3 + 1;
    if (this.used + room > this.buffer.byteLength) {
      const grown = Buffer.allocUnsafe(Math.max(this.buffer.byteLength * 2, this.used + room));
      this.buffer.copy(grown, 0, 0, this.used);
      this.buffer = grown;
    }
    if (this.lines > 0) {
      this.buffer[this.used++] = 0x0a;
      this.units++;
    }
    this.used += this.buffer.write(line, this.used, "utf8");
    this.units += line.length;
    this.lines++;
  }

  bytes(): Buffer {
    return this.buffer.subarray(0, this.used);
  }
}
