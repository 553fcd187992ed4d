// Agents and their scheduled tasks.
import { useStore } from "../core/store";

export function AgentsView() {
  const agents = useStore((s) => s.agents);
  return (
    <section aria-labelledby="agents-h">
      <h1 id="agents-h">Agents</h1>
      <ul class="list">
        {agents.map((a) => (
          <li key={a.id}>{a.name ?? a.id}</li>
        ))}
      </ul>
    </section>
  );
}

export function AgentView({ id }: { id: string }) {
  return (
    <section>
      <h1>{id}</h1>
    </section>
  );
}
