// Settings → Skills on the desktop: the catalog from a pinned index whose files a loopback
// server holds, the marketplace's warning (no JuCode login), an install that shows its badge;
// a hostile description stays text.
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, newPage, shoot, startDaemon } from "./harness.mjs";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const sha = (b) => createHash("sha256").update(b).digest("hex");

/** Serves `files` (path → bytes) on loopback; resolves to its base URL and a stop. */
function serveFiles(files) {
  return new Promise((resolve) => {
    const server = createServer((req, res) => {
      const body = files.get(req.url);
      res.writeHead(body ? 200 : 404);
      res.end(body ?? "not found");
    });
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}`, stop: () => server.close() });
    });
  });
}

export const scenarios = [
  {
    name: "the desktop lists skills with their warning and installs one",
    async run({ browser, home, cleanup }) {
      const skill = Buffer.from("---\nname: tidy\n---\nTidy up.\n");
      const files = new Map([[`/${COMMIT}/skills/tidy/SKILL.md`, skill]]);
      const src = await serveFiles(files);
      cleanup.push(() => src.stop());
      const index = {
        repository: "anthropics/skills",
        commit: COMMIT,
        skills: [
          {
            id: "tidy",
            name: "Tidy",
            description: "Tidies a repository. <img src=x onerror=alert(1)>",
            license: "Apache-2.0",
            redistributable: true,
            files: [{ path: "SKILL.md", size: skill.length, sha256: sha(skill) }],
          },
          { id: "docs", name: "Docs", description: "Documents", license: "Proprietary", redistributable: false, files: [] },
        ],
      };
      const indexPath = join(home.root, "index.json");
      writeFileSync(indexPath, JSON.stringify(index));
      mkdirSync(home.home, { recursive: true });
      writeFileSync(
        join(home.home, "config.json"),
        JSON.stringify({ anthropic_skills_index: indexPath, anthropic_skills_url: src.url }),
      );
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      for (const [size, tag] of [
        [PHONE, "phone"],
        [DESKTOP, "desktop"],
      ]) {
        const page = await newPage(browser, size);
        await page.goto(daemon.localLink());
        await page.getByRole("link", { name: "Settings" }).click();
        const card = page.getByTestId("skills");
        await card.getByRole("button", { name: tag === "phone" ? "Install Tidy" : "Reinstall Tidy" }).waitFor();
        await card.getByText(/the JuCode marketplace is not configured/).waitFor();
        await card.getByText("source-available: not installable").waitFor();
        await card.getByText(/<img src=x onerror=alert\(1\)>/).waitFor();
        if (tag === "phone") {
          await card.getByRole("button", { name: "Install Tidy" }).click();
          await card.getByText(/^Installed Tidy in /).waitFor();
          await card.getByRole("button", { name: "Reinstall Tidy" }).waitFor();
          await card.getByText("installed", { exact: true }).waitFor();
        }
        await card.scrollIntoViewIfNeeded();
        await shoot(page, `skills-catalog-${tag}`);
        assert(page.problems.length === 0, page.problems.join("\n"));
        await page.close();
      }
    },
  },
];
