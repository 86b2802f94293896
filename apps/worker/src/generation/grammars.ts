import { GrammarEngine } from "@ferry/guided/engine";

let shared: GrammarEngine | undefined;

/**
 * The worker's one grammar engine: every generator it serves shares its thread (one more
 * thread per model would compete for the same cores for no gain), started with the first
 * generator that can be guided so that the first guided request finds it warm.
 */
export function grammarEngine(): GrammarEngine {
  shared ??= new GrammarEngine();
  return shared;
}
