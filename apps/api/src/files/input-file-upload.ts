import { FerryError } from "@ferry/protocol";
import type { FileStore } from "@ferry/transport";
import { type CheckedLines, checkInputLines } from "./input-lines.js";

/** Limits on a batch input file, enforced while it streams in. */
export interface UploadLimits {
  /** Bytes of the file. */
  maxBytes: number;
  /** Its lines that are not blank. */
  maxLines: number;
  /** Bytes of one line (one request). */
  maxLineBytes: number;
}

/**
 * A stored chunk (whole lines) closes at CHUNK_BYTES once it holds CHUNK_LINES lines, and at
 * MAX_CHUNK_BYTES whatever it holds: few round trips a file, and a chunk of wide rows (MNIST's
 * lines, ~2.3 KB, ~110 to a 256 KiB chunk) does not cost its upload and its run a Redis write,
 * a check, a render, a record and an output write per hundred lines (a 20,000-row MNIST batch
 * through the Batch API took ~10% less end to end; 100,000 digits rows, ~770 lines to 256 KiB,
 * as before, and 1 MiB for them read ~5% slower).
 */
const CHUNK_BYTES = 256 * 1024;
const CHUNK_LINES = 256;
const MAX_CHUNK_BYTES = 1024 * 1024;
/** Distinct urls of one file: predict lines may name a model each, but not without end. */
const MAX_URLS = 64;

const NEWLINE = 0x0a;

/** Checks a chunk of whole lines, the first of them line `firstLine` of the file. */
export type CheckLines = (bytes: Uint8Array, firstLine: number) => Promise<CheckedLines>;

/**
 * A batch input file as it uploads: split into lines as it arrives, stored a chunk of whole
 * lines at a time with the exact bytes sent, each chunk's lines checked first
 * (`checkInputLine`, by `check`: the API's parse thread) and its custom_ids checked unique by
 * Redis beside it, and a chunk of plain predict lines kept packed beside its bytes too (see
 * packed-lines.ts). A chunk is checked while the one before it is stored, and both while the
 * next arrives. Byte limits are
 * checked as the bytes come, so the upload is refused (413) the moment it crosses one, never
 * after buffering it; the line count as each chunk is checked, before it is stored.
 */
export class InputFileUpload {
  /** Bytes received and not yet stored: whole lines, then the start of the next. */
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  /** Bytes of the line being received. */
  private partialBytes = 0;
  private bytes = 0;
  /** Lines received, blank ones included, and those of them sent to be checked. */
  private received = 0;
  private sent = 0;
  /**
   * The last chunk sent to be checked and stored, and the one before it: a chunk is checked
   * while the one before is stored (Redis checks its custom_ids), and no more are held.
   */
  private storing: Promise<void> = Promise.resolve();
  private stored: Promise<void> = Promise.resolve();
  /** Lines that are not blank. */
  lines = 0;
  /** The distinct urls the lines name (a batch checks them against its endpoint). */
  readonly urls = new Set<string>();

  constructor(
    private readonly store: Pick<FileStore, "append">,
    private readonly id: string,
    /** The upload's token on the file (FileStore.begin): an append under another is refused. */
    private readonly writer: string,
    private readonly limits: UploadLimits,
    private readonly check: CheckLines = async (bytes, firstLine) =>
      checkInputLines(bytes, firstLine),
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
      if (this.partialBytes + newline - start > this.limits.maxLineBytes) throw this.lineTooLong();
      this.hold(chunk.subarray(start, newline + 1));
      this.partialBytes = 0;
      this.received++;
      start = newline + 1;
      // only here, at the end of a line: a stored chunk holds whole lines
      if (
        this.pendingBytes >= MAX_CHUNK_BYTES ||
        (this.pendingBytes >= CHUNK_BYTES && this.received - this.sent >= CHUNK_LINES)
      )
        await this.flush();
      newline = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.byteLength) {
      const rest = chunk.subarray(start);
      this.hold(rest);
      this.partialBytes += rest.byteLength;
      if (this.partialBytes > this.limits.maxLineBytes) throw this.lineTooLong();
    }
  }

  /** The file has ended (its last line may lack its newline). */
  async end(): Promise<void> {
    if (this.partialBytes > 0) this.received++;
    this.partialBytes = 0;
    await this.flush();
    await this.storing;
    if (this.lines === 0) throw new FerryError("INVALID_INPUT", "the file has no lines");
  }

  private hold(piece: Uint8Array): void {
    this.pending.push(piece);
    this.pendingBytes += piece.byteLength;
  }

  /**
   * Sends the whole lines held to be checked, while the chunk before them is stored, and then
   * stored after it (in order: custom_ids are unique across the file, and lines are counted
   * as they come); throws what an earlier chunk met. Two chunks at most are in flight.
   */
  private async flush(): Promise<void> {
    await this.stored;
    if (this.pendingBytes === 0) return;
    const data = Buffer.concat(this.pending);
    const firstLine = this.sent + 1;
    this.sent = this.received;
    this.pending = [];
    this.pendingBytes = 0;
    const checking = this.check(data, firstLine);
    // awaited by the store below, or its failure thrown by the chunk before it
    checking.catch(() => undefined);
    this.stored = this.storing;
    this.storing = this.storeAfter(this.storing, data, checking);
    // a failure is thrown by the next write or end, which wait for it
    this.storing.catch(() => undefined);
  }

  private async storeAfter(
    before: Promise<void>,
    data: Buffer,
    checking: Promise<CheckedLines>,
  ): Promise<void> {
    await before;
    const checked = await checking;
    this.count(checked);
    const ids = checked.customIds;
    const repeated = await this.store.append(
      this.id,
      data,
      ids.length,
      ids,
      this.writer,
      checked.packed,
    );
    if (repeated !== undefined)
      throw new FerryError(
        "INVALID_INPUT",
        `line ${checked.numbers[repeated]} has custom_id ${JSON.stringify(ids[repeated])}, which an earlier line has; custom_ids must be unique`,
      );
  }

  /** Counts a checked chunk's lines and urls against the limits; throws its problem. */
  private count(checked: CheckedLines): void {
    for (const [k, url] of checked.urls.entries()) {
      this.lines++;
      if (this.lines > this.limits.maxLines)
        throw new FerryError(
          "PAYLOAD_TOO_LARGE",
          `the file has more than ${this.limits.maxLines} lines; split it into several batches`,
        );
      this.urls.add(url);
      if (this.urls.size > MAX_URLS)
        throw new FerryError(
          "INVALID_INPUT",
          `line ${checked.numbers[k]}: the file's lines name more than ${MAX_URLS} different urls`,
        );
    }
    if (checked.problem) throw new FerryError("INVALID_INPUT", checked.problem);
  }

  private lineTooLong(): FerryError {
    return new FerryError(
      "PAYLOAD_TOO_LARGE",
      `line ${this.received + 1} exceeds ${this.limits.maxLineBytes} bytes; one request per line`,
    );
  }
}
