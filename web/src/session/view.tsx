// One session's live view.
import { useEffect, useState } from "preact/hooks";
import { post, unwatch, watch } from "../core/daemon";
import { store, type Json } from "../core/store";

interface Item {
  role: "user" | "assistant";
  text: string;
}

export function SessionView({ id }: { id: string }) {
  const [items, setItems] = useState<Item[]>([]);
  const [draft, setDraft] = useState("");
  useEffect(() => {
    setItems([]);
    const off = store.onSessionFrame((f) => {
      if (f.session !== id) return;
      const a = f as Json;
      if (f.type === "user_message") setItems((xs) => [...xs, { role: "user", text: String(a.content ?? "") }]);
      if (f.type === "assistant_start") setItems((xs) => [...xs, { role: "assistant", text: "" }]);
      if (f.type === "assistant_delta")
        setItems((xs) => {
          const last = xs[xs.length - 1];
          if (!last || last.role !== "assistant") return [...xs, { role: "assistant", text: String(a.delta ?? "") }];
          return [...xs.slice(0, -1), { ...last, text: last.text + String(a.delta ?? "") }];
        });
    });
    watch(id);
    return () => {
      off();
      unwatch(id);
    };
  }, [id]);
  return (
    <section aria-label="Session">
      <ol class="transcript" data-testid="transcript">
        {items.map((it, i) => (
          <li key={i} class={it.role}>
            {it.text}
          </li>
        ))}
      </ol>
      <form
        class="composer"
        onSubmit={(e) => {
          e.preventDefault();
          if (!draft.trim()) return;
          post("user_message", { session: id, content: draft });
          setDraft("");
        }}
      >
        <label class="sr-only" for="composer-input">
          Message
        </label>
        <textarea id="composer-input" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} rows={2} />
        <button type="submit">Send</button>
      </form>
    </section>
  );
}
