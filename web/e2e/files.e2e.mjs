// The file browser and the diff view against the real daemon: a project with a git repository
// made here (a modified, an added, an untracked and a renamed file, plus hostile names and
// contents), reached from the project list and from a session; browse, open, diff.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, desk, newPage, shoot, startDaemon } from "./harness.mjs";

const HOSTILE = "<img src=x onerror=window.__pwned=1>.txt";

function git(dir, ...args) {
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], {
    cwd: dir,
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: dir },
    stdio: "pipe",
  });
}

/** A repository with one commit, then a change of every kind. */
function repo(dir) {
  mkdirSync(join(dir, "src"), { recursive: true });
  writeFileSync(join(dir, "README.md"), "# demo\n\nA project for the file browser.\n");
  writeFileSync(join(dir, "src", "main.rs"), 'fn main() {\n    println!("hello");\n}\n');
  writeFileSync(join(dir, "old-name.txt"), "this file is renamed\nand keeps its lines\nall three\n");
  writeFileSync(join(dir, ".gitignore"), ".jucode-fake/\n*.log\n");
  // Committed and unchanged: large to open, absent from the diff.
  writeFileSync(join(dir, "big.txt"), "a line of a big file\n".repeat(60_000));
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "first");
  writeFileSync(join(dir, "src", "main.rs"), 'fn main() {\n    println!("hello, world");\n}\n');
  writeFileSync(join(dir, "added.txt"), "a new file\n");
  git(dir, "add", "added.txt");
  git(dir, "mv", "old-name.txt", "new-name.txt");
  writeFileSync(join(dir, "notes.md"), "untracked notes <script>window.__pwned=1</script>\n");
  writeFileSync(join(dir, HOSTILE), "<script>window.__pwned=1</script>\n");
  writeFileSync(join(dir, "logo.bin"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 1, 2, 3]));
  writeFileSync(join(dir, "debug.log"), "ignored\n");
}

const noProblems = (page) => assert(page.problems.length === 0, page.problems.join("\n"));

async function notPwned(page) {
  assert((await page.evaluate(() => window.__pwned)) === undefined, "hostile text ran");
}

export const scenarios = [
  {
    name: "a project's files are browsed and opened, and its changes diffed (desktop)",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const dir = home.project("demo");
      repo(dir);
      await d.request("project_add", { path: dir });
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink("/remote/settings"));
      await page.getByRole("link", { name: "Files of demo" }).click();
      const list = page.getByRole("list", { name: "Entries of demo" });
      await list.waitFor();
      const names = await list.locator(".entry .name").allInnerTexts();
      // Folders first; ignored files and .git left out; the hostile name shown as text.
      assert(names[0] === "src", `folders first: ${names}`);
      assert(!names.includes("debug.log") && !names.includes(".git"), `ignored entries: ${names}`);
      assert(names.includes(HOSTILE), `the hostile name as text: ${names}`);
      await list.getByRole("button", { name: /^src/ }).click();
      await page.getByRole("button", { name: /main\.rs/ }).click();
      await page.getByLabel("Contents of main.rs").getByText('println!("hello, world");').waitFor();
      await page.getByRole("navigation", { name: "Folder path" }).getByRole("button", { name: "demo" }).click();
      await page.getByRole("button", { name: /logo\.bin/ }).click();
      await page.getByText("Binary file: not shown.").waitFor();
      await page.getByRole("button", { name: new RegExp("onerror") }).click();
      await page.getByLabel(/^Contents of <img/).getByText("<script>window.__pwned=1</script>").waitFor();
      await shoot(page, "files-browser-desktop");
      await page.getByRole("button", { name: /big\.txt/ }).click();
      await page.getByText(/Showing the first 1 MB of 1\.2 MB/).waitFor();

      await page.getByRole("navigation", { name: "Files or changes" }).getByRole("link", { name: "Changes" }).click();
      const changes = page.getByRole("list", { name: "Changed files" });
      await changes.waitFor();
      const rows = await changes.locator(".entry").allInnerTexts();
      for (const want of ["src/main.rs", "added.txt", "new-name.txt", "notes.md"]) {
        assert(rows.some((r) => r.includes(want)), `${want} in ${rows.join(" | ")}`);
      }
      assert(rows.some((r) => r.includes("old-name.txt → ") && r.includes("new-name.txt")), `the rename: ${rows}`);
      await changes.getByRole("button", { name: /src\/main\.rs/ }).click();
      const added = page.locator(".dl.d-add", { hasText: 'println!("hello, world");' });
      await added.waitFor();
      await page.locator(".dl.d-del", { hasText: 'println!("hello");' }).waitFor();
      await page.getByRole("button", { name: "All changes" }).click();
      await page.getByRole("region", { name: "Changes to notes.md" }).waitFor();
      await page.getByRole("region", { name: "Changes to new-name.txt" }).waitFor();
      await shoot(page, "files-diff-desktop");
      await notPwned(page);
      noProblems(page);
    },
  },
  {
    name: "a session's directory is browsed and diffed on a phone",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const dir = home.project("phoneproj");
      repo(dir);
      const { session } = await d.request("session_create", { cwd: dir });
      const page = await newPage(browser, PHONE);
      await page.goto(daemon.localLink(`/remote/s/${session}`));
      await page.getByRole("link", { name: "Files and changes" }).waitFor();
      await shoot(page, "files-session-link-phone");
      await page.getByRole("link", { name: "Files and changes" }).click();
      await page.getByRole("list", { name: "Entries of phoneproj" }).waitFor();
      await shoot(page, "files-list-phone");
      await page.getByRole("button", { name: /README\.md/ }).click();
      await page.getByLabel("Contents of README.md").getByText("A project for the file browser.").waitFor();
      await shoot(page, "files-browser-phone");
      await page.getByRole("button", { name: "Close the file" }).click();
      await page.getByRole("link", { name: "Changes" }).click();
      await page.getByRole("button", { name: /src\/main\.rs/ }).click();
      await page.locator(".dl.d-add", { hasText: "hello, world" }).waitFor();
      await shoot(page, "files-diff-phone");
      await page.emulateMedia({ colorScheme: "dark" });
      await shoot(page, "files-diff-phone-dark");
      await notPwned(page);
      noProblems(page);
    },
  },
];
