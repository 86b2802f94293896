import { type Atom, product, type Sequence, type Spelling } from "./spelling.js";

/**
 * The JSON strings a `format` is written as, where XGrammar 0.1.27's own pattern is looser than a
 * validator: it writes 2590-02-30 and 06-31 as dates, 20:60 and a 60th second as times, and a
 * hostname label of any length. Each is spelled here as a subset every validator takes: days
 * within their month (February to the 28th: the 29th needs a leap year), seconds 00-59, an
 * offset or Z on every time (RFC 3339's full-time), at most 9 fraction digits; hostnames of up
 * to three labels of 1-63 lowercase letters, digits and inner hyphens; emails whose domain has a
 * dot (XGrammar's took `f1f@735353`) and a local part of one or two runs.
 */
export function formatSpelling(format: unknown): Sequence | undefined {
  const parts = typeof format === "string" ? FORMATS[format]?.() : undefined;
  return parts && [[[QUOTE]], ...parts, [[QUOTE]]];
}

const QUOTE: Atom = { literal: '"' };
const lit = (literal: string): Spelling => [[{ literal }]];
const digit = (from: number, to: number): Atom => ({ from, to });
const digits = (n: number): Atom => ({ min: n, max: n });

/** Two digits from 00 to `last` (23, 59). */
function twoDigits(last: number): Spelling {
  const tens = Math.floor(last / 10);
  return [
    [digit(0, tens - 1), digits(1)],
    [{ literal: String(tens) }, digit(0, last % 10)],
  ];
}

function date(): Spelling {
  const days = (last: 28 | 30 | 31): Spelling => [
    [{ literal: "0" }, digit(1, 9)],
    ...(last === 28
      ? [
          [{ literal: "1" }, digits(1)],
          [{ literal: "2" }, digit(0, 8)],
        ]
      : [[digit(1, 2), digits(1)]]),
    ...(last === 30 ? [[{ literal: "30" }]] : last === 31 ? [[digit(3, 3), digit(0, 1)]] : []),
  ];
  const months: Array<[string, 28 | 30 | 31]> = [
    ["01", 31],
    ["02", 28],
    ["03", 31],
    ["04", 30],
    ["05", 31],
    ["06", 30],
    ["07", 31],
    ["08", 31],
    ["09", 30],
    ["10", 31],
    ["11", 30],
    ["12", 31],
  ];
  return product(
    [[digits(4), { literal: "-" }]],
    months.flatMap(([month, last]) => product(lit(`${month}-`), days(last))),
  );
}

function time(): Spelling {
  const fraction: Spelling = [[], [{ literal: "." }, { min: 1, max: 9 }]];
  const offset: Spelling = [
    [{ literal: "Z" }],
    ...product([[{ oneOf: "+-" }]], twoDigits(23), lit(":"), twoDigits(59)),
  ];
  return product(twoDigits(23), lit(":"), twoDigits(59), lit(":"), twoDigits(59), fraction, offset);
}

const ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789";
/** A hostname's label: 1-63 letters, digits and inner hyphens. */
const LABEL: Spelling = [
  [{ oneOf: ALNUM }],
  [{ oneOf: ALNUM }, { min: 0, max: 61, oneOf: `${ALNUM}-` }, { oneOf: ALNUM }],
];

/** Up to two more labels, each after a dot. */
const MORE_LABELS: Spelling = [
  [],
  ...product(lit("."), LABEL),
  ...product(lit("."), LABEL, lit("."), LABEL),
];

/**
 * A local part of one or two dot-separated runs, then a domain of two or more labels of any
 * length (ajv-formats bounds neither; a hostname's labels are bounded).
 */
function email(): Sequence {
  const run: Spelling = [[{ min: 1, max: Number.POSITIVE_INFINITY, oneOf: `${ALNUM}_%+-` }]];
  const label: Spelling = [
    [{ oneOf: ALNUM }],
    [
      { oneOf: ALNUM },
      { min: 0, max: Number.POSITIVE_INFINITY, oneOf: `${ALNUM}-` },
      { oneOf: ALNUM },
    ],
  ];
  return [
    run,
    [[], ...product(lit("."), run)],
    lit("@"),
    label,
    product(lit("."), label),
    [[], ...product(lit("."), label)],
  ];
}

const FORMATS: Record<string, () => Sequence> = {
  date: () => [date()],
  time: () => [time()],
  "date-time": () => [date(), lit("T"), time()],
  hostname: () => [LABEL, MORE_LABELS],
  email,
};
