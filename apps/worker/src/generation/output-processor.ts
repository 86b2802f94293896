import type { FinishReason } from "@ferry/protocol";

/**
 * Turns a sequence's decoded text pieces into what the client may see: text that could be the
 * start of a stop string is held back until it is known not to be one, and the stop string
 * itself is never sent (OpenAI's behaviour). With vLLM's `include_stop_str_in_output` nothing
 * is held back and the text ends after the stop string.
 */
export class OutputProcessor {
  private held = "";
  private sent = "";
  finished: FinishReason | undefined;
  /** Characters of text already sent that a stop string ending in the next piece may begin in. */
  private readonly lookback: number;

  constructor(
    private readonly stop: readonly string[],
    private readonly includeStop = false,
  ) {
    this.lookback = includeStop ? Math.max(1, ...stop.map((s) => s.length)) - 1 : 0;
  }

  /**
   * Adds decoded text; returns the part that is safe to send now. `matchStops` false (vLLM's
   * `min_tokens` not reached yet): no stop string ends it, though what could begin one is
   * still held back, so that one completed once they apply is found whole, as vLLM finds it.
   */
  push(piece: string, matchStops = true): string {
    if (this.finished) return "";
    if (this.includeStop) return this.pushIncluding(piece, matchStops);
    this.held += piece;
    if (matchStops)
      for (const s of this.stop) {
        const at = this.held.indexOf(s);
        if (at >= 0) {
          this.finished = "stop";
          return this.release(this.held.slice(0, at));
        }
      }
    const keep = this.longestStopPrefixSuffix();
    return this.release(
      this.held.slice(0, this.held.length - keep),
      this.held.slice(this.held.length - keep),
    );
  }

  /**
   * `include_stop_str_in_output`: a piece goes out whole unless a stop string ends in it (one
   * that began in text already sent counts, as vLLM looks back that far); then up to its end.
   */
  private pushIncluding(piece: string, matchStops: boolean): string {
    const tail = this.sent.slice(Math.max(0, this.sent.length - this.lookback));
    const text = tail + piece;
    if (matchStops)
      for (const s of this.stop) {
        const at = text.indexOf(s, Math.max(0, tail.length - s.length + 1));
        if (at >= 0) {
          this.finished = "stop";
          return this.release(text.slice(tail.length, at + s.length));
        }
      }
    return this.release(piece);
  }

  /** Ends the sequence (EOS, length, cancel): whatever was held back is released. */
  finish(reason: FinishReason): string {
    if (this.finished) return "";
    this.finished = reason;
    return this.release(this.held);
  }

  get text(): string {
    return this.sent;
  }

  private release(out: string, rest = ""): string {
    this.held = rest;
    this.sent += out;
    return out;
  }

  /** Length of the longest tail of the held text that begins some stop string. */
  private longestStopPrefixSuffix(): number {
    let best = 0;
    for (const s of this.stop) {
      for (let n = Math.min(s.length - 1, this.held.length); n > best; n--) {
        if (this.held.endsWith(s.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
