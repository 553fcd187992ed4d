// The message box: Enter sends (Shift+Enter for a new line), a "/" at the start offers the
// engine's slash commands, and while a turn runs: Stop, and Steer when something is queued.
// Files and photos are attached with the pickers, by pasting or by dropping (uploads/).
import { useState } from "preact/hooks";
import { matchCommands, type Command } from "./model";
import { AttachButtons, Tray, useAttachments } from "../uploads/tray";
import type { Uploaded } from "../uploads/model";

interface Props {
  commands: Command[];
  busy: boolean;
  canSteer: boolean;
  onSend: (text: string, files: Uploaded[]) => Promise<boolean>;
  onInterrupt: () => void;
  onSteer: () => void;
}

export function Composer({ commands, busy, canSteer, onSend, onInterrupt, onSteer }: Props) {
  const [draft, setDraft] = useState("");
  const [active, setActive] = useState(0);
  const [dismissed, setDismissed] = useState("");
  const matches = dismissed === draft ? [] : matchCommands(commands, draft);
  const open = matches.length > 0;
  const sel = Math.min(active, matches.length - 1);
  const att = useAttachments();
  const [dropping, setDropping] = useState(false);
  const canSend = (draft.trim() !== "" || att.uploaded.length > 0) && !att.busy && !att.failed;

  const pick = (c: Command) => {
    setDraft(c.command + (c.args ? " " : ""));
    setActive(0);
    setDismissed(c.command + (c.args ? " " : ""));
    document.getElementById("composer-input")?.focus();
  };
  const submit = async () => {
    const text = draft;
    if (!canSend) return;
    const files = att.uploaded;
    setDraft("");
    if (await onSend(text, files)) att.clear();
    else setDraft(text);
  };

  return (
    <>
    <Tray a={att} />
    <form
      class={dropping ? "composer dropping" : "composer"}
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
      onDragOver={(e) => {
        if (!e.dataTransfer?.types.includes("Files")) return;
        e.preventDefault();
        setDropping(true);
      }}
      onDragLeave={() => setDropping(false)}
      onDrop={(e) => {
        const files = [...(e.dataTransfer?.files ?? [])];
        setDropping(false);
        if (!files.length) return;
        e.preventDefault();
        att.add(files);
      }}
    >
      <AttachButtons onFiles={att.add} />
      {open && (
        <ul class="cmds" role="listbox" id="composer-cmds" aria-label="Slash commands">
          {matches.map((c, i) => (
            <li
              key={c.command}
              id={`cmd-${i}`}
              role="option"
              aria-selected={i === sel}
              onMouseDown={(e) => {
                e.preventDefault();
                pick(c);
              }}
            >
              <span class="cmd">{c.command}</span>
              {c.args && <span class="muted"> {c.args}</span>}
              {c.description && <span class="desc"> {c.description}</span>}
            </li>
          ))}
        </ul>
      )}
      <label class="sr-only" for="composer-input">
        Message
      </label>
      <textarea
        id="composer-input"
        rows={2}
        value={draft}
        placeholder={busy ? "Queue a message…" : "Message, or / for commands"}
        aria-controls={open ? "composer-cmds" : undefined}
        aria-autocomplete="list"
        aria-activedescendant={open ? `cmd-${sel}` : undefined}
        onPaste={(e) => {
          const files = [...(e.clipboardData?.files ?? [])];
          if (!files.length) return;
          e.preventDefault();
          att.add(files);
        }}
        onInput={(e) => {
          setDraft(e.currentTarget.value);
          setActive(0);
        }}
        onKeyDown={(e) => {
          if (open) {
            if (e.key === "ArrowDown" || e.key === "ArrowUp") {
              e.preventDefault();
              const d = e.key === "ArrowDown" ? 1 : -1;
              setActive((sel + d + matches.length) % matches.length);
              return;
            }
            if (e.key === "Tab" || (e.key === "Enter" && !e.shiftKey && matches[sel]!.command !== draft.trim())) {
              e.preventDefault();
              pick(matches[sel]!);
              return;
            }
            if (e.key === "Escape") {
              e.preventDefault();
              setDismissed(draft);
              return;
            }
          }
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            void submit();
          }
        }}
      />
      <div class="composer-actions">
        {busy && (
          <button type="button" class="danger" onClick={onInterrupt}>
            Stop
          </button>
        )}
        {canSteer && (
          <button type="button" onClick={onSteer} title="End this turn and start the next queued message">
            Steer
          </button>
        )}
        <button type="submit" disabled={!canSend}>
          {att.busy ? "Uploading…" : "Send"}
        </button>
      </div>
    </form>
    </>
  );
}
