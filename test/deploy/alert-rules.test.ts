/**
 * The alert rules in deploy/prometheus/ as Prometheus' own tools read them:
 * `promtool check rules` accepts every rule, and `promtool test rules` runs
 * alerts.test.yml, whose series make each alert fire and leave it quiet.
 * Beside that: every alert has a severity, a summary and a runbook link to
 * a section of docs/operations.md that exists, and a test that fires it
 * and one that keeps it quiet.
 *
 * promtool is Debian's `prometheus` package (CI installs it, .ci/run); on a
 * machine without it these tests are skipped with a message, except in CI.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse } from "yaml";
import { markdownAnchors } from "../support/markdownAnchors.js";

const run = promisify(execFile);
const DIR = "deploy/prometheus";
const PROMTOOL = "/usr/bin/promtool";

interface Rule {
  alert: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleTest {
  alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[];
}

const rules = (
  parse(readFileSync(join(DIR, "alerts.yml"), "utf8")) as { groups: { rules: Rule[] }[] }
).groups.flatMap((g) => g.rules);
const ruleTests = (
  parse(readFileSync(join(DIR, "alerts.test.yml"), "utf8")) as { tests: RuleTest[] }
).tests;

const promtool = existsSync(PROMTOOL);
const skip = promtool
  ? false
  : `${PROMTOOL} is not installed (Debian package \`prometheus\`): promtool checks skipped`;
if (!promtool && process.env["CI"])
  throw new Error(`CI is set but ${PROMTOOL} is missing: .ci/run installs the prometheus package`);

describe("alert rules", () => {
  test("promtool check rules accepts every rule", { skip }, async () => {
    const { stdout } = await run(PROMTOOL, ["check", "rules", join(DIR, "alerts.yml")]);
    console.log(stdout.trim());
    assert.match(stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  test(
    "promtool test rules: each alert fires and stays quiet as its tests expect",
    { skip },
    async () => {
      // Run from the rules' folder: the test file names alerts.yml relative to itself.
      const result = await run(PROMTOOL, ["test", "rules", "alerts.test.yml"], { cwd: DIR }).catch(
        (e: { stdout: string; stderr: string; code: number }) => e,
      );
      console.log(`${result.stdout}${result.stderr}`.trim());
      assert.ok(
        !("code" in result),
        `promtool test rules failed:\n${result.stdout}${result.stderr}`,
      );
      assert.match(result.stdout, /SUCCESS/);
    },
  );

  test("every alert is tested firing and quiet", () => {
    for (const { alert } of rules) {
      const evals = ruleTests
        .flatMap((t) => t.alert_rule_test ?? [])
        .filter((e) => e.alertname === alert);
      assert.ok(
        evals.some((e) => (e.exp_alerts ?? []).length > 0),
        `${alert}: no test expects it to fire`,
      );
      assert.ok(
        evals.some((e) => (e.exp_alerts ?? []).length === 0),
        `${alert}: no test expects it to stay quiet`,
      );
    }
  });

  test("every alert has a severity, a summary and a runbook section that exists", () => {
    const anchors = markdownAnchors(readFileSync("docs/operations.md", "utf8"));
    assert.ok(rules.length >= 9, `only ${rules.length} rules`);
    for (const rule of rules) {
      assert.match(
        rule.labels?.["severity"] ?? "",
        /^(critical|warning)$/,
        `${rule.alert} severity`,
      );
      assert.ok(rule.annotations?.["summary"], `${rule.alert} has no summary`);
      // What the rule groups by is what it names: the network, the signer, the route.
      const summary = rule.annotations["summary"];
      const grouped = [...rule.expr.matchAll(/\bby \(([^)]*)\)/g)].flatMap((m) =>
        m[1]!.split(/,\s*/),
      );
      for (const label of new Set(grouped))
        assert.ok(
          summary.includes(`$labels.${label}`),
          `${rule.alert}: the summary does not name the ${label}`,
        );
      // Only an alert on one service-wide figure (the outbox, the confidential days) names neither.
      if (!/^\s*max\(/.test(rule.expr))
        assert.match(summary, /\$labels\.(network|signer|route)/, `${rule.alert} summary`);
      const url = rule.annotations["runbook_url"] ?? "";
      const [path, anchor] = url.split("#");
      assert.equal(path, "docs/operations.md", `${rule.alert} runbook_url ${url}`);
      assert.ok(anchors.has(anchor ?? ""), `${rule.alert}: docs/operations.md has no #${anchor}`);
    }
  });
});
