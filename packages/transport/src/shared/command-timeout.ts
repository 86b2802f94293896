import { Command } from "ioredis";

/** A command as its timer sees it: ioredis' own (private) timer field, and how it settles. */
interface TimedCommand {
  _commandTimeoutTimer?: NodeJS.Timeout;
  isResolved: boolean;
  reject(err: Error): void;
}

/** A timer firing this late (ms) says this process was busy, not that Redis was slow. */
const LATE_MS = 50;

let installed = false;

/**
 * Makes ioredis' `commandTimeout` count Redis' delay, not this process's. Its timer fires in
 * the event loop's timers phase, before the poll phase that reads the socket, and it starts
 * when the command is queued, not written: after turns longer than the timeout (an API
 * parsing thousands of requests under overload) commands failed with "Command timed out"
 * although Redis had answered or had not yet been sent them, and the requests behind them got
 * spurious 503s. Here an expired timer first lets a poll phase run (setImmediate runs after
 * it); a timer that fired late, because the process itself was busy, gives the command as
 * much time again; only a command still unanswered after a timeout the process did not
 * itself overrun fails. A Redis that stopped answering still fails requests after the
 * timeout, and a sync row has its own deadline besides.
 *
 * The timer keeps ioredis' own field, so that ioredis still clears it when the reply comes.
 */
export function tolerateEventLoopDelays(): void {
  if (installed) return;
  installed = true;
  Command.prototype.setTimeout = function setTimeout(this: Command, ms: number): void {
    const command = this as unknown as TimedCommand;
    if (!command._commandTimeoutTimer) arm(command, ms);
  };
}

function arm(command: TimedCommand, ms: number): void {
  const due = performance.now() + ms;
  command._commandTimeoutTimer = globalThis.setTimeout(() => {
    const late = performance.now() - due;
    setImmediate(() => {
      if (command.isResolved) return;
      if (late > LATE_MS) arm(command, late);
      else command.reject(new Error("Command timed out"));
    });
  }, ms);
}
