import type { ChildProcess } from "node:child_process";

/**
 * Whether `child` has ended. One ended by a signal (SIGKILL, or V8's abort on a heap out of
 * memory) keeps `exitCode` null, its `signalCode` saying how it ended: `exitCode === null`
 * alone reads it as alive, and waiting for its exit again waits forever.
 */
export function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}
