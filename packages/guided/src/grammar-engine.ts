import type { Worker } from "node:worker_threads";
import { FerryError, spawnThread } from "@ferry/protocol";
import { byteLevelPiece } from "./byte-level.js";
import { GrammarGuide, type MatcherHost } from "./grammar-guide.js";
import type { GrammarReply, GrammarRequest, VocabularyData } from "./grammar-messages.js";
import { type GuidedSpec, specKey } from "./guided-spec.js";
import { HeldOpens } from "./held-opens.js";
import { MaskWindow } from "./mask-window.js";

export interface GrammarEngineOptions {
  /** How long one grammar may take to compile before the request is refused (ms). @defaultValue 5_000 */
  compileBudgetMs?: number;
  /** How long one mask may take before its sequence fails (ms). @defaultValue 1_000 */
  maskBudgetMs?: number;
  /** The thread's WebAssembly memory past which it is replaced by a fresh one (bytes). @defaultValue 512 MiB */
  memoryCapBytes?: number;
}

/**
 * What the engine needs of a tokenizer: the exact bytes each token adds to the text (none for
 * one the text leaves out, a special token: XGrammar never allows an empty token) and the end
 * of text.
 */
export interface SpelledVocabulary {
  tokenBytes(id: number): readonly number[];
  readonly eosTokenId: number | undefined;
}

/** What a request gets when its thread is replaced: its guide is rebuilt on the next one. */
class ThreadReplaced extends FerryError {}

interface Pending {
  request: GrammarRequest;
  guide: GrammarGuide | undefined;
  /** How many of its guide's tokens the matcher will have taken when it answers. */
  upTo: number;
  /** How long the thread may work on it (none for a vocabulary, which takes what it takes). */
  budgetMs: number | undefined;
  /** Its budget's timer, running from when the thread takes it up. */
  timer: NodeJS.Timeout | undefined;
  resolve: (reply: GrammarReply) => void;
  reject: (err: Error) => void;
}

/**
 * Guided decoding on XGrammar (the engine vLLM, SGLang and TensorRT-LLM default to): JSON
 * schemas, regular expressions, choices and EBNF grammars compiled to a pushdown automaton
 * with precomputed token masks. Everything XGrammar does runs on one grammar thread; this
 * side sends it each sequence's tokens and keeps the masks it answers. A request the thread
 * does not answer within its budget (a grammar too costly to compile or to mask) ends the
 * thread: that request fails, a fresh thread starts, and every other sequence's matcher is
 * rebuilt there from the tokens it has drawn, so no one else's request fails with it.
 */
export class GrammarEngine implements MatcherHost {
  private thread: Worker | undefined;
  private starting: Promise<void> | undefined;
  private readonly pending = new Map<number, Pending>();
  private readonly vocabularies: VocabularyData[] = [];
  private readonly vocabularyIds = new WeakMap<object, Map<number, number>>();
  private readonly guides = new Map<number, GrammarGuide>();
  /** Guides whose (re)open waits its turn (`HeldOpens`). */
  private readonly held = new HeldOpens();
  /** After a compile, the running sequences' masks before the next (`MaskWindow`). */
  private readonly masks = new MaskWindow(() => void this.openNext());
  private compiling = false;
  private nextId = 0;
  private nextSeq = 0;
  private closed = false;
  /** Threads replaced so far (a budget spent, a crash, the memory cap): for metrics and tests. */
  restarts = 0;
  /** The thread's memory outside its JavaScript heap (XGrammar's WebAssembly), at its last mask. */
  memoryBytes = 0;
  private readonly compileBudgetMs: number;
  private readonly maskBudgetMs: number;
  private readonly memoryCapBytes: number;

  constructor(options: GrammarEngineOptions = {}) {
    this.compileBudgetMs = options.compileBudgetMs ?? 5_000;
    this.maskBudgetMs = options.maskBudgetMs ?? 1_000;
    this.memoryCapBytes = options.memoryCapBytes ?? 512 * 1024 * 1024;
  }

  /** The id a tokenizer's vocabulary of `size` logits is known by, registered on first use. */
  vocabulary(tokenizer: SpelledVocabulary & object, size: number): number {
    let bySize = this.vocabularyIds.get(tokenizer);
    if (!bySize) {
      bySize = new Map();
      this.vocabularyIds.set(tokenizer, bySize);
    }
    const known = bySize.get(size);
    if (known !== undefined) return known;
    const pieces: string[] = [];
    for (let id = 0; id < size; id++)
      pieces.push(id === tokenizer.eosTokenId ? "" : byteLevelPiece(tokenizer.tokenBytes(id)));
    const data: VocabularyData = {
      id: this.vocabularies.length,
      pieces,
      size,
      stopIds: tokenizer.eosTokenId === undefined ? [] : [tokenizer.eosTokenId],
    };
    this.vocabularies.push(data);
    bySize.set(size, data.id);
    // a thread running already takes it now; one that starts takes every vocabulary first
    if (this.thread)
      this.request({ type: "vocabulary", id: 0, vocabulary: data }, undefined).catch(() => {});
    else this.ensureThread().catch(() => {});
    return data.id;
  }

  /**
   * A guide for `spec` over a vocabulary, its first mask ready (after `tokens`, those a resumed
   * sequence already drew). A spec the engine cannot take, or that spends the compile budget,
   * is refused with INVALID_INPUT naming why.
   */
  async open(
    spec: GuidedSpec,
    vocabulary: number,
    tokens: readonly number[] = [],
    signal?: AbortSignal,
    /** Whose request it is (an API key): owners' opens take turns on the thread. */
    owner = "",
  ): Promise<GrammarGuide> {
    if (this.closed) throw new FerryError("UNAVAILABLE", "the grammar engine is shut down");
    const guide = new GrammarGuide(this.nextSeq++, vocabulary, specKey(spec), spec, this, owner);
    guide.tokens.push(...tokens);
    this.guides.set(guide.seq, guide);
    // given up while it waits (its request cancelled, or past its deadline): it fails at once,
    // and a grammar not yet on the thread is never compiled
    const givenUp = () =>
      guide.fail(
        signal?.reason instanceof FerryError
          ? signal.reason
          : new FerryError("CANCELLED", "guided decoding: given up before its grammar compiled"),
      );
    if (signal?.aborted) givenUp();
    else signal?.addEventListener("abort", givenUp, { once: true });
    try {
      await Promise.race([this.reopen(guide), guide.whenReady()]);
    } finally {
      signal?.removeEventListener("abort", givenUp);
    }
    const error = guide.error;
    if (error) {
      this.close(guide);
      throw error;
    }
    return guide;
  }

  advance(guide: GrammarGuide, tokens: number[]): void {
    // a guide whose open waits its turn takes every token drawn when it is sent
    if (this.held.holds(guide.seq)) return;
    // a replaced thread rejects it: the guide is rebuilt from all its tokens meanwhile
    const upTo = guide.tokens.length;
    this.request({ type: "advance", id: 0, seq: guide.seq, tokens }, guide, upTo).catch((err) =>
      this.unanswered(guide, err),
    );
  }

  close(guide: GrammarGuide): void {
    if (!this.guides.delete(guide.seq)) return;
    if (!this.running()) this.masks.end();
    // still held: it is skipped when its turn comes, and has no matcher to free
    if (this.held.holds(guide.seq)) return;
    if (this.thread)
      this.request({ type: "close", id: 0, seq: guide.seq }, undefined).catch(() => {});
  }

  /** Ends the thread; every guide still open fails. */
  async shutdown(): Promise<void> {
    this.closed = true;
    const thread = this.thread;
    this.thread = undefined;
    for (const guide of this.guides.values())
      guide.fail(new FerryError("UNAVAILABLE", "the worker is shutting down"));
    this.guides.clear();
    for (const settled of this.held.drop()) settled();
    await thread?.terminate();
  }

  /** Queues the guide's (re)open; resolves once it was answered, or given up. */
  private reopen(guide: GrammarGuide): Promise<void> {
    guide.rebuilding();
    return new Promise<void>((settled) => {
      this.held.hold(guide, settled);
      void this.openNext();
    });
  }

  /** Sends the next held open once none is on the thread, with every token its guide drew. */
  private async openNext(): Promise<void> {
    if (this.compiling || this.closed || this.masks.holds(this.running())) return;
    const next = this.held.next();
    if (!next) return;
    const { guide, settle } = next;
    const settled = () => {
      for (const s of settle) s();
    };
    if (guide.isClosed || guide.error) {
      settled();
      return this.openNext();
    }
    this.compiling = true;
    const tokens = [...guide.tokens];
    let again = false;
    const started = this.thread ? performance.now() : undefined; // a starting thread is no compile
    try {
      await this.request(
        {
          type: "open",
          id: 0,
          seq: guide.seq,
          vocabulary: guide.vocabulary,
          key: guide.key,
          spec: guide.spec,
          tokens,
        },
        guide,
        tokens.length,
      ).catch((err) => {
        // its thread was replaced under it: it waits its turn on the next, and so do those
        // waiting for it (an open answers with its first mask, a cancel still heard)
        if (err instanceof ThreadReplaced && this.held.join(guide.seq, settle)) again = true;
        else this.unanswered(guide, err);
      });
    } finally {
      this.compiling = false;
      // (a thread replaced under it ended the window already: rebuilds go at once)
      if (!again) this.masks.compiled(started === undefined ? 0 : performance.now() - started);
      if (!again) settled();
      void this.openNext();
    }
  }

  /** Whether a guided sequence runs (its guide open, not waiting for its turn). */
  private running(): boolean {
    for (const seq of this.guides.keys()) if (!this.held.holds(seq)) return true;
    return false;
  }

  /**
   * A guide's request that will get no answer: after a thread replacement it is rebuilt, but a
   * thread that could not start (or an engine shut down) leaves it nothing to wait for.
   */
  private unanswered(guide: GrammarGuide, err: unknown): void {
    if (err instanceof ThreadReplaced) return;
    guide.fail(
      err instanceof FerryError
        ? err
        : new FerryError(
            "MODEL_ERROR",
            `guided decoding: ${err instanceof Error ? err.message : String(err)}`,
          ),
    );
  }

  private async request(
    request: GrammarRequest,
    guide: GrammarGuide | undefined,
    upTo = 0,
  ): Promise<GrammarReply> {
    if (this.closed) throw new FerryError("UNAVAILABLE", "the grammar engine is shut down");
    await this.ensureThread();
    const thread = this.thread;
    if (!thread) throw new FerryError("UNAVAILABLE", "the grammar thread is not running");
    return this.post(thread, request, guide, upTo);
  }

  private post(
    thread: Worker,
    request: GrammarRequest,
    guide: GrammarGuide | undefined,
    upTo: number,
  ): Promise<GrammarReply> {
    const id = ++this.nextId;
    const sent = { ...request, id };
    const budgetMs =
      request.type === "open"
        ? this.compileBudgetMs
        : request.type === "advance"
          ? this.maskBudgetMs
          : undefined;
    return new Promise<GrammarReply>((resolve, reject) => {
      this.pending.set(id, {
        request: sent,
        guide,
        upTo,
        budgetMs,
        timer: undefined,
        resolve,
        reject,
      });
      thread.postMessage(sent);
      this.timeHead();
    });
  }

  /**
   * Starts the budget of the request the thread works on: it answers in order, so the oldest
   * one pending. A budget that ran from the post counted the requests queued before it: beside
   * one grammar of 0.9 s a neighbour's mask spent its second waiting, and the grammar was
   * blamed for a compile budget it had not spent.
   */
  private timeHead(): void {
    const head: Pending | undefined = this.pending.values().next().value;
    if (!head || head.timer !== undefined || head.budgetMs === undefined) return;
    head.timer = setTimeout(() => this.overBudget(head), head.budgetMs);
  }

  private onReply(reply: GrammarReply): void {
    if (reply.type === "ready") return;
    const entry = this.pending.get(reply.id);
    if (!entry) return;
    this.pending.delete(reply.id);
    clearTimeout(entry.timer);
    const guide = entry.guide;
    if (reply.type === "mask") {
      if (guide && !guide.isClosed) guide.masked(reply.words, entry.upTo);
      this.memoryBytes = reply.memoryBytes;
      if (reply.memoryBytes > this.memoryCapBytes) this.replaceThread(undefined, "memory cap");
    } else if (reply.type === "error" && guide) {
      const what =
        entry.request.type === "open"
          ? `${entry.request.spec.kind}: ${reply.message}`
          : reply.message;
      guide.fail(new FerryError(reply.invalid ? "INVALID_INPUT" : "MODEL_ERROR", what));
    }
    entry.resolve(reply);
    // XGrammar's memory may be corrupt: every other sequence moves to a fresh thread
    if (reply.type === "error" && reply.broken) {
      if (guide) this.guides.delete(guide.seq);
      this.replaceThread(undefined, "XGrammar failed");
    }
    this.timeHead();
  }

  /**
   * The request the thread works on is past its budget, and WebAssembly cannot be interrupted:
   * the thread goes, and that request's guide with it.
   */
  private overBudget(entry: Pending): void {
    if (this.pending.get(entry.request.id) !== entry) return;
    const message =
      entry.request.type === "open"
        ? `guided decoding: the grammar took longer than ${this.compileBudgetMs} ms to compile; simplify the schema or pattern`
        : `guided decoding: one token's mask took longer than ${this.maskBudgetMs} ms`;
    this.replaceThread(entry, message);
  }

  /** Ends the thread; `culprit`'s guide fails, every other guide is rebuilt on a fresh one. */
  private replaceThread(culprit: Pending | undefined, why: string): void {
    const thread = this.thread;
    this.thread = undefined;
    this.restarts++;
    this.masks.end();
    void thread?.terminate();
    const failed = culprit?.guide;
    if (failed) {
      failed.fail(new FerryError("INVALID_INPUT", why));
      this.guides.delete(failed.seq);
    }
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const entry of waiting) {
      clearTimeout(entry.timer);
      entry.reject(new ThreadReplaced("UNAVAILABLE", `the grammar thread was replaced (${why})`));
    }
    if (this.closed) return;
    for (const guide of this.guides.values()) void this.reopen(guide);
  }

  private ensureThread(): Promise<void> {
    if (this.thread) return Promise.resolve();
    this.starting ??= this.startThread().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async startThread(): Promise<void> {
    const thread = spawnThread(new URL("./grammar-thread.js", import.meta.url));
    await new Promise<void>((resolve, reject) => {
      thread.once("error", reject);
      thread.once("message", () => {
        thread.off("error", reject);
        resolve();
      });
    });
    thread.on("message", (reply: GrammarReply) => this.onReply(reply));
    thread.on("exit", () => {
      if (this.thread === thread)
        this.replaceThread(this.pending.values().next().value, "the grammar thread exited");
    });
    thread.unref();
    this.thread = thread;
    // pending like any request: the budgets of those after them start once they are indexed
    for (const vocabulary of this.vocabularies)
      this.post(thread, { type: "vocabulary", id: 0, vocabulary }, undefined, 0).catch(() => {});
  }
}
