/**
 * How long a process whose parent has gone gives its drain before it exits anyway, in ms: no
 * one is left to stop it, and the port it holds must be free for the next `npm start`.
 */
export const ORPHAN_GRACE_MS = 2_000;

/**
 * Calls `stop` once the process that spawned this one with an IPC channel (`npm start`'s
 * scripts/start.ts) is gone, however it ended: a `kill -9` of it sends no signal here, but
 * the kernel closes its end of the channel. The process exits `ORPHAN_GRACE_MS` later
 * whatever `stop` is still waiting on. Started without a channel (a test, a container),
 * nothing is watched.
 *
 * @example
 * exitWithParent(() => void shutdown("parent gone"));
 */
export function exitWithParent(stop: () => void): void {
  if (typeof process.send !== "function") return;
  const orphaned = () => {
    setTimeout(() => process.exit(1), ORPHAN_GRACE_MS).unref();
    stop();
  };
  // gone already, while this process was starting (its channel closed before anyone listened)
  if (!process.connected) orphaned();
  else process.once("disconnect", orphaned);
}

/**
 * Calls `stop` once any of `pids` is gone, looked for every `everyMs`: for a parent that gives
 * no channel to watch (npm, or the `sh -c` npm runs a script under, which outlives a `kill -9`
 * of npm unless the script `exec`s).
 */
export function watchAncestors(pids: number[], stop: () => void, everyMs = 500): void {
  const timer = setInterval(() => {
    if (pids.every(processAlive)) return;
    clearInterval(timer);
    stop();
  }, everyMs);
  timer.unref();
}

/** Whether process `pid` runs (signal 0 reaches it, or would but for permission). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, someone else's (pid 1 of a container, say)
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** What the API tells the process that started it (`npm start`) once its port is bound. */
export interface ListeningMessage {
  ferry: "listening";
  port: number;
}

/**
 * Tells the parent watching this process (`npm start`'s scripts/start.ts) that its port is
 * bound: only then is the stack up, whatever else may answer on that port.
 */
export function tellParentListening(port: number): void {
  const message: ListeningMessage = { ferry: "listening", port };
  if (typeof process.send === "function" && process.connected) process.send(message);
}

export function isListeningMessage(message: unknown): message is ListeningMessage {
  const m = message as Partial<ListeningMessage> | null;
  return m?.ferry === "listening" && typeof m.port === "number";
}
