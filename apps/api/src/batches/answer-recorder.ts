import type { RecordedLine } from "@ferry/transport";

/** Answers kept in one round trip at most. */
const MAX_LINES = 512;

/**
 * Keeps a batch's answers a group at a time: the lines answered in one event-loop turn (or
 * `MAX_LINES` of them) go to Redis in one round trip, not one each. A line's `record` settles
 * once its group is kept, so a line counts as done only when its answer is in Redis.
 *
 * @example
 * const recorder = new AnswerRecorder((lines) => store.recordMany(batchId, lines));
 * await recorder.record({ index: 0, ok: true, line: "..." });
 */
export class AnswerRecorder {
  private group: RecordedLine[] = [];
  private waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private scheduled = false;

  constructor(private readonly keep: (lines: RecordedLine[]) => Promise<unknown>) {}

  record(line: RecordedLine): Promise<void> {
    return new Promise((resolve, reject) => {
      this.group.push(line);
      this.waiters.push({ resolve, reject });
      if (this.group.length >= MAX_LINES) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    if (this.group.length === 0) return;
    const lines = this.group;
    const waiters = this.waiters;
    this.group = [];
    this.waiters = [];
    this.keep(lines).then(
      () => {
        for (const w of waiters) w.resolve();
      },
      (err: unknown) => {
        for (const w of waiters) w.reject(err);
      },
    );
  }
}
