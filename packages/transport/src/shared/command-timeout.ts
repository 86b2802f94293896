import { Command } from "ioredis";

/** A command as its timer sees it: ioredis' own (private) timer field, and how it settles. */
interface TimedCommand {
  _commandTimeoutTimer?: NodeJS.Timeout;
  isResolved: boolean;
  reject(err: Error): void;
}

let installed = false;

/**
 * Makes ioredis' `commandTimeout` blind to this process's own delays. Its timer fires in the
 * event loop's timers phase, which comes before the poll phase that reads the socket: after a
 * turn longer than the timeout (an API parsing thousands of requests under overload) every
 * command in flight failed with "Command timed out" although Redis had answered, its reply
 * waiting unread, and the requests behind them got spurious 503s. Here an expired timer first
 * lets one poll phase run (setImmediate runs after it), and only a command still unanswered
 * then fails: a Redis that stopped answering still fails requests after the timeout.
 *
 * The timer keeps ioredis' own field, so that ioredis still clears it when the reply comes.
 */
export function tolerateEventLoopDelays(): void {
  if (installed) return;
  installed = true;
  Command.prototype.setTimeout = function setTimeout(this: Command, ms: number): void {
    const command = this as unknown as TimedCommand;
    if (command._commandTimeoutTimer) return;
    command._commandTimeoutTimer = globalThis.setTimeout(() => {
      setImmediate(() => {
        if (!command.isResolved) command.reject(new Error("Command timed out"));
      });
    }, ms);
  };
}
