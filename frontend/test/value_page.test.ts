// The Value pane's page line (src/panes/value-page.ts) from the engine's page fields
// (docs/api.md "Value pages"): which leaves, the pages around, the data budget's end.
import { describe, expect, it } from "vitest";
import { missingData, valuePage } from "../src/panes/value-page";

const leaves = (n: number): { path: string; shape: number[]; dtype: string; data: null }[] =>
  Array.from({ length: n }, (_, i) => ({ path: `[${i}]`, shape: [], dtype: "float32", data: null }));

describe("valuePage", () => {
  it("says nothing of a value it holds whole, or of an event without page fields", () => {
    expect(valuePage({ tree: leaves(3), first_leaf: 0, total_leaves: 3, data_stops_at: null })).toBeNull();
    expect(valuePage({ tree: leaves(3) })).toBeNull();
  });

  it("names the first page of many leaves and the next", () => {
    const page = valuePage({ tree: leaves(4096), first_leaf: 0, total_leaves: 5000, data_stops_at: null });
    expect(page).toMatchObject({ leaves: "leaves 1–4,096 of 5,000", previous: null, next: 4096, dataFrom: null, dataNote: null });
  });

  it("names a later page and the one before", () => {
    const page = valuePage({ tree: leaves(904), first_leaf: 4096, total_leaves: 5000, data_stops_at: null });
    expect(page).toMatchObject({ leaves: "leaves 4,097–5,000 of 5,000", previous: 0, next: null });
    expect(valuePage({ tree: leaves(10), first_leaf: 5000, total_leaves: 9000 })?.previous).toBe(5000 - 4096);
  });

  it("says where the data budget ran out, and a leaf past it offers to show from there", () => {
    const page = valuePage({ tree: leaves(300), first_leaf: 0, total_leaves: 300, data_stops_at: 256 });
    expect(page).toMatchObject({ leaves: null, next: null, dataFrom: 256 });
    expect(page?.dataNote).toBe("leaves 257–300 without their values: past the 65,536-element budget");
    expect(missingData(256, page)).toBe("data past the 65,536-element budget: show from here");
    expect(missingData(255, page)).toBe("(too large to send; see the summary)");
    expect(missingData(3, null)).toBe("(too large to send; see the summary)");
  });

  it("says a page past the end holds nothing and offers the leaves before", () => {
    const page = valuePage({ tree: [], first_leaf: 7, total_leaves: 2, data_stops_at: null });
    expect(page).toMatchObject({ leaves: "no leaves from leaf 8: the value has 2 leaves", previous: 0, next: null });
  });
});

describe("value_from in the request", () => {
  it("is sent for the one run a page button starts, never by default nor kept from a link", async () => {
    const { fromRequest, toRequest } = await import("../src/model/state");
    const { DEFAULT_STATE } = await import("../src/model/examples");
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("value_from");
    const paged = toRequest({ ...DEFAULT_STATE, valueFrom: 4096 });
    expect(paged.value_from).toBe(4096);
    expect(fromRequest(paged, DEFAULT_STATE).valueFrom).toBeUndefined();
  });
});
