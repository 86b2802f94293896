import type { FerryError } from "@ferry/protocol";
import { keepMasked } from "./bitmask.js";
import type { GuidedSpec } from "./guided-spec.js";

/** What a guide asks of the engine that hosts its matcher (the grammar thread's client). */
export interface MatcherHost {
  /** Sends the tokens the guide took since it last asked; the next mask comes to `onMask`. */
  advance(guide: GrammarGuide, tokens: number[]): void;
  close(guide: GrammarGuide): void;
}

/**
 * One guided sequence's side of the grammar thread: it takes the tokens drawn (sent to the
 * thread, which finds the next mask while the model runs the next step) and masks the logits
 * with the newest mask. Until that mask is back the guide is not `ready`, and its sequence
 * sits the step out rather than hold anyone else's.
 */
export class GrammarGuide {
  /** Every token drawn so far: what a rebuilt matcher (a new thread) takes again. */
  readonly tokens: number[] = [];
  private words: Uint32Array | undefined;
  private unsent: number[] = [];
  private waiters: Array<() => void> = [];
  private failure: FerryError | undefined;
  private closed = false;

  constructor(
    readonly seq: number,
    readonly vocabulary: number,
    readonly key: string,
    readonly spec: GuidedSpec,
    private readonly host: MatcherHost,
    /** Whose request it guides (an API key): owners take turns on the grammar thread. */
    readonly owner = "",
  ) {}

  /** Whether the mask for the next token is here (or the guide failed: `error` says why). */
  get ready(): boolean {
    return this.failure !== undefined || (this.words !== undefined && this.unsent.length === 0);
  }

  get error(): FerryError | undefined {
    return this.failure;
  }

  /** Resolves once `ready`. */
  whenReady(): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  advance(token: number): void {
    if (this.closed || this.failure) return;
    this.tokens.push(token);
    this.unsent.push(token);
    this.words = undefined;
    // a resumed sequence replays many tokens at once: one message for them all
    if (this.unsent.length === 1)
      queueMicrotask(() => {
        if (this.closed || this.failure || this.unsent.length === 0) return;
        const tokens = this.unsent;
        this.unsent = [];
        this.host.advance(this, tokens);
      });
  }

  /** Every logit but those of the tokens the grammar allows next to minus infinity. */
  mask(logits: Float32Array): void {
    const words = this.words;
    if (!words) throw new Error("guided mask used before it was ready");
    keepMasked(words, logits);
  }

  /**
   * The thread's answer: the mask after the first `upTo` tokens drawn. One for fewer than
   * were drawn is stale (a newer token is on its way, or was sent while a rebuilt matcher
   * answered for the tokens it was rebuilt from): the mask it waits for will follow.
   */
  masked(words: ArrayBuffer, upTo: number): void {
    if (upTo !== this.tokens.length) return;
    this.words = new Uint32Array(words);
    this.wake();
  }

  /**
   * The matcher is being rebuilt on a new thread from every token drawn (those not yet sent
   * too). A mask already here stays: the rebuilt matcher answers the same one, and a step in
   * flight masks its logits with it (cleared, the step's mask threw, and the engine spun on a
   * sequence it could neither advance nor drop).
   */
  rebuilding(): void {
    this.unsent = [];
  }

  fail(error: FerryError): void {
    if (this.failure) return;
    this.failure = error;
    this.wake();
  }

  /** Frees its matcher; called when its sequence leaves. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.host.close(this);
    this.wake();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
