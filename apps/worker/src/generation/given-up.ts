import { FerryError } from "@ferry/protocol";

/**
 * A signal that aborts when `signal` does (CANCELLED) or at `deadline` (DEADLINE_EXCEEDED),
 * with the error as its reason; `done` drops its timer.
 */
export function givenUpBy(
  signal: AbortSignal,
  deadline: number | undefined,
): { signal: AbortSignal; done: () => void } {
  const controller = new AbortController();
  const cancelled = () => controller.abort(new FerryError("CANCELLED", "generation was cancelled"));
  if (signal.aborted) cancelled();
  else signal.addEventListener("abort", cancelled, { once: true });
  const timer =
    deadline === undefined
      ? undefined
      : setTimeout(
          () =>
            controller.abort(
              new FerryError(
                "DEADLINE_EXCEEDED",
                "deadline passed while its grammar waited to compile; not computed",
              ),
            ),
          Math.max(0, deadline - Date.now()),
        );
  timer?.unref();
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", cancelled);
    },
  };
}
