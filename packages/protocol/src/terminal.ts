/**
 * Whether a write failed because what it wrote to is gone: a terminal that hung up (EIO:
 * closed, an ssh session dropped) or a pipe whose reader left (EPIPE).
 */
export function outputGone(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "EIO" || code === "EPIPE";
}

/**
 * Keeps this process running when its standard output and error are gone. Node raises a failed
 * write to them as an uncaught exception: `npm start`'s processes, draining after their terminal
 * closed (SIGHUP), would die at their first line of output with accepted requests unanswered.
 */
export function survivesLostTerminal(): void {
  for (const stream of [process.stdout, process.stderr])
    stream.on("error", (err) => {
      if (!outputGone(err)) throw err;
    });
}
