const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/**
 * Python's `strftime` in the C locale (what transformers' `strftime_now` gives a chat
 * template), for the directives templates use; local time. Others are left as written.
 */
export function strftime(date: Date, format: string): string {
  const hours12 = date.getHours() % 12 || 12;
  // calendar days, so that a daylight-saving change cannot shift it
  const year = date.getFullYear();
  const dayOfYear =
    (Date.UTC(year, date.getMonth(), date.getDate()) - Date.UTC(year, 0, 1)) / 86_400_000 + 1;
  const day = DAYS[date.getDay()] ?? "";
  const month = MONTHS[date.getMonth()] ?? "";
  const fields: Record<string, string> = {
    a: day.slice(0, 3),
    A: day,
    b: month.slice(0, 3),
    B: month,
    d: pad(date.getDate()),
    m: pad(date.getMonth() + 1),
    y: pad(year % 100),
    Y: String(year),
    H: pad(date.getHours()),
    I: pad(hours12),
    M: pad(date.getMinutes()),
    S: pad(date.getSeconds()),
    p: date.getHours() < 12 ? "AM" : "PM",
    j: pad(dayOfYear, 3),
    "%": "%",
  };
  return format.replace(/%(.)/g, (whole, code: string) => fields[code] ?? whole);
}
