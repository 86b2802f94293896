import { describe, expect, it } from "vitest";
import { strftime } from "./strftime.js";

describe("strftime (Python's, C locale)", () => {
  it("writes the directives chat templates use, in English whatever the machine's locale", () => {
    const date = new Date(2024, 6, 26, 15, 4, 9); // local time, as Python's datetime.now()
    expect(strftime(date, "%d %b %Y")).toBe("26 Jul 2024");
    expect(strftime(date, "%B %d, %Y")).toBe("July 26, 2024");
    expect(strftime(date, "%Y-%m-%d %H:%M:%S")).toBe("2024-07-26 15:04:09");
    expect(strftime(date, "%a %A %I%p %y %j 100%%")).toBe("Fri Friday 03PM 24 208 100%");
    expect(strftime(new Date(2024, 11, 31, 23, 59), "%j")).toBe("366");
    expect(strftime(date, "%Q stays")).toBe("%Q stays");
  });
});
