import { describe, expect, it } from "vitest";
import { importNotebook } from "../src/app/notebook-import";
import { reportPath } from "../src/app/report";

describe("report links", () => {
  it("names the snippet's report, with an across comparison's versions", () => {
    expect(reportPath("abcdefgh", "md", null)).toBe("/api/v1/snippets/abcdefgh/report.md");
    expect(reportPath("abcdefgh", "ipynb", ["0.4.30", "0.4.31"])).toBe("/api/v1/snippets/abcdefgh/report.ipynb?across=0.4.30%2C0.4.31");
    expect(reportPath("abcdefgh", "md", ["0.4.30"])).toBe("/api/v1/snippets/abcdefgh/report.md");
  });
});

describe("notebook import", () => {
  const answer = (status: number, body: unknown) => (async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch;

  it("answers the link and how many lines were dropped", async () => {
    const got = await importNotebook("{}", answer(201, { url: "http://x/s/abcdefgh", dropped: [{ cell: 1 }, { cell: 2 }] }));
    expect(got).toEqual({ url: "http://x/s/abcdefgh", dropped: 2 });
  });

  it("says the server's reason for a file that is not a notebook", async () => {
    const got = await importNotebook("nope", answer(422, { status: 422, error: "not_a_notebook", message: "not JSON", field: "body" }));
    expect(got).toEqual({ problem: "Could not import the notebook: not JSON" });
  });
});
