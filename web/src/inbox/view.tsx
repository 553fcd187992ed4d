// Deferred actions, questions and reports, as one inbox.
export function InboxView() {
  return (
    <section aria-labelledby="inbox-h">
      <h1 id="inbox-h">Inbox</h1>
    </section>
  );
}
