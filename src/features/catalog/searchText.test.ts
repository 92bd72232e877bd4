import { test } from "node:test";
import assert from "node:assert/strict";
import { searchDocument, searchTerms, tsqueryText, urlWords } from "./searchText.js";

test("URL words are the scheme, the host, its labels and the path segments", () => {
  assert.equal(
    urlWords("https://api.example.com/v1/weather-forecast/:city"),
    "https api.example.com api example com v1 weather forecast city",
  );
  assert.equal(urlWords("http://x.io/caf%C3%A9"), "http x.io x io café");
});

test("a search document weights names, then tags, description, and last the type and URL", () => {
  assert.deepEqual(
    searchDocument({
      resource: "https://mcp.example.com/mcp",
      type: "mcp",
      serviceName: "Harbour Almanac",
      toolName: "tide_forecast",
      tags: ["tides", "marine"],
      description: "Tide tables",
    }),
    {
      a: "Harbour Almanac tide_forecast tide forecast",
      b: "tides marine",
      c: "Tide tables",
      d: "mcp https mcp.example.com mcp example com mcp",
    },
  );
});

test("query terms keep only letters and digits, lowercased and deduplicated", () => {
  assert.deepEqual(searchTerms("Weather & forecast | API's!! weather (eip155) ÉTÉ"), [
    "weather",
    "forecast",
    "api",
    "s",
    "eip155",
    "été",
  ]);
  assert.deepEqual(searchTerms("!!! ::: &|"), []);
  assert.equal(tsqueryText(["weather", "api", "s", "v1"]), "weather:* | api:* | s | v1");
});
