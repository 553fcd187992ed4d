#!/usr/bin/env python3
"""Writes the bundled index of the anthropics/skills repository at one commit.

Usage: anthropic-skills-index.py <git dir of a clone> <commit> > crates/jucode-server/src/skills/anthropic-index.json

Every file of each skill is listed with its size and sha256, so an install can check each
download against the index it shipped with.
"""
import hashlib
import json
import subprocess
import sys

# Anthropic's document skills are source-available, not open source (the repository's README).
SOURCE_AVAILABLE = {"docx", "pdf", "pptx", "xlsx"}


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def front_matter(text):
    fields = {}
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return fields
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if ":" in line and not line.startswith(" "):
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip().strip('"')
    return fields


def main():
    repo, commit = sys.argv[1], sys.argv[2]
    commit = git(repo, "rev-parse", commit).decode().strip()
    ids = git(repo, "ls-tree", "--name-only", f"{commit}:skills").decode().split()
    skills = []
    for sid in ids:
        meta = front_matter(git(repo, "show", f"{commit}:skills/{sid}/SKILL.md").decode())
        files = []
        for row in git(repo, "ls-tree", "-r", f"{commit}:skills/{sid}").decode().splitlines():
            info, path = row.split("\t", 1)
            mode, kind, obj = info.split()
            if kind != "blob" or mode == "120000":
                continue
            data = git(repo, "cat-file", "blob", obj)
            files.append({
                "path": path,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "executable": mode == "100755",
            })
        redistributable = sid not in SOURCE_AVAILABLE
        skills.append({
            "id": sid,
            "name": meta.get("name", sid),
            "description": meta.get("description", ""),
            "license": "Apache-2.0" if redistributable else "Proprietary (source-available)",
            "redistributable": redistributable,
            "homepage": f"https://github.com/anthropics/skills/tree/{commit}/skills/{sid}",
            "files": files,
        })
    json.dump({"repository": "anthropics/skills", "commit": commit, "skills": skills}, sys.stdout, indent=1)
    sys.stdout.write("\n")


main()
