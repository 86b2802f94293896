import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";

/** The highest nice value Linux takes: the lowest priority. */
const MAX_NICE = 19;

/**
 * Lowers the calling thread's CPU priority to nice value `nice` (1-19), so that the kernel
 * gives the cores to every other thread of the process, and to other processes, whenever they
 * want them, and this thread what is left: for a thread that only does offline work beside
 * threads that answer interactive requests. Linux keeps a nice value per thread (setpriority
 * on a thread id sets that thread's alone); elsewhere setpriority takes a whole process, so
 * this does nothing there. Raising one's nice value needs no privilege, lowering it back does:
 * a thread lowered stays so. Returns whether the value was applied.
 */
export function lowerThreadPriority(nice: number): boolean {
  if (process.platform !== "linux" || !(nice > 0)) return false;
  try {
    // "<pid>/task/<tid>", the calling thread's own entry
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    const wanted = Math.min(MAX_NICE, Math.round(nice));
    // a process started lower already (`nice -n 15 npm start`) stays as low
    if (getPriority(tid) < wanted) setPriority(tid, wanted);
    return true;
  } catch {
    // a kernel without /proc/thread-self (before 3.17), or a sandbox that refuses it: the
    // thread runs at its process's priority, as it did before
    return false;
  }
}
