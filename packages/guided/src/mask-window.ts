/** Compiles shorter than this leave the thread to the next at once. */
const MIN_COMPILE_MS = 20;
/** The longest the next compile waits after one, however long that one took. */
const MAX_WINDOW_MS = 1_000;

/**
 * The time after a compile when the grammar thread is the running sequences' masks' alone: a
 * compile of D ms is followed by up to D (1 s at most) of masks before the next compile, while
 * a guided sequence runs. The thread answers in the order it is asked: a running sequence
 * posts its next token's mask after the compile that held its last one ended, and one key's
 * queued compiles (each within its budget, ~2 s) had made another's sequence wait one whole
 * compile a token (a 3-token guided choice: 10 ms -> 8.3 s). Compiles keep half the thread.
 */
export class MaskWindow {
  private until = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** Runs the next compile, once a window that held it ends. */
    private readonly resume: () => void,
  ) {}

  /** A compile of `ms` ended: the masks have the thread as long next. */
  compiled(ms: number): void {
    this.until = ms < MIN_COMPILE_MS ? 0 : Date.now() + Math.min(ms, MAX_WINDOW_MS);
  }

  /**
   * Whether the next compile waits now (it is resumed when the window ends); `running`: a
   * guided sequence is running, whose masks the window is for.
   */
  holds(running: boolean): boolean {
    const wait = this.until - Date.now();
    if (wait <= 0 || !running) return false;
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.resume();
    }, wait);
    return true;
  }

  /** Ends the window now (no sequence needs masks, or the thread was replaced). */
  end(): void {
    this.until = 0;
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.resume();
  }
}
