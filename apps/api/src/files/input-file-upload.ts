import { FerryError } from "@ferry/protocol";
import type { FileStore } from "@ferry/transport";
import { checkInputLine } from "./input-lines.js";

/** Limits on a batch input file, enforced while it streams in. */
export interface UploadLimits {
  /** Bytes of the file. */
  maxBytes: number;
  /** Its lines that are not blank. */
  maxLines: number;
  /** Bytes of one line (one request). */
  maxLineBytes: number;
}

/** Bytes of a stored chunk (whole lines): large enough that a file costs few round trips. */
const CHUNK_BYTES = 256 * 1024;
/** Distinct urls of one file: predict lines may name a model each, but not without end. */
const MAX_URLS = 64;

const NEWLINE = 0x0a;

/**
 * A batch input file as it uploads: split into lines as it arrives, each line checked
 * (`checkInputLine`), and stored a chunk of whole lines at a time with the exact bytes sent,
 * custom_ids checked unique by Redis beside the chunk. Limits are checked as the bytes come,
 * so the upload is refused (413) the moment it crosses one, never after buffering it.
 */
export class InputFileUpload {
  /** Bytes received and not yet stored: whole lines, then the start of the next. */
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private pendingIds: string[] = [];
  private pendingLineNumbers: number[] = [];
  /** The line being received, as the pieces it came in. */
  private partial: Uint8Array[] = [];
  private partialBytes = 0;
  private bytes = 0;
  /** Lines seen, blank ones included (what an error's line number counts). */
  private seen = 0;
  private readonly decoder = new TextDecoder();
  /** Lines that are not blank. */
  lines = 0;
  /** The distinct urls the lines name (a batch checks them against its endpoint). */
  readonly urls = new Set<string>();

  constructor(
    private readonly store: Pick<FileStore, "append">,
    private readonly id: string,
    private readonly limits: UploadLimits,
  ) {}

  async write(chunk: Uint8Array): Promise<void> {
    this.bytes += chunk.byteLength;
    if (this.bytes > this.limits.maxBytes)
      throw new FerryError(
        "PAYLOAD_TOO_LARGE",
        `the file exceeds ${this.limits.maxBytes} bytes; split it into several batches`,
      );
    let start = 0;
    let newline = chunk.indexOf(NEWLINE, start);
    while (newline >= 0) {
      this.hold(chunk.subarray(start, newline + 1));
      this.line(this.take(chunk.subarray(start, newline)));
      start = newline + 1;
      // only here, at the end of a line: a stored chunk holds whole lines
      if (this.pendingBytes >= CHUNK_BYTES) await this.flush();
      newline = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.byteLength) {
      const rest = chunk.subarray(start);
      this.hold(rest);
      this.partial.push(rest);
      this.partialBytes += rest.byteLength;
      if (this.partialBytes > this.limits.maxLineBytes) throw this.lineTooLong();
    }
  }

  /** The file has ended (its last line may lack its newline). */
  async end(): Promise<void> {
    if (this.partialBytes > 0) this.line(this.take(new Uint8Array(0)));
    await this.flush();
    if (this.lines === 0) throw new FerryError("INVALID_INPUT", "the file has no lines");
  }

  private hold(piece: Uint8Array): void {
    this.pending.push(piece);
    this.pendingBytes += piece.byteLength;
  }

  /** The line that `tail` ends, as text. */
  private take(tail: Uint8Array): string {
    if (this.partialBytes + tail.byteLength > this.limits.maxLineBytes) throw this.lineTooLong();
    const whole = this.partial.length === 0 ? tail : Buffer.concat([...this.partial, tail]);
    this.partial = [];
    this.partialBytes = 0;
    return this.decoder.decode(whole);
  }

  private line(text: string): void {
    this.seen++;
    if (text.trim() === "") return;
    this.lines++;
    if (this.lines > this.limits.maxLines)
      throw new FerryError(
        "PAYLOAD_TOO_LARGE",
        `the file has more than ${this.limits.maxLines} lines; split it into several batches`,
      );
    const { customId, url } = checkInputLine(text, this.seen);
    this.pendingIds.push(customId);
    this.pendingLineNumbers.push(this.seen);
    this.urls.add(url);
    if (this.urls.size > MAX_URLS)
      throw new FerryError(
        "INVALID_INPUT",
        `line ${this.seen}: the file's lines name more than ${MAX_URLS} different urls`,
      );
  }

  private async flush(): Promise<void> {
    if (this.pendingBytes === 0) return;
    const data = Buffer.concat(this.pending);
    const ids = this.pendingIds;
    const numbers = this.pendingLineNumbers;
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingIds = [];
    this.pendingLineNumbers = [];
    const repeated = await this.store.append(this.id, data, ids.length, ids);
    if (repeated !== undefined)
      throw new FerryError(
        "INVALID_INPUT",
        `line ${numbers[repeated]} has custom_id ${JSON.stringify(ids[repeated])}, which an earlier line has; custom_ids must be unique`,
      );
  }

  private lineTooLong(): FerryError {
    return new FerryError(
      "PAYLOAD_TOO_LARGE",
      `line ${this.seen + 1} exceeds ${this.limits.maxLineBytes} bytes; one request per line`,
    );
  }
}
