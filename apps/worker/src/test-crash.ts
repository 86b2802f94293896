/**
 * TEST ONLY (test/poison.fault.test.ts): the marker that makes a generation end this process
 * at once, as an input that crashed the runtime would (a SIGKILL: nothing is cleaned up).
 * Unset, as in every deployment, nothing is looked for.
 */
const marker = process.env.FERRY_TEST_CRASH_ON;

/** Ends the process when the test marker is set and `prompt` holds it. */
export function crashOnTestMarker(prompt: string): void {
  if (marker && prompt.includes(marker)) process.kill(process.pid, "SIGKILL");
}
