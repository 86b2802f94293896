import { Environment, Interpreter, type Template } from "@huggingface/jinja";
import { strftime } from "./strftime.js";

/** Python's `range`, as Jinja's globals have it. */
function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error("range() step must not be zero");
  const out: number[] = [];
  for (let i = from; step > 0 ? i < to : i > to; i += step) out.push(i);
  return out;
}

/**
 * The globals transformers gives a chat template. @huggingface/jinja's `Template.render` has
 * them too, but cannot replace one, and its `strftime_now` names months in the machine's
 * locale and knows few directives, where transformers' is Python's in the C locale (Llama 3.1
 * writes "Today Date: 26 Jul 2024" into every prompt).
 */
const GLOBALS = {
  true: true,
  false: false,
  none: null,
  True: true,
  False: false,
  None: null,
  range,
  raise_exception: (message: unknown) => {
    throw new Error(String(message));
  },
  strftime_now: (format: unknown) => strftime(new Date(), String(format)),
};

/** A chat template's text for `items`, with transformers' globals. */
export function renderTemplate(template: Template, items: Record<string, unknown>): string {
  const env = new Environment();
  for (const [name, value] of Object.entries({ ...GLOBALS, ...items })) env.set(name, value);
  const result = new Interpreter(env).run(template.parsed);
  return String(result.value);
}
